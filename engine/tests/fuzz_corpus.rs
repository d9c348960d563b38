//! Replays the corpus of the `record_batch` fuzz target
//! (`fuzz/corpus/record_batch/`) and its crash regressions
//! (`fuzz/regressions/record_batch/`) through the entry point the target
//! calls (`engine::fuzzing::record_batch`), on stable, so CI
//! keeps every input the fuzzer found interesting and every crash it found.
//! A missing or empty corpus fails: the replay cannot pass vacuously.
//! See docs/fuzzing.md.

#[path = "../../fuzz/replay.rs"]
mod shared;

use shared::{inputs, replay};
use std::panic::catch_unwind;

#[test]
fn record_batch_corpus_replays() {
    replay("record_batch", engine::fuzzing::record_batch);
}

#[test]
fn a_missing_corpus_is_refused() {
    let refused = catch_unwind(|| inputs("no_such_target")).is_err();
    assert!(refused, "an absent corpus must fail the replay");
}
