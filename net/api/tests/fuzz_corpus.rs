//! Replays the corpora of the request fuzz targets (`fuzz/corpus/<target>/`)
//! and their crash regressions (`fuzz/regressions/<target>/`) through the
//! same entry points the targets call (`api::fuzzing`), on stable, so CI
//! keeps every input the fuzzer found interesting and every crash it found.
//! A missing or empty corpus fails: the replay cannot pass vacuously.
//! See docs/fuzzing.md.

#[path = "../../../fuzz/replay.rs"]
mod shared;

use shared::{inputs, replay};
use std::panic::catch_unwind;

#[test]
fn request_frame_corpus_replays() {
    replay("request_frame", api::fuzzing::request_frame);
}

#[test]
fn produce_request_corpus_replays() {
    replay("produce_request", |d| {
        usize::from(api::fuzzing::produce_request(d))
    });
}

#[test]
fn sasl_corpus_replays() {
    replay("sasl", api::fuzzing::sasl);
}

#[test]
fn fetch_request_corpus_replays() {
    replay("fetch_request", |d| {
        usize::from(api::fuzzing::fetch_request(d))
    });
}

#[test]
fn a_missing_corpus_is_refused() {
    let refused = catch_unwind(|| inputs("no_such_target")).is_err();
    assert!(refused, "an absent corpus must fail the replay");
}
