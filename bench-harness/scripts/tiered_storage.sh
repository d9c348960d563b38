#!/usr/bin/env bash
# Tiered storage (KIP-405, issue #35) on one rill (--cores 1, the default
# fsync policy) with a file:// object store, in one run:
#  1. Consume from the store against consume from the local log. Topics
#     `tiered` (remote.storage.enable=true, SEGMENT_MB segments,
#     local.retention.bytes=1) and `local` (plain, same segments) are
#     filled with ~FILL_MB each of 1 KiB records by the same rill-bench
#     runs (one producer per topic). Once every sealed segment of `tiered`
#     is uploaded and deleted locally, each topic is drained from earliest
#     to its end by the same `rill-bench run` (1 consumer), twice: cold
#     (the store's and `local`'s files dropped from the page cache with
#     posix_fadvise DONTNEED: rill writes its segments with O_DIRECT, so
#     they are not cached after the fill, while the store's files are)
#     and warm (right after the cold pass). A sampler reads /metrics every
#     0.1 s: the drain is the span over which Fetch response bytes
#     (rill_response_bytes_total{api="Fetch"}) rise, and the broker's CPU
#     (process_cpu_seconds_total) is read over it. Prints MB/s and broker
#     CPU-s per GB consumed, the remote/local ratios, and each drain's
#     rill_remote_fetch_* / rill_remote_storage_* deltas.
#  2. Produce latency with uploads off and on: the same `rill-bench run`
#     (acks=all, RATE x 1 KiB/s) on two tiered topics with P2_SEGMENT_BYTES
#     segments and local.retention.bytes=1 that differ only in
#     remote.log.copy.disable: `p_off` (true: nothing is uploaded and the
#     local log keeps everything) and `p_on` (a segment sealed every
#     couple of seconds is uploaded, then deleted locally, all through the
#     run). The segment rolls are the same, so the difference is the
#     uploads and the local deletions. ROUNDS rounds in ABBA order (off on,
#     on off, ...), each run after a `sync`. Prints each run's p50, p99,
#     p99.9, broker cores busy, rill_remote_copy_segments_total delta and
#     data-log fdatasyncs (per second, mean time), then the percentiles of
#     all rounds' latencies pooled and their ratios (the issue's goal: p99
#     within 1.1x).
# Needs kafka-python (admin calls, end offsets) and curl. Disk: about
# 2 x FILL_MB (`local` and the store) plus 0.5 GB (part 2), all removed
# at the end unless KEEP=1.
#   R=target/release D=/work/bench-tmp/tiered bash bench-harness/scripts/tiered_storage.sh
# Knobs (defaults): FILL_MB=2048 per topic, PARTITIONS=4, SEGMENT_MB=16,
# DRAIN_S=25 (each drain's rill-bench run, which must outlast the drain),
# RATE=2000, WARMUP_S=5, DURATION_S=20, ROUNDS=4, P2_SEGMENT_BYTES=1048576,
# TASK_INTERVAL_MS=1000 (remote.log.manager.task.interval.ms and
# log.retention.check.interval.ms), UPLOAD_WAIT_S=600, SERVER_PROPS (more
# broker settings, one per line), KEEP=1 keeps the data and the store.
set -u
R=${R:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
D=${D:-$(mktemp -d "${TMPDIR:-/var/tmp}/rill-tiered-XXXX")}
FILL_MB=${FILL_MB:-2048}
PARTITIONS=${PARTITIONS:-4}
SEGMENT_MB=${SEGMENT_MB:-16}
DRAIN_S=${DRAIN_S:-25}
FILL_ROUND_S=${FILL_ROUND_S:-10}
RATE=${RATE:-2000}
WARMUP_S=${WARMUP_S:-5}
DURATION_S=${DURATION_S:-20}
ROUNDS=${ROUNDS:-4}
P2_SEGMENT_BYTES=${P2_SEGMENT_BYTES:-1048576}
TASK_INTERVAL_MS=${TASK_INTERVAL_MS:-1000}
UPLOAD_WAIT_S=${UPLOAD_WAIT_S:-600}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port); ADMIN=127.0.0.1:$(free_port); BOOT=127.0.0.1:$PORT
# file:// URLs take an absolute path without `..`: pwd -P gives one.
mkdir -p "$D"; D=$(cd "$D" && pwd -P)
rm -rf "$D/data" "$D/remote"; mkdir -p "$D/data" "$D/remote"
cat > "$D/server.properties" <<EOF
remote.log.storage.system.enable=true
rill.remote.storage.url=file://$D/remote
remote.log.manager.task.interval.ms=$TASK_INTERVAL_MS
log.retention.check.interval.ms=$TASK_INTERVAL_MS
${SERVER_PROPS:-}
EOF
$R/rill serve --cores 1 --data-dir "$D/data" --listen $BOOT --admin-listen $ADMIN \
  --config "$D/server.properties" --log-level warn >> "$D/broker.log" 2>&1 &
BROKER=$!
SAMPLER=""
cleanup() {
  [ -n "$SAMPLER" ] && kill $SAMPLER 2>/dev/null
  kill $BROKER 2>/dev/null; wait $BROKER 2>/dev/null
  [ "${KEEP:-0}" = 1 ] || rm -rf "$D/data" "$D/remote"
}
trap cleanup EXIT
until curl -sf "http://$ADMIN/metrics" >/dev/null; do
  kill -0 $BROKER 2>/dev/null || { echo "rill exited:"; tail -5 "$D/broker.log"; exit 1; }
  sleep 0.2
done
# A family's sum over its samples (shards).
metric() { curl -sf "http://$ADMIN/metrics" | awk -v m="$1" 'index($1, m) == 1 && substr($1, length(m) + 1, 1) ~ /^($|[{,}])/ {s += $2} END {printf "%.6f", s}'; }
int() { printf %.0f "$1"; }
admin() {
  python3 - "$BOOT" "$@" <<'EOF'
import sys
from kafka.admin import KafkaAdminClient, NewTopic
boot, name, partitions, *pairs = sys.argv[1:]
configs = dict(pair.split("=", 1) for pair in pairs)
client = KafkaAdminClient(bootstrap_servers=boot)
client.create_topics([NewTopic(name, int(partitions), 1, topic_configs=configs)])
client.close()
EOF
}
end_offsets() {
  python3 - "$BOOT" "$1" <<'EOF'
import sys
from kafka import KafkaConsumer, TopicPartition
boot, topic = sys.argv[1:]
consumer = KafkaConsumer(bootstrap_servers=boot)
parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
print(sum(consumer.end_offsets(parts).values()))
consumer.close()
EOF
}
json() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
local_logs() { find "$D/data" -path "*/$1-*" -name '*.log' | wc -l; }
# Drops the files under the given dirs from the page cache (clean pages
# only: call after a sync). Only this run's files, not the whole cache.
evict() {
  python3 - "$@" <<'EOF'
import os, sys
for root in sys.argv[1:]:
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            except FileNotFoundError:  # a segment deleted meanwhile
                continue
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
EOF
}

# --- 1. consume from the store against consume from the local log ---
admin tiered $PARTITIONS remote.storage.enable=true segment.bytes=$((SEGMENT_MB << 20)) local.retention.bytes=1 ||
  { echo "creating tiered failed"; exit 1; }
admin local $PARTITIONS segment.bytes=$((SEGMENT_MB << 20)) || { echo "creating local failed"; exit 1; }
echo "filling tiered and local with ~${FILL_MB} MB each of 1 KiB records..."
t0=$(date +%s)
# Rounds of FILL_ROUND_S at the rate that would finish the rest in one:
# an unlimited producer would overshoot by up to a round's worth.
target=$((2 * FILL_MB * 1000000 / 1024)); produced=0; round=0
while [ $produced -lt $((target * 99 / 100)) ]; do
  round=$((round + 1))
  $R/rill-bench run --bootstrap $BOOT --topic tiered --topic local --partitions $PARTITIONS \
    --message-size 1024 --producers 1 --consumers 0 --acks all --warmup-s 0 \
    --rate $(( (target - produced) / FILL_ROUND_S + 1 )) --duration-s $FILL_ROUND_S \
    --quiet --out "$D/fill-$round.json" > "$D/fill-$round.txt" 2>&1 ||
    { echo "fill failed:"; tail -5 "$D/fill-$round.txt"; exit 1; }
  [ "$(json "$D/fill-$round.json" "r['errors']")" = 0 ] ||
    { echo "fill errors:"; json "$D/fill-$round.json" "r['error_samples'][:3]"; exit 1; }
  produced=$((produced + $(json "$D/fill-$round.json" "r['total_produced_messages']")))
done
records_tiered=$(end_offsets tiered); records_local=$(end_offsets local)
echo "filled in $(( $(date +%s) - t0 )) s: tiered $records_tiered records, local $records_local records"
echo "waiting for tiered's sealed segments to be uploaded and deleted locally..."
t0=$(date +%s)
while :; do
  logs=$(local_logs tiered); lag=$(int $(metric rill_remote_copy_lag_segments))
  [ "$logs" -le $PARTITIONS ] && [ "$lag" = 0 ] && break
  kill -0 $BROKER 2>/dev/null || { echo "rill exited:"; tail -5 "$D/broker.log"; exit 1; }
  if [ $(( $(date +%s) - t0 )) -gt $UPLOAD_WAIT_S ]; then
    echo "uploads stalled: $logs .log files in tiered-*, rill_remote_copy_lag_segments $lag"
    exit 1
  fi
  sleep 1
done
echo "uploaded $(( $(date +%s) - t0 )) s after the fill: $(int $(metric rill_remote_copy_segments_total)) segments," \
  "$(( $(int $(metric rill_remote_copy_bytes_total)) >> 20 )) MiB ($(du -sm "$D/remote" | cut -f1) MB in the store's dir);" \
  ".log files left locally: tiered $logs, local $(local_logs local)"

# Counters a drain reports the deltas of, in the table's order.
COUNTERS="rill_remote_fetch_requests_total rill_remote_fetch_microseconds_total rill_remote_fetch_bytes_total rill_remote_storage_fetched_bytes_total rill_remote_storage_cache_hits_total rill_remote_storage_cache_misses_total rill_remote_fetch_errors_total rill_remote_storage_errors_total"
snapshot() { for m in $COUNTERS; do echo "$(metric $m)"; done; }
# Drains topic $1 (run $2) with rill-bench while sampling /metrics: writes
# $D/$2.json (rill-bench), $D/$2.samples (time, CPU s, Fetch bytes) and
# $D/$2.before/.after (the remote counters).
drain() {
  snapshot > "$D/$2.before"
  rm -f "$D/$2.samples"  # here: the background job's redirection comes later
  python3 -u - "http://$ADMIN/metrics" > "$D/$2.samples" <<'EOF' &
import sys, time, urllib.request
# One scrape every 0.1 s: wall time, CPU seconds, Fetch response bytes.
while True:
    try:
        text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
    except OSError as error:  # a slow scrape on a busy host: skip it
        print("scrape failed:", error, file=sys.stderr)
        time.sleep(0.1)
        continue
    cpu = fetch = 0.0
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name == "process_cpu_seconds_total":
            cpu += float(value)
        elif name.startswith('rill_response_bytes_total{api="Fetch"'):
            fetch += float(value)
    print(time.time(), cpu, fetch)
    time.sleep(0.1)
EOF
  SAMPLER=$!
  until [ -s "$D/$2.samples" ]; do sleep 0.05; done  # a baseline before the first fetch
  $R/rill-bench run --bootstrap $BOOT --topic $1 --partitions $PARTITIONS --message-size 1024 \
    --producers 0 --consumers 1 --from-earliest --warmup-s 0 --duration-s $DRAIN_S \
    --quiet --out "$D/$2.json" > "$D/$2.txt" 2>&1
  local rc=$?
  sleep 0.3; kill $SAMPLER; wait $SAMPLER 2>/dev/null; SAMPLER=""
  snapshot > "$D/$2.after"
  [ $rc = 0 ] || { echo "drain of $1 failed:"; tail -5 "$D/$2.txt"; exit 1; }
}
# Run $1's figures: seconds, MB/s, broker CPU-s/GB, remote fetches and their
# mean ms, then the other counters' deltas. Sample k is the last before
# Fetch bytes rise, sample e the first within 256 KiB of the final count
# (what follows is empty long polls); the drain's ends are placed inside
# (k, k+1) and (e-1, e) at its mean byte rate, and the CPU is read over
# [k, e], where the broker is otherwise idle. $2: the records the topic
# holds.
drain_figures() {
  python3 - "$D/$1" "$2" <<'EOF'
import json, sys
run, expected = sys.argv[1], int(sys.argv[2])
samples = [tuple(map(float, l.split())) for l in open(run + ".samples") if len(l.split()) == 3]
r = json.load(open(run + ".json"))
consumed = r["total_consumed_messages"]
if consumed != expected or r["errors"]:
    sys.exit(f"{run}: consumed {consumed} of {expected} records, {r['errors']} errors "
             f"(raise DRAIN_S?) {r['error_samples'][:3]}")
first, last = samples[0][2], samples[-1][2]
if last - first < consumed * 1024:
    sys.exit(f"{run}: {last - first:.0f} Fetch bytes sampled for {consumed * 1024} consumed")
k = max(i for i, s in enumerate(samples) if s[2] <= first)
e = min(i for i, s in enumerate(samples) if last - s[2] < 256 << 10)
if e < k + 2:
    sys.exit(f"{run}: the drain took under two samples: raise FILL_MB")
rate = (last - first) / (samples[e][0] - samples[k][0])
for _ in range(3):
    seconds = samples[e - 1][0] - samples[k + 1][0]
    seconds += (samples[k + 1][2] - first + last - samples[e - 1][2]) / rate
    rate = (last - first) / seconds
gb = consumed * 1024 / 1e9
cpu = samples[e][1] - samples[k][1]
before = [float(x) for x in open(run + ".before")]
after = [float(x) for x in open(run + ".after")]
deltas = [a - b for a, b in zip(after, before)]
deltas[1] = deltas[1] / 1e3 / max(deltas[0], 1)  # the mean remote fetch, ms
deltas[2] /= 1e6  # bytes to MB
deltas[3] /= 1e6
print(f"{seconds:.2f} {gb * 1e3 / seconds:.0f} {cpu / gb:.2f} {deltas[0]:.0f} {deltas[1]:.2f} "
      + " ".join("%.0f" % d for d in deltas[2:]))
EOF
}
echo "draining each topic from earliest (1 consumer; rill-bench runs of ${DRAIN_S} s), cold then warm..."
sync; evict "$D/remote" "$D/data"
drain local cold-local
drain tiered cold-remote
drain local warm-local
drain tiered warm-remote
FORMAT="%-12s %7s %6s %9s %10s %8s %9s %8s %6s %6s %s\n"
printf "$FORMAT" drain seconds MB/s CPU-s/GB remote_req req_ms remote_MB store_MB hits misses errors
for run in cold-local cold-remote warm-local warm-remote; do
  records=$records_local; [ ${run#*-} = remote ] && records=$records_tiered
  figures=$(drain_figures $run $records) || exit 1
  read seconds mbs cpu requests request_ms fetched stored hits misses fetch_errors store_errors <<< "$figures"
  printf "$FORMAT" $run $seconds $mbs $cpu $requests $request_ms $fetched $stored $hits $misses $((fetch_errors + store_errors))
  echo "$mbs $cpu" > "$D/$run.figures"
done
for pass in cold warm; do
  python3 - "$D/$pass-local.figures" "$D/$pass-remote.figures" $pass <<'EOF'
import sys
(local_mbs, local_cpu), (remote_mbs, remote_cpu) = [map(float, open(f).read().split()) for f in sys.argv[1:3]]
print(f"{sys.argv[3]}: remote/local MB/s {remote_mbs / local_mbs:.2f}, broker CPU-s/GB {remote_cpu / local_cpu:.2f}")
EOF
done
echo "rill_remote_storage_cache_bytes $(int $(metric rill_remote_storage_cache_bytes)) of $(int $(metric rill_remote_storage_cache_max_bytes))"

# --- 2. produce latency with uploads off and on ---
for t in p_off p_on; do
  extra=""; [ $t = p_off ] && extra=remote.log.copy.disable=true
  admin $t $PARTITIONS remote.storage.enable=true segment.bytes=$P2_SEGMENT_BYTES local.retention.bytes=1 $extra ||
    { echo "creating $t failed"; exit 1; }
done
ms() { json "$D/$1.json" "'%.2f' % (r['publish_latency_us']['$2'] / 1000)"; }
# One produce run on topic $1, result $D/$1-$2.json.
produce() {
  sync  # the earlier runs' dirty pages (the store's files among them)
  local copied0=$(metric rill_remote_copy_segments_total) t0=$(date +%s.%N)
  local fsyncs0=$(metric rill_fsyncs_total) fsync_us0=$(metric rill_fsync_microseconds_total)
  $R/rill-bench run --bootstrap $BOOT --topic $1 --partitions $PARTITIONS --message-size 1024 \
    --producers 1 --consumers 0 --acks all --rate $RATE --warmup-s $WARMUP_S --duration-s $DURATION_S \
    --broker-metrics $ADMIN --quiet --out "$D/$1-$2.json" > "$D/$1-$2.txt" 2>&1 ||
    { echo "produce run on $1 failed:"; tail -5 "$D/$1-$2.txt"; exit 1; }
  local copied=$(( $(int $(metric rill_remote_copy_segments_total)) - $(int $copied0) ))
  local fsync=$(python3 -c "import sys; t0, t1, n0, n1, u0, u1 = map(float, sys.argv[1:]); print('%.0f %.2f' % ((n1 - n0) / (t1 - t0), (u1 - u0) / max(n1 - n0, 1) / 1000))" \
    $t0 $(date +%s.%N) $fsyncs0 $(metric rill_fsyncs_total) $fsync_us0 $(metric rill_fsync_microseconds_total))
  printf "$PRODUCE_FORMAT" "$1 #$2" $(ms $1-$2 p50_us) $(ms $1-$2 p99_us) $(ms $1-$2 p99_9_us) \
    $(ms $1-$2 max_us) "$(json "$D/$1-$2.json" "'%.3f' % r['broker_cpu']['cores_busy'] if r.get('broker_cpu') else '-'")" \
    $copied $fsync "$(json "$D/$1-$2.json" "r['errors']")"
}
echo "produce: ${RATE} x 1 KiB/s, acks=all, ${WARMUP_S} s warm-up + ${DURATION_S} s;" \
  "p_off (remote.log.copy.disable=true) and p_on (uploads running), $ROUNDS rounds in ABBA order"
# Each run's fdatasyncs per second and their mean time (warm-up included):
# the data log's group commits, the disk's latency as the broker saw it.
PRODUCE_FORMAT="%-10s %7s %7s %8s %7s %12s %8s %8s %13s %s\n"
printf "$PRODUCE_FORMAT" run p50_ms p99_ms p99.9_ms max_ms broker_cores uploaded fsyncs/s fsync_mean_ms errors
for round in $(seq $ROUNDS); do
  if [ $((round % 2)) = 1 ]; then produce p_off $round; produce p_on $round
  else produce p_on $round; produce p_off $round; fi
done
python3 - "$D" $ROUNDS <<'EOF'
import json, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def pooled(topic):
    """The rounds' latency histograms merged: (value_us, count) sorted."""
    counts = {}
    for i in range(1, rounds + 1):
        for value, count in json.load(open(f"{d}/{topic}-{i}.json"))["publish_latency_histogram"]["buckets"]:
            counts[value] = counts.get(value, 0) + count
    return sorted(counts.items())
def quantile(buckets, q):
    total, seen = sum(c for _, c in buckets), 0
    for value, count in buckets:
        seen += count
        if seen >= q * total:
            return value / 1000
off, on = pooled("p_off"), pooled("p_on")
per_round = lambda q: " ".join(
    "%.2f" % (json.load(open(f"{d}/p_on-{i}.json"))["publish_latency_us"][q]
              / json.load(open(f"{d}/p_off-{i}.json"))["publish_latency_us"][q]) for i in range(1, rounds + 1))
for name, q, key in (("p50", 0.5, "p50_us"), ("p99", 0.99, "p99_us"), ("p99.9", 0.999, "p99_9_us")):
    a, b = quantile(off, q), quantile(on, q)
    print(f"{name}: pooled off {a:.2f} ms, on {b:.2f} ms, on/off {b / a:.2f} (per round {per_round(key)})")
EOF
echo "logs and results: $D"
