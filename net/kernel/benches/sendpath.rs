//! Send-path throughput: a 64 MiB file range sent over loopback with each of
//! copy, sendfile and splice, side by side from one run.
//!
//! Back of the envelope: loopback TCP tops out near memory bandwidth divided
//! by the copies made. copy makes two user/kernel copies plus the receiver's,
//! sendfile and splice one fewer; expect zero-copy ahead by roughly 1.5–2x
//! when the file is in the page cache (it is here: it was just written).
//!
//! Each iteration is one `Sender::send` of the whole range; a std thread on the
//! other end reads and discards. Criterion reports bytes/s (Throughput::Bytes).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::FileSlice;
use glommio::LocalExecutorBuilder;
use kernel::sendpath::OutChunk;
use kernel::sendpath::{SendPath, Sender};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RANGE_BYTES: usize = 64 << 20;

fn temp_file(length: usize) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("rill-sendpath-bench-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create bench file");
    std::fs::remove_file(&path).expect("unlink bench file");
    let block: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 + 3) as u8).collect();
    for _ in 0..length / block.len() {
        file.write_all(&block).expect("write bench file");
    }
    file
}

/// Runs `iterations` sends of the range with `path`; returns the time taken.
fn time_sends(path: SendPath, file: &Arc<std::fs::File>, iterations: u64) -> Duration {
    let file = file.clone();
    let executor = LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .expect("executor");
    executor.run(async move {
        let listener = glommio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let total_bytes = RANGE_BYTES as u64 * iterations;
        let reader = std::thread::spawn(move || {
            let mut stream = std::net::TcpStream::connect(address).expect("connect");
            let mut buffer = vec![0u8; 1 << 20];
            let mut received_bytes = 0u64;
            while received_bytes < total_bytes {
                let read = stream.read(&mut buffer).expect("read");
                assert!(read > 0, "sender closed early");
                received_bytes += read as u64;
            }
        });
        let stream = listener.accept().await.expect("accept");
        let sender = Sender::new(path).expect("sender");
        let start = Instant::now();
        for _ in 0..iterations {
            let chunks = vec![OutChunk::File(FileSlice {
                file: file.clone(),
                position: 0,
                length: RANGE_BYTES,
            })];
            sender.send(&stream, chunks).await.expect("send");
        }
        reader.join().expect("reader");
        start.elapsed()
    })
}

fn sendpath(criterion: &mut Criterion) {
    let file = Arc::new(temp_file(RANGE_BYTES));
    let mut group = criterion.benchmark_group("sendpath_64MiB_loopback");
    group.throughput(Throughput::Bytes(RANGE_BYTES as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for path in [SendPath::Copy, SendPath::Sendfile, SendPath::Splice] {
        group.bench_function(path.to_string(), |bencher| {
            bencher.iter_custom(|iterations| time_sends(path, &file, iterations))
        });
    }
    group.finish();
}

criterion_group!(benches, sendpath);
criterion_main!(benches);
