//! An S3 server on loopback for the tiered-storage tests: `s3s-fs` (an S3
//! API backed by a directory) served with hyper inside the test process,
//! so a broker reaches a real S3 API (SigV4-signed requests checked
//! against a static test key) with `s3://` and an endpoint override.
//! Dropping the server stops it (its runtime goes, and with it the
//! listener and every connection); starting one again on the same address
//! and directory brings the same store back.

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use std::net::SocketAddr;
use std::path::Path;

/// The bucket every server has.
pub const BUCKET: &str = "rill-tiered";
/// The test key's id.
pub const ACCESS_KEY: &str = "rill-test-access-key";
/// The test key's secret.
pub const SECRET_KEY: &str = "rill-test-secret-key";

/// The environment a broker reads the test key from (the AWS SDK's names).
pub const CREDENTIALS_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
    ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
    ("AWS_REGION", "us-east-1"),
];

/// A running S3 server.
pub struct S3Server {
    /// Where it listens.
    pub address: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for S3Server {
    /// Stops the server without blocking, so that an async test may drop it.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl S3Server {
    /// Starts a server on `address` (port 0: any) keeping its objects under
    /// `root` (the bucket is a directory there).
    pub fn start(address: SocketAddr, root: &Path) -> S3Server {
        std::fs::create_dir_all(root.join(BUCKET)).expect("bucket directory");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("S3 server runtime");
        // Bound here, not in the runtime: the caller may be a runtime's task.
        let listener = std::net::TcpListener::bind(address).expect("S3 server listens");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let address = listener.local_addr().expect("S3 server address");
        let store = s3s_fs::FileSystem::new(root).expect("S3 server store");
        let mut service = S3ServiceBuilder::new(store);
        service.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = service.build();
        runtime.spawn(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            // Ends with the runtime, when the server is dropped.
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
            runtime: Some(runtime),
        }
    }
}
