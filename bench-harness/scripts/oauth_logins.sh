#!/usr/bin/env bash
# SASL login cost per mechanism on one release broker: PLAIN, SCRAM-SHA-512,
# OAUTHBEARER with an unsigned token, and OAUTHBEARER with ES256 and RS256
# tokens checked against a JWKS (bench-harness/scripts/jwt_provider.py,
# Python's `cryptography`). Each round runs `rill-bench handshakes` (1,000
# connections, 8 at once) per mechanism, interleaved, and prints the
# broker's CPU for them (utime+stime ticks of /proc/PID/stat).
#   R=target/release D=/tmp/logins ROUNDS=2 bash bench-harness/scripts/oauth_logins.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
R=${R:-$HERE/../../target/release}
D=${D:-$(mktemp -d)}
ROUNDS=${ROUNDS:-2}
rm -rf "$D/data" "$D/jwks"; mkdir -p "$D/jwks"
python3 "$HERE/jwt_provider.py" "$D/jwks" ES256 bench > "$D/jwks/es256"
python3 "$HERE/jwt_provider.py" "$D/jwks" RS256 bench > "$D/jwks/rs256"
cat > "$D/server.properties" <<P
listeners=PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19094,SIGNED://127.0.0.1:19095
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,OAUTHBEARER
listener.name.signed.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.signed.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=file://$D/jwks/jwks.json
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";
rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=bench,password=bench-secret]
P
"$R/rill" serve --data-dir "$D/data" --admin-listen 127.0.0.1:19099 --config "$D/server.properties" > "$D/broker.log" 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null' EXIT
sleep 4
ticks() { awk '{print $14 + $15}' "/proc/$BROKER/stat"; }
logins() { # label port mechanism [token]
  local before; before=$(ticks)
  "$R/rill-bench" --security-protocol SASL_PLAINTEXT --sasl-mechanism "$3" --sasl-username bench \
    --sasl-password "${4:-bench-secret}" handshakes --bootstrap "127.0.0.1:$2" \
    --connections 1000 --concurrency 8 --label "$1" --out "$D/$1.json" > "$D/$1.log" 2>&1
  echo "$1: $(grep 'connections/s' "$D/$1.log" | sed 's/^[^:]*: //'); broker CPU $(( ($(ticks) - before) * 10 )) ms"
  grep -i error "$D/$1.log" | head -2
}
for round in $(seq "$ROUNDS"); do
  echo "round $round"
  logins plain 19094 PLAIN
  logins scram-sha-512 19094 SCRAM-SHA-512
  logins unsigned 19094 OAUTHBEARER "$(python3 -c 'import base64,json,time;b=lambda v:base64.urlsafe_b64encode(json.dumps(v).encode()).decode().rstrip("=");n=int(time.time());print(b({"alg":"none"})+"."+b({"sub":"bench","iat":n,"exp":n+3600})+".")')"
  logins es256 19095 OAUTHBEARER "$(cat "$D/jwks/es256")"
  logins rs256 19095 OAUTHBEARER "$(cat "$D/jwks/rs256")"
done
