#!/usr/bin/env bash
# A/B comparison of two rill builds on the same load, interleaved (A, B, A,
# B, ...) so that a change's effect is a ratio from one sitting on a noisy
# host. Each run starts the broker on a fresh data dir and free ports, runs
# rill-bench with --broker-pid (the broker's CPU over the measurement window
# only), and stops the broker. Prints each run's figures, each round's B/A
# ratios and their medians.
#
# usage: ab.sh RILL_A RILL_B RILL_BENCH OUT_DIR [ROUNDS]
#   RILL_A, RILL_B: rill binaries (build each revision first, e.g. in a git
#   worktree with `cargo build --release -p rill`).
# env: BENCH_ARGS (the workload; default: 8 partitions, 1 KiB, 2 producers,
#      2 consumers, acks=all, unthrottled), RILL_ARGS (extra broker flags),
#      RILL_ARGS_A / RILL_ARGS_B (flags for one side only: with the same
#      binary twice, an A/B of a setting, e.g. two --config files),
#      WARMUP_S (default 3), DURATION_S (default 15)
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,17p' "$0"; exit 2; fi
A=$1; B=$2; BENCH=$3; OUT=$4; ROUNDS=${5:-3}
BENCH_ARGS=${BENCH_ARGS:---topics 1 --partitions 8 --message-size 1024 --producers 2 --consumers 2 --rate 0 --acks all}
for bin in "$A" "$B" "$BENCH"; do
  [ -x "$bin" ] || { echo "ab.sh: $bin is not an executable" >&2; exit 2; }
done
mkdir -p "$OUT"
# shellcheck source=broker_lib.sh
. "$(dirname "$0")/broker_lib.sh"
trap stop_broker EXIT
side_args() { if [ "$1" = A ]; then echo "${RILL_ARGS_A:-}"; else echo "${RILL_ARGS_B:-}"; fi; }
run_one() { # label binary round
  local label=$1 bin=$2 round=$3
  # shellcheck disable=SC2046,SC2086 # the flags are split into words on purpose
  if ! start_broker "$bin" "$OUT/rill-$label-$round.log" ${RILL_ARGS:-} $(side_args "$label"); then
    echo "$label round $round: broker did not start (see $OUT/rill-$label-$round.log)"; stop_broker; return
  fi
  if ! "$BENCH" run --bootstrap "127.0.0.1:$port" $BENCH_ARGS --warmup-s "${WARMUP_S:-3}" \
      --duration-s "${DURATION_S:-15}" --broker-pid "$broker_pid" --label "$label-$round" \
      --out "$OUT/$label-$round.json" --quiet > "$OUT/bench-$label-$round.out" 2>&1; then
    echo "$label round $round: rill-bench failed:"; tail -n 3 "$OUT/bench-$label-$round.out"
    rm -f "$OUT/$label-$round.json"
  fi
  stop_broker
  python3 - "$OUT/$label-$round.json" "$label" "$round" <<'PY'
import json, os, sys
path, label, rnd = sys.argv[1:]
if os.path.exists(path):
    r = json.load(open(path)); cpu = r.get('broker_cpu') or {}
    print(f"{label} round {rnd}: produce {r['produce']['mb_per_s']:.1f} MB/s, consume {r['consume']['mb_per_s']:.1f} MB/s, "
          f"publish p50 {r['publish_latency_us']['p50_us']} us p99 {r['publish_latency_us']['p99_us']} us, "
          f"broker CPU {cpu.get('cpu_s', 0):.1f} s = {cpu.get('cpu_s_per_gb_produced') or 0:.2f} s/GB produced, errors {r['errors']}")
PY
}
for round in $(seq 1 "$ROUNDS"); do
  run_one A "$A" "$round"
  run_one B "$B" "$round"
done
python3 "$(dirname "$0")/ab_summary.py" "$OUT" "$ROUNDS"
