"""Client-metrics subscriptions (KIP-714) through kafka-python's admin
client, as `kafka-configs --entity-type client-metrics` manages them.

    client_metrics.py BOOTSTRAP set NAME key=value ...   IncrementalAlterConfigs SET
    client_metrics.py BOOTSTRAP delete NAME key ...      IncrementalAlterConfigs DELETE
    client_metrics.py BOOTSTRAP describe NAME            DescribeConfigs: {key: value} as JSON
    client_metrics.py BOOTSTRAP list                     ListConfigResources: names as JSON

An alter prints the broker's answer for the resource (`OK` or the error)
and exits non-zero unless it is `OK`.
"""

import json
import sys

from kafka.admin import (AlterConfigOp, ConfigResource, ConfigResourceType,
                         KafkaAdminClient)


def main():
    bootstrap, command = sys.argv[1], sys.argv[2]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    if command in ("set", "delete"):
        name = sys.argv[3]
        if command == "set":
            configs = dict(pair.split("=", 1) for pair in sys.argv[4:])
        else:
            configs = {key: (AlterConfigOp.DELETE, None) for key in sys.argv[4:]}
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs=configs)
        answer = admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
        outcome = str(answer["client_metrics"][name])
        print(outcome)
        sys.exit(0 if outcome == "OK" else 1)
    if command == "describe":
        name = sys.argv[3]
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name)
        described = admin.describe_configs([resource])["client_metrics"][name]
        print(json.dumps({key: entry["value"] for key, entry in described.items()}))
    elif command == "list":
        listed = admin.list_config_resources([ConfigResourceType.CLIENT_METRICS])
        print(json.dumps(listed.get("client_metrics", [])))
    admin.close()


if __name__ == "__main__":
    main()
