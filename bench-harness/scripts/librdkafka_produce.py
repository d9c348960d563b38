#!/usr/bin/env python3
"""One librdkafka producer with its default settings, as the efficiency
scripts run it (issue #37): creates TOPIC with 8 partitions (unless
--no-create), then produces RECORDS records of 1 KiB round-robin over them
with acks=all, and fails unless every record is acknowledged.

usage: librdkafka_produce.py BOOTSTRAP TOPIC RECORDS [--no-create]
"""
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 8


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    bootstrap, topic, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if '--no-create' not in sys.argv[4:]:
        admin = AdminClient({'bootstrap.servers': bootstrap, 'log_level': 3})
        for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            future.result()
    producer = Producer({'bootstrap.servers': bootstrap, 'acks': 'all', 'log_level': 3})
    value = b'x' * 1024
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        sys.exit(f'{left} records left unacknowledged')


if __name__ == '__main__':
    main()
