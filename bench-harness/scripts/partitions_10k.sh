#!/usr/bin/env bash
# Startup and shutdown at scale (issue #20 point 7): one topic of N
# partitions (default 10,000) on a fresh broker. Prints the time to create
# it, idle RSS, the time from SIGTERM to exit with one acknowledged record
# in every partition, the time from a restart to a Metadata answer naming
# every partition's leader, that every record is still there, and a second
# (idle) shutdown.
#   R=target/release N=10000 bash bench-harness/scripts/partitions_10k.sh
set -u
R=${R:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
D=${D:-$(mktemp -d)}
N=${N:-10000}
PORT=${PORT:-19292}
ADMIN=${ADMIN:-127.0.0.1:19844}
rm -rf "$D/data"; mkdir -p "$D/data"
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.2f'; }
start() {
  $R/rill serve --data-dir "$D/data" --listen 127.0.0.1:$PORT --admin-listen $ADMIN \
    --log-level warn >> "$D/broker.log" 2>&1 &
  BROKER=$!
}
stop() { t=$(now); kill -TERM $BROKER; wait $BROKER 2>/dev/null; ELAPSED=$(since $t); }
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null' EXIT
metric() { curl -sf "http://$ADMIN/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'; }
py() { python3 - "$@"; }
t=$(now); start
until curl -sf "http://$ADMIN/metrics" >/dev/null; do sleep 0.1; done
echo "start (empty): $(since $t) s"
t=$(now)
py <<PY || exit 1
from kafka.admin import KafkaAdminClient, NewTopic
a = KafkaAdminClient(bootstrap_servers="127.0.0.1:$PORT", request_timeout_ms=600000)
a.create_topics([NewTopic("wide", $N, 1)], timeout_ms=600000)
PY
echo "create $N partitions: $(since $t) s"
py <<PY || exit 1
from kafka import KafkaProducer
import time
p = KafkaProducer(bootstrap_servers="127.0.0.1:$PORT", acks="all", linger_ms=5)
while len(p.partitions_for("wide") or ()) < $N:
    time.sleep(0.5)
fs = [p.send("wide", value=b"x%d" % i, partition=i) for i in range($N)]
p.flush()
assert all(f.get(timeout=60) for f in fs)
PY
echo "idle RSS with $N partitions: $(( $(metric process_resident_memory_bytes) / 1048576 )) MiB"
stop; echo "SIGTERM to exit ($N partitions written since start): $ELAPSED s"
t=$(now); start
py <<PY || exit 1
import time
from kafka import KafkaConsumer, TopicPartition
while True:
    try:
        c = KafkaConsumer(bootstrap_servers="127.0.0.1:$PORT")
        parts = c.partitions_for_topic("wide") or set()
        if len(parts) == $N:
            break
        c.close()
    except Exception:
        pass
    time.sleep(0.1)
PY
echo "restart to full Metadata: $(since $t) s"
py <<PY || exit 1
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers="127.0.0.1:$PORT")
ends = c.end_offsets([TopicPartition("wide", i) for i in range($N)])
total = sum(ends.values())
print("records after restart: %d of $N" % total)
assert total == $N
PY
sleep 2
stop; echo "SIGTERM to exit (nothing written since start): $ELAPSED s"
