//! How a connection's bytes travel: plain TCP or TLS, behind one reader and
//! one writer so that the request loop does not care which.
//!
//! - Plain TCP: the reader reads the socket; the writer has its own stream on
//!   a duplicate of the descriptor and sends through the shard's
//!   [`kernel::sendpath::Sender`] (copy, sendfile or splice of file ranges).
//! - TLS (any protocol with [`SecurityProtocol::uses_tls`], SSL and
//!   SASL_SSL): the handshake runs first ([`ListenerTls::handshake`]), then
//!   the TLS stream is split in a read half and a write half (one thread, so
//!   the halves' lock is never contended). Responses are encrypted from
//!   memory: a Fetch on a TLS connection reads its records into memory
//!   (the engine's asynchronous DMA reads, or the batch cache), never as a
//!   file range, which the writer could only read with a blocking `pread`
//!   on the shard's thread. Small chunks are gathered into one buffer so
//!   that a Fetch response's many framing pieces become a few TLS records
//!   and writes, not one each.
//!
//! [`SecurityProtocol::uses_tls`]: security::SecurityProtocol::uses_tls
//! [`ListenerTls::handshake`]: security::tls::ListenerTls::handshake

use crate::fetch_response::OutChunk;
use futures::future::{select, Either};
use futures::io::{AsyncWriteExt, BufWriter, ReadHalf, WriteHalf};
use futures_lite::io::AsyncRead;
use glommio::net::TcpStream;
use kernel::config::ClientListener;
use kernel::conn_limits::LogLimiter;
use runtimes::Shard;
use security::tls::ServerTlsStream;
use security::Principal;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Gathering buffer of a TLS writer: a TLS record's worth and more, so
/// small chunks leave together.
const TLS_GATHER_BYTES: usize = 32 << 10;

thread_local! {
    /// One line a second at most for failed handshakes (a scanner or a
    /// misconfigured client in a loop); each is still counted.
    static HANDSHAKE_LOG: LogLimiter = const { LogLimiter::new(Duration::from_secs(1)) };
}

/// A connection ready to serve Kafka frames.
pub struct Transport {
    /// Reads request bytes.
    pub reader: Reader,
    /// Writes responses.
    pub writer: Writer,
    /// The socket's descriptor, for shutdown(2) by the idle watch.
    pub fd: RawFd,
    /// The client's address, for logs.
    pub peer: String,
    /// The subject of the client's certificate (mutual TLS).
    pub principal: Option<Principal>,
}

/// The read side of a connection.
pub enum Reader {
    /// Plain TCP.
    Plain(TcpStream),
    /// The read half of a TLS stream.
    Tls(ReadHalf<ServerTlsStream>),
}

/// The write side of a connection.
pub enum Writer {
    /// Plain TCP, on a duplicate of the socket's descriptor.
    Plain(TcpStream),
    /// The write half of a TLS stream.
    Tls {
        /// Gathers small chunks in front of the TLS stream.
        out: BufWriter<WriteHalf<ServerTlsStream>>,
        /// The socket's descriptor.
        fd: RawFd,
    },
}

/// Makes the connection of a freshly accepted `stream` on `listener`: for
/// TLS, runs the handshake (bounded by its timeout and by shutdown) and
/// counts it. `None` when the connection is to be dropped; the reason is
/// logged.
///
/// This is the one place a listener's protocol chooses the transport: every
/// protocol whose `uses_tls()` is true gets TLS, with the acceptor built at
/// start in [`ClientListener::tls`].
pub async fn open(
    shard: &Rc<Shard>,
    listener: &ClientListener,
    stream: TcpStream,
    shutdown: &super::ShutdownSignal,
) -> Option<Transport> {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "TCP_NODELAY not set");
    }
    let fd = stream.as_raw_fd();
    if !listener.protocol.uses_tls() {
        // The writer needs `&TcpStream` while the reader needs `&mut`: the
        // writer gets its own stream on a duplicate of the descriptor.
        let writer = match duplicate(&stream) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot duplicate socket; closing");
                return None;
            }
        };
        return Some(Transport {
            reader: Reader::Plain(stream),
            writer: Writer::Plain(writer),
            fd,
            peer,
            principal: None,
        });
    }
    // Never a silent plaintext downgrade: a TLS listener without its
    // acceptor (a config not built by `BrokerConfig::from_args`) serves
    // nobody.
    let Some(tls) = listener.tls.as_ref() else {
        tracing::error!(listener = %listener.name, protocol = %listener.protocol, "TLS listener has no acceptor; closing");
        return None;
    };
    let outcome = {
        let handshake = tls.handshake(stream);
        futures::pin_mut!(handshake);
        match select(handshake, shutdown.clone()).await {
            Either::Left((outcome, _)) => outcome,
            Either::Right(_) => return None,
        }
    };
    match outcome {
        Ok((stream, principal)) => {
            shard.metrics.borrow_mut().tls_handshakes += 1;
            let name = principal.as_ref().map(ToString::to_string);
            tracing::debug!(%peer, listener = %listener.name, principal = name.as_deref().unwrap_or("none"), "TLS handshake done");
            let (read, write) = futures::io::AsyncReadExt::split(stream);
            Some(Transport {
                reader: Reader::Tls(read),
                writer: Writer::Tls {
                    out: BufWriter::with_capacity(TLS_GATHER_BYTES, write),
                    fd,
                },
                fd,
                peer,
                principal,
            })
        }
        Err(e) => {
            shard.metrics.borrow_mut().tls_handshake_failures += 1;
            if let Some(suppressed) = HANDSHAKE_LOG.with(|l| l.admit(Instant::now())) {
                tracing::info!(%peer, listener = %listener.name, error = %e, suppressed, "TLS handshake failed; closing");
            }
            None
        }
    }
}

impl Reader {
    /// Whether this is plain TCP (not TLS).
    pub fn is_plain(&self) -> bool {
        matches!(self, Reader::Plain(_))
    }

    /// On plain TCP, reads what the socket holds (at most `into.len()`
    /// bytes) without waiting and without the runtime's poll; `None` on
    /// TLS. `WouldBlock` when the socket is empty.
    pub fn try_recv(&mut self, into: &mut [u8]) -> Option<io::Result<usize>> {
        let Reader::Plain(stream) = self else {
            return None;
        };
        if into.is_empty() {
            return None;
        }
        // SAFETY: `into` is writable memory of `into.len()` bytes; recv(2)
        // writes at most that many there and touches nothing else.
        let received = unsafe {
            libc::recv(
                stream.as_raw_fd(),
                into.as_mut_ptr().cast(),
                into.len(),
                libc::MSG_DONTWAIT,
            )
        };
        Some(usize::try_from(received).map_err(|_| io::Error::last_os_error()))
    }

    /// Plain TCP: receives what the socket holds, without waiting, into
    /// `frame`'s spare capacity (up to `frame.len() == limit`), which needs
    /// no zeroing first. `None` on TLS (bytes must go through the TLS
    /// stream) or without spare capacity below `limit`; `WouldBlock` when
    /// nothing is there yet.
    pub fn try_recv_into_spare(
        &mut self,
        frame: &mut bytes::BytesMut,
        limit: usize,
    ) -> Option<io::Result<usize>> {
        let Reader::Plain(stream) = self else {
            return None;
        };
        let filled = frame.len();
        let spare = frame.spare_capacity_mut();
        let want = limit.saturating_sub(filled).min(spare.len());
        if want == 0 {
            // Nothing to read into (a 0-byte recv would look like EOF).
            return None;
        }
        // SAFETY: `spare` is writable memory of at least `want` bytes
        // (`MaybeUninit<u8>` has `u8`'s layout); recv(2) writes at most
        // `want` bytes there and touches nothing else.
        let received = unsafe {
            libc::recv(
                stream.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                want,
                libc::MSG_DONTWAIT,
            )
        };
        let Ok(received) = usize::try_from(received) else {
            return Some(Err(io::Error::last_os_error()));
        };
        assert!(received <= want, "recv(2) returned more than asked for");
        // SAFETY: recv(2) initialised the first `received` spare bytes.
        unsafe { frame.set_len(filled + received) };
        Some(Ok(received))
    }
}

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Reader::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Reader::Tls(half) => Pin::new(half).poll_read(cx, buf),
        }
    }
}

impl Writer {
    /// Writes one response's chunks in order. If the future is dropped
    /// before it finishes, an unknown prefix has been written: the
    /// connection must be closed.
    pub async fn send(&mut self, shard: &Shard, chunks: Vec<OutChunk>) -> io::Result<()> {
        match self {
            Writer::Plain(stream) => shard.sender.send(stream, chunks).await,
            Writer::Tls { out, .. } => {
                for chunk in chunks {
                    match chunk {
                        OutChunk::Bytes(bytes) => out.write_all(&bytes).await?,
                        OutChunk::File(slice) => {
                            // A Fetch on TLS reads into memory (see the
                            // module doc): a file range here is a bug. The
                            // connection closes rather than block the
                            // shard on a pread.
                            tracing::error!(
                                position = slice.position,
                                length = slice.length,
                                "a file range reached a TLS connection; closing it"
                            );
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "a file range cannot be sent on a TLS connection",
                            ));
                        }
                    }
                }
                out.flush().await
            }
        }
    }

    /// Shuts both directions so the reader, blocked in a read, sees
    /// end-of-file.
    pub fn close(&self) {
        let fd = match self {
            Writer::Plain(stream) => stream.as_raw_fd(),
            Writer::Tls { fd, .. } => *fd,
        };
        // SAFETY: shutdown(2) on the connection's descriptor, open while
        // this writer (which holds the stream or half of it) lives.
        unsafe {
            libc::shutdown(fd, libc::SHUT_RDWR);
        }
    }
}

fn duplicate(stream: &TcpStream) -> io::Result<TcpStream> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor `stream` owns; it returns
    // a new descriptor (or -1) and touches no memory.
    let fd = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created by us and is owned by nothing else.
    Ok(unsafe { TcpStream::from_raw_fd(fd) })
}
