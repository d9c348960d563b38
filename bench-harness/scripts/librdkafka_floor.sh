#!/usr/bin/env bash
# One librdkafka producer against its floors (issue #37, point 1): the CPU
# seconds per GB produced of each server, for one confluent-kafka producer
# with its default settings (acks=all, 1,000,000 records of 1 KiB round-robin
# over 8 partitions), against rill-bench's null-sink and each rill build
# given, interleaved round by round so the ratios come from one sitting.
# Then the disk floor (disk_cpu_floor.py, 256 KiB O_DIRECT + fdatasync) in
# the same data dir, and each rill's ratio to null-sink + disk floor.
#
# A server's CPU is its process's (every thread, io_uring workers
# included) from /proc/PID/stat, read before and after the producer runs.
#
# usage: librdkafka_floor.sh RILL_BENCH DATA_DIR ROUNDS RILL [RILL ...]
#   (needs python3 with confluent-kafka, and ~2 GB free in DATA_DIR per run)
# env: RECORDS (default 1000000), WARMUP (records produced before the
#      measured window, default 0; 500000 leaves out the heap's growth to
#      its steady size, about 5 % of one run's CPU here)
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,17p' "$0"; exit 2; fi
BENCH=$1; DATA=$2; ROUNDS=$3; shift 3
RECORDS=${RECORDS:-1000000}
WARMUP=${WARMUP:-0}
mkdir -p "$DATA"
server=0
trap '[ "$server" = 0 ] || kill "$server" 2>/dev/null || true' EXIT
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
produce() { # RECORDS [--no-create]
  python3 "$(dirname "$0")/librdkafka_produce.py" 127.0.0.1:19092 floor "$@"
}
run_one() { # label command...
  local label=$1; shift
  rm -rf "$DATA/run"; mkdir -p "$DATA/run"
  "$@" > "$DATA/$label.log" 2>&1 &
  server=$!
  sleep 3
  local before after
  # The topic (and WARMUP records, to bring the server's heap to its steady
  # size), outside the measured window.
  produce "$WARMUP"
  before=$(cpu_s "$server")
  produce "$RECORDS" --no-create
  after=$(cpu_s "$server")
  kill "$server"; wait "$server" 2>/dev/null || true
  python3 -c "print('%s %.3f' % ('$label', ($after - $before) / ($RECORDS * 1024 / 1e9)))"
}
results=$DATA/results.txt; : > "$results"
for round in $(seq 1 "$ROUNDS"); do
  run_one "null-sink" "$BENCH" null-sink --listen 127.0.0.1:19092 --partitions 8 | tee -a "$results"
  n=0
  for rill in "$@"; do
    n=$((n + 1))
    run_one "rill-$n" "$rill" serve --data-dir "$DATA/run" --listen 127.0.0.1:19092 \
      --admin-listen 127.0.0.1:19644 | tee -a "$results"
  done
done
rm -rf "$DATA/run"
floor=$(python3 "$(dirname "$0")/disk_cpu_floor.py" "$DATA" --block 256k --total 2g |
  tee /dev/stderr | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^CPU-s\/GB/) {print $(i - 1); exit}}')
echo "disk floor (256 KiB + fdatasync): $floor s/GB"
python3 - "$results" "$floor" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
floor = float(sys.argv[2])
by = {}
for label, value in rows:
    by.setdefault(label, []).append(float(value))
sink = statistics.median(by['null-sink'])
print('median CPU-s/GB: null-sink %.3f, disk floor %.3f, sum %.3f' % (sink, floor, sink + floor))
for label in sorted(k for k in by if k != 'null-sink'):
    m = statistics.median(by[label])
    print('%s: %.3f s/GB, %.2fx (null-sink + disk floor)' % (label, m, m / (sink + floor)))
PY
