#!/usr/bin/env bash
# TLS vs PLAINTEXT on one release broker, interleaved (P, T, P, T).
set -u
R=${R:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
D=${D:-$(mktemp -d)}
rm -rf $D/data $D/pki; mkdir -p $D/pki
cd $D/pki
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=localhost" 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" > ext.cnf
openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.crt -days 2 -extfile ext.cnf 2>/dev/null
cat > $D/server.properties <<P
listeners=PLAINTEXT://127.0.0.1:19092,SSL://127.0.0.1:19093
advertised.listeners=PLAINTEXT://127.0.0.1:19092,SSL://localhost:19093
ssl.certificate.location=$D/pki/broker.crt
ssl.key.location=$D/pki/broker.key
P
$R/rill serve --data-dir $D/data --admin-listen 127.0.0.1:19644 --config $D/server.properties --log-level warn > $D/broker.log 2>&1 &
BROKER=$!
sleep 3
common="--partitions 8 --message-size 1024 --producers 2 --consumers 2 --acks all --rate 0 --warmup-s 3 --duration-s 12 --broker-metrics 127.0.0.1:19644"
for round in 1 2; do
  echo "== round $round PLAINTEXT"; $R/rill-bench run --bootstrap 127.0.0.1:19092 --topic-prefix p$round $common 2>&1 | tail -25
  echo "== round $round SSL"; $R/rill-bench --security-protocol SSL --ssl-ca-location $D/pki/ca.pem run --bootstrap localhost:19093 --topic-prefix t$round $common 2>&1 | tail -25
done
kill $BROKER; wait $BROKER 2>/dev/null
