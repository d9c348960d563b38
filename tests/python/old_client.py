"""kafka-python pinned to an old broker version, driven by tests/tests/old_clients.rs.

    old_client.py BOOTSTRAP TOPIC GROUP API_VERSION TOTAL FIRST

API_VERSION is a broker version such as 0.11 or 2.2: kafka-python then
sends the request versions that broker spoke (its BROKER_API_VERSIONS table)
instead of asking ApiVersions. The script creates TOPIC (one partition),
produces TOTAL records, reads FIRST of them in GROUP, commits, closes,
reopens the group and reads the rest. Then a transactional producer writes
TOPIC-txn: one committed transaction (5 records and an offset for GROUP-txn)
and one aborted, read back with read_committed. It prints one JSON line:
{"first": [offsets], "second": [offsets], "committed": [values],
"txn_offset": offset}.
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic


def read(bootstrap, topic, group, api_version, count):
    """The offsets of the next COUNT records of GROUP; commits them, then closes."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        api_version=api_version,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=count,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )
    consumer.subscribe([topic])
    offsets = []
    deadline = time.monotonic() + 60
    while len(offsets) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500, max_records=count - len(offsets)).values():
            offsets.extend(r.offset for r in records)
    consumer.commit()
    consumer.close()
    return offsets


def transactions(bootstrap, topic, group, api_version):
    """Values a read_committed reader sees after a committed and an aborted
    transaction, and the offset the committed one gave `group`."""
    tp = TopicPartition(topic, 0)
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version,
                             transactional_id=f"{topic}-producer")
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, f"kept-{i}".encode())
    producer.send_offsets_to_transaction({tp: OffsetAndMetadata(3, "", -1)}, group)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"aborted")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    reader = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version,
                           isolation_level="read_committed", auto_offset_reset="earliest",
                           fetch_max_wait_ms=100)
    reader.assign([tp])
    values = []
    # Until the 5 committed values and one more second (for the aborted
    # record, were it to show up), or 10 s.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for records in reader.poll(timeout_ms=200).values():
            values.extend(r.value.decode() for r in records)
        if len(values) >= 5:
            deadline = min(deadline, time.monotonic() + 1)
    reader.close()
    checker = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api_version, group_id=group)
    committed = checker.committed(tp)
    checker.close()
    return values, committed


def main():
    bootstrap, topic, group, version, total, first = sys.argv[1:7]
    api_version = tuple(int(p) for p in version.split("."))
    total, first = int(total), int(first)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=api_version)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1),
                         NewTopic(f"{topic}-txn", num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks="all")
    for i in range(total):
        producer.send(topic, f"v-{i}".encode())
    producer.flush()
    producer.close()
    before = read(bootstrap, topic, group, api_version, first)
    after = read(bootstrap, topic, group, api_version, total - first)
    committed, txn_offset = transactions(bootstrap, f"{topic}-txn", f"{group}-txn", api_version)
    print(json.dumps({"first": before, "second": after, "committed": committed,
                      "txn_offset": txn_offset}), flush=True)


if __name__ == "__main__":
    main()
