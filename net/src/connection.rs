//! One client connection, served on the shard that accepted it.
//!
//! A reader takes frames off the socket and starts each request as its own
//! task, so several requests of one connection are in progress at once; the
//! tasks go into a bounded queue (`rill.max.in.flight.requests.per.connection`)
//! whose fullness stops the reader — backpressure without a counter. A writer
//! awaits the tasks in queue order, so responses leave in request order as
//! Kafka requires, and sends every response through the shard's
//! [`crate::sendpath::Sender`] (the only writer of this socket).
//!
//! Bad input never panics: an impossible length, a truncated frame, an unknown
//! API key or a body that does not decode closes this connection with a log
//! line; an unsupported ApiVersions version gets Kafka's v0 error answer.

use crate::error::{FrameError, RequestError};
use crate::fetch_response::OutChunk;
use crate::frame::{bytes_missing, decode_header, peek_header, try_split_frame};
use crate::handlers::{self, api_versions, Request, Response};
use crate::shard::Shard;
use bytes::{Bytes, BytesMut};
use futures::channel::oneshot;
use futures::future::{select, Either, Shared};
use futures_lite::io::AsyncRead;
use glommio::net::TcpStream;
use glommio::task::JoinHandle;
use kafka_protocol::messages::ApiKey;
use std::os::fd::{AsRawFd, FromRawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

/// Smallest read into the connection buffer.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Resolves when the broker shuts down.
pub type ShutdownSignal = Shared<oneshot::Receiver<()>>;

/// A request in the queue between reader and writer.
struct Pending {
    api_key: i16,
    request_bytes: usize,
    received: Instant,
    work: Work,
}

enum Work {
    /// Answer known at once (ApiVersions error).
    Ready(Bytes),
    /// Handler running as its own task.
    Running(JoinHandle<Result<Response, RequestError>>),
}

/// Serves one connection until the peer closes, bad input, or shutdown.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, shutdown: ShutdownSignal) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "TCP_NODELAY not set");
    }
    // The writer needs `&TcpStream` while the reader needs `&mut`: the writer
    // gets its own stream on a duplicate of the socket's descriptor.
    let writer_stream = match duplicate(&stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot duplicate socket; closing");
            return;
        }
    };
    let (queue, pending) =
        glommio::channels::local_channel::new_bounded(shard.config.max_in_flight_per_connection);
    let writer = glommio::spawn_local(write_responses(
        shard.clone(),
        writer_stream,
        pending,
        peer.clone(),
    ));
    read_requests(&shard, stream, queue, shutdown, &peer).await;
    writer.await;
}

fn duplicate(stream: &TcpStream) -> std::io::Result<TcpStream> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor `stream` owns; it returns
    // a new descriptor (or -1) and touches no memory.
    let fd = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created by us and is owned by nothing else.
    Ok(unsafe { TcpStream::from_raw_fd(fd) })
}

async fn read_requests(
    shard: &Rc<Shard>,
    mut stream: TcpStream,
    queue: glommio::channels::local_channel::LocalSender<Pending>,
    shutdown: ShutdownSignal,
    peer: &str,
) {
    let max_bytes = shard.config.socket_request_max_bytes;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    loop {
        let frame = match try_split_frame(&mut buf, max_bytes) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                let want = bytes_missing(&buf).max(READ_CHUNK_BYTES);
                let start = buf.len();
                buf.resize(start + want, 0);
                let outcome = {
                    let read = read_some(&mut stream, &mut buf[start..]);
                    futures::pin_mut!(read);
                    match select(read, shutdown.clone()).await {
                        Either::Left((outcome, _)) => Some(outcome),
                        Either::Right(_) => None,
                    }
                };
                let Some(outcome) = outcome else {
                    buf.truncate(start);
                    break;
                };
                match outcome {
                    Ok(0) => {
                        buf.truncate(start);
                        if !buf.is_empty() {
                            let e = FrameError::Truncated {
                                have: buf.len(),
                                want: buf.len() + bytes_missing(&buf),
                            };
                            log_protocol_error(shard, peer, &e.to_string());
                        }
                        break;
                    }
                    Ok(n) => buf.truncate(start + n),
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "read failed; closing");
                        break;
                    }
                }
                continue;
            }
            Err(e) => {
                log_protocol_error(shard, peer, &e.to_string());
                break;
            }
        };
        let pending = match dispatch(shard, frame) {
            Ok(pending) => pending,
            Err(reason) => {
                log_protocol_error(shard, peer, &reason);
                break;
            }
        };
        if queue.send(pending).await.is_err() {
            // The writer stopped (socket error or a request that must close us).
            break;
        }
    }
    // Dropping `queue` lets the writer finish what is in flight, then stop.
}

async fn read_some(stream: &mut TcpStream, into: &mut [u8]) -> std::io::Result<usize> {
    futures_lite::future::poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, into)).await
}

fn log_protocol_error(shard: &Shard, peer: &str, reason: &str) {
    shard.metrics.borrow_mut().protocol_errors += 1;
    tracing::warn!(%peer, shard = shard.id, %reason, "bad request; closing connection");
}

/// Turns a frame into queued work, or the reason to close the connection.
fn dispatch(shard: &Rc<Shard>, mut frame: Bytes) -> Result<Pending, String> {
    let received = Instant::now();
    let request_bytes = frame.len() + 4;
    let prefix = peek_header(&frame).map_err(|e| e.to_string())?;
    let handler = handlers::find(prefix.api_key)
        .ok_or_else(|| format!("unknown API key {}", prefix.api_key))?;
    // Which versions clients send (`RUST_LOG=rill_net::connection=debug`).
    tracing::debug!(
        api = handlers::api_name(handler.api_key),
        version = prefix.api_version,
        "request"
    );
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
    let request = Request {
        api_key: handler.api_key,
        version: prefix.api_version,
        header,
        body: frame,
        received,
    };
    let task = glommio::spawn_local((handler.handle)(shard.clone(), request)).detach();
    Ok(Pending {
        api_key: prefix.api_key,
        request_bytes,
        received,
        work: Work::Running(task),
    })
}

async fn write_responses(
    shard: Rc<Shard>,
    stream: TcpStream,
    pending: glommio::channels::local_channel::LocalReceiver<Pending>,
    peer: String,
) {
    while let Some(item) = pending.recv().await {
        let Pending {
            api_key,
            request_bytes,
            received,
            work,
        } = item;
        let done = Done {
            api_key,
            request_bytes,
            received,
        };
        let outcome = match work {
            Work::Ready(frame) => Ok(Response::Chunks(vec![OutChunk::Bytes(frame)])),
            Work::Running(task) => task.await.unwrap_or(Err(RequestError::ShardGone(shard.id))),
        };
        let chunks = match outcome {
            Ok(Response::Chunks(chunks)) => chunks,
            Ok(Response::Nothing) => {
                record(&shard, &done, 0);
                continue;
            }
            Err(e) => {
                log_protocol_error(&shard, &peer, &e.to_string());
                close(&stream);
                break;
            }
        };
        let response_bytes: usize = chunks.iter().map(chunk_len).sum();
        if let Err(e) = shard.sender.send(&stream, chunks).await {
            tracing::debug!(%peer, error = %e, "write failed; closing");
            close(&stream);
            break;
        }
        record(&shard, &done, response_bytes);
    }
    // Anything still queued is dropped: its tasks were detached and finish on
    // their own, their responses have nowhere to go.
}

fn chunk_len(chunk: &OutChunk) -> usize {
    match chunk {
        OutChunk::Bytes(bytes) => bytes.len(),
        OutChunk::File(slice) => slice.length,
    }
}

/// What the metrics need of a request once its work is taken.
struct Done {
    api_key: i16,
    request_bytes: usize,
    received: Instant,
}

fn record(shard: &Shard, item: &Done, response_bytes: usize) {
    let mut metrics = shard.metrics.borrow_mut();
    metrics.record_request(item.api_key, item.request_bytes, response_bytes);
    metrics.record_latency(item.api_key, item.received.elapsed().as_micros() as u64);
}

/// Shuts both directions so the reader, blocked in a read, sees end-of-file.
fn close(stream: &TcpStream) {
    // SAFETY: shutdown(2) on a descriptor `stream` owns; touches no memory.
    unsafe {
        libc::shutdown(stream.as_raw_fd(), libc::SHUT_RDWR);
    }
}
