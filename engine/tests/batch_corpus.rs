//! Replays every file of the `batch_parse` fuzz corpus
//! (`engine/fuzz/corpus/batch_parse/`) through the batch decoders: none may
//! panic, whatever validates must also decode to its declared count, and
//! whatever recompresses must validate and hold the same records.
//!
//! The exercises below are the body of the fuzz target
//! (`engine/fuzz/fuzz_targets/batch_parse.rs`); keep the two in step.
//!
//! The seed files come from real batches the builder writes; regenerate them
//! with `cargo test -p rill-engine --test batch_corpus -- --ignored`.

use std::path::PathBuf;

use engine::batch::{
    batches, decompress, recompress, records, validate_batch, BatchBuilder, BatchHeader,
    Compression, CompressionLevels,
};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/batch_parse")
}

/// Feed `data` to every decoder and check the invariants that tie them
/// together. Panics only on a real bug.
fn exercise(data: &[u8]) {
    let _ = BatchHeader::parse(data);
    for codec in Compression::ALL {
        let _ = decompress(codec, data);
    }
    let mut iter = batches(data);
    for item in iter.by_ref() {
        let Ok((header, range)) = item else { break };
        assert_eq!(range.len(), header.total_bytes());
        let batch = &data[range];
        let decoded = records(batch);
        if let Ok(validated) = validate_batch(batch, usize::MAX) {
            assert_eq!(validated, header);
            // Uncompressed records were checked by validation itself, so
            // decoding must agree; compressed ones are only CRC-checked.
            if header.compression() == Ok(Compression::None) {
                let decoded = decoded.expect("validated uncompressed batch must decode");
                assert_eq!(decoded.len(), header.records_count as usize);
            }
        }
    }
    assert!(iter.consumed_bytes() + iter.remainder_bytes() <= data.len());
}

/// Broker-side recompression of every valid batch of `data`: when it takes
/// the batch, the new one validates and holds the same records. (Not run
/// on the mutations below: a mutation that still validates only changed
/// bytes outside the CRC, and the codecs' setup costs ~10 ms a call in a
/// debug build.)
fn exercise_recompress(data: &[u8]) {
    for item in batches(data) {
        let Ok((_, range)) = item else { break };
        let batch = &data[range];
        if validate_batch(batch, usize::MAX).is_err() {
            continue;
        }
        for target in Compression::ALL {
            if let Ok(rewritten) = recompress(batch, target, &CompressionLevels::default()) {
                let after =
                    validate_batch(&rewritten, usize::MAX).expect("a recompressed batch validates");
                assert_eq!(after.compression(), Ok(target));
                assert_eq!(records(&rewritten).ok(), records(batch).ok());
            }
        }
    }
}

#[test]
fn corpus_replays_without_panics() {
    let entries = std::fs::read_dir(corpus_dir()).expect("corpus directory exists");
    let mut replayed = 0;
    let mut valid = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        exercise(&data);
        exercise_recompress(&data);
        if batches(&data)
            .next()
            .and_then(Result::ok)
            .is_some_and(|(_, range)| validate_batch(&data[range], usize::MAX).is_ok())
        {
            valid += 1;
        }
        replayed += 1;
    }
    assert!(replayed >= 10, "corpus has only {replayed} files");
    assert!(valid >= 5, "corpus has only {valid} valid seeds");
}

/// Every single-byte truncation and a byte flip at every position of each
/// seed: a cheap, deterministic stand-in for a fuzzing run.
#[test]
fn corpus_mutations_do_not_panic() {
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        if data.len() > 4096 {
            continue;
        }
        for cut in 0..data.len() {
            exercise(&data[..cut]);
        }
        let mut mutated = data.clone();
        for index in 0..mutated.len() {
            mutated[index] ^= 0xa5;
            exercise(&mutated);
            mutated[index] ^= 0xa5;
        }
    }
}

fn seed(base_offset: i64, codec: Compression, count: i32) -> Vec<u8> {
    let mut builder = BatchBuilder::new(base_offset, codec).producer(4000, 1, 0, false);
    for delta in 0..count {
        let key = format!("key-{}", delta % 3);
        let value = format!("value {delta} for the corpus");
        let key = (delta % 4 != 1).then_some(key.as_bytes());
        let value = (delta % 5 != 2).then_some(value.as_bytes());
        builder.push(
            delta,
            1_700_000_000_000 + i64::from(delta),
            key,
            value,
            &[(b"trace", Some(b"t-1")), (b"empty", None)],
        );
    }
    builder.build().unwrap()
}

#[test]
#[ignore = "writes the seed corpus; run by hand after changing the builder"]
fn regenerate_corpus() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for codec in Compression::ALL {
        files.push((format!("{}-3", codec.name()), seed(0, codec, 3)));
        files.push((format!("{}-1", codec.name()), seed(77, codec, 1)));
    }
    files.push((
        "empty".into(),
        BatchBuilder::new(5, Compression::None).build().unwrap(),
    ));
    let mut control = BatchBuilder::new(9, Compression::None)
        .producer(4000, 1, -1, true)
        .control(true);
    control.push(
        0,
        1_700_000_000_000,
        Some(&[0, 0, 0, 1]),
        Some(&[0, 0, 0, 0, 0, 0]),
        &[],
    );
    files.push(("control".into(), control.build().unwrap()));
    let mut several = seed(0, Compression::None, 2);
    several.extend_from_slice(&seed(2, Compression::Lz4, 4));
    several.extend_from_slice(&seed(6, Compression::Zstd, 2));
    files.push(("several".into(), several.clone()));
    files.push((
        "several-torn-tail".into(),
        several[..several.len() - 7].to_vec(),
    ));
    let mut bad_crc = seed(0, Compression::None, 2);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    files.push(("bad-crc".into(), bad_crc));
    let mut old_magic = seed(0, Compression::None, 1);
    old_magic[16] = 1;
    files.push(("old-magic".into(), old_magic));
    let mut zero_tail = seed(0, Compression::Snappy, 2);
    zero_tail.extend_from_slice(&[0u8; 64]);
    files.push(("zeroed-tail".into(), zero_tail));
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
}
