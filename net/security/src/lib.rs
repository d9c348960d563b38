//! rill's security model: who is on the other end of a connection, how it
//! reached the broker, and what it may do.
//!
//! A leaf of the broker's crates: it imports nothing of the shard kernel,
//! the runtimes or the API layer (only `engine`'s error codes and the SCRAM
//! credential type the cluster metadata stores), so the model and its tests
//! stand alone.
//!
//! - [`protocol`]: Kafka's security protocols (`PLAINTEXT`, `SSL`,
//!   `SASL_PLAINTEXT`, `SASL_SSL`) as named in `listener.security.protocol.map`.
//! - [`session`]: one connection's listener, peer and authenticated
//!   principal, carried by every request so that handlers can authorize it.
//! - [`tls`]: TLS listeners with rustls: the acceptor, the handshake and the
//!   principal of a client certificate, named by [`principal_mapping`]
//!   (`ssl.principal.mapping.rules`).
//! - [`sasl`]: the SASL mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER,
//!   GSSAPI) as pure state machines.
//! - [`kerberos`]: GSSAPI's Kerberos acceptor (MIT Kerberos, loaded at run
//!   time) and `sasl.kerberos.principal.to.local.rules`.
//! - [`oauth`]: OAUTHBEARER's bearer tokens: unsigned ones (Kafka's
//!   default validator) and ones signed by an identity provider's JWKS.
//! - [`acl`]: ACLs (Kafka's model), the standard authorizer, and the
//!   per-request checks handlers make.

pub mod acl;
pub mod kerberos;
pub mod oauth;
pub mod principal_mapping;
pub mod protocol;
pub mod sasl;
pub mod session;
pub mod tls;
pub mod tls_client;

pub use protocol::SecurityProtocol;
pub use session::{Principal, Session};
