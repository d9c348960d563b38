//! Fuzz target `record_batch`: arbitrary bytes into `engine::fuzzing::record_batch` (see docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = engine::fuzzing::record_batch(data);
});
