//! SaslAuthenticate (key 36): one SASL token of the exchange SaslHandshake
//! started, answered with the server's token. When the exchange succeeds
//! the connection's session is authenticated as `User:<name>`; v1+ answers
//! `session_lifetime_ms` (`connections.max.reauth.ms`, KIP-368; no later
//! than an OAUTHBEARER token's expiry), after which only a re-authentication (a new SaslHandshake + SaslAuthenticate
//! on the same connection, as the same principal) is served.
//!
//! A failure answers SASL_AUTHENTICATION_FAILED (58) with the reason, then
//! closes the connection, as Kafka does; a token with no exchange in
//! progress answers ILLEGAL_SASL_STATE (34) and closes too.

use super::{str_bytes, Handler, HandlerFuture, Request, Response};
use bytes::Bytes;
use cluster::metadata::MetadataImage;
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse};
use kernel::config::sasl::SaslConfig;
use kernel::error::RequestError;
use runtimes::Shard;
use security::kerberos::rules::ShortNamer;
use security::sasl::gssapi::GssAcceptor;
use security::sasl::{
    scram, CredentialSource, ScramCredential, ScramMechanism, Step, TokenIdentity,
};
use security::{Principal, Session};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// v0–v2.
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::SaslAuthenticate,
    min_version: 0,
    max_version: 2,
    handle,
};

/// The broker's users as the mechanisms see them: the listener's JAAS
/// users, the metadata image's SCRAM credentials, the listener's
/// OAUTHBEARER validator and the broker's Kerberos.
pub struct BrokerCredentials<'a> {
    /// The SASL settings.
    pub config: &'a SaslConfig,
    /// The listener the client came in on.
    pub listener: &'a str,
    /// This shard's copy of the metadata image.
    pub image: Arc<MetadataImage>,
    /// Now, wall-clock ms (tokens expire).
    pub now_ms: i64,
}

impl CredentialSource for BrokerCredentials<'_> {
    fn plain_password(&self, user: &str) -> Option<String> {
        self.config
            .plain_password(self.listener, user)
            .map(str::to_string)
    }

    /// The quorum's credential; until the quorum has one, the bootstrap
    /// user of `rill.sasl.bootstrap.scram` (a fresh salt per exchange). The
    /// metadata shard writes those users into the quorum just after the
    /// listeners open, so without this a client that logs in at once (a
    /// systemd unit's first client, a test) fails its first login, where
    /// Kafka's `kafka-storage format --add-scram` had them from the start.
    fn scram(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        if let Some(credential) = self.image.scram_credential(user, mechanism.record_type()) {
            return Some(credential.clone());
        }
        self.config
            .bootstrap_scram
            .iter()
            .find(|b| b.name == user && b.mechanism == mechanism)
            .map(|b| scram::credential_from_password(mechanism, &b.password, b.iterations))
    }

    fn validate_token(&self, token: &str) -> Result<TokenIdentity, String> {
        self.config
            .oauth
            .validator(self.listener)
            .validate(token, self.now_ms)
            .map_err(|e| e.to_string())
    }

    /// A context of the Kerberos the broker's start set up (it does when
    /// a listener offers GSSAPI).
    fn gss_acceptor(&self) -> Result<Box<dyn GssAcceptor>, String> {
        let kerberos = security::kerberos::get()
            .ok_or_else(|| String::from("Kerberos is not configured on this broker"))?;
        Ok(Box::new(kerberos.context()))
    }

    fn kerberos_short_name(&self, principal: &str) -> Result<String, String> {
        let realm = security::kerberos::get().map_or("", |k| k.default_realm());
        ShortNamer::parse(&self.config.kerberos.to_local_rules, realm)?.short_name(principal)
    }
}

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: SaslAuthenticateRequest = request.decode()?;
        let session = request.session.clone();
        let mut response = SaslAuthenticateResponse::default();
        let Some(mechanism) = session
            .sasl_mechanism()
            .filter(|_| session.protocol.uses_sasl())
        else {
            response.error_code = ErrorCode::IllegalSaslState.code();
            response.error_message = Some(str_bytes(
                "SaslAuthenticate without a SaslHandshake choosing a mechanism first",
            ));
            return close_after(&request, &response);
        };
        let credentials = BrokerCredentials {
            config: &shard.config.sasl,
            listener: &session.listener,
            image: shard.runtime().view.image(),
            now_ms: shard.now_ms(),
        };
        let outcome = session.sasl_step(&body.auth_bytes, &credentials);
        let failure = match outcome {
            Some(Ok(Step::Continue(token))) => {
                response.auth_bytes = Bytes::from(token);
                return request.respond(&response);
            }
            Some(Ok(Step::Done {
                user,
                response: token,
                expires_at_ms,
            })) => match succeed(&shard, &session, &user, expires_at_ms) {
                Ok(lifetime_ms) => {
                    shard
                        .metrics
                        .borrow_mut()
                        .record_sasl(mechanism.name(), true);
                    response.auth_bytes = Bytes::from(token);
                    response.session_lifetime_ms = lifetime_ms;
                    return request.respond(&response);
                }
                Err(reason) => (ErrorCode::SaslAuthenticationFailed, reason),
            },
            Some(Err(e)) => {
                let code = if e.is_illegal_state() {
                    ErrorCode::IllegalSaslState
                } else {
                    ErrorCode::SaslAuthenticationFailed
                };
                (code, e.to_string())
            }
            None => (
                ErrorCode::IllegalSaslState,
                String::from("no SASL exchange in progress"),
            ),
        };
        shard
            .metrics
            .borrow_mut()
            .record_sasl(mechanism.name(), false);
        tracing::info!(
            listener = %session.listener,
            peer = ?session.peer,
            %mechanism,
            reason = %failure.1,
            "SASL authentication failed; closing"
        );
        response.error_code = failure.0.code();
        response.error_message = Some(str_bytes(failure.1));
        close_after(&request, &response)
    })
}

/// Authenticates the session as `User:<user>` and sets its lifetime:
/// `connections.max.reauth.ms`, cut to a token's remaining life, as
/// Kafka does when re-authentication is on; `Err` when a
/// re-authentication names another principal (KIP-368 forbids the change).
fn succeed(
    shard: &Shard,
    session: &Session,
    user: &str,
    expires_at_ms: Option<i64>,
) -> Result<i64, String> {
    let principal = Principal::user(user);
    if session.is_authenticated() && session.principal() != principal {
        return Err(format!(
            "re-authentication as {principal} on a connection authenticated as {}",
            session.principal()
        ));
    }
    session.authenticate(principal);
    let max_ms = shard.config.sasl.max_reauth_ms;
    let lifetime_ms = match expires_at_ms {
        Some(expires_ms) if max_ms > 0 => max_ms.min((expires_ms - shard.now_ms()).max(1)),
        _ => max_ms,
    };
    let expiry = (lifetime_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(lifetime_ms.unsigned_abs()));
    session.set_expiry(expiry);
    Ok(lifetime_ms)
}

/// The answer, after which the connection closes.
fn close_after(
    request: &Request,
    response: &SaslAuthenticateResponse,
) -> Result<Response, RequestError> {
    match request.respond(response)? {
        Response::Chunks(chunks) => Ok(Response::ChunksThenClose(chunks)),
        other => Ok(other),
    }
}
