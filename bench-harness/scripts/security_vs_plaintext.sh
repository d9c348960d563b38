#!/usr/bin/env bash
# PLAINTEXT vs SSL vs SASL_SSL (SCRAM-SHA-512) on one release broker,
# interleaved (P, T, S, P, T, S), then connection setup rates per protocol
# (`rill-bench handshakes`). Needs openssl for the test certificates.
#   R=target/release D=/tmp/sec bash bench-harness/scripts/security_vs_plaintext.sh
set -u
R=${R:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
D=${D:-$(mktemp -d)}
DURATION=${DURATION:-12}
rm -rf $D/data $D/pki; mkdir -p $D/pki
cd $D/pki
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=localhost" 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" > ext.cnf
openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.crt -days 2 -extfile ext.cnf 2>/dev/null
cat > $D/server.properties <<P
listeners=PLAINTEXT://127.0.0.1:19092,SSL://127.0.0.1:19093,SASL_SSL://127.0.0.1:19094,SASL_PLAINTEXT://127.0.0.1:19095
advertised.listeners=PLAINTEXT://127.0.0.1:19092,SSL://localhost:19093,SASL_SSL://localhost:19094,SASL_PLAINTEXT://127.0.0.1:19095
ssl.certificate.location=$D/pki/broker.crt
ssl.key.location=$D/pki/broker.key
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";
rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=bench,password=bench-secret]
P
$R/rill serve --data-dir $D/data --admin-listen 127.0.0.1:19644 --config $D/server.properties --log-level warn > $D/broker.log 2>&1 &
BROKER=$!
sleep 4
TLS="--ssl-ca-location $D/pki/ca.pem"
SCRAM="--sasl-mechanism SCRAM-SHA-512 --sasl-username bench --sasl-password bench-secret"
PLAIN="--sasl-mechanism PLAIN --sasl-username bench --sasl-password bench-secret"
common="--partitions 8 --message-size 1024 --producers 2 --consumers 2 --acks all --rate 0 --warmup-s 3 --duration-s $DURATION --broker-metrics 127.0.0.1:19644 --quiet"
for round in 1 2; do
  echo "== round $round PLAINTEXT"; $R/rill-bench run --bootstrap 127.0.0.1:19092 --topic-prefix p$round --label plaintext-$round --out $D/p$round.json $common 2>&1 | tail -3
  echo "== round $round SSL"; $R/rill-bench --security-protocol SSL $TLS run --bootstrap localhost:19093 --topic-prefix t$round --label ssl-$round --out $D/t$round.json $common 2>&1 | tail -3
  echo "== round $round SASL_SSL SCRAM-SHA-512"; $R/rill-bench --security-protocol SASL_SSL $TLS $SCRAM run --bootstrap localhost:19094 --topic-prefix s$round --label sasl-ssl-$round --out $D/s$round.json $common 2>&1 | tail -3
done
$R/rill-bench report $D/p1.json $D/t1.json $D/s1.json $D/p2.json $D/t2.json $D/s2.json --html $D/report.html
echo "== connection setup (500 connections, 8 at a time)"
$R/rill-bench handshakes --bootstrap 127.0.0.1:19092 --out $D/h-p.json
$R/rill-bench --security-protocol SSL $TLS handshakes --bootstrap localhost:19093 --out $D/h-t.json
$R/rill-bench --security-protocol SASL_PLAINTEXT $PLAIN handshakes --bootstrap 127.0.0.1:19095 --label SASL_PLAINTEXT-PLAIN --out $D/h-sp.json
$R/rill-bench --security-protocol SASL_PLAINTEXT $SCRAM handshakes --bootstrap 127.0.0.1:19095 --label SASL_PLAINTEXT-SCRAM-SHA-512 --out $D/h-ss.json
$R/rill-bench --security-protocol SASL_SSL $TLS $SCRAM handshakes --bootstrap localhost:19094 --label SASL_SSL-SCRAM-SHA-512 --out $D/h-s.json
kill $BROKER; wait $BROKER 2>/dev/null
