"""kafka-python over TLS, driven by tests/tests/tls.rs.

    tls_client.py BOOTSTRAP CAFILE TOPIC COUNT

Produces COUNT values v0..v{COUNT-1} to TOPIC through an SSL listener
(checking the broker's certificate and host name against CAFILE), reads
them back and prints them as one JSON list.
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer


def main():
    bootstrap, cafile, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    tls = dict(security_protocol="SSL", ssl_cafile=cafile, ssl_check_hostname=True)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **tls)
    for i in range(count):
        producer.send(topic, f"v{i}".encode())
    producer.flush(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        **tls,
    )
    values = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value.decode() for r in records)
    consumer.close()
    print(json.dumps(values))


if __name__ == "__main__":
    main()
