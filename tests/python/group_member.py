"""A kafka-python group member driven by rill's black-box tests (tests/tests/groups.rs).

    group_member.py BOOTSTRAP TOPIC GROUP STRATEGY MODE [ARG]

STRATEGY is `range` or `roundrobin` (the classic protocol's assignor).
MODE:
  member      subscribe and poll; print {"assigned": [partitions]} (one JSON
              line) each time the assignment changes; close the consumer
              (LeaveGroup) and exit when stdin closes. The tests also SIGKILL it.
  commit N    subscribe, wait for an assignment, commit offset N for every
              assigned partition, print {"committed": N, "partitions": [...]}, close.
  first       subscribe, print the first record read as
              {"partition": p, "offset": o, "committed": c}, close.
"""

import json
import sys
import threading
import time

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

ASSIGNORS = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}


def say(obj):
    print(json.dumps(obj), flush=True)


STARTED = time.monotonic()


def step(what):
    """Where the member is, on stderr: a timed-out test shows where it stuck."""
    print(f"[group_member {time.monotonic() - STARTED:6.2f}s] {what}", file=sys.stderr, flush=True)


def main():
    bootstrap, topic, group, strategy, mode = sys.argv[1:6]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[ASSIGNORS[strategy]],
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )
    consumer.subscribe([topic])
    step(f"{mode}: subscribed to {topic} in {group}")
    # Generous: a slow virtio disk has been seen to stretch the group's
    # first use (creating __consumer_offsets) far past its usual 3 s.
    deadline = time.monotonic() + 60
    if mode == "member":
        stdin_closed = threading.Event()

        def watch_stdin():
            sys.stdin.read()
            stdin_closed.set()

        threading.Thread(target=watch_stdin, daemon=True).start()
        last = None
        while not stdin_closed.is_set():
            consumer.poll(timeout_ms=50)
            now = sorted(tp.partition for tp in consumer.assignment())
            if now != last:
                say({"assigned": now})
                last = now
    elif mode == "commit":
        offset = int(sys.argv[6])
        while not consumer.assignment():
            if time.monotonic() > deadline:
                sys.exit("no assignment within 60 s")
            consumer.poll(timeout_ms=100)
        owned = sorted(consumer.assignment())
        step(f"assigned {[tp.partition for tp in owned]}")
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp in owned})
        step("committed")
        say({"committed": offset, "partitions": [tp.partition for tp in owned]})
    elif mode == "first":
        while True:
            if time.monotonic() > deadline:
                sys.exit("no record within 60 s")
            batches = consumer.poll(timeout_ms=100, max_records=1)
            records = [r for rs in batches.values() for r in rs]
            if records:
                r = records[0]
                step(f"first record at offset {r.offset}")
                committed = consumer.committed(TopicPartition(topic, r.partition))
                say({"partition": r.partition, "offset": r.offset, "committed": committed})
                break
    else:
        sys.exit(f"unknown mode {mode}")
    step("closing")
    consumer.close()
    step("closed")


if __name__ == "__main__":
    main()
