//! Each listener's accept loop: admit a connection under `max.connections`
//! and `max.connections.per.ip`, then serve it in its own task.

use super::limits::effective_max_connections;
use api::connection::{self, transport, ShutdownSignal};
use futures::future::{select, Either};
use glommio::net::TcpStream;
use kernel::config::ClientListener;
use kernel::conn_limits::{IpSlot, LogLimiter, PerIpConnections};
use runtimes::Shard;
use security::{Principal, Session};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

thread_local! {
    /// One line a second at most for refused connections (a client in a
    /// connect loop would flood the log); each refusal is still counted.
    static REFUSAL_LOG: LogLimiter = const { LogLimiter::new(Duration::from_secs(1)) };
}

/// Accepts on `listener` until `shutdown`, serving each admitted
/// connection in its own task inside `gate`.
pub(super) async fn accept_loop(
    shard: &Rc<Shard>,
    spec: Rc<ClientListener>,
    listener: &glommio::net::TcpListener,
    gate: &Rc<glommio::sync::Gate>,
    shutdown: ShutdownSignal,
) {
    loop {
        let accepted = {
            let accept = listener.accept();
            futures::pin_mut!(accept);
            match select(accept, shutdown.clone()).await {
                Either::Left((accepted, _)) => accepted,
                Either::Right(_) => return,
            }
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                // Out of descriptors and similar: back off, keep serving the others.
                tracing::warn!(shard = shard.id, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if !take_connection_place(shard) {
            drop(stream);
            continue;
        }
        let Ok(ip_slot) = take_ip_place(shard, &stream) else {
            drop(stream);
            continue;
        };
        {
            let mut metrics = shard.metrics.borrow_mut();
            metrics.connections_accepted += 1;
            metrics.connections_open += 1;
        }
        let Ok(pass) = gate.enter() else {
            shard.open_connections.fetch_sub(1, Ordering::AcqRel);
            return;
        };
        let peer = stream.peer_addr().ok();
        let shard = shard.clone();
        let shutdown = shutdown.clone();
        let spec = spec.clone();
        glommio::spawn_local(async move {
            serve_connection(&shard, &spec, stream, peer, shutdown).await;
            drop(ip_slot);
            shard.open_connections.fetch_sub(1, Ordering::AcqRel);
            shard.metrics.borrow_mut().connections_open -= 1;
            drop(pass);
        })
        .detach();
    }
}

/// Counts a new connection in the broker's open connections; over
/// `max.connections` (or the descriptor limit) it is uncounted again and
/// refused (`false`), the refusal counted and logged.
fn take_connection_place(shard: &Shard) -> bool {
    let open = shard.open_connections.fetch_add(1, Ordering::AcqRel) + 1;
    let max_connections = effective_max_connections(shard.config.max_connections);
    if open <= max_connections {
        return true;
    }
    shard.open_connections.fetch_sub(1, Ordering::AcqRel);
    shard.metrics.borrow_mut().connections_refused += 1;
    if let Some(suppressed) = REFUSAL_LOG.with(|l| l.admit(Instant::now())) {
        tracing::warn!(
            shard = shard.id,
            limit = max_connections,
            suppressed,
            "max.connections (or the descriptor limit) reached; refusing"
        );
    }
    false
}

/// A place under `max.connections.per.ip` for the stream's client (`None`:
/// no peer address). Refused (`Err`): the connection is uncounted from the
/// open connections and the refusal counted and logged.
fn take_ip_place(shard: &Shard, stream: &TcpStream) -> Result<Option<IpSlot>, ()> {
    match stream.peer_addr() {
        Ok(peer) => {
            let limit = shard.config.connection_limits.limit_for(peer.ip());
            let slot = PerIpConnections::try_acquire(&shard.per_ip_connections, peer.ip(), limit);
            if slot.is_none() {
                shard.open_connections.fetch_sub(1, Ordering::AcqRel);
                shard.metrics.borrow_mut().connections_refused += 1;
                if let Some(suppressed) = REFUSAL_LOG.with(|l| l.admit(Instant::now())) {
                    tracing::warn!(
                        shard = shard.id,
                        %peer,
                        limit,
                        suppressed,
                        "max.connections.per.ip reached; refusing"
                    );
                }
                return Err(());
            }
            Ok(slot)
        }
        // No peer address (already closed): nothing to count it under.
        Err(_) => Ok(None),
    }
}

/// Opens the connection's transport (TLS, SASL) and serves its requests
/// until it closes or `shutdown`.
async fn serve_connection(
    shard: &Rc<Shard>,
    spec: &ClientListener,
    stream: TcpStream,
    peer: Option<SocketAddr>,
    shutdown: ShutdownSignal,
) {
    // The TLS handshake runs here, in the connection's own task, so
    // a slow client never holds up the accept loop.
    if let Some(transport) = transport::open(shard, spec, stream, &shutdown).await {
        // SASL listeners replace the principal once SASL succeeds.
        let principal = transport
            .principal
            .clone()
            .unwrap_or_else(Principal::anonymous);
        let session = Session::new(&spec.name, spec.protocol, peer.map(|a| a.ip()), principal)
            .with_peer_port(peer.map(|a| a.port()));
        let session = Rc::new(session);
        connection::serve(shard.clone(), transport, session, shutdown).await;
    }
}
