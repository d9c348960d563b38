#!/usr/bin/env bash
# Shutdown time of two builds on one data dir (issue #20 point 7): N partitions
# (default 10,000) of one topic, created by A; then A, B, A, B each start on the
# dir, get one acknowledged record in every partition and are stopped with
# SIGTERM; prints each SIGTERM-to-exit time.
#   A=old/release B=target/release N=10000 bash bench-harness/scripts/shutdown_ab.sh
set -u
N=${N:-10000}; D=${D:-$(mktemp -d)}; PORT=19392; ADMIN=127.0.0.1:19944
rm -rf $D; mkdir -p $D/data
start() { $1/rill serve --data-dir $D/data --listen 127.0.0.1:$PORT --admin-listen $ADMIN --log-level warn >> $D/broker.log 2>&1 & BROKER=$!; until curl -sf http://$ADMIN/metrics >/dev/null; do sleep 0.2; done; }
produce() { python3 - <<PY
import time
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
while True:
    try:
        p = KafkaProducer(bootstrap_servers="127.0.0.1:$PORT", acks="all", linger_ms=5, max_block_ms=120000); break
    except Exception: time.sleep(0.5)
if "${1:-}" == "create":
    KafkaAdminClient(bootstrap_servers="127.0.0.1:$PORT", request_timeout_ms=600000).create_topics([NewTopic("wide", $N, 1)], timeout_ms=600000)
while len(p.partitions_for("wide") or ()) < $N: time.sleep(0.5)
fs = [p.send("wide", value=b"x", partition=i) for i in range($N)]
p.flush(); [f.get(timeout=120) for f in fs]
PY
}
stop() { t=$(date +%s.%N); kill -TERM $BROKER; wait $BROKER; echo "$1 SIGTERM->exit $(echo "$(date +%s.%N) - $t" | bc) s"; }
start $A; produce create; stop A0
for r in 1 2; do for x in A B; do if [ $x = A ]; then b=$A; else b=$B; fi; start $b; produce; stop $x$r; done; done
