//! Micro-benchmarks of the batch hot paths: CRC32C, produce-side validation
//! of uncompressed batches, lz4 decompress + record decode (compaction), and
//! broker-side recompression of a 16 KiB batch (a producer's usual size).
//!
//! Run: `cargo bench -p rill-engine --bench batch -- --warm-up-time 1 --measurement-time 3`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use engine::batch::{
    compute_crc, recompress, records, validate_batch, BatchBuilder, Compression, CompressionLevels,
};

const RECORD_VALUE_BYTES: usize = 1024;

/// A batch of `total_bytes` (roughly) of 1 KiB records whose values look like
/// log lines: compressible, but not trivially.
fn batch_of(total_bytes: usize, codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, codec);
    let mut delta = 0i32;
    while builder.records_bytes() + RECORD_VALUE_BYTES < total_bytes {
        let value: Vec<u8> = format!("{delta:08} GET /api/v1/items?page={} 200 ", delta % 97)
            .bytes()
            .cycle()
            .take(RECORD_VALUE_BYTES)
            .collect();
        let key = format!("user-{}", delta % 1000);
        builder.push(
            delta,
            1_700_000_000_000 + i64::from(delta),
            Some(key.as_bytes()),
            Some(&value),
            &[],
        );
        delta += 1;
    }
    builder.build().expect("bench batch builds")
}

fn bench_crc(c: &mut Criterion) {
    let buf: Vec<u8> = (0..1 << 20)
        .map(|index: u32| (index * 31 % 251) as u8)
        .collect();
    let mut group = c.benchmark_group("crc32c");
    group.throughput(Throughput::Bytes(buf.len() as u64));
    group.bench_function("1MiB", |b| b.iter(|| compute_crc(black_box(&buf))));
    group.finish();
}

fn bench_validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate_batch");
    for (name, size_bytes) in [
        ("1MiB_uncompressed_1KiB_records", 1 << 20),
        ("16KiB_uncompressed", 16 << 10),
    ] {
        let buf = batch_of(size_bytes, Compression::None);
        validate_batch(&buf, usize::MAX).expect("bench batch is valid");
        group.throughput(Throughput::Bytes(buf.len() as u64));
        group.bench_function(name, |b| {
            b.iter(|| validate_batch(black_box(&buf), usize::MAX))
        });
    }
    group.finish();
}

fn bench_records(c: &mut Criterion) {
    let mut group = c.benchmark_group("records");
    for codec in [Compression::None, Compression::Lz4] {
        let buf = batch_of(1 << 20, codec);
        let count = records(&buf).expect("bench batch decodes").len();
        // Throughput counts uncompressed record bytes, the work done.
        group.throughput(Throughput::Bytes((count * RECORD_VALUE_BYTES) as u64));
        group.bench_function(format!("1MiB_{}", codec.name()), |b| {
            b.iter(|| records(black_box(&buf)))
        });
    }
    group.finish();
}

fn bench_recompress(c: &mut Criterion) {
    let mut group = c.benchmark_group("recompress");
    let levels = CompressionLevels::default();
    for (from, to) in [
        (Compression::None, Compression::Zstd),
        (Compression::None, Compression::Lz4),
        (Compression::Snappy, Compression::Zstd),
        (Compression::Gzip, Compression::Lz4),
        (Compression::Zstd, Compression::None),
    ] {
        let buf = batch_of(16 << 10, from);
        let raw_bytes = batch_of(16 << 10, Compression::None).len();
        // Throughput counts uncompressed batch bytes, the work done.
        group.throughput(Throughput::Bytes(raw_bytes as u64));
        group.bench_function(format!("16KiB_{}_to_{}", from.name(), to.name()), |b| {
            b.iter(|| recompress(black_box(&buf), to, &levels))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_crc,
    bench_validate,
    bench_records,
    bench_recompress
);
criterion_main!(benches);
