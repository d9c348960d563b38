//! Fuzz target `fetch_request`: arbitrary bytes into `api::fuzzing::fetch_request` (see docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = api::fuzzing::fetch_request(data);
});
