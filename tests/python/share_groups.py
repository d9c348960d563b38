"""Share groups (KIP-932) through confluent-kafka's ShareConsumer (the
preview share consumer of librdkafka 2.15+), for tests/tests/share_groups.rs.

    share_groups.py BOOTSTRAP config GROUP key=value ...
        IncrementalAlterConfigs SET on the GROUP resource; prints OK.
    share_groups.py BOOTSTRAP split TOPIC GROUP CONSUMERS COUNT
        COUNT records produced while CONSUMERS share consumers (implicit
        acknowledgement) read them; prints {"per_consumer": [...],
        "values": [...]} once all are read (or after 60 s).
    share_groups.py BOOTSTRAP release TOPIC GROUP
        One record produced; one consumer (explicit mode) releases it at
        each delivery until it stops coming back; prints the delivery
        counts it saw, as JSON.
    share_groups.py BOOTSTRAP hold TOPIC GROUP STALL_S
        Polls until it holds records (explicit mode, none acknowledged),
        prints them, stays stuck STALL_S seconds (its connections open),
        then dies without closing.
    share_groups.py BOOTSTRAP late TOPIC GROUP WAIT_S
        One consumer (implicit mode) polls until it gets records, waits
        WAIT_S (past the lock), then polls on: its late acceptance comes
        with that poll. Prints {"first": n, "again": [delivery counts]}.
    share_groups.py BOOTSTRAP collect TOPIC GROUP COUNT
        Reads until COUNT records came (or 60 s), accepting them; prints
        {"values": [...], "delivery_counts": [...], "seconds": s}.
    share_groups.py BOOTSTRAP produce TOPIC FIRST COUNT
        Produces values FIRST..FIRST+COUNT-1, acks=all.
    share_groups.py BOOTSTRAP produce_at TOPIC TIMESTAMP_MS VALUE...
        Produces each VALUE with that record timestamp, acks=all.
    share_groups.py BOOTSTRAP poll TOPIC GROUP SECONDS
        Reads for SECONDS, accepting what comes; prints {"values": [...]}.
    share_groups.py BOOTSTRAP stream TOPIC GROUP COUNT
        Produces 0..COUNT-1 (idempotent, paced) while one consumer in
        explicit mode accepts what it gets, committing each poll's records;
        ends once every value was delivered (or after 120 s); prints
        {"missing": [...], "redelivered_accepted": [...], "accepted": n,
        "failed_commits": n}: values never delivered, and deliveries of
        values whose acceptance had been confirmed.
    share_groups.py BOOTSTRAP transactions TOPIC
        Produces "committed-0..4" in a committed transaction and
        "aborted-0..4" in an aborted one, then "after".
"""

import json
import os
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ResourceType)


def consumer(bootstrap, group, topic, explicit=False):
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(config)
    c.subscribe([topic])
    return c


def records(messages):
    for m in messages:
        if m.error():
            print("consumer error:", m.error(), file=sys.stderr)
            continue
        yield m


def set_config(bootstrap, group, pairs):
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in (p.split("=", 1) for p in pairs)]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    print("OK")


def produce(bootstrap, topic, values, pace_s=0.0):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for v in values:
        p.produce(topic, str(v).encode())
        p.poll(0)
        if pace_s:
            p.flush()
            time.sleep(pace_s)
    p.flush(30)


def split(bootstrap, topic, group, consumers, count):
    got = [[] for _ in range(consumers)]
    done = threading.Event()

    def run(index):
        c = consumer(bootstrap, group, topic)
        while not done.is_set():
            for m in records(c.poll(0.5)):
                got[index].append(int(m.value()))
                # Slow enough that the others take their turns.
                time.sleep(0.005)
        # Implicit mode accepts the last poll's records here: a close
        # alone would give them back, to be delivered again.
        c.commit_sync(30)
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    produce(bootstrap, topic, range(count), pace_s=0.002)
    deadline = time.time() + 60
    while time.time() < deadline and sum(len(g) for g in got) < count:
        time.sleep(0.2)
    done.set()
    for t in threads:
        t.join()
    print(json.dumps({"per_consumer": [len(g) for g in got],
                      "values": sorted(v for g in got for v in g)}))


def release(bootstrap, topic, group):
    c = consumer(bootstrap, group, topic, explicit=True)
    produce(bootstrap, topic, ["again"])
    counts = []
    quiet_since = time.time()
    while time.time() - quiet_since < 5:
        batch = list(records(c.poll(0.5)))
        for m in batch:
            counts.append(m.delivery_count())
            c.acknowledge(m, AcknowledgeType.RELEASE)
        if batch:
            c.commit_sync(30)
            quiet_since = time.time()
    c.close()
    print(json.dumps(counts))


def hold(bootstrap, topic, group, stall_s):
    c = consumer(bootstrap, group, topic, explicit=True)
    held = []
    deadline = time.time() + 60
    # One poll that gives records: explicit mode allows no other until
    # they are acknowledged, and this one never acknowledges.
    while not held and time.time() < deadline:
        held.extend(int(m.value()) for m in records(c.poll(0.5)))
    print(json.dumps(sorted(held)), flush=True)
    # Stuck for a while, its connections open, then dies holding the
    # records: no acknowledgement, no close.
    time.sleep(stall_s)
    os._exit(0)


def late(bootstrap, topic, group, wait_s):
    c = consumer(bootstrap, group, topic)
    first, again = [], []
    deadline = time.time() + 60
    while not first and time.time() < deadline:
        first = list(records(c.poll(0.5)))
    time.sleep(wait_s)
    deadline = time.time() + 10
    while len(again) < len(first) and time.time() < deadline:
        again.extend(m.delivery_count() for m in records(c.poll(0.5)))
    c.commit_sync(30)
    c.close()
    print(json.dumps({"first": len(first), "again": again}))


def collect(bootstrap, topic, group, count):
    c = consumer(bootstrap, group, topic)
    start = time.time()
    values, counts = [], []
    while len(values) < count and time.time() - start < 60:
        for m in records(c.poll(0.5)):
            values.append(m.value().decode())
            counts.append(m.delivery_count())
    c.commit_sync(30)
    c.close()
    print(json.dumps({"values": values, "delivery_counts": counts,
                      "seconds": time.time() - start}))


def stream(bootstrap, topic, group, count):
    producer = threading.Thread(target=lambda: produce_idempotent(bootstrap, topic, count))
    producer.start()
    c = consumer(bootstrap, group, topic, explicit=True)
    delivered, accepted, again = set(), set(), []
    failed = 0
    deadline = time.time() + 120
    while time.time() < deadline and len(delivered) < count:
        batch = list(records(c.poll(0.5)))
        for m in batch:
            value = int(m.value())
            if value in accepted:
                again.append(value)
            delivered.add(value)
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        if not batch:
            continue
        try:
            outcome = c.commit_sync(30)
        except Exception as e:  # the coordinator or leader moved
            print("commit failed:", e, file=sys.stderr)
            outcome = {None: e}
        if all(error is None for error in outcome.values()):
            accepted.update(int(m.value()) for m in batch)
        else:
            failed += 1
    producer.join()
    c.close()
    print(json.dumps({"missing": sorted(set(range(count)) - delivered),
                      "redelivered_accepted": again, "accepted": len(accepted),
                      "failed_commits": failed}))


def produce_at(bootstrap, topic, timestamp_ms, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        p.produce(topic, v.encode(), timestamp=timestamp_ms)
    if p.flush(30) != 0:
        sys.exit("records not delivered")
    print("OK")


def poll(bootstrap, topic, group, seconds):
    c = consumer(bootstrap, group, topic)
    deadline = time.time() + seconds
    values = []
    while time.time() < deadline:
        values.extend(m.value().decode() for m in records(c.poll(0.5)))
    c.commit_sync(30)
    c.close()
    print(json.dumps({"values": values}))


def produce_idempotent(bootstrap, topic, count):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 0, "message.timeout.ms": 60000})
    for v in range(count):
        p.produce(topic, str(v).encode())
        p.poll(0)
        time.sleep(0.01)
    if p.flush(60) != 0:
        print("producer: records not delivered", file=sys.stderr)


def transactions(bootstrap, topic):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"committed-{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"aborted-{i}".encode())
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"after")
    p.commit_transaction(30)
    print("OK")


def main():
    bootstrap, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "config":
        set_config(bootstrap, args[0], args[1:])
    elif command == "split":
        split(bootstrap, args[0], args[1], int(args[2]), int(args[3]))
    elif command == "release":
        release(bootstrap, args[0], args[1])
    elif command == "hold":
        hold(bootstrap, args[0], args[1], float(args[2]))
    elif command == "late":
        late(bootstrap, args[0], args[1], float(args[2]))
    elif command == "collect":
        collect(bootstrap, args[0], args[1], int(args[2]))
    elif command == "produce":
        first, count = int(args[1]), int(args[2])
        produce(bootstrap, args[0], range(first, first + count))
    elif command == "produce_at":
        produce_at(bootstrap, args[0], int(args[1]), args[2:])
    elif command == "poll":
        poll(bootstrap, args[0], args[1], float(args[2]))
    elif command == "stream":
        stream(bootstrap, args[0], args[1], int(args[2]))
    elif command == "transactions":
        transactions(bootstrap, args[0])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
