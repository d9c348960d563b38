#!/usr/bin/env bash
# A/B of segment recycling (`rill.segment.recycle.max`, engine/src/recycle.rs)
# in the broker, at steady state: small segments and a small retention, so
# that retention deletes segments all the time and new ones roll all the
# time. A runs with recycling off (0), B with it on (2), interleaved rounds,
# one rill binary. Each run: a fresh broker whose data dir lies under
# DATA_PARENT (the file system under test, e.g. a loop-mounted ext4 with
# its journal), a warm-up load until retention deletes, then the measured
# load. Around the measured load it reads the device's written sectors
# (/proc/diskstats, the journal included), the journal's commits (ext4's
# jbd2 transactions, XFS's log writes), and the broker's fdatasyncs and
# recycled segments (/metrics), and the context switches of its threads
# (`perf stat -p`, when perf is there).
#
# usage: recycling_ab.sh RILL RILL_BENCH DATA_PARENT OUT [ROUNDS]
# env: BENCH_ARGS (default: 8 partitions, 1 KiB, 2 producers, no consumers,
#      acks=all, unthrottled), DURATION_S (default 20), WARMUP_S (default 12),
#      SEGMENT_BYTES (default 16 MiB), RETENTION_BYTES (default 64 MiB),
#      CHECK_INTERVAL_MS (log.retention.check.interval.ms, default 1000, so
#      that A deletes as it goes too and the disk does not fill; B also runs
#      retention at each roll that finds no spare)
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,20p' "$0"; exit 2; fi
RILL=$1; BENCH=$2; PARENT=$3; OUT=$4; ROUNDS=${5:-3}
BENCH_ARGS=${BENCH_ARGS:---partitions 8 --message-size 1024 --producers 2 --consumers 0 --rate 0 --acks all}
mkdir -p "$OUT"
# shellcheck source=broker_lib.sh
. "$(dirname "$0")/broker_lib.sh"
trap stop_broker EXIT
dev=$(basename "$(df --output=source "$PARENT" | tail -n 1)")
written_sectors() { awk -v d="$dev" '$3 == d { print $10 }' /proc/diskstats; }
journal_commits() { # ext4: jbd2 transactions; XFS: log writes
  local info=/proc/fs/jbd2/$dev-8/info xfs=/sys/fs/xfs/$dev/stats/stats
  if [ -r "$info" ]; then awk 'NR == 1 { print $1 }' "$info"
  elif [ -r "$xfs" ]; then awk '$1 == "log" { print $2 }' "$xfs"
  else echo 0; fi
}
fsync_totals() { # "count microseconds recycled" summed over the shards
  curl -s "127.0.0.1:$admin/metrics" | awk '/^rill_fsyncs_total/ { n += $2 } /^rill_fsync_microseconds_total/ { us += $2 }
    /^rill_segments_recycled_total/ { r += $2 } END { printf "%d %d %d\n", n, us, r }'
}
run_one() { # label recycle_max round
  local label=$1 max=$2 round=$3 conf="$OUT/$1.properties"
  printf 'log.segment.bytes=%s\nlog.retention.bytes=%s\nlog.retention.check.interval.ms=%s\nrill.segment.recycle.max=%s\n' \
    "${SEGMENT_BYTES:-16777216}" "${RETENTION_BYTES:-67108864}" "${CHECK_INTERVAL_MS:-1000}" "$max" > "$conf"
  if ! TMPDIR=$PARENT start_broker "$RILL" "$OUT/rill-$label-$round.log" --config "$conf"; then
    echo "$label round $round: broker did not start"; stop_broker; return
  fi
  # shellcheck disable=SC2086 # the flags are split into words on purpose
  "$BENCH" run --bootstrap "127.0.0.1:$port" $BENCH_ARGS --topic recycling --warmup-s 0 \
    --duration-s "${WARMUP_S:-12}" --quiet > /dev/null 2>&1 || true
  local s0 j0 f0 perf_pid=""; s0=$(written_sectors); j0=$(journal_commits); f0=$(fsync_totals)
  if command -v perf > /dev/null; then
    perf stat -e context-switches -x, -o "$OUT/switches-$label-$round.csv" -p "$broker_pid" > /dev/null 2>&1 &
    perf_pid=$!
  fi
  # shellcheck disable=SC2086
  if ! "$BENCH" run --bootstrap "127.0.0.1:$port" $BENCH_ARGS --topic recycling --warmup-s 0 \
      --duration-s "${DURATION_S:-20}" --broker-pid "$broker_pid" --label "$label-$round" \
      --out "$OUT/$label-$round.json" --quiet > "$OUT/bench-$label-$round.out" 2>&1; then
    echo "$label round $round: rill-bench failed:"; tail -n 3 "$OUT/bench-$label-$round.out"
  fi
  local s1 j1 f1; s1=$(written_sectors); j1=$(journal_commits); f1=$(fsync_totals)
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; fi
  local switches; switches=$(awk -F, '$3 == "context-switches" { print $1 }' "$OUT/switches-$label-$round.csv" 2>/dev/null || true)
  local spares; spares=$(find "$data" -name '*.recycled' | wc -l)
  stop_broker
  python3 - "$OUT/$label-$round.json" "$label" "$round" "$((s1 - s0))" "$((j1 - j0))" "$spares" "$f0" "$f1" "${switches:-0}" <<'PY'
import json, os, sys
path, label, rnd, sectors, commits, spares, f0, f1, switches = sys.argv[1:]
(n0, us0, r0), (n1, us1, r1) = ([int(x) for x in f.split()] for f in (f0, f1))
if not os.path.exists(path):
    sys.exit(0)
r = json.load(open(path)); cpu = r.get('broker_cpu') or {}
gb = r['produce']['bytes'] / 1e9
extra = {'device_gb_per_gb': int(sectors) * 512 / 1e9 / gb, 'journal_commits_per_gb': int(commits) / gb,
         'fdatasync_mean_us': (us1 - us0) / max(n1 - n0, 1), 'fdatasyncs_per_gb': (n1 - n0) / gb,
         'segments_recycled': r1 - r0, 'switches_per_gb': int(switches or 0) / gb}
r['extra'] = extra
json.dump(r, open(path, 'w'))
print(f"{label} round {rnd}: produce {r['produce']['mb_per_s']:.1f} MB/s, p99 {r['publish_latency_us']['p99_us']} us, "
      f"broker {cpu.get('cpu_s_per_gb_produced') or 0:.3f} CPU-s/GB, device {extra['device_gb_per_gb']:.3f} GB/GB, "
      f"journal commits {extra['journal_commits_per_gb']:.0f}/GB, fdatasync {extra['fdatasyncs_per_gb']:.0f}/GB "
      f"mean {extra['fdatasync_mean_us']:.0f} us, switches {extra['switches_per_gb']:.0f}/GB, "
      f"segments recycled {r1 - r0}, spares at the end {spares}")
PY
}
for round in $(seq 1 "$ROUNDS"); do
  run_one A 0 "$round"
  run_one B 2 "$round"
done
python3 "$(dirname "$0")/ab_summary.py" "$OUT" "$ROUNDS"
