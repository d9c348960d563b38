"""kafka-python pinned to an old broker version, driven by tests/tests/old_clients.rs.

    old_client.py BOOTSTRAP TOPIC GROUP API_VERSION TOTAL FIRST

API_VERSION is a broker version such as 0.11 or 2.2: kafka-python then
sends the request versions that broker spoke (its BROKER_API_VERSIONS table)
instead of asking ApiVersions. The script creates TOPIC (one partition),
produces TOTAL records, reads FIRST of them in GROUP, commits, closes,
reopens the group and reads the rest; it prints one JSON line:
{"first": [offsets], "second": [offsets]}.
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer
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


def main():
    bootstrap, topic, group, version, total, first = sys.argv[1:7]
    api_version = tuple(int(p) for p in version.split("."))
    total, first = int(total), int(first)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=api_version)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks="all")
    for i in range(total):
        producer.send(topic, f"v-{i}".encode())
    producer.flush()
    producer.close()
    before = read(bootstrap, topic, group, api_version, first)
    after = read(bootstrap, topic, group, api_version, total - first)
    print(json.dumps({"first": before, "second": after}), flush=True)


if __name__ == "__main__":
    main()
