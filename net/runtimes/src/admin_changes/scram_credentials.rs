//! SCRAM credentials in the metadata quorum (AlterUserScramCredentials and
//! the bootstrap users of `rill.sasl.bootstrap.scram`): committed by the
//! active controller as `UserScramCredential` / `RemoveUserScramCredential`
//! records, so every broker holds the same users and they survive restarts.
//!
//! Only the salted, hashed form is ever sent or stored (salt, iterations,
//! StoredKey, ServerKey); a bootstrap password is salted here, on the
//! broker that read it from its file.

use super::commit::commit;
use crate::cluster_runtime::ControllerRpc;
use crate::Shard;
use engine::ErrorCode;
use security::sasl::{scram, ScramCredential, ScramMechanism};
use std::rc::Rc;
use std::time::Duration;

/// One credential to create or replace: (user, mechanism, credential).
pub type Upsert = (String, ScramMechanism, ScramCredential);

/// A change of SCRAM credentials, run on the controller shard.
#[derive(Debug, Clone)]
pub struct AlterScramCredentials {
    /// Credentials to create or replace.
    pub upserts: Vec<Upsert>,
    /// Credentials to delete: (user, mechanism).
    pub deletions: Vec<(String, ScramMechanism)>,
}

impl AlterScramCredentials {
    /// The controller request carrying it.
    fn rpc(&self) -> ControllerRpc {
        ControllerRpc::AlterScramCredentials {
            upserts: self
                .upserts
                .iter()
                .map(|(name, mechanism, c)| {
                    (
                        name.clone(),
                        mechanism.record_type(),
                        c.salt.clone(),
                        c.iterations,
                        c.stored_key.clone(),
                        c.server_key.clone(),
                    )
                })
                .collect(),
            deletions: self
                .deletions
                .iter()
                .map(|(name, mechanism)| (name.clone(), mechanism.record_type()))
                .collect(),
        }
    }
}

/// Commits a change from any shard and waits until this shard's view has
/// it, so that the client's next login or describe sees it.
pub async fn submit(
    shard: &Rc<Shard>,
    request: AlterScramCredentials,
) -> Result<(), (ErrorCode, String)> {
    commit(shard, request.rpc()).await
}

/// Fault-injection point for tests: milliseconds to wait before the
/// bootstrap users are written, holding open the window in which the
/// listeners serve and the quorum has no credential for them yet.
pub const FAULT_DELAY_BOOTSTRAP_SCRAM_MS: &str = "RILL_FAULT_DELAY_BOOTSTRAP_SCRAM_MS";

/// Writes the `rill.sasl.bootstrap.scram` users that have no credential of
/// their mechanism yet into the quorum; retries until the quorum answers.
/// Runs on the metadata shard. (Until it is done, logins use the file's
/// users directly: `api`'s `BrokerCredentials`.)
pub async fn bootstrap(shard: Rc<Shard>) {
    let wanted = &shard.config.sasl.bootstrap_scram;
    if wanted.is_empty() || shard.runtime().quorum.is_none() {
        return;
    }
    let delay_ms = std::env::var(FAULT_DELAY_BOOTSTRAP_SCRAM_MS)
        .ok()
        .and_then(|value| value.parse::<u64>().ok());
    if let Some(delay_ms) = delay_ms {
        glommio::timer::sleep(Duration::from_millis(delay_ms)).await;
    }
    loop {
        let image = shard.runtime().view.image();
        let upserts: Vec<Upsert> = wanted
            .iter()
            .filter(|b| {
                image
                    .scram_credential(&b.name, b.mechanism.record_type())
                    .is_none()
            })
            .map(|b| {
                let credential =
                    scram::credential_from_password(b.mechanism, &b.password, b.iterations);
                (b.name.clone(), b.mechanism, credential)
            })
            .collect();
        if upserts.is_empty() {
            return;
        }
        let names: Vec<String> = upserts
            .iter()
            .map(|(name, m, _)| format!("{name} ({})", m.name()))
            .collect();
        let request = AlterScramCredentials {
            upserts,
            deletions: Vec::new(),
        };
        match submit(&shard, request).await {
            Ok(()) => {
                tracing::info!(users = ?names, "bootstrap SCRAM users written to the metadata quorum");
                return;
            }
            Err((code, message)) => {
                tracing::debug!(%code, %message, "bootstrap SCRAM users not written yet; retrying");
                glommio::timer::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
