//! One pipelined TCP connection to a broker, on tokio. Many requests may be
//! in flight: a writer task sends frames in submission order and registers
//! each correlation id before its bytes leave, a reader task splits response
//! frames and hands each to the waiter registered under its correlation id.
//! Decoding happens in the waiter's task, so one connection's reader does not
//! become the bottleneck of a busy load generator.
//!
//! With `--security-protocol SSL` ([`crate::kafka::tls`]) the stream is TLS;
//! the reader and writer then work on its split halves. With SASL
//! ([`crate::kafka::sasl`]) the connection authenticates after ApiVersions.

use crate::error::{BenchError, Result};
use crate::kafka::framing::{decode_response, encode_request, peek_correlation_id, split_frame};
use crate::kafka::sasl::{
    self, client_nonce, oauthbearer_message, plain_message, SaslCredentials, SaslMechanism,
    ScramClient,
};
use crate::kafka::versions::{negotiate_ranges, ApiRanges, NegotiatedVersions, SUPPORTED_RANGES};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// Bound on frames queued for the writer: backpressure for producers.
const OUTGOING_QUEUE_FRAMES: usize = 1024;
/// How long any response may take. A broker that stops answering fails the
/// request (and the run reports it) instead of hanging the harness.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// UNSUPPORTED_VERSION: the broker answers ApiVersions with it (in a v0 body)
/// when our ApiVersions version is too new for it.
const UNSUPPORTED_VERSION: i16 = 35;

type PendingMap = Arc<Mutex<HashMap<i32, oneshot::Sender<Bytes>>>>;

struct Outgoing {
    frame: Bytes,
    correlation_id: i32,
    reply: Option<oneshot::Sender<Bytes>>,
}

/// A connection with negotiated API versions.
pub struct Connection {
    addr: String,
    client_id: StrBytes,
    next_correlation_id: AtomicI32,
    outgoing: mpsc::Sender<Outgoing>,
    closed: Arc<AtomicBool>,
    versions: NegotiatedVersions,
}

/// A response that has been asked for and not yet awaited.
pub struct PendingResponse<R: Request> {
    reply: oneshot::Receiver<Bytes>,
    version: i16,
    addr: String,
    _request: PhantomData<fn() -> R>,
}

impl<R: Request> PendingResponse<R> {
    /// Waits for and decodes the response.
    pub async fn wait(self) -> Result<R::Response> {
        let frame = self.reply.await.map_err(|_| BenchError::ConnectionClosed {
            addr: self.addr.clone(),
        })?;
        let (_, response) = decode_response::<R>(frame, self.version)?;
        Ok(response)
    }
}

impl Connection {
    /// Connects and negotiates API versions with ApiVersions.
    pub async fn connect(addr: &str, client_id: &str) -> Result<Arc<Connection>> {
        Connection::connect_with_ranges(addr, client_id, &SUPPORTED_RANGES).await
    }

    /// [`Connection::connect`] negotiating `ranges` instead of the load
    /// generator's (they must hold the SASL APIs when SASL is configured).
    pub async fn connect_with_ranges(
        addr: &str,
        client_id: &str,
        ranges: ApiRanges,
    ) -> Result<Arc<Connection>> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| BenchError::Timeout(format!("connect to {addr}")))?
            .map_err(|source| BenchError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        stream.set_nodelay(true)?;
        let pending: PendingMap = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let (outgoing, outgoing_rx) = mpsc::channel(OUTGOING_QUEUE_FRAMES);
        match crate::kafka::tls::connector_for(addr)? {
            None => {
                let (read_half, write_half) = stream.into_split();
                tokio::spawn(write_loop(
                    write_half,
                    outgoing_rx,
                    pending.clone(),
                    closed.clone(),
                ));
                tokio::spawn(read_loop(read_half, pending, closed.clone()));
            }
            Some((connector, name)) => {
                let tls = tokio::time::timeout(REQUEST_TIMEOUT, connector.connect(name, stream))
                    .await
                    .map_err(|_| BenchError::Timeout(format!("TLS handshake with {addr}")))??;
                let (read_half, write_half) = tokio::io::split(tls);
                tokio::spawn(write_loop(
                    write_half,
                    outgoing_rx,
                    pending.clone(),
                    closed.clone(),
                ));
                tokio::spawn(read_loop(read_half, pending, closed.clone()));
            }
        }
        let mut connection = Connection {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            next_correlation_id: AtomicI32::new(1),
            outgoing,
            closed,
            versions: NegotiatedVersions::bootstrap(),
        };
        let response = connection.api_versions().await?;
        connection.versions = negotiate_ranges(addr, ranges, &response.api_keys);
        authenticate_if_configured(&connection).await?;
        Ok(Arc::new(connection))
    }

    async fn api_versions(&self) -> Result<ApiVersionsResponse> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("rill-bench"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let pending = self.send_at_version(&request, 3).await?;
        let frame = pending
            .reply
            .await
            .map_err(|_| BenchError::ConnectionClosed {
                addr: self.addr.clone(),
            })?;
        // A broker older than v3 answers in a v0 body with UNSUPPORTED_VERSION.
        match decode_response::<ApiVersionsRequest>(frame.clone(), 3) {
            Ok((_, response)) if response.error_code == 0 => Ok(response),
            _ => {
                let (_, v0) = decode_response::<ApiVersionsRequest>(frame, 0)?;
                if v0.error_code != 0 && v0.error_code != UNSUPPORTED_VERSION {
                    return Err(BenchError::Broker {
                        error_code: v0.error_code,
                        context: format!("ApiVersions from {}", self.addr),
                    });
                }
                let retry = self
                    .send_at_version(&ApiVersionsRequest::default(), 0)
                    .await?;
                let response = retry.wait().await?;
                if response.error_code != 0 {
                    return Err(BenchError::Broker {
                        error_code: response.error_code,
                        context: format!("ApiVersions v0 from {}", self.addr),
                    });
                }
                Ok(response)
            }
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// The negotiated version for request type `R`.
    pub fn version_of<R: Request>(&self) -> Result<i16> {
        self.versions
            .get(R::KEY)
            .ok_or_else(|| self.versions.unsupported(&self.addr, R::KEY))
    }

    /// Queues a request; the returned handle awaits the response. Many may
    /// be outstanding at once.
    pub async fn send<R: Request>(&self, body: &R) -> Result<PendingResponse<R>> {
        let version = self.version_of::<R>()?;
        self.send_at_version(body, version).await
    }

    async fn send_at_version<R: Request>(
        &self,
        body: &R,
        version: i16,
    ) -> Result<PendingResponse<R>> {
        let (reply, reply_rx) = oneshot::channel();
        self.enqueue(body, version, Some(reply)).await?;
        Ok(PendingResponse {
            reply: reply_rx,
            version,
            addr: self.addr.clone(),
            _request: PhantomData,
        })
    }

    /// Queues a request the broker does not answer (Produce with acks=0).
    pub async fn send_without_response<R: Request>(&self, body: &R) -> Result<()> {
        let version = self.version_of::<R>()?;
        self.enqueue(body, version, None).await
    }

    /// Sends and waits.
    pub async fn call<R: Request>(&self, body: &R) -> Result<R::Response> {
        self.send(body).await?.wait().await
    }

    /// [`Connection::call`] at `version`, which must not pass the
    /// negotiated one (a client that speaks an older form on purpose:
    /// transactions v1 beside v2).
    pub async fn call_at<R: Request>(&self, body: &R, version: i16) -> Result<R::Response> {
        if version > self.version_of::<R>()? {
            return Err(self.versions.unsupported(&self.addr, R::KEY));
        }
        self.send_at_version(body, version).await?.wait().await
    }

    async fn enqueue<R: Request>(
        &self,
        body: &R,
        version: i16,
        reply: Option<oneshot::Sender<Bytes>>,
    ) -> Result<()> {
        if self.is_closed() {
            return Err(BenchError::ConnectionClosed {
                addr: self.addr.clone(),
            });
        }
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let mut buf = BytesMut::new();
        encode_request(&mut buf, version, correlation_id, &self.client_id, body)?;
        self.outgoing
            .send(Outgoing {
                frame: buf.freeze(),
                correlation_id,
                reply,
            })
            .await
            .map_err(|_| BenchError::ConnectionClosed {
                addr: self.addr.clone(),
            })
    }
}

async fn write_loop(
    write_half: impl AsyncWrite + Unpin,
    mut outgoing: mpsc::Receiver<Outgoing>,
    pending: PendingMap,
    closed: Arc<AtomicBool>,
) {
    let mut writer = BufWriter::with_capacity(256 * 1024, write_half);
    'outer: while let Some(mut next) = outgoing.recv().await {
        // Write everything already queued, then flush once.
        loop {
            if let Some(reply) = next.reply.take() {
                if let Ok(mut map) = pending.lock() {
                    map.insert(next.correlation_id, reply);
                }
            }
            if writer.write_all(&next.frame).await.is_err() {
                break 'outer;
            }
            match outgoing.try_recv() {
                Ok(more) => next = more,
                Err(_) => break,
            }
        }
        if writer.flush().await.is_err() {
            break;
        }
    }
    close(&closed, &pending);
}

async fn read_loop(
    mut read_half: impl AsyncRead + Unpin,
    pending: PendingMap,
    closed: Arc<AtomicBool>,
) {
    let mut buf = BytesMut::with_capacity(1024 * 1024);
    loop {
        match read_half.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        loop {
            let frame = match split_frame(&mut buf) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => {
                    close(&closed, &pending);
                    return;
                }
            };
            let Ok(correlation_id) = peek_correlation_id(&frame) else {
                close(&closed, &pending);
                return;
            };
            let waiter = pending
                .lock()
                .ok()
                .and_then(|mut map| map.remove(&correlation_id));
            match waiter {
                // The waiter may have given up; that is its business.
                Some(waiter) => {
                    let _ = waiter.send(frame);
                }
                // A response nobody asked for: the stream is out of sync.
                None => {
                    close(&closed, &pending);
                    return;
                }
            }
        }
        if buf.capacity() - buf.len() < 64 * 1024 {
            buf.reserve(1024 * 1024);
        }
    }
    close(&closed, &pending);
}

/// Marks the connection closed and fails every outstanding request (dropping
/// a reply sender wakes its waiter with an error).
fn close(closed: &AtomicBool, pending: &PendingMap) {
    closed.store(true, Ordering::Relaxed);
    if let Ok(mut map) = pending.lock() {
        map.clear();
    }
}

/// Authenticates `connection` when SASL was chosen; a no-op otherwise.
async fn authenticate_if_configured(connection: &Connection) -> Result<()> {
    match sasl::credentials() {
        Some(credentials) => authenticate(connection, credentials).await,
        None => Ok(()),
    }
}

async fn authenticate(connection: &Connection, credentials: &SaslCredentials) -> Result<()> {
    let addr = connection.addr().to_string();
    let handshake = connection
        .call(
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str(credentials.mechanism.name())),
        )
        .await?;
    if handshake.error_code != 0 {
        let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(BenchError::Broker {
            error_code: handshake.error_code,
            context: format!(
                "SaslHandshake {} at {addr} (broker offers {offered:?})",
                credentials.mechanism.name()
            ),
        });
    }
    match credentials.mechanism {
        SaslMechanism::Plain => {
            let message = plain_message(&credentials.username, &credentials.password);
            exchange(connection, message).await?;
            Ok(())
        }
        SaslMechanism::OAuthBearer => {
            // A refused token is answered with an error challenge; the
            // acknowledgement then gets the failure and its reason.
            let challenge =
                exchange(connection, oauthbearer_message(&credentials.password)).await?;
            if challenge.is_empty() {
                return Ok(());
            }
            exchange(connection, vec![1]).await?;
            Err(BenchError::Other(format!(
                "OAUTHBEARER token refused at {addr}: {}",
                String::from_utf8_lossy(&challenge)
            )))
        }
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            let mut client = ScramClient::new(
                credentials.mechanism,
                &credentials.username,
                &credentials.password,
                &client_nonce(),
            );
            let server_first = exchange(connection, client.client_first()).await?;
            let client_final = client.client_final(&server_first)?;
            let server_final = exchange(connection, client_final).await?;
            client.verify_server_final(&server_final)
        }
    }
}

/// One SaslAuthenticate round trip: our bytes out, the broker's back.
async fn exchange(connection: &Connection, message: Vec<u8>) -> Result<Vec<u8>> {
    let response = connection
        .call(&SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)))
        .await?;
    if response.error_code != 0 {
        let reason = response
            .error_message
            .as_ref()
            .map_or("", |message| message.as_str());
        return Err(BenchError::Broker {
            error_code: response.error_code,
            context: format!("SaslAuthenticate at {}: {reason}", connection.addr()),
        });
    }
    Ok(response.auth_bytes.to_vec())
}
