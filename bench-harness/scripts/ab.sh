#!/usr/bin/env bash
# A/B comparison of two rill builds on the same load, interleaved (A, B, A,
# B, ...) so that a change's effect is a ratio from one sitting on a noisy
# host. Each run starts the broker on a fresh data dir, runs rill-bench, and
# reads the broker's CPU time from /proc before stopping it.
#
# usage: ab.sh RILL_A RILL_B RILL_BENCH OUT_DIR [ROUNDS]
# env: BENCH_ARGS (the workload; default: 8 partitions, 1 KiB, 2 producers,
#      2 consumers, acks=all, unthrottled), RILL_ARGS (extra broker flags),
#      DURATION_S (default 15)
set -euo pipefail
A=$1; B=$2; BENCH=$3; OUT=$4; ROUNDS=${5:-3}
BENCH_ARGS=${BENCH_ARGS:---topics 1 --partitions 8 --message-size 1024 --producers 2 --consumers 2 --rate 0 --acks all}
mkdir -p "$OUT"
ticks=$(getconf CLK_TCK)
run_one() { # label binary round
  local label=$1 bin=$2 round=$3
  local data; data=$(mktemp -d "${TMPDIR:-/var/tmp}/rill-ab-XXXX")
  "$bin" serve --data-dir "$data" --listen 127.0.0.1:39092 --admin-listen 127.0.0.1:39644 \
    --log-level warn ${RILL_ARGS:-} > "$OUT/rill-$label-$round.log" 2>&1 &
  local pid=$!
  sleep 2
  "$BENCH" run --bootstrap 127.0.0.1:39092 $BENCH_ARGS --warmup-s 3 \
    --duration-s "${DURATION_S:-15}" --topic-prefix "ab$label$round" \
    --out "$OUT/$label-$round.json" --label "$label-$round" --quiet > "$OUT/bench-$label-$round.out" 2>&1 || true
  # utime + stime of the broker, in clock ticks (fields 14 and 15).
  local cpu; cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill -TERM "$pid" || true
  wait "$pid" || true
  rm -rf "$data"
  python3 - "$OUT/$label-$round.json" "$cpu" "$ticks" "$label" "$round" <<'PY'
import json, sys
path, cpu, ticks, label, rnd = sys.argv[1:]
r = json.load(open(path)); s = r.get('summary', r)
cpu_s = float(cpu) / float(ticks)
lat = s['publish_latency_us']
print(f"{label} round {rnd}: produce {s['produce']['mb_per_s']:.1f} MB/s, consume {s['consume']['mb_per_s']:.1f} MB/s, "
      f"publish p50 {lat['p50_us']} us p99 {lat['p99_us']} us, broker CPU {cpu_s:.1f} s (whole run incl. warm-up)")
PY
}
for round in $(seq 1 "$ROUNDS"); do
  run_one A "$A" "$round"
  run_one B "$B" "$round"
done
