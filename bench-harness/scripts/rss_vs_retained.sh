#!/usr/bin/env bash
# Broker RSS against retained bytes (issue #20 point 1): one topic of 100
# partitions with 8 MiB segments, filled to each size in turn; at each size
# the broker is restarted, RSS read while idle, then every record read once
# (kcat, from the beginning) and RSS read again.
#   R=target/release D=/tmp/rss SIZES_MB="512 1024 2048" bash bench-harness/scripts/rss_vs_retained.sh
set -u
R=${R:-$(cd "$(dirname "$0")/../.." && pwd)/target/release}
D=${D:-$(mktemp -d)}
SIZES_MB=${SIZES_MB:-512 1024 2048}
PORT=${PORT:-19192}
ADMIN=${ADMIN:-127.0.0.1:19744}
rm -rf "$D/data"; mkdir -p "$D/data"
printf 'log.segment.bytes=8388608\n' > "$D/server.properties"
start() {
  $R/rill serve --data-dir "$D/data" --listen 127.0.0.1:$PORT --admin-listen $ADMIN \
    --config "$D/server.properties" --log-level warn >> "$D/broker.log" 2>&1 &
  BROKER=$!
  until curl -sf "http://$ADMIN/metrics" >/dev/null; do sleep 0.2; done
}
stop() { kill $BROKER; wait $BROKER 2>/dev/null; }
metric() { curl -sf "http://$ADMIN/metrics" | awk -v m="$1" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'; }
mib() { echo $(( $1 / 1048576 )); }
start
printf "%-12s %-14s %-14s %-16s %-10s\n" retained_MiB idle_RSS_MiB read_RSS_MiB index_cache_KiB segments
for size in $SIZES_MB; do
  while [ $(du -sm "$D/data" | cut -f1) -lt $size ]; do
    $R/rill-bench run --bootstrap 127.0.0.1:$PORT --topic rss --partitions 100 \
      --message-size 1024 --producers 2 --consumers 0 --acks 1 --rate 0 --warmup-s 0 \
      --duration-s 5 --quiet --out "$D/fill.json" > /dev/null 2>&1 || { echo "fill failed"; break; }
  done
  stop; start; sleep 2
  idle=$(metric process_resident_memory_bytes)
  # Every record of the one topic the fills wrote.
  timeout 1200 kcat -b 127.0.0.1:$PORT -C -t rss -o beginning -e -q > /dev/null 2>&1
  read=$(metric process_resident_memory_bytes)
  printf "%-12s %-14s %-14s %-16s %-10s\n" "$(du -sm "$D/data" | cut -f1)" "$(mib $idle)" "$(mib $read)" \
    "$(( $(metric rill_index_cache_bytes) / 1024 ))" "$(find "$D/data" -name '*.log' | wc -l)"
done
stop
