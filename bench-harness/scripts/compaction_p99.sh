#!/usr/bin/env bash
# Produce p99 while the log cleaner works (issue #20 point 2): rill on one
# shard (--cores 1), a compacted topic `kv` filled with ~FILL_MB of keyed
# records over KEYS distinct keys (so a pass drops nearly all of it), its
# cleaning held back by min.compaction.lag.ms = 1 day. Then the same
# `rill-bench run` on another topic of the same shard, twice: once with no
# compaction pending, once while the cleaner works the whole of `kv`
# (IncrementalAlterConfigs sets min.compaction.lag.ms=0 a few seconds into
# the run; rill_cleaner_* show when the pass ran). Prints both p99s and
# their ratio. Needs kafka-python (admin calls) and curl.
#   R=target/release D=/tmp/cp99 FILL_MB=1024 bash bench-harness/scripts/compaction_p99.sh
# SERVER_PROPS adds broker settings, e.g.
#   SERVER_PROPS=log.cleaner.io.max.bytes.per.second=104857600
set -u
R=${R:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
D=${D:-$(mktemp -d)}
FILL_MB=${FILL_MB:-1024}
KEYS=${KEYS:-100}
# Free ports by default: other brokers may share this host.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=${PORT:-$(free_port)}
ADMIN=${ADMIN:-127.0.0.1:$(free_port)}
# The measured run: 4 partitions, 2000 x 1 KiB records/s, acks=all.
RUN_ARGS=${RUN_ARGS:---partitions 4 --message-size 1024 --rate 2000 --producers 1 --consumers 1 --warmup-s 3 --duration-s 20}
TRIGGER_AFTER_S=${TRIGGER_AFTER_S:-6}
BOOT=127.0.0.1:$PORT
rm -rf "$D/data"; mkdir -p "$D/data"
# A one-second cleaner tick: the pass starts within a second of the trigger.
printf 'log.retention.check.interval.ms=1000\n%s\n' "${SERVER_PROPS:-}" > "$D/server.properties"
$R/rill serve --cores 1 --data-dir "$D/data" --listen $BOOT --admin-listen $ADMIN \
  --config "$D/server.properties" --log-level warn >> "$D/broker.log" 2>&1 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null' EXIT
until curl -sf "http://$ADMIN/metrics" >/dev/null; do
  kill -0 $BROKER 2>/dev/null || { echo "rill exited:"; tail -5 "$D/broker.log"; exit 1; }
  sleep 0.2
done
metric() { curl -sf "http://$ADMIN/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'; }
admin() {
  python3 - "$BOOT" "$@" <<'EOF'
import sys
from kafka.admin import KafkaAdminClient, NewTopic, ConfigResource, ConfigResourceType
boot, op = sys.argv[1], sys.argv[2]
client = KafkaAdminClient(bootstrap_servers=boot)
if op == "create":
    client.create_topics([NewTopic("kv", 1, 1, topic_configs={
        "cleanup.policy": "compact", "segment.bytes": str(64 << 20),
        "min.compaction.lag.ms": "86400000"})])
else:
    client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kv",
        configs={"min.compaction.lag.ms": "0"})], incremental=True)
client.close()
EOF
}
admin create || { echo "creating kv failed"; exit 1; }
echo "filling kv with ${FILL_MB} MB over $KEYS keys..."
while [ $(du -sm "$D/data" | cut -f1) -lt $FILL_MB ]; do
  $R/rill-bench run --bootstrap $BOOT --topic kv --keys random --key-space $KEYS \
    --message-size 1024 --producers 1 --consumers 0 --acks 1 --rate 0 --warmup-s 0 \
    --duration-s 10 --quiet --out "$D/fill.json" > /dev/null 2>&1 || { echo "fill failed"; exit 1; }
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r['total_produced_messages'] == 0 or r['errors'] > 0)" "$D/fill.json" ||
    { echo "fill produced nothing or failed:"; python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['error_samples'][:3])" "$D/fill.json"; exit 1; }
done
echo "kv: $(du -sm "$D/data" | cut -f1) MB on disk, cleaner passes so far: $(metric rill_cleaner_passes_total)"
measure() {
  $R/rill-bench run --bootstrap $BOOT --topic m $RUN_ARGS --quiet --out "$D/$1.json" > "$D/$1.txt" 2>&1
}
p99_ms() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('%.2f' % (r['publish_latency_us']['p99_us']/1000))" "$1"; }
max_sec_p99_ms() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('%.2f' % (max(s['publish_latency_us_p99'] for s in r['series'])/1000))" "$1"; }
errors() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['errors'])" "$1"; }

measure idle || { echo "idle run failed"; cat "$D/idle.txt"; exit 1; }
passes0=$(metric rill_cleaner_passes_total); cleaned0=$(metric rill_cleaner_cleaned_bytes_total)
pass_ms0=$(metric rill_cleaner_pass_duration_ms_total)
measure busy &
RUN=$!
sleep $TRIGGER_AFTER_S
admin alter || echo "alter failed"
t0=$(date +%s.%N); started=""
while kill -0 $RUN 2>/dev/null; do
  if [ -z "$started" ] && { [ "$(metric rill_cleaner_passes_total)" != "$passes0" ] ||
     [ "$(metric rill_cleaner_cleaned_bytes_total)" != "$cleaned0" ]; }; then
    started=$(date +%s.%N)
  fi
  sleep 0.2
done
wait $RUN || { echo "busy run failed"; cat "$D/busy.txt"; exit 1; }
cleaned=$(( $(metric rill_cleaner_cleaned_bytes_total) - cleaned0 ))
pass_ms=$(( $(metric rill_cleaner_pass_duration_ms_total) - pass_ms0 ))
idle=$(p99_ms "$D/idle.json"); busy=$(p99_ms "$D/busy.json")
echo "cleaner during the busy run: $(( $(metric rill_cleaner_passes_total) - passes0 )) passes, $(( cleaned / 1048576 )) MiB read, ${pass_ms} ms of passes, $(( $(metric rill_cleaner_removed_bytes_total) / 1048576 )) MiB removed in all"
# The counters move when a pass ends: the pass ran for about pass_ms before.
[ -n "$started" ] && echo "cleaner counters moved $(python3 -c "print('%.1f' % ($started - $t0))") s after the trigger (the pass ends then; trigger ${TRIGGER_AFTER_S} s after the run's start, warm-up included)"
echo "kv after cleaning: $(du -sm "$D/data" | cut -f1) MB on disk"
printf "%-22s %-10s %-22s %s\n" run p99_ms max_1s_p99_ms errors
printf "%-22s %-10s %-22s %s\n" "no compaction" "$idle" "$(max_sec_p99_ms "$D/idle.json")" "$(errors "$D/idle.json")"
printf "%-22s %-10s %-22s %s\n" "cleaner working kv" "$busy" "$(max_sec_p99_ms "$D/busy.json")" "$(errors "$D/busy.json")"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('p99 ratio (cleaning / idle): %.2f' % (b / a if a else float('nan')))" "$idle" "$busy"
