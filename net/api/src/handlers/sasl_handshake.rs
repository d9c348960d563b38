//! SaslHandshake (key 17): the client names the SASL mechanism it will
//! authenticate with; the answer lists the listener's mechanisms.
//!
//! v0 and v1 are advertised, as Kafka does: librdkafka before 2.x turns its
//! SASL handshake on only when the broker lists v0 (its feature map), and
//! then speaks v1 with SaslAuthenticate. A v0 exchange proper is followed
//! by raw SASL tokens outside Kafka framing (before KIP-152), which rill
//! does not read: a v0 request is answered UNSUPPORTED_VERSION with the
//! mechanisms, and the connection is closed, so such a client fails with
//! an error rather than on a misread token.

use super::{str_bytes, Handler, HandlerFuture, Request, Response};
use engine::ErrorCode;
use kafka_protocol::messages::{ApiKey, SaslHandshakeRequest, SaslHandshakeResponse};
use runtimes::Shard;
use security::sasl::Mechanism;
use std::rc::Rc;

/// v0 advertised, v1 served (see the module doc).
pub const HANDLER: Handler = Handler {
    api_key: ApiKey::SaslHandshake,
    min_version: 0,
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
        if request.version == 0 {
            tracing::debug!(listener = %session.listener, "SaslHandshake v0 (raw SASL tokens) is not served; closing");
            response.error_code = ErrorCode::UnsupportedVersion.code();
            return match request.respond(&response)? {
                Response::Chunks(chunks) => Ok(Response::ChunksThenClose(chunks)),
                other => Ok(other),
            };
        }
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
