//! Fuzz target `produce_request`: arbitrary bytes into `api::fuzzing::produce_request` (see docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = api::fuzzing::produce_request(data);
});
