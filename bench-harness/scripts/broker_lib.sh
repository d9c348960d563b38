# Sourced by the bench scripts that start their own rill: one broker at a
# time on free ports and a fresh data dir, stopped (and its dir removed) by
# stop_broker, which the caller also traps on EXIT.
#
#   start_broker BINARY LOG [FLAGS...]  sets port, admin, data, broker_pid;
#                                       returns 1 if it does not accept
#                                       connections within 30 s; a command
#                                       in BROKER_PREFIX that execs its
#                                       arguments (taskset -c 0) runs it
#   wait_for_port PORT PID              until PORT accepts (1: PID gone or
#                                       30 s)
#   stop_broker                         SIGTERM, wait, remove the data dir
broker_pid=""; data=""; port=""; admin=""
stop_broker() {
  if [ -n "$broker_pid" ]; then kill -TERM "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
  if [ -n "$data" ]; then rm -rf "$data"; fi
  broker_pid=""; data=""
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_for_port PORT PID: returns once PORT accepts connections; 1 if PID
# exits first or 30 s pass.
wait_for_port() {
  local tries=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -gt 300 ] || ! kill -0 "$2" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
}
start_broker() {
  local bin=$1 log=$2 prefix=()
  shift 2
  read -r -a prefix <<< "${BROKER_PREFIX:-}"
  port=$(free_port); admin=$(free_port)
  data=$(mktemp -d "${TMPDIR:-/var/tmp}/rill-bench-XXXX")
  "${prefix[@]}" "$bin" serve --data-dir "$data" --listen "127.0.0.1:$port" \
    --admin-listen "127.0.0.1:$admin" --log-level warn "$@" > "$log" 2>&1 &
  broker_pid=$!
  # Ready when the Kafka port accepts.
  wait_for_port "$port" "$broker_pid"
}
