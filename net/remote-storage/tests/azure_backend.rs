//! The remote store against a real Azure Blob API: Azurite, Microsoft's
//! emulator (npm `azurite`, which `.ci/run` installs), started on
//! 127.0.0.1 on a free port with in-memory storage. The store reaches it
//! as `az://container/prefix` with the endpoint override and the
//! emulator's well-known account and SharedKey, as an operator would reach
//! an Azure-compatible endpoint. Without `azurite-blob` on the PATH the
//! test says so and skips, unless `RILL_REQUIRE_AZURITE` is set (CI).

mod common;

use base64::Engine as _;
use bytes::Bytes;
use common::MIB;
use futures::executor::block_on;
use hmac::{Hmac, Mac};
use remote_storage::{RemoteError, RemoteStorageConfig, RemoteStore};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Once;

const CONTAINER: &str = "rill-tiered";
/// Azurite's built-in account and key, public by design.
const ACCOUNT: &str = "devstoreaccount1";
const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const API_VERSION: &str = "2021-08-06";

/// An Azurite blob service; dropping it kills it.
struct Azurite {
    child: Child,
    endpoint: String,
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Azurite {
    /// Starts Azurite, or `None` where it is not installed (and not
    /// required).
    fn start() -> Option<Azurite> {
        let spawned = Command::new("azurite-blob")
            .args(["--blobHost", "127.0.0.1", "--blobPort", "0"])
            .args(["--inMemoryPersistence", "--skipApiVersionCheck", "--silent"])
            .arg("--disableTelemetry")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(error) if std::env::var_os("RILL_REQUIRE_AZURITE").is_none() => {
                eprintln!("skipped: azurite-blob cannot start ({error}); `npm install -g azurite`");
                return None;
            }
            Err(error) => panic!("RILL_REQUIRE_AZURITE is set, and azurite-blob: {error}"),
        };
        let stdout = child.stdout.take().unwrap();
        // "Azurite Blob service successfully listens on http://127.0.0.1:PORT"
        let mut lines = BufReader::new(stdout).lines();
        let endpoint = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| Some(line.split("listens on ").nth(1)?.trim().to_string()))
            .expect("Azurite printed where it listens");
        // Azurite dies of a closed stdout: read it to the end.
        std::thread::spawn(move || lines.for_each(drop));
        Some(Azurite { child, endpoint })
    }

    /// Creates the container with a SharedKey-signed request: object_store
    /// reads and writes blobs but makes no containers, as an operator's
    /// would already exist.
    fn create_container(&self, name: &str) {
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let to_sign = format!(
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{API_VERSION}\n\
             /{ACCOUNT}/{ACCOUNT}/{name}\nrestype:container"
        );
        let engine = base64::engine::general_purpose::STANDARD;
        let key = engine.decode(ACCOUNT_KEY).unwrap();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
        mac.update(to_sign.as_bytes());
        let signature = engine.encode(mac.finalize().into_bytes());
        let url = format!("{}/{ACCOUNT}/{name}?restype=container", self.endpoint);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // reqwest has no crypto provider of its own (see the root
        // Cargo.toml); the store installs ring's, and so does this.
        let _already = rustls::crypto::ring::default_provider().install_default();
        let status = runtime.block_on(async {
            reqwest::Client::new()
                .put(url)
                .header("x-ms-date", date)
                .header("x-ms-version", API_VERSION)
                .header("content-length", "0")
                .header("authorization", format!("SharedKey {ACCOUNT}:{signature}"))
                .send()
                .await
                .unwrap()
                .status()
        });
        assert_eq!(status.as_u16(), 201, "container create");
    }
}

/// The emulator's account, where MicrosoftAzureBuilder::from_env reads it.
fn test_credentials() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT);
        std::env::set_var("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY);
        std::env::remove_var("AZURE_STORAGE_USE_EMULATOR");
    });
}

fn azure_config(endpoint: &str) -> RemoteStorageConfig {
    test_credentials();
    let mut config = RemoteStorageConfig::from_url(&format!("az://{CONTAINER}/cluster-1"));
    // Path-style, as Azurite and Azure Stack serve: the account in the path.
    config.endpoint = Some(format!("{endpoint}/{ACCOUNT}"));
    config.allow_http = true;
    config.part_bytes = 5 * MIB;
    config.chunk_bytes = MIB;
    config.cache_bytes = 4 * MIB;
    config.op_timeout_ms = 10_000;
    config
}

#[test]
fn block_blob_upload_range_reads_list_and_delete_prefix() {
    let Some(azurite) = Azurite::start() else {
        return;
    };
    azurite.create_container(CONTAINER);
    let store = RemoteStore::open(azure_config(&azurite.endpoint)).unwrap();
    assert_eq!(store.key_prefix(), "cluster-1");
    let uploaded = common::upload_and_read(&store);
    common::cache_bounds_and_delete(&store, &uploaded);

    // A container that does not exist: a clear refusal, not a hang.
    let mut missing = azure_config(&azurite.endpoint);
    missing.url = "az://no-such-container/p".into();
    let store = RemoteStore::open(missing).unwrap();
    let answer = block_on(store.put_bytes("k".into(), Bytes::from_static(b"x")));
    assert!(answer.is_err(), "{answer:?}");

    // Azurite gone: operations fail as Unavailable, which the broker retries.
    let endpoint = azurite.endpoint.clone();
    drop(azurite);
    let mut gone = azure_config(&endpoint);
    gone.op_timeout_ms = 2_000;
    let store = RemoteStore::open(gone).unwrap();
    let answer = block_on(store.get("k".into()));
    assert!(
        matches!(answer, Err(RemoteError::Unavailable { .. })),
        "{answer:?}"
    );
}
