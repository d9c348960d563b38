//! Reads: `get` fetches a whole object; `get_range` serves a byte range
//! from the whole chunks that cover it, through the chunk cache.
//!
//! A consumer reading a remote segment forward asks for about 1 MiB per
//! fetch; with 4 MiB chunks, three fetches in four are cache hits, and
//! the store's first-byte latency (tens of ms on S3) is paid once per
//! chunk. A range past the object's end is `InvalidRange`: a short last
//! chunk tells the length, and a read starting past the end (which the
//! store refuses) is checked with one HEAD, on that error path only.

use crate::cache::ChunkId;
use crate::chunks::{assemble, chunk_range, covering};
use crate::context::{object_path, Context};
use crate::error::RemoteError;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{GetOptions, ObjectStoreExt};
use std::ops::Range;
use std::time::Instant;

/// Chunk fetches at once for one `get_range`: a range of a few chunks
/// arrives in about one round trip, and a huge one does not open dozens of
/// connections.
const CHUNKS_IN_FLIGHT: usize = 4;

const GET: &str = "get";
const GET_RANGE: &str = "get_range";

/// The whole object under `key`.
pub(crate) async fn get(ctx: &Context, key: &str) -> Result<Bytes, RemoteError> {
    let path = object_path(key)?;
    let started = Instant::now();
    let read = async { ctx.store.get(&path).await?.bytes().await };
    let bytes = ctx.bounded(GET, key, read).await?;
    ctx.stats
        .record_fetch(bytes.len() as u64, started.elapsed());
    Ok(bytes)
}

/// Bytes `range` of the object under `key`. An empty range reads nothing
/// (and does not check that the object exists).
pub(crate) async fn get_range(
    ctx: &Context,
    key: &str,
    range: Range<u64>,
) -> Result<Bytes, RemoteError> {
    let path = object_path(key)?;
    if range.is_empty() {
        return Ok(Bytes::new());
    }
    let deadline = Instant::now() + ctx.op_timeout;
    let read = if ctx.cache.borrow().is_enabled() {
        read_through_cache(ctx, &path, key, &range).await
    } else {
        read_exact(ctx, &path, key, &range).await
    };
    match read {
        Err(error @ (RemoteError::Unavailable { .. } | RemoteError::Io { .. })) => {
            Err(past_the_end(ctx, &path, key, &range, deadline, error).await)
        }
        other => other,
    }
}

/// The range in one request, without the cache.
async fn read_exact(
    ctx: &Context,
    path: &Path,
    key: &str,
    range: &Range<u64>,
) -> Result<Bytes, RemoteError> {
    let (bytes, object_bytes) = fetch(ctx, path, key, range.clone()).await?;
    if (bytes.len() as u64) < range.end - range.start {
        return Err(invalid_range(key, range, object_bytes));
    }
    Ok(bytes)
}

async fn read_through_cache(
    ctx: &Context,
    path: &Path,
    key: &str,
    range: &Range<u64>,
) -> Result<Bytes, RemoteError> {
    let indexes = covering(range, ctx.chunk_bytes);
    let first = *indexes.start();
    let chunks: Vec<Bytes> = futures::stream::iter(indexes)
        .map(|index| cached_chunk(ctx, path, key, index))
        .buffered(CHUNKS_IN_FLIGHT)
        .try_collect()
        .await?;
    assemble(range, ctx.chunk_bytes, first, &chunks)
        .map_err(|object_bytes| invalid_range(key, range, object_bytes))
}

/// Chunk `index` of `key`, from the cache or else from the store (and then
/// kept).
async fn cached_chunk(
    ctx: &Context,
    path: &Path,
    key: &str,
    index: u64,
) -> Result<Bytes, RemoteError> {
    let id = ChunkId {
        key: key.to_string(),
        index,
    };
    let (cached, generation) = {
        let mut cache = ctx.cache.borrow_mut();
        (cache.get(&id), cache.generation())
    };
    ctx.stats.record_cache_lookup(cached.is_some());
    if let Some(bytes) = cached {
        return Ok(bytes);
    }
    let (bytes, _) = fetch(ctx, path, key, chunk_range(index, ctx.chunk_bytes)).await?;
    let mut cache = ctx.cache.borrow_mut();
    cache.insert(id, bytes.clone(), generation);
    ctx.stats.set_cache_bytes(cache.used_bytes());
    Ok(bytes)
}

/// One ranged read from the store: the bytes (cut short at the object's
/// end) and the object's length.
async fn fetch(
    ctx: &Context,
    path: &Path,
    key: &str,
    range: Range<u64>,
) -> Result<(Bytes, u64), RemoteError> {
    let started = Instant::now();
    let options = GetOptions {
        range: Some(range.into()),
        ..GetOptions::default()
    };
    let read = async {
        let answer = ctx.store.get_opts(path, options).await?;
        let object_bytes = answer.meta.size;
        Ok((answer.bytes().await?, object_bytes))
    };
    let (bytes, object_bytes) = ctx.bounded(GET_RANGE, key, read).await?;
    ctx.stats
        .record_fetch(bytes.len() as u64, started.elapsed());
    Ok((bytes, object_bytes))
}

/// A ranged read failed: if the range reaches past the object's end (a
/// read starting there is refused: 416 from S3, an error of the local
/// store), say so; otherwise the original error stands. The HEAD that
/// tells has only what is left of the operation's time: a store that is
/// down has used it all, and its failure is not delayed by a second wait.
async fn past_the_end(
    ctx: &Context,
    path: &Path,
    key: &str,
    range: &Range<u64>,
    deadline: Instant,
    error: RemoteError,
) -> RemoteError {
    let time_left = deadline.saturating_duration_since(Instant::now());
    if time_left.is_zero() {
        return error;
    }
    match tokio::time::timeout(time_left, ctx.store.head(path)).await {
        Ok(Ok(meta)) if meta.size < range.end => invalid_range(key, range, meta.size),
        _ => error,
    }
}

fn invalid_range(key: &str, range: &Range<u64>, object_bytes: u64) -> RemoteError {
    RemoteError::InvalidRange {
        key: key.to_string(),
        start: range.start,
        end: range.end,
        object_bytes,
    }
}
