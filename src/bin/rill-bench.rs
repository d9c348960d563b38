//! `rill-bench`, the benchmark harness for any Kafka-protocol broker: its
//! command line is `bench_harness::app`; this binary sits in the root
//! package so that `cargo install --path .` installs it beside `rill`.

/// The broker's allocator: the load generator shares the host's cores with
/// the broker it measures, so its allocations should cost no more than
/// they must.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    bench_harness::app::main();
}
