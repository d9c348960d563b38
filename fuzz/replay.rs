//! The corpus replay shared by `engine/tests/fuzz_corpus.rs` and
//! `net/api/tests/fuzz_corpus.rs` (each includes this file with `#[path]`;
//! `fuzz/` is found by walking up from the including crate's directory).

#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .map(|dir| dir.join("fuzz"))
        .find(|dir| dir.join("replay.rs").is_file())
        .expect("fuzz/replay.rs above the crate's directory")
}

/// Every file of the target's corpus (which must hold some) and of its
/// regressions (which may not exist yet).
pub fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let corpus = read_dir(&fuzz_dir().join("corpus").join(target));
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/{target}/ is missing or empty"
    );
    let regressions_dir = fuzz_dir().join("regressions").join(target);
    let mut all = corpus;
    if regressions_dir.exists() {
        all.extend(read_dir(&regressions_dir));
    }
    all
}

fn read_dir(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

/// Runs `entry` on every input; fails naming each input that panicked, and
/// when no input at all was accepted (a corpus of garbage, or an entry
/// point that refuses everything, would make the replay vacuous).
pub fn replay(target: &str, entry: impl Fn(&[u8]) -> usize) {
    let inputs = inputs(target);
    let mut panicked = Vec::new();
    let mut accepted = 0;
    for (path, bytes) in &inputs {
        match catch_unwind(AssertUnwindSafe(|| entry(bytes))) {
            Ok(n) => accepted += n,
            Err(_) => panicked.push(path.display().to_string()),
        }
    }
    assert!(panicked.is_empty(), "{target}: panicked on {panicked:?}");
    assert!(
        accepted > 0,
        "{target}: no input of {} decoded",
        inputs.len()
    );
    eprintln!("{target}: {} inputs, {accepted} decoded", inputs.len());
}
