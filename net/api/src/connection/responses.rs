//! The connection's writer: answers in request order, those already known
//! sent together.
//!
//! A pipelining producer has dozens of requests in flight, and one
//! fdatasync completes all of those it covers at once. Each answer sent
//! on its own cost a `sendmsg`, a pass through the TCP stack and a
//! wake-up of the client: under `rill-bench`'s two producers 0.9 sends
//! per Produce request. The writer now waits for the oldest answer only;
//! the ones queued behind it whose handlers have already finished go out
//! in the same send.

use super::{log_protocol_error, Activity, Held, Pending, Work, Writer};
use crate::fetch_response::OutChunk;
use crate::handlers::Response;
use futures_lite::future::poll_once;
use glommio::channels::local_channel::LocalReceiver;
use kernel::error::RequestError;
use runtimes::Shard;
use std::rc::Rc;
use std::time::Instant;

/// Answers gathered into one send stop growing past this many bytes (a
/// fetch answer's file ranges count at their length).
const GATHERED_MAX_BYTES: usize = 256 << 10;

/// Sends the answers to the requests `pending` brings, in their order,
/// until the connection or the queue ends.
pub(super) async fn write_responses(
    shard: Rc<Shard>,
    mut stream: Writer,
    pending: LocalReceiver<Pending>,
    peer: String,
    activity: Rc<Activity>,
) {
    // A request taken off the queue whose answer was not ready yet.
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match pending.recv().await {
                Some(item) => dequeued(&activity, item),
                None => break,
            },
        };
        let mut gathered = Gathered::default();
        let Pending {
            api_key,
            request_bytes,
            received,
            work,
            held,
        } = first;
        let done = Done {
            api_key,
            request_bytes,
            received,
        };
        gathered.add(&shard, &peer, (done, held), answer(&shard, work).await);
        carried = gather_answered(&shard, &peer, &pending, &activity, &mut gathered).await;
        if !gathered.send(&shard, &mut stream, &peer).await {
            break;
        }
    }
    // Anything still queued is dropped: its tasks were detached and finish on
    // their own, their responses have nowhere to go.
}

/// Adds to `gathered` the queued requests whose answers are known now,
/// in order; returns the first one still being worked on.
async fn gather_answered(
    shard: &Shard,
    peer: &str,
    pending: &LocalReceiver<Pending>,
    activity: &Activity,
    gathered: &mut Gathered,
) -> Option<Pending> {
    while !gathered.close_after && gathered.bytes < GATHERED_MAX_BYTES {
        let Some(Some(item)) = poll_once(pending.recv()).await else {
            return None;
        };
        let mut item = dequeued(activity, item);
        let Some(outcome) = answer_now(shard, &mut item.work).await else {
            return Some(item);
        };
        let done = Done {
            api_key: item.api_key,
            request_bytes: item.request_bytes,
            received: item.received,
        };
        gathered.add(shard, peer, (done, item.held), outcome);
    }
    None
}

/// A request taken off the queue: no longer in flight.
fn dequeued(activity: &Activity, item: Pending) -> Pending {
    activity
        .in_flight
        .set(activity.in_flight.get().saturating_sub(1));
    activity.touch();
    item
}

/// The answer to `work`, waited for.
async fn answer(shard: &Shard, work: Work) -> Result<Response, RequestError> {
    match work {
        Work::Ready(frame) => Ok(Response::Chunks(vec![OutChunk::Bytes(frame)])),
        Work::Running(task) => task.await.unwrap_or(Err(RequestError::ShardGone(shard.id))),
    }
}

/// The answer to `work` if its handler has finished; `None` leaves the
/// task running, to be waited for later.
async fn answer_now(shard: &Shard, work: &mut Work) -> Option<Result<Response, RequestError>> {
    match work {
        Work::Ready(frame) => Some(Ok(Response::Chunks(vec![OutChunk::Bytes(frame.clone())]))),
        Work::Running(task) => poll_once(task)
            .await
            .map(|result| result.unwrap_or(Err(RequestError::ShardGone(shard.id)))),
    }
}

/// Answers for one send, with what each request holds until its answer
/// has left.
#[derive(Default)]
struct Gathered {
    chunks: Vec<OutChunk>,
    bytes: usize,
    /// For the metrics, once sent: each answer and its size.
    answered: Vec<(Done, usize)>,
    /// The requests' budget permits, given back after the send.
    held: Vec<Held>,
    /// The connection closes after these chunks (an answer asked for it,
    /// or a request failed: the answers before it still go out).
    close_after: bool,
}

impl Gathered {
    fn add(
        &mut self,
        shard: &Shard,
        peer: &str,
        (done, held): (Done, Held),
        outcome: Result<Response, RequestError>,
    ) {
        self.held.push(held);
        let chunks = match outcome {
            Ok(Response::Chunks(chunks)) => chunks,
            Ok(Response::ChunksThenClose(chunks)) => {
                self.close_after = true;
                chunks
            }
            Ok(Response::Nothing) => {
                record(shard, &done, 0);
                return;
            }
            Err(e) => {
                log_protocol_error(shard, peer, &e.to_string());
                self.close_after = true;
                return;
            }
        };
        let response_bytes: usize = chunks.iter().map(chunk_len).sum();
        self.bytes += response_bytes;
        self.chunks.extend(chunks);
        self.answered.push((done, response_bytes));
    }

    /// Sends what was gathered; false once the connection is closed.
    async fn send(self, shard: &Rc<Shard>, stream: &mut Writer, peer: &str) -> bool {
        if !self.chunks.is_empty() {
            if let Err(e) = stream.send(shard, self.chunks).await {
                tracing::debug!(%peer, error = %e, "write failed; closing");
                stream.close();
                return false;
            }
        }
        for (done, response_bytes) in &self.answered {
            record(shard, done, *response_bytes);
        }
        drop(self.held);
        if self.close_after {
            stream.close();
            return false;
        }
        true
    }
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
