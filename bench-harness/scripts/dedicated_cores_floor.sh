#!/usr/bin/env bash
# rill-bench's two producers against the floors (issue #37, point 1) with
# the servers on CPUs of their own: rill (default settings: one shard per
# CPU it is allowed), the null-sink and the disk floor each run under
# `taskset -c BROKER_CPUS`, the load generator under `taskset -c
# CLIENT_CPUS`, so that client and server never take each other's core.
# On a 2-core host that is one shard on CPU 0 and the client on CPU 1; on
# a 16-core one, BROKER_CPUS=0-7 CLIENT_CPUS=8-15. BROKER_CPUS=all
# CLIENT_CPUS=all runs everything unpinned, as rill-bench run
# --against-null-sink does, for the same figures with shared cores.
#
# Each round: rill, then the null-sink, then disk_cpu_floor.py (256 KiB
# O_DIRECT + fdatasync, 1 GB over 8 files) twice: its files preallocated
# to what is written (128 MiB each, the floor of issue #37) and to 1 GiB
# each, as a broker's 1 GiB segments are (an extent-tree block written
# with every fdatasync). Each server's CPU per GB produced comes from
# /proc/PID/stat (rill-bench --broker-pid); rill over the sum of the
# null-sink and each disk floor. Medians at the end.
#
# usage: dedicated_cores_floor.sh RILL_BENCH OUT ROUNDS RILL
# env: BROKER_CPUS (default 0), CLIENT_CPUS (default 1), DURATION_S
#      (default 12), PRODUCERS (default 2)
set -euo pipefail
if [ $# -lt 4 ]; then sed -n '2,22p' "$0"; exit 2; fi
BENCH=$1; OUT=$2; ROUNDS=$3; RILL=$4
BROKER_CPUS=${BROKER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
mkdir -p "$OUT"
. "$(dirname "$0")/broker_lib.sh"
server=""
trap 'stop_broker; [ -z "$server" ] || kill "$server" 2>/dev/null || true' EXIT
WORKLOAD=(--partitions 8 --message-size 1024 --producers "${PRODUCERS:-2}" --consumers 0
  --rate 0 --acks all --warmup-s 3 --duration-s "${DURATION_S:-12}" --quiet)
# The command prefix that pins to CPUS: taskset, which execs the command
# (so $! is the server's own pid), or nothing for all.
pinned() { [ "$1" = all ] || echo "taskset -c $1"; }
read -r -a ON_BROKER <<< "$(pinned "$BROKER_CPUS")"
read -r -a ON_CLIENT <<< "$(pinned "$CLIENT_CPUS")"
client() { # OUT_FILE BOOTSTRAP PID
  "${ON_CLIENT[@]}" "$BENCH" run --bootstrap "$2" "${WORKLOAD[@]}" --broker-pid "$3" \
    > "$1" 2>&1
}
disk_floor() { # PREALLOCATE
  "${ON_BROKER[@]}" python3 "$(dirname "$0")/disk_cpu_floor.py" "${TMPDIR:-/var/tmp}" \
    --block 256k --total 1g --preallocate "$1" |
    awk '{for (i = 2; i <= NF; i++) if ($i ~ /^CPU-s\/GB/) {print $(i - 1); exit}}'
}
cpu_per_gb() { sed -n 's/.*, \([0-9.]*\) s\/GB produced.*/\1/p' "$1"; }
results=$OUT/results.txt; : > "$results"
for round in $(seq 1 "$ROUNDS"); do
  BROKER_PREFIX="${ON_BROKER[*]}" start_broker "$RILL" "$OUT/rill-$round.log" ||
    { echo "rill did not start: $OUT/rill-$round.log" >&2; exit 1; }
  client "$OUT/rill-$round.out" "127.0.0.1:$port" "$broker_pid"
  stop_broker
  port=$(free_port)
  "${ON_BROKER[@]}" "$BENCH" null-sink --listen "127.0.0.1:$port" \
    > "$OUT/sink-$round.log" 2>&1 &
  server=$!
  wait_for_port "$port" "$server" ||
    { echo "the null-sink did not start: $OUT/sink-$round.log" >&2; exit 1; }
  client "$OUT/sink-$round.out" "127.0.0.1:$port" "$server"
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  disk=$(disk_floor 0); disk_1g=$(disk_floor 1g)
  echo "$round $(cpu_per_gb "$OUT/rill-$round.out") $(cpu_per_gb "$OUT/sink-$round.out") $disk $disk_1g" |
    tee -a "$results"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [[float(x) for x in l.split()[1:]] for l in open(sys.argv[1]) if l.strip()]
for rill, sink, disk, disk_1g in rows:
    print('rill %.3f, null-sink %.3f, disk floor %.3f (1 GiB files %.3f): %.2fx the floors\' sum (%.2fx)'
          % (rill, sink, disk, disk_1g, rill / (sink + disk), rill / (sink + disk_1g)))
med = lambda i: statistics.median(r[i] for r in rows)
for name, i in (('disk floor', 2), ('disk floor, 1 GiB files', 3)):
    ratios = [r[0] / (r[1] + r[i]) for r in rows]
    print('median against the %s: rill %.3f CPU-s/GB, null-sink %.3f, disk %.3f; ratio %.2fx (%.2f-%.2f)'
          % (name, med(0), med(1), med(i), statistics.median(ratios), min(ratios), max(ratios)))
PY
