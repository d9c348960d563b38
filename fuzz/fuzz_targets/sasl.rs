//! Fuzz target `sasl`: arbitrary bytes into `api::fuzzing::sasl` (see docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = api::fuzzing::sasl(data);
});
