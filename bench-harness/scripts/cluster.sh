#!/usr/bin/env bash
# Cluster figures in one sitting (issue #18, "How it is measured"):
#  (a) acks=all throughput with RF=3 (min.insync.replicas=2) vs RF=1 on the
#      same local 3-broker cluster and the same workload: MB/s and the
#      brokers' CPU seconds per GB produced (utime+stime of the three rill
#      processes from /proc before and after each run, warm-up included, so
#      the bytes are every byte produced in that span);
#  (b) leader failover: `rill-bench failover`, 10 SIGKILLs of the leader;
#  (c) replication lag under load, cheaply, sampled once a second during
#      the RF=3 run from the brokers' /metrics: rill_under_replicated_partitions
#      summed over the brokers, and the largest
#      rill_follower_lag_at_leader_messages (how many messages a follower
#      was behind its leader's log end at its last fetch).
# Run from the repository root after
#   cargo build --release -p rill -p rill-bench
# The brokers and the load generator share this host's cores: the figures
# are ratios for one host, not a cluster's capacity.
#
# usage: bench-harness/scripts/cluster.sh [OUT_DIR]
# env: DURATION_S (20), WARMUP_S (5), KILLS (10), SESSION_TIMEOUT_MS (1500),
#      HEARTBEAT_INTERVAL_MS (300), BENCH_ARGS (the workload; default:
#      6 partitions, 1 KiB, 1 producer, 1 consumer, unthrottled),
#      KEEP_DATA=1 keeps the brokers' data dirs (several GB) for a look
set -euo pipefail
OUT=${1:-/var/tmp/rill-cluster-bench}
RILL=${RILL:-target/release/rill}
BENCH=${BENCH:-target/release/rill-bench}
DURATION_S=${DURATION_S:-20}
WARMUP_S=${WARMUP_S:-5}
KILLS=${KILLS:-10}
SESSION_TIMEOUT_MS=${SESSION_TIMEOUT_MS:-1500}
HEARTBEAT_INTERVAL_MS=${HEARTBEAT_INTERVAL_MS:-300}
BENCH_ARGS=${BENCH_ARGS:---topics 1 --partitions 6 --message-size 1024 --producers 1 --consumers 1 --rate 0 --acks all}
TIMING=(--session-timeout-ms "$SESSION_TIMEOUT_MS" --heartbeat-interval-ms "$HEARTBEAT_INTERVAL_MS")
for binary in "$RILL" "$BENCH"; do
  [ -x "$binary" ] || { echo "missing $binary: cargo build --release -p rill -p rill-bench" >&2; exit 1; }
done
rm -rf "$OUT"
mkdir -p "$OUT"
ticks=$(getconf CLK_TCK)

"$BENCH" cluster --brokers 3 --rill "$RILL" --dir "$OUT/cluster" "${TIMING[@]}" \
  > "$OUT/cluster.out" 2> "$OUT/cluster.err" &
cluster_pid=$!
sampler_pid=
cleanup() {
  [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
  kill -TERM "$cluster_pid" 2>/dev/null || true
  wait "$cluster_pid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  [ -e "$OUT/cluster/ready" ] && break
  kill -0 "$cluster_pid" 2>/dev/null || { cat "$OUT/cluster.err" >&2; exit 1; }
  sleep 0.5
done
[ -e "$OUT/cluster/ready" ] || { echo "cluster did not form; see $OUT" >&2; exit 1; }
bootstrap=$(cat "$OUT/cluster/bootstrap")
read -r -a pids < "$OUT/cluster/pids"
read -r -a admins < "$OUT/cluster/admin"
echo "cluster: $bootstrap (pids ${pids[*]})"

cpu_ticks() { # utime + stime (fields 14, 15) summed over the brokers
  local total=0 pid
  for pid in "${pids[@]}"; do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}

replication_sample() { # "under-replicated (summed) largest-follower-lag"
  local total=0 lag=0 addr metrics value
  for addr in "${admins[@]}"; do
    metrics=$(curl -s --max-time 1 "http://$addr/metrics" || true)
    value=$(awk '/^rill_under_replicated_partitions/ {print $2}' <<< "$metrics" | head -n 1)
    total=$((total + ${value:-0}))
    value=$(awk '/^rill_follower_lag_at_leader_messages/ {if ($2 > m) m = $2} END {print m + 0}' <<< "$metrics")
    [ "${value:-0}" -gt "$lag" ] && lag=$value
  done
  echo "$total $lag"
}

run_rf() { # rf extra-args...
  local rf=$1; shift
  local before after
  before=$(cpu_ticks)
  # shellcheck disable=SC2086
  "$BENCH" run --bootstrap "$bootstrap" $BENCH_ARGS --replication-factor "$rf" "$@" \
    --warmup-s "$WARMUP_S" --duration-s "$DURATION_S" --topic-prefix "rf$rf" \
    --label "rf$rf" --out "$OUT/rf$rf.json" --quiet > "$OUT/rf$rf.out" 2>&1
  after=$(cpu_ticks)
  echo $((after - before)) > "$OUT/rf$rf.cpu_ticks"
}

# (c) runs beside (a)'s RF=3 run.
(while true; do replication_sample; sleep 1; done) > "$OUT/replication.rf3" &
sampler_pid=$!
run_rf 3 --min-insync-replicas 2
kill "$sampler_pid" 2>/dev/null || true
sampler_pid=
run_rf 1

{
  echo "# rill cluster figures, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
  echo "workload: $BENCH_ARGS --warmup-s $WARMUP_S --duration-s $DURATION_S"
  for rf in 3 1; do
    jq -r --arg rf "$rf" --argjson ticks "$(cat "$OUT/rf$rf.cpu_ticks")" --argjson hz "$ticks" '
      (.total_produced_messages * (.workload.message_size)) as $bytes
      | "RF=\($rf): produce \(.produce.mb_per_s * 100 | round / 100) MB/s, consume \(.consume.mb_per_s * 100 | round / 100) MB/s, publish p50 \(.publish_latency_us.p50_us) us p99 \(.publish_latency_us.p99_us) us, errors \(.errors), brokers CPU \($ticks / $hz) s for \($bytes / 1e9 * 1000 | round / 1000) GB = \(($ticks / $hz) / ($bytes / 1e9) * 10 | round / 10) CPU s/GB"' \
      "$OUT/rf$rf.json"
  done
  awk '{ n++; s += $1; if ($1 > m) m = $1; l += $2; if ($2 > x) x = $2 } END { printf "during RF=3 (1 s samples, %d): under-replicated partitions mean %.2f max %d; largest follower lag mean %.0f max %d messages\n", n, (n ? s / n : 0), m, (n ? l / n : 0), x }' \
    "$OUT/replication.rf3"
} | tee "$OUT/summary.txt"

cleanup
trap - EXIT

# (b) its own cluster, so that kills do not disturb (a)'s brokers.
"$BENCH" failover --brokers 3 --rill "$RILL" --dir "$OUT/failover" "${TIMING[@]}" \
  --kills "$KILLS" --out "$OUT/failover.json" 2> "$OUT/failover.err" | tee -a "$OUT/summary.txt"
if [ "${KEEP_DATA:-0}" != 1 ]; then
  rm -rf "$OUT"/cluster/node-? "$OUT"/failover/node-?
fi
echo "results in $OUT (summary.txt, rf3.json, rf1.json, failover.json; broker logs in cluster/ and failover/)"
