//! The remote store against a real S3 API: `s3s-fs`, an S3 server backed
//! by a directory, served with hyper on 127.0.0.1:0 inside the test. The
//! store reaches it as `s3://bucket/prefix` with the endpoint override,
//! plain HTTP and SigV4-signed requests (the server checks the static test
//! key). Then the server is stopped, or replaced by one that never answers,
//! and operations must fail with `Unavailable` within the timeout.

mod common;

use bytes::Bytes;
use common::MIB;
use futures::executor::block_on;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use remote_storage::{RemoteError, RemoteStorageConfig, RemoteStore};
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Once;
use std::time::{Duration, Instant};

const BUCKET: &str = "rill-tiered";
const ACCESS_KEY: &str = "rill-test-access-key";
const SECRET_KEY: &str = "rill-test-secret-key";

/// The test credentials, where AmazonS3Builder::from_env reads them. Set
/// once, before any test reads the environment: every test calls this
/// first, and `Once` holds the others back until it is done.
fn test_credentials() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::remove_var("AWS_SESSION_TOKEN");
        std::env::remove_var("AWS_ENDPOINT");
    });
}

/// An S3 server on loopback; dropping it stops it (the runtime goes, and
/// with it the listener and every connection).
struct S3Server {
    address: SocketAddr,
    root: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
}

impl S3Server {
    fn start() -> S3Server {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let mut service = S3ServiceBuilder::new(s3s_fs::FileSystem::new(root.path()).unwrap());
        service.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = service.build();
        runtime.spawn(async move {
            // Bounded by the test: the runtime is dropped with the server.
            while let Ok((socket, _)) = listener.accept().await {
                let service = service.clone();
                tokio::spawn(async move {
                    let connection = ConnectionBuilder::new(TokioExecutor::new());
                    let _ = connection
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
            }
        });
        S3Server {
            address,
            root,
            _runtime: runtime,
        }
    }

    /// Where the server keeps an object of the bucket.
    fn object_file(&self, object: &str) -> PathBuf {
        self.root.path().join(BUCKET).join(object)
    }
}

fn s3_config(address: SocketAddr, op_timeout_ms: u64) -> RemoteStorageConfig {
    test_credentials();
    let mut config = RemoteStorageConfig::from_url(&format!("s3://{BUCKET}/cluster-1"));
    config.endpoint = Some(format!("http://{address}"));
    config.allow_http = true;
    // S3's smallest part (all but the last), 1 MiB chunks, 4 MiB of cache.
    config.part_bytes = 5 * MIB;
    config.chunk_bytes = MIB;
    config.cache_bytes = 4 * MIB;
    config.op_timeout_ms = op_timeout_ms;
    config
}

#[test]
fn multipart_upload_range_reads_list_and_delete_prefix() {
    let server = S3Server::start();
    let store = RemoteStore::open(s3_config(server.address, 10_000)).unwrap();
    assert_eq!(store.key_prefix(), "cluster-1");
    let uploaded = common::upload_and_read(&store);
    // The URL's prefix is joined in front of the key, in the bucket.
    let on_server = server.object_file(&format!("cluster-1/{}", uploaded.log_key));
    assert_eq!(
        std::fs::metadata(on_server).unwrap().len(),
        uploaded.content.len() as u64
    );
    common::cache_bounds_and_delete(&store, &uploaded);
}

#[test]
fn a_stopped_server_fails_operations_with_unavailable_in_time() {
    let server = S3Server::start();
    let address = server.address;
    let store = RemoteStore::open(s3_config(address, 2_000)).unwrap();
    block_on(store.put_bytes("k".into(), Bytes::from_static(b"before"))).unwrap();
    drop(server);
    for attempt in 0..3 {
        let started = Instant::now();
        let answer = match attempt {
            0 => block_on(store.get("k".into())).map(drop),
            1 => block_on(store.get_range("k".into(), 0..3)).map(drop),
            _ => block_on(store.list(String::new())).map(drop),
        };
        let took = started.elapsed();
        assert!(
            matches!(answer, Err(RemoteError::Unavailable { .. })),
            "attempt {attempt}: {answer:?}"
        );
        // The 2 s timeout, and timer slack on a loaded machine.
        assert!(
            took < Duration::from_millis(3_000),
            "attempt {attempt} took {took:?}"
        );
    }
    assert!(store.stats().get_errors >= 2);
}

#[test]
fn a_server_that_never_answers_fails_with_unavailable_in_time() {
    // Accepts connections (the kernel's backlog) and never reads a byte.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap();
    let store = RemoteStore::open(s3_config(address, 1_500)).unwrap();
    let started = Instant::now();
    let answer = block_on(store.get("k".into()));
    let took = started.elapsed();
    assert!(
        matches!(answer, Err(RemoteError::Unavailable { .. })),
        "{answer:?}"
    );
    assert!(took >= Duration::from_millis(1_000), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let upload = block_on(store.put_bytes("k".into(), Bytes::from_static(b"x")));
    assert!(
        matches!(upload, Err(RemoteError::Unavailable { .. })),
        "{upload:?}"
    );
    drop(silent);
}
