"""KIP-430's authorized operations as librdkafka's admin client reads them
(confluent-kafka): describe_topics, describe_cluster and
describe_consumer_groups with include_authorized_operations=True.

    authorized_operations.py BOOTSTRAP GROUP TOPIC...

Prints one JSON line: {"topics": {name: [ops]}, "cluster": [ops],
"groups": {name: [ops]}}, each list of operation names sorted.
"""

import json
import sys

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient


def names(operations):
    return sorted(op.name for op in operations or [])


def main():
    bootstrap, group, topics = sys.argv[1], sys.argv[2], sys.argv[3:]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = {"topics": {}, "groups": {}}
    described = admin.describe_topics(
        TopicCollection(topics), include_authorized_operations=True, request_timeout=15
    )
    for name, future in described.items():
        out["topics"][name] = names(future.result(timeout=30).authorized_operations)
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=15)
    out["cluster"] = names(cluster.result(timeout=30).authorized_operations)
    groups = admin.describe_consumer_groups(
        [group], include_authorized_operations=True, request_timeout=15
    )
    for name, future in groups.items():
        out["groups"][name] = names(future.result(timeout=30).authorized_operations)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
