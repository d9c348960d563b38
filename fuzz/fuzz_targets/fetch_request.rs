//! Fuzz target `fetch_request`: arbitrary bytes into `net::fuzzing::fetch_request` (see docs/fuzzing.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = net::fuzzing::fetch_request(data);
});
