#!/usr/bin/env bash
# Core scaling of rill: the same produce+consume load against rill pinned to
# 1, 2, 4 and 8 cores, with rill-bench pinned to the remaining cores so the
# load generator never competes with the broker.
#
# usage: core_scaling.sh RILL RILL_BENCH OUT_DIR [CORE_COUNTS...]
# env: RILL_ARGS (extra broker flags, e.g. "--flush-policy os"), ACKS (default all),
#      PRODUCERS and CONSUMERS (default 4 each)
set -euo pipefail
RILL=$1; BENCH=$2; OUT=$3; shift 3
COUNTS=${*:-1 2 4 8}
NPROC=$(nproc)
mkdir -p "$OUT"
for n in $COUNTS; do
  data=$(mktemp -d "${TMPDIR:-/var/tmp}/rill-scale-XXXX")
  # Broker on CPUs 0..n-1, load generator on the rest.
  taskset -c "0-$((n - 1))" "$RILL" serve --cores "$n" --data-dir "$data" \
    --listen 127.0.0.1:39092 --admin-listen 127.0.0.1:39644 --log-level warn ${RILL_ARGS:-} \
    > "$OUT/rill-$n.log" 2>&1 &
  pid=$!
  sleep 2
  taskset -c "$n-$((NPROC - 1))" "$BENCH" run --bootstrap 127.0.0.1:39092 \
    --topics 1 --partitions $((n * 8)) --message-size 1024 \
    --producers "${PRODUCERS:-4}" --consumers "${CONSUMERS:-4}" --rate 0 --acks "${ACKS:-all}" \
    --broker-pid "$pid" \
    --warmup-s 3 --duration-s 15 --topic-prefix "scale$n" \
    --out "$OUT/scale-$n.json" --label "cores-$n" --quiet > "$OUT/bench-$n.out" 2>&1 || true
  kill -TERM "$pid" || true
  wait "$pid" || true
  rm -rf "$data"
  python3 - "$OUT/scale-$n.json" "$n" <<'PY' || tail -5 "$OUT/bench-$n.out"
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("summary", r)
cpu = s.get("broker_cpu") or {}
print("cores", sys.argv[2],
      "produce MB/s", round(s["produce"]["mb_per_s"], 1),
      "consume MB/s", round(s["consume"]["mb_per_s"], 1),
      "publish p99 us", s["publish_latency_us"]["p99_us"],
      "broker cores busy", round(cpu.get("cores_busy") or 0, 2),
      "broker CPU-s/GB produced", round(cpu.get("cpu_s_per_gb_produced") or 0, 2))
PY
done
