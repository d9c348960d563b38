//! Fuzz target `request_frame`: arbitrary bytes into `api::fuzzing::request_frame` (see docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = api::fuzzing::request_frame(data);
});
