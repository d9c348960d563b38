"""ElectLeaders through kafka-python's admin client (`elect_leaders`, which
finds the controller from Metadata as a Kafka client does), driven by
tests/tests/elections.rs.

    elect_leaders.py BOOTSTRAP ELECTION_TYPE TOPIC PARTITION

ELECTION_TYPE is 0 (preferred) or 1 (unclean). Prints the response's
top-level code (v1+) as `top CODE`, then `TOPIC PARTITION CODE` per
partition answered.
"""

import sys

from kafka.admin import KafkaAdminClient


def main():
    bootstrap, election_type, topic, partition = sys.argv[1:5]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        response = admin.elect_leaders(
            int(election_type),
            topic_partitions={topic: [int(partition)]},
            timeout_ms=30000,
            raise_errors=False,
        )
    finally:
        admin.close()
    print("top", getattr(response, "error_code", 0))
    for result in response.replica_election_results:
        for answer in result.partition_result:
            print(result.topic, answer.partition_id, answer.error_code)


if __name__ == "__main__":
    main()
