#!/usr/bin/env bash
# AddressSanitizer over the broker. Run it by hand before every landing that
# touches `unsafe`, glommio's patch (third_party/glommio) or the I/O paths:
#
#   bash .ci/asan.sh                 # foreign-wake stress + black-box tests
#   ASAN_TESTS="produce_churn" bash .ci/asan.sh
#
# It is not part of .ci/run: the instrumented release build alone takes
# about 10 minutes on a 2-core machine, which would push CI past its budget.
#
# How: the machine has only the stable toolchain, so RUSTC_BOOTSTRAP=1
# unlocks `-Zsanitizer=address` (the ASan runtime ships with rust-std).
# The broker is built without mimalloc (`--no-default-features`), so every
# allocation goes through the system allocator that ASan intercepts, and
# with `--target`, so build scripts and proc macros stay uninstrumented.
# The black-box tests themselves are a normal build: they start the
# instrumented broker through RILL_TEST_BINARY. Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-gnu
target_dir=${ASAN_TARGET_DIR:-target/asan}
tests=${ASAN_TESTS:-"produce_churn produce_consume bad_input broker_lifecycle transactions groups"}
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT

export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$reports/asan"
# RUSTC_BOOTSTRAP only for the instrumented builds: Cargo fingerprints it,
# and setting it for the normal test build would rebuild target/debug.
# The C libraries stay uninstrumented (`-fno-sanitize=address`): cc would
# instrument them as well, and then librdkafka's configure, which links its
# feature probes against the static zstd without the ASan runtime, fails
# every probe and the build with it.
asan() {
  RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zsanitizer=address" \
    CFLAGS="-fno-sanitize=address" CXXFLAGS="-fno-sanitize=address" \
    "$@" --release --target "$target" --target-dir "$target_dir"
}

echo "== building rill with AddressSanitizer"
asan cargo build --no-default-features --bin rill
echo "== glommio foreign wakes (engine/tests/foreign_wakes.rs) under ASan"
asan cargo test -p rill-engine --test foreign_wakes

echo "== black-box tests against the instrumented broker: $tests"
# Each name is a module of the black-box binary (tests/tests/main.rs).
filters=()
for t in $tests; do filters+=("$t::"); done
broker=$(realpath "$target_dir/$target/release/rill")
RILL_TEST_BINARY="$broker" cargo test --test blackbox -- "${filters[@]}"

if compgen -G "$reports/asan*" >/dev/null; then
  echo "AddressSanitizer reported errors:" >&2
  cat "$reports"/asan* >&2
  exit 1
fi
echo "asan: no reports"
