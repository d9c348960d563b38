#!/usr/bin/env bash
# What one librdkafka producer (librdkafka_produce.py: 1,000,000 records of
# 1 KiB, acks=all, 8 partitions) costs each rill binary given in kernel
# events, per GB produced (issue #37, point 2):
# - io_uring submissions by opcode (tracepoint io_uring:io_uring_submit_req);
# - context switches by thread kind (shard, io_uring worker, ...) and by the
#   state the thread left in (S: waiting for an event, D: waiting for the
#   disk, R: preempted), from sched:sched_switch;
# - fdatasyncs (the broker's rill_fsyncs_total), and both per fdatasync.
# With STACKS=1, also the kernel call chain each switch came from (top 12).
#
# Counts, not timings: they hold on a noisy host, though the number of
# fdatasyncs per GB moves with the timing of the group commit.
#
# usage: uring_ops.sh RILL [RILL ...]   (root, perf, python3 with confluent-kafka)
set -euo pipefail
if [ $# -lt 1 ]; then sed -n '2,15p' "$0"; exit 2; fi
command -v perf > /dev/null || { echo "uring_ops.sh: needs perf" >&2; exit 2; }
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
here=$(dirname "$0")
. "$here/broker_lib.sh"
out=$(mktemp -d "${TMPDIR:-/var/tmp}/uring-ops-XXXX")
trap 'stop_broker; rm -rf "$out"' EXIT
metric() { curl -s "127.0.0.1:$admin/metrics" | awk -v n="$1" '$1 ~ "^"n {s += $2} END {print s + 0}'; }
for bin in "$@"; do
  start_broker "$bin" "$out/rill.log" || { echo "uring_ops.sh: $bin did not start" >&2; exit 1; }
  python3 "$here/librdkafka_produce.py" "127.0.0.1:$port" ops 0
  graph=(); if [ "${STACKS:-0}" = 1 ]; then graph=(-g); fi
  perf record -q -o "$out/perf.data" -e io_uring:io_uring_submit_req -e sched:sched_switch \
    "${graph[@]}" -p "$broker_pid" 2> /dev/null &
  recorder=$!
  sleep 1
  fsyncs_before=$(metric rill_fsyncs_total)
  python3 "$here/librdkafka_produce.py" "127.0.0.1:$port" ops 1000000 --no-create
  fsyncs=$(( $(metric rill_fsyncs_total) - fsyncs_before ))
  kill -INT "$recorder"; wait "$recorder" || true
  perf script -i "$out/perf.data" 2> /dev/null > "$out/events.txt"
  echo "== $bin"
  python3 - "$out/events.txt" "$fsyncs" <<'PY'
import collections, re, sys
GB = 1_000_000 * 1024 / 1e9
text, fsyncs = open(sys.argv[1]).read(), int(sys.argv[2])
ops, switches, stacks = collections.Counter(), collections.Counter(), collections.Counter()
events = []  # an event's first line, then its call chain (indented)
for line in text.splitlines():
    if re.search(r' (io_uring|sched):\w+:', line):
        events.append([line])
    elif line.strip() and events:
        events[-1].append(line)
for lines in events:
    head = lines[0]
    if 'io_uring_submit_req' in head:
        ops[re.search(r'opcode (\w+)', head).group(1)] += 1
    elif 'sched_switch' in head:
        kind = re.sub(r'[-0-9]+$', '', head.split()[0])
        state = re.search(r'prev_state=(\S+)', head).group(1).rstrip('+')
        switches[(kind, state)] += 1
        frames = [l.split()[1].split('+')[0] for l in lines[1:] if len(l.split()) > 1]
        frames = [f for f in frames if not re.search(r'schedule|switch|trace', f)]
        if frames:
            stacks[(kind, state, ' < '.join(frames[:4]))] += 1
print(f'fdatasyncs: {fsyncs / GB:,.0f}/GB')
total = sum(ops.values())
print(f'io_uring submissions: {total / GB:,.0f}/GB ({total / max(fsyncs, 1):.1f} per fdatasync)')
for op, n in ops.most_common():
    print(f'  {op:<14} {n / GB:>9,.0f}/GB')
total = sum(switches.values())
print(f'context switches: {total / GB:,.0f}/GB ({total / max(fsyncs, 1):.2f} per fdatasync)')
for (kind, state), n in switches.most_common():
    print(f'  {kind:<14} {state:<2} {n / GB:>9,.0f}/GB {n / max(fsyncs, 1):6.2f} per fdatasync')
for (kind, state, stack), n in stacks.most_common(12):
    print(f'  {n / max(fsyncs, 1):5.2f}/fdatasync {kind} {state}: {stack}')
PY
  stop_broker
done
