//! Send-path tests over real loopback sockets: every path must put exactly
//! the expected bytes on the wire.

use super::*;
use bytes::Bytes;
use engine::FileSlice;
use glommio::LocalExecutorBuilder;
use std::io::{Read, Write};
use std::sync::Arc;

const FILE_BYTES: usize = 5 << 20;

fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..length)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn temp_file_with(contents: &[u8]) -> std::fs::File {
    let path = std::env::temp_dir().join(format!(
        "rill-sendpath-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    file.write_all(contents).unwrap();
    file
}

/// Sends `make_chunks()` `rounds` times over one loopback connection with
/// `path`, returning what the peer received.
fn send_over_loopback(
    path: SendPath,
    rounds: usize,
    make_chunks: impl Fn() -> Vec<OutChunk> + 'static,
) -> Vec<u8> {
    let executor = LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .unwrap();
    executor.run(async move {
        let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let mut stream = std::net::TcpStream::connect(address).unwrap();
            // 5 MiB is more than loopback socket buffers hold, so the
            // sender meets EAGAIN and the wait-for-writable path.
            let mut received = Vec::new();
            stream.read_to_end(&mut received).unwrap();
            received
        });
        let stream = listener.accept().await.unwrap();
        let sender = Sender::new(path).unwrap();
        assert_eq!(sender.path(), path);
        for _ in 0..rounds {
            sender.send(&stream, make_chunks()).await.unwrap();
        }
        // glommio closes a dropped socket asynchronously, which a blocking
        // join would never let happen: shut it down explicitly.
        stream.shutdown(std::net::Shutdown::Both).await.unwrap();
        reader.join().unwrap()
    })
}

fn mixed_chunks(
    file: &Arc<std::fs::File>,
    contents: &[u8],
) -> (impl Fn() -> Vec<OutChunk>, Vec<u8>) {
    let head = Bytes::from(pattern(1000, 1));
    let middle = Bytes::from(pattern(37, 2));
    let tail = Bytes::from(pattern(5, 3));
    let range_start = 4093; // not page aligned
    let range_bytes = FILE_BYTES - 10_000;
    let mut expected = Vec::new();
    expected.extend_from_slice(&head);
    expected.extend_from_slice(&middle);
    expected.extend_from_slice(&contents[range_start..range_start + range_bytes]);
    expected.extend_from_slice(&tail);
    expected.extend_from_slice(&contents[..7]);
    let file = file.clone();
    let make = move || {
        vec![
            OutChunk::Bytes(head.clone()),
            OutChunk::Bytes(Bytes::new()),
            OutChunk::Bytes(middle.clone()),
            OutChunk::File(FileSlice {
                file: file.clone(),
                position: range_start as u64,
                length: range_bytes,
            }),
            OutChunk::Bytes(tail.clone()),
            OutChunk::File(FileSlice {
                file: file.clone(),
                position: 0,
                length: 7,
            }),
            OutChunk::File(FileSlice {
                file: file.clone(),
                position: 0,
                length: 0,
            }),
        ]
    };
    (make, expected)
}

#[test]
fn every_path_sends_the_exact_bytes() {
    let contents = pattern(FILE_BYTES, 42);
    let file = Arc::new(temp_file_with(&contents));
    for path in [SendPath::Copy, SendPath::Sendfile, SendPath::Splice] {
        let (make, expected) = mixed_chunks(&file, &contents);
        let rounds = 3;
        let received = send_over_loopback(path, rounds, make);
        assert_eq!(received.len(), expected.len() * rounds, "{path}");
        for round in received.chunks(expected.len()) {
            assert!(round == expected.as_slice(), "{path}: bytes differ");
        }
    }
}

#[test]
fn range_past_end_of_file_is_an_error_not_a_hang() {
    let contents = pattern(4096, 7);
    let file = Arc::new(temp_file_with(&contents));
    for path in [SendPath::Copy, SendPath::Sendfile, SendPath::Splice] {
        let file = file.clone();
        let executor = LocalExecutorBuilder::default()
            .io_memory(2 << 20)
            .make()
            .unwrap();
        let error = executor.run(async move {
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            let reader = std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(address).unwrap();
                let mut received = Vec::new();
                let _ = stream.read_to_end(&mut received);
            });
            let stream = listener.accept().await.unwrap();
            let sender = Sender::new(path).unwrap();
            let chunks = vec![OutChunk::File(FileSlice {
                file,
                position: 4000,
                length: 200,
            })];
            let error = sender.send(&stream, chunks).await.unwrap_err();
            stream.shutdown(std::net::Shutdown::Both).await.unwrap();
            reader.join().unwrap();
            error
        });
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{path}");
    }
}

#[test]
fn send_path_parses_and_displays() {
    for path in [SendPath::Copy, SendPath::Sendfile, SendPath::Splice] {
        assert_eq!(path.to_string().parse::<SendPath>(), Ok(path));
    }
    assert_eq!("splice".parse::<SendPath>(), Ok(SendPath::default()));
    assert!("mmap".parse::<SendPath>().is_err());
}
