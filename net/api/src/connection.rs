//! One client connection, served on the shard that accepted it.
//!
//! A reader takes frames off the socket and starts each request as its own
//! task, so several requests of one connection are in progress at once; the
//! tasks go into a bounded queue (`rill.max.in.flight.requests.per.connection`)
//! whose fullness stops the reader — backpressure without a counter. A writer
//! awaits the tasks in queue order, so responses leave in request order as
//! Kafka requires, and sends every response through the connection's
//! [`transport::Writer`] (the only writer of this socket): the shard's
//! [`kernel::sendpath::Sender`] on plain TCP, rustls on TLS.
//!
//! - [`transport`]: plain TCP or TLS (the handshake, and the read and write
//!   sides of each).
//!
//! Bad input never panics: an impossible length, a truncated frame, an unknown
//! API key or a body that does not decode closes this connection with a log
//! line; an unsupported ApiVersions version gets Kafka's v0 error answer.

use crate::frame::{
    announced_length, bytes_missing, decode_header, peek_header, try_split_frame,
    LENGTH_PREFIX_BYTES,
};
use crate::handlers::{self, api_versions, Request, Response};
use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use futures::future::{select, Either, Shared};
use futures_lite::io::AsyncRead;
use glommio::sync::StaticPermit;
use glommio::task::JoinHandle;
use kafka_protocol::messages::ApiKey;
use kernel::conn_limits::{LogLimiter, RequestBytes};
use kernel::error::{FrameError, RequestError};
use runtimes::quotas::{self, QuotaKind};
use runtimes::Shard;
use security::Session;
use std::cell::Cell;
use std::pin::Pin;
use transport::{Reader, Transport, Writer};

mod responses;
mod scatter;
pub mod transport;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Smallest read into the connection buffer.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Smallest read of a connection that has not yet filled one: an idle or
/// unauthenticated connection holds 4 KiB rather than 64 KiB (10,000 of
/// them: 40 MiB, not 640 MiB); the first read that fills it moves the
/// connection to [`READ_CHUNK_BYTES`].
const FIRST_READ_CHUNK_BYTES: usize = 4 << 10;

/// Smallest frame read into a buffer of its own rather than the
/// connection's: its bytes go from the socket straight to where the request
/// (and, for a Produce, the log) keeps them, not zeroed first on plain
/// TCP (see `read_rest`), never moved by a growing read buffer, and the
/// frame shares its allocation with nothing (see
/// `handlers::produce::own_payloads`).
const OWN_BUFFER_FRAME_BYTES: usize = handlers::produce::OWNED_FRAME_MIN_BYTES;
/// Largest read of a large frame's rest that waits through the runtime
/// (its piece of the frame is zeroed first; reads that find bytes in the
/// socket fill the frame without zeroing).
const WAIT_READ_BYTES: usize = 64 << 10;

/// A request frame as read.
struct Frame {
    /// Its bytes, without the length prefix.
    body: Bytes,
    /// A Produce request read apart (`scatter`): each partition's records
    /// in request order (`None` where null), whose fields `body` holds
    /// empty. Empty for any other frame.
    records: Vec<Option<BytesMut>>,
    /// Its size on the wire, length prefix included.
    wire_bytes: usize,
}

impl Frame {
    fn whole(body: Bytes) -> Frame {
        let wire_bytes = body.len() + LENGTH_PREFIX_BYTES;
        Frame {
            body,
            records: Vec::new(),
            wire_bytes,
        }
    }
}

/// Resolves when the broker shuts down.
pub type ShutdownSignal = Shared<oneshot::Receiver<()>>;

/// A request in the queue between reader and writer.
struct Pending {
    api_key: i16,
    request_bytes: usize,
    received: Instant,
    work: Work,
    /// The request's bytes in the shard's and the connection's budgets
    /// (`queued.max.request.bytes`), given back when its answer has left.
    held: Held,
}

/// One connection's share of its shard's read-buffer bytes
/// (`Shard::read_buffer_bytes`): follows its buffer's capacity and gives it
/// back when the connection ends.
struct ReadBufferAccount {
    shard: Rc<Cell<u64>>,
    held: u64,
}

impl ReadBufferAccount {
    fn set(&mut self, capacity: usize) {
        let total = &self.shard;
        total.set(total.get() - self.held + capacity as u64);
        self.held = capacity as u64;
    }
}

impl Drop for ReadBufferAccount {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// Budget permits a request holds (none where unlimited).
type Held = (Option<StaticPermit>, Option<StaticPermit>);

enum Work {
    /// Answer known at once (ApiVersions error).
    Ready(Bytes),
    /// Handler running as its own task.
    Running(JoinHandle<Result<Response, RequestError>>),
}

/// What the idle watch knows of a connection (shard-local).
struct Activity {
    /// When a request last arrived or a response last left.
    last: Cell<Instant>,
    /// Requests read and not yet answered: a connection waiting on one
    /// (a long poll, a rebalance) is not idle.
    in_flight: Cell<usize>,
    /// The connection is over; its descriptor may be gone.
    ended: Cell<bool>,
}

impl Activity {
    fn touch(&self) {
        self.last.set(Instant::now());
    }
}

/// Closes the connection once nothing has happened on it for `max_idle`
/// (`connections.max.idle.ms`): a timer per connection, not per read, so
/// the request path pays only a clock read.
async fn watch_idle(
    activity: Rc<Activity>,
    fd: std::os::fd::RawFd,
    max_idle: Duration,
    peer: String,
) {
    loop {
        let since = activity.last.get().elapsed();
        glommio::timer::sleep(max_idle.saturating_sub(since).max(Duration::from_millis(1))).await;
        if activity.ended.get() {
            return;
        }
        if activity.in_flight.get() == 0 && activity.last.get().elapsed() >= max_idle {
            tracing::debug!(%peer, ?max_idle, "idle past connections.max.idle.ms; closing");
            // SAFETY: shutdown(2) on the connection's descriptor, which is
            // still open: `serve` owns the stream and sets `ended` before
            // dropping it, and nothing awaits between that check and this.
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
            return;
        }
    }
}

/// Closes a SASL listener's connection that has not authenticated within
/// `timeout` (`rill.sasl.handshake.timeout.ms`): an unauthenticated client
/// may hold a socket only that long, whatever it sends.
async fn watch_handshake(
    activity: Rc<Activity>,
    session: Rc<Session>,
    fd: std::os::fd::RawFd,
    timeout: Duration,
    peer: String,
) {
    glommio::timer::sleep(timeout).await;
    if activity.ended.get() || session.is_authenticated() {
        return;
    }
    tracing::debug!(%peer, ?timeout, "not authenticated within rill.sasl.handshake.timeout.ms; closing");
    // SAFETY: as in `watch_idle`: the descriptor is still open, `serve`
    // sets `ended` before dropping the stream and nothing awaits between
    // that check and this call.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// Serves one connection until the peer closes, bad input, idleness
/// (`connections.max.idle.ms`) or shutdown.
pub async fn serve(
    shard: Rc<Shard>,
    transport: Transport,
    session: Rc<Session>,
    shutdown: ShutdownSignal,
) {
    let Transport {
        reader: mut stream,
        writer: writer_stream,
        fd,
        peer,
        principal: _,
    } = transport;
    let activity = Rc::new(Activity {
        last: Cell::new(Instant::now()),
        in_flight: Cell::new(0),
        ended: Cell::new(false),
    });
    let watcher = glommio::spawn_local(watch_idle(
        activity.clone(),
        fd,
        shard.config.connection_limits.max_idle(),
        peer.clone(),
    ))
    .detach();
    let handshake_watch = session.protocol.uses_sasl().then(|| {
        glommio::spawn_local(watch_handshake(
            activity.clone(),
            session.clone(),
            fd,
            Duration::from_millis(shard.config.sasl.handshake_timeout_ms),
            peer.clone(),
        ))
        .detach()
    });
    let (queue, pending) =
        glommio::channels::local_channel::new_bounded(shard.config.max_in_flight_per_connection);
    let writer = glommio::spawn_local(responses::write_responses(
        shard.clone(),
        writer_stream,
        pending,
        peer.clone(),
        activity.clone(),
    ));
    read_requests(
        &shard,
        &mut stream,
        queue,
        shutdown,
        &session,
        &peer,
        &activity,
    )
    .await;
    writer.await;
    activity.ended.set(true);
    // The share sessions this connection opened end with it (KIP-932).
    if !shard.runtime().share.sessions.borrow().is_empty() {
        runtimes::share_runtime::connection_closed(&shard, Rc::as_ptr(&session) as usize).await;
    }
    watcher.cancel();
    if let Some(handshake_watch) = handshake_watch {
        handshake_watch.cancel();
    }
    drop(stream);
}

async fn read_requests(
    shard: &Rc<Shard>,
    stream: &mut Reader,
    queue: glommio::channels::local_channel::LocalSender<Pending>,
    shutdown: ShutdownSignal,
    session: &Rc<Session>,
    peer: &str,
    activity: &Activity,
) {
    let frame_max_bytes = shard.config.socket_request_max_bytes;
    let budgets = RequestBudgets {
        shard: shard.request_bytes.clone(),
        connection: RequestBytes::new(
            shard
                .config
                .connection_limits
                .queued_max_request_bytes_per_connection,
        ),
    };
    let mut reader = FrameReader {
        shard,
        stream,
        shutdown: &shutdown,
        peer,
        activity,
        session,
        frame_max_bytes,
        chunk_bytes: FIRST_READ_CHUNK_BYTES,
        next_fill_most_bytes: usize::MAX,
        buf: BytesMut::new(),
        room: BytesMut::zeroed(FIRST_READ_CHUNK_BYTES),
        account: ReadBufferAccount {
            shard: shard.read_buffer_bytes.clone(),
            held: 0,
        },
    };
    while let Some(frame) = reader.next_frame().await {
        if !wait_out_mute(session, &shutdown).await {
            break;
        }
        let frame_bytes = frame.wire_bytes;
        let Some(held) = budgets.admit(frame_bytes, &shutdown).await else {
            break;
        };
        let pending = match dispatch(shard, session, frame) {
            Ok(mut pending) => {
                pending.held = held;
                pending
            }
            Err(reason) => {
                log_protocol_error(shard, peer, &reason);
                break;
            }
        };
        activity.in_flight.set(activity.in_flight.get() + 1);
        if queue.send(pending).await.is_err() {
            // The writer stopped (socket error or a request that must close us).
            break;
        }
    }
    // Dropping `queue` lets the writer finish what is in flight, then stop.
}

/// The read side of one connection: its socket, the bytes read and not yet
/// cut into frames, and what reading needs to stop well (the log, the
/// shutdown signal, the idle watch).
struct FrameReader<'a> {
    shard: &'a Shard,
    stream: &'a mut Reader,
    shutdown: &'a ShutdownSignal,
    peer: &'a str,
    activity: &'a Activity,
    /// Whether the connection still has to authenticate.
    session: &'a Rc<Session>,
    /// Largest frame accepted (`socket.request.max.bytes`).
    frame_max_bytes: usize,
    /// Size of the next region read into: [`FIRST_READ_CHUNK_BYTES`] until
    /// a read fills one, then [`READ_CHUNK_BYTES`].
    chunk_bytes: usize,
    /// Most bytes the next [`FrameReader::fill`] takes: small right after a
    /// Produce frame read apart (`scatter`), so that the read meeting the
    /// next frame's length prefix brings little of its records along, and
    /// a large Produce behind it is read apart too rather than copied out
    /// of this buffer.
    next_fill_most_bytes: usize,
    // `buf`: bytes read and not yet cut into frames. `room`: zeroed bytes
    // right after them in the same allocation, where reads go; each byte
    // is zeroed once, not before every read, and a read's bytes join `buf`
    // without a copy (`unsplit` of adjacent parts).
    buf: BytesMut,
    room: BytesMut,
    account: ReadBufferAccount,
}

impl FrameReader<'_> {
    /// The largest frame accepted now: `sasl.server.max.receive.size` on a
    /// SASL listener until the connection authenticates (Kafka's guard: an
    /// unauthenticated peer cannot make the broker buffer 100 MB), else
    /// `socket.request.max.bytes`.
    fn frame_limit(&self) -> usize {
        if self.session.protocol.uses_sasl() && !self.session.is_authenticated() {
            let sasl_max = self.shard.config.sasl.server_max_receive_bytes;
            return self.frame_max_bytes.min(sasl_max);
        }
        self.frame_max_bytes
    }

    /// The next whole frame (without its length prefix), or `None` once the
    /// connection must close: the peer closed, a bad or truncated frame, a
    /// failed read, or shutdown.
    async fn next_frame(&mut self) -> Option<Frame> {
        loop {
            self.account.set(self.buf.capacity() + self.room.capacity());
            let limit = self.frame_limit();
            match try_split_frame(&mut self.buf, limit) {
                Ok(Some(frame)) => return Some(Frame::whole(frame)),
                Ok(None) => {}
                Err(e) => {
                    log_protocol_error(self.shard, self.peer, &e.to_string());
                    return None;
                }
            }
            if let Some(length) =
                announced_length(&self.buf).filter(|&l| l >= OWN_BUFFER_FRAME_BYTES)
            {
                if let Some(version) = self.scattered_version(length) {
                    return self.read_scattered(length, version).await;
                }
                return self.read_large_frame(length).await.map(Frame::whole);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// Reads the frame of `length` bytes announced at the front of the
    /// buffer into a buffer of its own; `None` when the connection must
    /// close.
    async fn read_large_frame(&mut self, length: usize) -> Option<Bytes> {
        // A large frame: the rest of it is read into its own
        // buffer (what the read buffer has of it moves once).
        let mut frame = BytesMut::with_capacity(length);
        frame.extend_from_slice(&self.buf[LENGTH_PREFIX_BYTES..]);
        self.buf.clear();
        self.account.set(self.buf.capacity() + length);
        self.chunk_bytes = READ_CHUNK_BYTES;
        match read_rest(
            self.stream,
            &mut frame,
            length,
            self.shutdown,
            self.activity,
        )
        .await
        {
            RestOfFrame::Complete => Some(frame.freeze()),
            RestOfFrame::Closed(filled) => {
                let e = FrameError::Truncated {
                    have: LENGTH_PREFIX_BYTES + filled,
                    want: LENGTH_PREFIX_BYTES + length,
                };
                log_protocol_error(self.shard, self.peer, &e.to_string());
                None
            }
            RestOfFrame::Stopped => None,
        }
    }

    /// One read from the socket into `room`, its bytes joining `buf`
    /// (moving to a fresh region first when too little room is left).
    /// `false` when the connection must close: the peer closed, the read
    /// failed, or shutdown.
    async fn fill(&mut self) -> bool {
        let missing = bytes_missing(&self.buf);
        if self.room.len() < missing.max(self.chunk_bytes / 4) {
            new_region(&mut self.buf, &mut self.room, missing.max(self.chunk_bytes));
            self.account.set(self.buf.capacity() + self.room.capacity());
        }
        let offered = self.room.len().min(self.next_fill_most_bytes);
        self.next_fill_most_bytes = usize::MAX;
        let outcome = {
            let read = read_some(self.stream, &mut self.room[..offered]);
            futures::pin_mut!(read);
            match select(read, self.shutdown.clone()).await {
                Either::Left((outcome, _)) => outcome,
                Either::Right(_) => return false,
            }
        };
        let expected = (!self.buf.is_empty()).then(|| bytes_missing(&self.buf));
        let Some(n) = self.landed(outcome, expected) else {
            return false;
        };
        if n == offered {
            self.chunk_bytes = READ_CHUNK_BYTES;
        }
        true
    }

    /// A read into the front of `room`: its bytes join `buf`. `None` when
    /// the connection must close: the read failed, or the peer closed,
    /// logged as a truncated frame when `expected` more bytes were due.
    fn landed(
        &mut self,
        outcome: std::io::Result<usize>,
        expected: Option<usize>,
    ) -> Option<usize> {
        match outcome {
            Ok(0) => {
                if let Some(missing) = expected {
                    let e = FrameError::Truncated {
                        have: self.buf.len(),
                        want: self.buf.len() + missing,
                    };
                    log_protocol_error(self.shard, self.peer, &e.to_string());
                }
                None
            }
            Ok(n) => {
                self.activity.touch();
                self.buf.unsplit(self.room.split_to(n));
                Some(n)
            }
            Err(e) => {
                tracing::debug!(peer = %self.peer, error = %e, "read failed; closing");
                None
            }
        }
    }
}

/// A client over its quota reads nothing more until its throttle ends
/// (KIP-219); its response already left with the throttle time. `false`
/// when the broker shut down meanwhile.
async fn wait_out_mute(session: &Session, shutdown: &ShutdownSignal) -> bool {
    if let Some(wait) = session.take_mute() {
        let pause = glommio::timer::sleep(wait);
        futures::pin_mut!(pause);
        if let Either::Right(_) = select(pause, shutdown.clone()).await {
            return false;
        }
    }
    true
}

/// The budgets of unanswered request bytes (`queued.max.request.bytes`)
/// that a connection's requests hold until answered.
struct RequestBudgets {
    /// This shard's share.
    shard: Rc<RequestBytes>,
    /// This connection's own.
    connection: RequestBytes,
}

impl RequestBudgets {
    /// Waits for room in the connection's, then the shard's, budget for a
    /// frame of `frame_bytes`; `None` when the broker shut down meanwhile.
    async fn admit(&self, frame_bytes: usize, shutdown: &ShutdownSignal) -> Option<Held> {
        let take = async {
            let own = self.connection.take(frame_bytes).await;
            let shared = self.shard.take(frame_bytes).await;
            (shared, own)
        };
        futures::pin_mut!(take);
        match select(take, shutdown.clone()).await {
            Either::Left((held, _)) => Some(held),
            Either::Right(_) => None,
        }
    }
}

/// Moves the read buffer to a fresh allocation: what `buf` holds (part of
/// a frame, or nothing) is copied to its front, and `room` becomes `size`
/// zeroed bytes after it. The old allocation stays with the frames cut
/// from it until they are answered.
fn new_region(buf: &mut BytesMut, room: &mut BytesMut, size: usize) {
    let held = buf.len();
    let mut fresh = BytesMut::with_capacity(held + size);
    fresh.extend_from_slice(buf);
    fresh.resize(held + size, 0);
    *room = fresh.split_off(held);
    *buf = fresh;
}

/// How reading the rest of a large frame ended.
enum RestOfFrame {
    /// The frame is whole.
    Complete,
    /// The peer closed the connection with this many bytes of the frame read.
    Closed(usize),
    /// A read failed, or the broker is shutting down.
    Stopped,
}

/// Reads into `frame` until it holds `length` bytes. On plain TCP, the
/// bytes already in the socket go straight into the frame's unused
/// capacity (no zeroing of the frame first, and no poll armed per partial
/// read); only when the socket is empty does it wait through the runtime,
/// reading into a zeroed piece of at most [`WAIT_READ_BYTES`].
async fn read_rest(
    stream: &mut Reader,
    frame: &mut BytesMut,
    length: usize,
    shutdown: &ShutdownSignal,
    activity: &Activity,
) -> RestOfFrame {
    while frame.len() < length {
        match stream.try_recv_into_spare(frame, length) {
            Some(Ok(0)) => return RestOfFrame::Closed(frame.len()),
            Some(Ok(_)) => {
                activity.touch();
                continue;
            }
            Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Some(Err(e)) if e.kind() != std::io::ErrorKind::WouldBlock => {
                tracing::debug!(error = %e, "read failed; closing");
                return RestOfFrame::Stopped;
            }
            // Nothing there yet, or TLS: wait for bytes below.
            Some(Err(_)) | None => {}
        }
        let filled = frame.len();
        frame.resize(filled + (length - filled).min(WAIT_READ_BYTES), 0);
        let outcome = {
            let read = read_some(stream, &mut frame[filled..]);
            futures::pin_mut!(read);
            match select(read, shutdown.clone()).await {
                Either::Left((outcome, _)) => outcome,
                Either::Right(_) => return RestOfFrame::Stopped,
            }
        };
        match outcome {
            Ok(0) => return RestOfFrame::Closed(filled),
            Ok(n) => {
                activity.touch();
                frame.truncate(filled + n);
            }
            Err(e) => {
                tracing::debug!(error = %e, "read failed; closing");
                return RestOfFrame::Stopped;
            }
        }
    }
    RestOfFrame::Complete
}

async fn read_some(stream: &mut Reader, into: &mut [u8]) -> std::io::Result<usize> {
    futures_lite::future::poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, into)).await
}

thread_local! {
    /// One line a second at most for bad requests: a flood of malformed
    /// frames must not flood the log (each is still counted in
    /// `rill_protocol_errors_total`).
    static PROTOCOL_ERROR_LOG: LogLimiter = const { LogLimiter::new(Duration::from_secs(1)) };
}

fn log_protocol_error(shard: &Shard, peer: &str, reason: &str) {
    shard.metrics.borrow_mut().protocol_errors += 1;
    if let Some(suppressed) = PROTOCOL_ERROR_LOG.with(|l| l.admit(Instant::now())) {
        tracing::warn!(%peer, shard = shard.id, %reason, suppressed, "bad request; closing connection");
    }
}

/// Turns a frame into queued work, or the reason to close the connection.
fn dispatch(shard: &Rc<Shard>, session: &Rc<Session>, frame: Frame) -> Result<Pending, String> {
    let received = Instant::now();
    let request_bytes = frame.wire_bytes;
    let (mut frame, scattered_records) = (frame.body, frame.records);
    let prefix = peek_header(&frame).map_err(|e| e.to_string())?;
    let handler = handlers::find(prefix.api_key)
        .ok_or_else(|| format!("unknown API key {}", prefix.api_key))?;
    // Which versions clients send (`RUST_LOG=api::connection=debug`).
    tracing::debug!(
        api = handlers::api_name(handler.api_key),
        version = prefix.api_version,
        "request"
    );
    if let Some(reason) = sasl_gate(session, handler.api_key, received) {
        return Err(reason);
    }
    let supported =
        handler.min_version <= prefix.api_version && prefix.api_version <= handler.max_version;
    if !supported {
        if handler.api_key == ApiKey::ApiVersions {
            let answer = api_versions::unsupported_version_frame(prefix.correlation_id)?;
            return Ok(Pending {
                api_key: prefix.api_key,
                request_bytes,
                received,
                work: Work::Ready(answer),
                held: (None, None),
            });
        }
        return Err(format!(
            "{} v{} not supported (v{}-v{})",
            handlers::api_name(handler.api_key),
            prefix.api_version,
            handler.min_version,
            handler.max_version
        ));
    }
    let header = decode_header(handler.api_key, prefix.api_version, &mut frame)
        .map_err(|e| e.to_string())?;
    // A produce quota is counted as requests are read, one after another,
    // as Kafka counts them: a pipelining client cannot slip a burst of
    // requests past the throttle that the first of them earned. Requests
    // read after this one wait out the throttle (see `read_requests`).
    let quota_throttle_ms = if handler.api_key == ApiKey::Produce {
        let client_id = header.client_id.as_deref().unwrap_or("");
        quotas::enforce::record(shard, session, client_id, QuotaKind::Produce, request_bytes)
    } else {
        0
    };
    let request = Request {
        api_key: handler.api_key,
        version: prefix.api_version,
        header,
        body: frame,
        scattered_records,
        received,
        session: session.clone(),
        quota_throttle_ms,
    };
    let task = glommio::spawn_local((handler.handle)(shard.clone(), request)).detach();
    Ok(Pending {
        api_key: prefix.api_key,
        request_bytes,
        received,
        work: Work::Running(task),
        held: (None, None),
    })
}

/// On a SASL listener, only ApiVersions, SaslHandshake and SaslAuthenticate
/// are served before authentication, and after the session's lifetime
/// (`connections.max.reauth.ms`) until a re-authentication; anything else
/// closes the connection, as Kafka does. `Some(reason)` to close.
fn sasl_gate(session: &Session, api_key: ApiKey, now: Instant) -> Option<String> {
    if !session.protocol.uses_sasl()
        || matches!(
            api_key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        )
    {
        return None;
    }
    if !session.is_authenticated() {
        return Some(format!(
            "{} before SASL authentication on listener {}",
            handlers::api_name(api_key),
            session.listener
        ));
    }
    session.is_expired(now).then(|| {
        format!(
            "{} after the SASL session expired (connections.max.reauth.ms) without re-authentication",
            handlers::api_name(api_key)
        )
    })
}
