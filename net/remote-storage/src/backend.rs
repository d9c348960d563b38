//! Builds the `object_store` client a parsed URL names.
//!
//! Each cloud builder starts from `from_env`, so credentials and options
//! come from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`) or the
//! machine's identity service, never from rill's configuration. The
//! configuration's endpoint, region and `allow_http` override the
//! environment's when set. The builders' `Debug` prints secrets: no
//! builder is ever logged here.
//!
//! Retries: object_store retries a failed request with backoff (10 times,
//! for up to 3 minutes by default). Both its per-request timeout and its
//! total retry time are set to the operation timeout, so that a store that
//! is down fails an operation within about one `op_timeout_ms`.

use crate::config::RemoteStorageConfig;
use crate::error::RemoteError;
use crate::location::{Backend, Location};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::azure::{MicrosoftAzure, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorage, GoogleCloudStorageBuilder};
use object_store::local::LocalFileSystem;
use object_store::prefix::PrefixStore;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// The longest a TCP (and TLS) connect may take, below the op timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The store for `location`, with the URL's prefix joined in front of every
/// key. Blocking (it may create the `file://` directory): called once, on
/// the remote thread, before it serves.
pub(crate) fn build(
    location: &Location,
    config: &RemoteStorageConfig,
) -> Result<Arc<dyn ObjectStore>, RemoteError> {
    let retry = RetryConfig {
        retry_timeout: config.op_timeout(),
        ..RetryConfig::default()
    };
    let store: Arc<dyn ObjectStore> = match &location.backend {
        Backend::File { root } => Arc::new(build_local(root)?),
        Backend::S3 { bucket } => {
            install_tls_provider();
            Arc::new(build_s3(bucket, config, retry).map_err(refused)?)
        }
        Backend::Gcs { bucket } => {
            install_tls_provider();
            Arc::new(build_gcs(bucket, config, retry)?)
        }
        Backend::Azure { container } => {
            install_tls_provider();
            Arc::new(build_azure(container, config, retry).map_err(refused)?)
        }
    };
    if location.prefix.is_empty() {
        return Ok(store);
    }
    Ok(Arc::new(PrefixStore::new(store, location.prefix.as_str())))
}

/// A builder's refusal (a missing bucket, a bad endpoint, …).
fn refused(error: object_store::Error) -> RemoteError {
    RemoteError::config(error.to_string())
}

fn build_s3(
    bucket: &str,
    config: &RemoteStorageConfig,
    retry: RetryConfig,
) -> object_store::Result<AmazonS3> {
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_client_options(client_options(config))
        .with_retry(retry);
    if let Some(endpoint) = &config.endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    if let Some(region) = &config.region {
        builder = builder.with_region(region);
    }
    if config.allow_http {
        builder = builder.with_allow_http(true);
    }
    builder.build()
}

fn build_gcs(
    bucket: &str,
    config: &RemoteStorageConfig,
    retry: RetryConfig,
) -> Result<GoogleCloudStorage, RemoteError> {
    if config.endpoint.is_some() || config.region.is_some() {
        return Err(RemoteError::config(
            "endpoint and region apply to s3:// and az:// only",
        ));
    }
    GoogleCloudStorageBuilder::from_env()
        .with_bucket_name(bucket)
        .with_client_options(client_options(config))
        .with_retry(retry)
        .build()
        .map_err(refused)
}

fn build_azure(
    container: &str,
    config: &RemoteStorageConfig,
    retry: RetryConfig,
) -> object_store::Result<MicrosoftAzure> {
    let mut builder = MicrosoftAzureBuilder::from_env()
        .with_container_name(container)
        .with_client_options(client_options(config))
        .with_retry(retry);
    if let Some(endpoint) = &config.endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    if config.allow_http {
        builder = builder.with_allow_http(true);
    }
    builder.build()
}

fn client_options(config: &RemoteStorageConfig) -> ClientOptions {
    ClientOptions::new()
        .with_timeout(config.op_timeout())
        .with_connect_timeout(CONNECT_TIMEOUT.min(config.op_timeout()))
        .with_allow_http(config.allow_http)
}

/// The local store: a directory, created if missing. Its writes go to a
/// temporary file renamed into place (a crash leaves nothing half-written
/// under a key), with fsync of the file and its directory, as durable as a
/// cloud store's acknowledged write; deletes remove the directories they
/// empty.
fn build_local(root: &std::path::Path) -> Result<LocalFileSystem, RemoteError> {
    std::fs::create_dir_all(root).map_err(RemoteError::io("open"))?;
    let store = LocalFileSystem::new_with_prefix(root)
        .map_err(|error| RemoteError::config(error.to_string()))?;
    Ok(store.with_fsync(true).with_automatic_cleanup(true))
}

/// reqwest is built with rustls but no crypto provider of its own (see the
/// root Cargo.toml), and takes the process default: ring, as the broker's
/// own TLS listeners use. A provider already installed (by the broker or a
/// test) is kept.
fn install_tls_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::location::parse;

    #[test]
    fn a_gcs_store_refuses_an_endpoint() {
        let mut config = RemoteStorageConfig::from_url("gs://bucket/p");
        config.endpoint = Some("http://127.0.0.1:1".into());
        let location = parse(&config.url).unwrap();
        assert!(matches!(
            build(&location, &config),
            Err(RemoteError::Config { .. })
        ));
    }

    #[test]
    fn a_local_store_creates_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a/b");
        let config = RemoteStorageConfig::from_url(&format!("file://{}", root.display()));
        let location = parse(&config.url).unwrap();
        build(&location, &config).unwrap();
        assert!(root.is_dir());
    }
}
