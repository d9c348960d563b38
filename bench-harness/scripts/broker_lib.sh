# Sourced by the bench scripts that start their own rill: one broker at a
# time on free ports and a fresh data dir, stopped (and its dir removed) by
# stop_broker, which the caller also traps on EXIT.
#
#   start_broker BINARY LOG [FLAGS...]  sets port, admin, data, broker_pid;
#                                       returns 1 if it does not accept
#                                       connections within 30 s
#   stop_broker                         SIGTERM, wait, remove the data dir
broker_pid=""; data=""; port=""; admin=""
stop_broker() {
  if [ -n "$broker_pid" ]; then kill -TERM "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
  broker_pid=""; data=""
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_broker() {
  local bin=$1 log=$2 tries=0
  shift 2
  port=$(free_port); admin=$(free_port)
  data=$(mktemp -d "${TMPDIR:-/var/tmp}/rill-bench-XXXX")
  "$bin" serve --data-dir "$data" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
    --log-level warn "$@" > "$log" 2>&1 &
  broker_pid=$!
  # Ready when the Kafka port accepts.
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -gt 300 ] || ! kill -0 "$broker_pid" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
}
