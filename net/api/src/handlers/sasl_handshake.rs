//! SaslHandshake (key 17): the client names the SASL mechanism it will
//! authenticate with; the answer lists the listener's mechanisms.
//!
//! Only v1 is served: v0 is followed by raw SASL tokens outside Kafka
//! framing (before KIP-152), which no current client sends when the broker
//! advertises v1; a v0 request closes the connection as an unsupported
//! version does.

use super::{str_bytes, Handler, HandlerFuture, Request};
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};
use runtimes::Shard;
use security::sasl::Mechanism;
use std::rc::Rc;

/// v1 only (see the module doc).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::SaslHandshake,
    min_version: 1,
    max_version: 1,
    handle,
};

fn handle(shard: Rc<Shard>, mut request: Request) -> HandlerFuture {
    Box::pin(async move {
        let body: SaslHandshakeRequest = request.decode()?;
        let session = request.session.clone();
        let offered = shard.config.sasl.mechanisms_for(&session.listener);
        let mut response = SaslHandshakeResponse::default();
        response.mechanisms = offered.iter().map(|m| str_bytes(m.name())).collect();
        if !session.protocol.uses_sasl() {
            // Kafka: SASL on a listener without it is out of order.
            response.error_code = ErrorCode::IllegalSaslState.code();
            return request.respond(&response);
        }
        match body.mechanism.parse::<Mechanism>() {
            Ok(mechanism) if offered.contains(&mechanism) => session.start_sasl(mechanism),
            _ => {
                tracing::debug!(listener = %session.listener, mechanism = %body.mechanism.as_str(), "SASL mechanism not offered");
                response.error_code = ErrorCode::UnsupportedSaslMechanism.code();
            }
        }
        request.respond(&response)
    })
}
