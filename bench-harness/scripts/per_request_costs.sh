#!/usr/bin/env bash
# The broker's per-request costs per GB produced (issue #37, point 2): CPU
# seconds, context switches (rill_process_context_switches_total) and
# fdatasyncs (rill_fsyncs_total), all from the broker's own /metrics, for
# three produce workloads against one fresh single-node rill (fsync policy,
# acks=all, 1 KiB records, 8 partitions): rill-bench with 2 producers and
# with 1 producer (15 s each after 3 s of warm-up), and one librdkafka
# producer with its defaults (confluent-kafka, 1,000,000 records).
#
# usage: per_request_costs.sh RILL RILL_BENCH [DATA_DIR]  (needs ~15 GB free there)
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,10p' "$0"; exit 2; fi
RILL=$1; BENCH=$2; DATA=${3:-/tmp/rill-per-request-costs}
for bin in "$RILL" "$BENCH"; do
  [ -x "$bin" ] || { echo "per_request_costs.sh: $bin is not an executable" >&2; exit 2; }
done
rm -rf "$DATA"; mkdir -p "$DATA"
"$RILL" serve --data-dir "$DATA/d" --listen 127.0.0.1:19092 --admin-listen 127.0.0.1:19644 \
  > "$DATA/rill.log" 2>&1 &
BROKER=$!
# The runs write about 15 GB (fsynced records): removed at the end.
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null || true; rm -rf "$DATA"' EXIT
sleep 3
for producers in 2 1; do
  "$BENCH" run --bootstrap 127.0.0.1:19092 --partitions 8 --message-size 1024 \
    --producers "$producers" --consumers 0 --rate 0 --acks all --warmup-s 3 --duration-s 15 \
    --broker-metrics 127.0.0.1:19644 --topic-prefix "p$producers" --quiet \
    --out "$DATA/run-$producers.json" 2>&1 | grep "broker CPU" | sed "s/^/rill-bench, $producers producers: /"
done
metric() { curl -s 127.0.0.1:19644/metrics | awk -v n="$1" '$1 ~ "^"n {s += $2} END {print s + 0}'; }
# The topic first (0 records), outside the measured window.
python3 "$(dirname "$0")/librdkafka_produce.py" 127.0.0.1:19092 librdkafka-one 0
before=("$(metric process_cpu_seconds_total)" "$(metric rill_process_context_switches_total)" "$(metric rill_fsyncs_total)")
python3 "$(dirname "$0")/librdkafka_produce.py" 127.0.0.1:19092 librdkafka-one 1000000 --no-create
after=("$(metric process_cpu_seconds_total)" "$(metric rill_process_context_switches_total)" "$(metric rill_fsyncs_total)")
python3 -c "
gb = 1_000_000 * 1024 / 1e9
b, a = [float(x) for x in '${before[*]}'.split()], [float(x) for x in '${after[*]}'.split()]
print('librdkafka, 1 producer: %.2f s/GB produced, %.0f context switches/GB produced, %.0f fdatasyncs/GB'
      % ((a[0] - b[0]) / gb, (a[1] - b[1]) / gb, (a[2] - b[2]) / gb))"
