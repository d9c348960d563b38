"""kafka-python over SASL_PLAINTEXT or SASL_SSL, driven by
tests/tests/sasl.rs and tests/tests/tls.rs.

    sasl_client.py BOOTSTRAP MECHANISM USER PASSWORD TOPIC COUNT [CAFILE]

With CAFILE the connection is SASL_SSL, trusting that CA.

Produces COUNT records to TOPIC (which exists) as USER with MECHANISM
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER with an unsigned
token naming USER and a SASL extension, PASSWORD then ignored; or GSSAPI
with the Kerberos ticket cache of KRB5CCNAME, PASSWORD then the host of
the broker's principal, kafka/PASSWORD, and USER only names the values), then
reads them back from the
beginning with an assigned consumer. Prints one JSON line:
{"produced": n, "consumed": [values]} — or {"error": "<exception class>:
<message>"} when the client cannot authenticate.
"""

import base64
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def unsigned_token_provider(user):
    """kafka-python's token provider: an unsigned JWT for `user`."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    class Unsigned(AbstractTokenProvider):
        def token(self):
            now = int(time.time())
            claims = {"sub": user, "iat": now, "exp": now + 600}
            return part({"alg": "none"}) + "." + part(claims) + "."

        def extensions(self):
            return {"traceId": "42"}

    return Unsigned()


def credentials(mechanism, user, password):
    if mechanism == "GSSAPI":
        return dict(sasl_kerberos_service_name="kafka",
                    sasl_kerberos_domain_name=password)
    if mechanism == "OAUTHBEARER":
        return dict(sasl_oauth_token_provider=unsigned_token_provider(user))
    return dict(sasl_plain_username=user, sasl_plain_password=password)


def main():
    bootstrap, mechanism, user, password, topic, count = sys.argv[1:7]
    count = int(count)
    cafile = sys.argv[7] if len(sys.argv) > 7 else None
    tls = dict(ssl_cafile=cafile, ssl_check_hostname=True) if cafile else {}
    sasl = dict(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_SSL" if cafile else "SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        **credentials(mechanism, user, password),
        request_timeout_ms=10000,
        # A refused login fails the bootstrap: after 5 s rather than the
        # default 30 (a good one takes well under a second).
        bootstrap_timeout_ms=5000,
        **tls
    )
    try:
        producer = KafkaProducer(max_block_ms=10000, **sasl)
        for i in range(count):
            producer.send(topic, value=("%s-%d" % (user, i)).encode()).get(timeout=20)
        producer.close()
        consumer = KafkaConsumer(
            enable_auto_commit=False, fetch_max_wait_ms=100, **sasl
        )
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in records)
        consumer.close()
        print(json.dumps({"produced": count, "consumed": values}))
    except Exception as e:  # the test reads the class and message
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))


if __name__ == "__main__":
    main()
