#!/usr/bin/env bash
# The effect of io-properties.yaml (issue #21 point 4): the same build with
# and without the file `rill iotune` makes on this machine, interleaved
# (without, with, without, ...), as with/without ratios.
#  1. the engine's group-commit bench (`group_commit_1KiB_fsync`), the file's
#     figures passed as RILL_BENCH_IO (the sizes `rill serve` derives for one
#     shard);
#  2. a broker run: ab.sh with A = `rill serve` on a fresh data dir (no file:
#     the defaults) and B = the same binary with `--io-properties FILE`.
#
#   CARGO_TARGET_DIR=/work/tgt-iop ROUNDS=3 bash bench-harness/scripts/io_properties_ab.sh
# env: R (release dir with rill and rill-bench; default $CARGO_TARGET_DIR/release),
#      IO_FILE (an existing file; default: `rill iotune` writes one), OUT,
#      ROUNDS (default 3), BENCH_ARGS / WARMUP_S / DURATION_S (see ab.sh),
#      SKIP_BROKER=1 (the group-commit bench only).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
R=${R:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/var/tmp}/rill-io-ab-XXXX")}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT" "$ROOT/target/bench-data"
cd "$ROOT"
# The file, measured on the disk the benches write to.
IO_FILE=${IO_FILE:-$OUT/io-properties.yaml}
if [ ! -f "$IO_FILE" ]; then
  "$R/rill" iotune --data-dir "$ROOT/target/bench-data" --duration-s 20 --file-size-mb 512 \
    --out "$IO_FILE" --quiet
fi
echo "== $IO_FILE"; cat "$IO_FILE"
figure() { awk -v k="$1:" '$1 == k {print $2; exit}' "$IO_FILE"; }
IO="$(figure read_bandwidth),$(figure read_iops),$(figure write_bandwidth),$(figure write_iops)"

echo "== group commit bench (RILL_BENCH_IO=$IO for 'with')"
for round in $(seq 1 "$ROUNDS"); do
  for side in without with; do
    if [ $side = with ]; then export RILL_BENCH_IO=$IO; else unset RILL_BENCH_IO; fi
    nice -n 0 cargo bench -q -p rill-engine --bench log -- group_commit \
      --warm-up-time 1 --measurement-time 5 > "$OUT/gc-$side-$round.out" 2>&1 || {
      echo "bench failed:"; tail -n 5 "$OUT/gc-$side-$round.out"; exit 1; }
    # The bench keeps its data dirs; they hold 32 MiB+ preallocated each.
    rm -rf "$ROOT"/target/bench-data/.tmp*
    grep -E "io sizing" "$OUT/gc-$side-$round.out" | head -n 1 | sed "s/^/$side $round: /"
  done
done
unset RILL_BENCH_IO
python3 - "$OUT" "$ROUNDS" <<'PY'
import os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def parse(path):
    """bench id -> (throughput in elements/s, ack p50 us, ack p99 us), the
    throughput from criterion's middle estimate, the acks from the last
    sample's line."""
    text = open(path).read()
    figures, acks = {}, {}
    for m in re.finditer(r"  (in_flight\w*) (\d+): .*ack p50 (\d+) us p99 (\d+) us", text):
        acks[f"{m.group(1)}/{m.group(2)}"] = (int(m.group(3)), int(m.group(4)))
    unit = {"elem/s": 1, "Kelem/s": 1e3, "Melem/s": 1e6}
    for m in re.finditer(r"group_commit_1KiB_fsync/(\S+)\s*\n?\s*time:.*?\n\s*thrpt:\s*\[\S+\s+\S+\s+(\S+)\s+(\S+)", text):
        figures[m.group(1)] = float(m.group(2)) * unit[m.group(3)]
    return {k: (v,) + acks.get(k, (None, None)) for k, v in figures.items()}
ratios = {}
for rnd in range(1, rounds + 1):
    a = parse(os.path.join(out, f"gc-without-{rnd}.out"))
    b = parse(os.path.join(out, f"gc-with-{rnd}.out"))
    for k in sorted(a):
        if k not in b: continue
        (ta, p50a, p99a), (tb, p50b, p99b) = a[k], b[k]
        r = ratios.setdefault(k, {"appends/s": [], "ack p50": [], "ack p99": []})
        r["appends/s"].append(tb / ta)
        if p50a and p50b: r["ack p50"].append(p50b / p50a)
        if p99a and p99b: r["ack p99"].append(p99b / p99a)
        print(f"round {rnd} {k}: without {ta:,.0f}/s p50 {p50a} p99 {p99a} us; with {tb:,.0f}/s p50 {p50b} p99 {p99b} us")
for k, r in ratios.items():
    print(f"median with/without {k}: " + ", ".join(
        f"{n} {statistics.median(v):.3f}x" for n, v in r.items() if v))
PY

if [ "${SKIP_BROKER:-0}" = 1 ]; then exit 0; fi
echo "== broker run (A: no file, B: --io-properties $IO_FILE)"
cat > "$OUT/rill-with" <<EOF
#!/bin/sh
exec "$R/rill" "\$@" --io-properties "$IO_FILE"
EOF
chmod +x "$OUT/rill-with"
bash "$ROOT/bench-harness/scripts/ab.sh" "$R/rill" "$OUT/rill-with" "$R/rill-bench" "$OUT/broker" "$ROUNDS"
