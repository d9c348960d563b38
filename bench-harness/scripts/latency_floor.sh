#!/usr/bin/env bash
# Publish latency against the do-nothing floor at 10 %, 50 % and 80 % of the
# maximum rate (issue #21, point 3). Finds the maximum produce rate against
# rill first, then at each fraction runs `rill-bench run --against-null-sink`
# (rill, then a null-sink, same client and rate) ROUNDS times, and prints
# each run's p50/p99/p99.9 and their ratios to the sink, then the median
# ratio and the spread (max/min of rill's p99 over the rounds) per fraction.
# A last run per fraction with consumers gives end-to-end latency (the sink
# serves no records, so it has no end-to-end floor). For each rill run it
# also prints the broker's own p99 of a produce request and of the disk
# calls a produce waits for (O_DIRECT write; fdatasync under `fsync`), from
# its /metrics, so the tail can be told apart: disk, broker, or the path
# between client and broker.
#
# usage: latency_floor.sh RILL RILL_BENCH OUT_DIR [ROUNDS]
# env: BENCH_ARGS (workload; default 1 topic, 8 partitions, 1 KiB, 1 producer,
#      acks=all, linger 1 ms), RILL_ARGS (extra broker flags, e.g.
#      "--flush-policy os"), FRACTIONS (default "0.1 0.5 0.8"),
#      WARMUP_S (default 2), DURATION_S (default 10), SINK_SYNC_DIR (a
#      directory: compare with a durable sink, which writes and fdatasyncs
#      every produce there before answering, instead of the null-sink)
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '2,23p' "$0"; exit 2; fi
RILL=$1; BENCH=$2; OUT=$3; ROUNDS=${4:-3}
BENCH_ARGS=${BENCH_ARGS:---topics 1 --partitions 8 --message-size 1024 --producers 1 --acks all --linger-ms 1}
FRACTIONS=${FRACTIONS:-0.1 0.5 0.8}
for bin in "$RILL" "$BENCH"; do
  [ -x "$bin" ] || { echo "latency_floor.sh: $bin is not an executable" >&2; exit 2; }
done
mkdir -p "$OUT"
# shellcheck source=broker_lib.sh
. "$(dirname "$0")/broker_lib.sh"
trap stop_broker EXIT
start_rill() { # name
  # shellcheck disable=SC2086 # RILL_ARGS is split into words on purpose
  start_broker "$RILL" "$OUT/rill-$1.log" ${RILL_ARGS:-} \
    || { echo "rill did not start (see $OUT/rill-$1.log)" >&2; exit 1; }
}
bench() { # name rate extra-args...
  local name=$1 rate=$2; shift 2
  "$BENCH" run --bootstrap "127.0.0.1:$port" $BENCH_ARGS --rate "$rate" \
    --warmup-s "${WARMUP_S:-2}" --duration-s "${DURATION_S:-10}" --broker-pid "$broker_pid" \
    --label rill --out "$OUT/$name.json" --quiet "$@" > "$OUT/$name.out" 2>&1 \
    || { echo "$name: rill-bench failed:"; tail -n 3 "$OUT/$name.out"; }
  # The sink run came after rill's; rill is still up, idle since.
  curl -s "http://127.0.0.1:$admin/metrics" > "$OUT/metrics-$name.txt" || true
}

start_rill max
bench max 0 --consumers 0
stop_broker
max=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(int(r["produce"]["msgs_per_s"]))' "$OUT/max.json")
echo "maximum produce rate against rill: $max msg/s"
for fraction in $FRACTIONS; do
  rate=$(python3 -c "print(max(1, int($max * $fraction)))")
  for round in $(seq 1 "$ROUNDS"); do
    start_rill "$fraction-$round"
    bench "floor-$fraction-$round" "$rate" --consumers 0 --against-null-sink \
      ${SINK_SYNC_DIR:+--sink-sync-dir "$SINK_SYNC_DIR"}
    stop_broker
  done
  start_rill "e2e-$fraction"
  bench "e2e-$fraction" "$rate" --consumers 1
  stop_broker
done
python3 - "$OUT" "$ROUNDS" "$max" $FRACTIONS <<'PY'
import json, os, statistics, sys
out, rounds, top, fractions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def broker_p99_us(name):
    """rill's own p99 (µs) of a produce request, an O_DIRECT write round and an fdatasync."""
    path = os.path.join(out, f"metrics-{name}.txt")
    found = {}
    if os.path.exists(path):
        for line in open(path):
            for key in ("rill_produce_latency_seconds", "rill_disk_write_latency_seconds", "rill_fsync_latency_seconds"):
                if line.startswith(key + '{quantile="0.99"}'):
                    found[key] = int(float(line.split()[-1]) * 1e6)
    return "/".join(str(found.get(k, "-")) for k in ("rill_produce_latency_seconds", "rill_disk_write_latency_seconds", "rill_fsync_latency_seconds"))
print(f"{'load':>5} {'rate/s':>8} {'round':>5} {'rill p50/p99/p99.9 us':>26} {'sink p50/p99/p99.9 us':>26} {'p99 x':>6} {'p99.9 x':>7} {'CPU/GB x':>8} {'rill p99 produce/write/fsync us':>32}")
for f in fractions:
    p99x, p999x, p99s = [], [], []
    for rnd in range(1, rounds + 1):
        path = os.path.join(out, f"floor-{f}-{rnd}.json")
        if not os.path.exists(path):
            continue
        rep = json.load(open(path))
        rill, sink = rep["runs"]
        lat = lambda r: r["publish_latency_us"]
        fmt = lambda l: f"{l['p50_us']}/{l['p99_us']}/{l['p99_9_us']}"
        ratios = rep["ratios"]
        p99x.append(ratios["publish_p99"] or 0); p999x.append(ratios["publish_p99_9"] or 0)
        p99s.append(lat(rill)["p99_us"])
        print(f"{float(f)*100:>4.0f}% {int(top*float(f)):>8} {rnd:>5} {fmt(lat(rill)):>26} {fmt(lat(sink)):>26} "
              f"{ratios['publish_p99'] or 0:>6.2f} {ratios['publish_p99_9'] or 0:>7.2f} {ratios['cpu_s_per_gb_produced'] or 0:>8.2f} {broker_p99_us(f'floor-{f}-{rnd}'):>32}")
    if p99x:
        spread = max(p99s) / max(1, min(p99s))
        print(f"{float(f)*100:>4.0f}%  median p99 {statistics.median(p99x):.2f}x, p99.9 {statistics.median(p999x):.2f}x the sink; "
              f"rill p99 spread over rounds {spread:.2f}x")
    path = os.path.join(out, f"e2e-{f}.json")
    if os.path.exists(path):
        r = json.load(open(path)); e = r.get("end_to_end_latency_us") or {}
        print(f"{float(f)*100:>4.0f}%  end-to-end p50/p99/p99.9 {e.get('p50_us')}/{e.get('p99_us')}/{e.get('p99_9_us')} us")
PY
