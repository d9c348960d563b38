//! Uploads: `put_file` streams a local file, `put_bytes` sends a buffer.
//!
//! A file no larger than one part goes up in one PUT. A larger one goes up
//! as a multipart upload, which S3 and GCS keep invisible until it is
//! completed (Azure's block list likewise, and the local store writes to a
//! staging file renamed at completion): a crash or an error mid-upload
//! leaves nothing under the key. A failed upload is aborted, so that its
//! parts are not kept (and billed) until a lifecycle rule removes them.
//!
//! Memory: `PARTS_IN_FLIGHT` parts upload while the next is read, so one
//! upload holds at most `(PARTS_IN_FLIGHT + 1) * part_bytes` (24 MiB with
//! the 8 MiB default), and the worker runs at most 4 uploads at once. Each part has the operation timeout to itself: a
//! 1 GiB segment needs far more than 30 s at 30 MB/s, but no one part does.

use crate::context::{object_path, Context};
use crate::error::RemoteError;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStoreExt};
use std::io;
use tokio::fs::File;
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;

/// Part uploads at once: two keep the link busy while the next part is
/// read from disk (a local read of 8 MiB is a few ms; its upload, ~100 ms
/// at 80 MB/s).
const PARTS_IN_FLIGHT: usize = 2;

/// S3's and GCS's most parts per upload.
const MAX_PARTS: u64 = 10_000;

const PUT_FILE: &str = "put_file";
const PUT_BYTES: &str = "put_bytes";

/// One part's upload: the store's answer, or the timeout.
type PartResult = Result<object_store::Result<()>, tokio::time::error::Elapsed>;

/// Stores `bytes` under `key` in one request.
pub(crate) async fn put_bytes(ctx: &Context, key: &str, bytes: Bytes) -> Result<(), RemoteError> {
    let path = object_path(key)?;
    let length = bytes.len() as u64;
    let put = ctx
        .bounded(PUT_BYTES, key, ctx.store.put(&path, bytes.into()))
        .await;
    // Also after a failure: a PUT whose answer was lost may have landed.
    ctx.invalidate_key(key);
    put?;
    ctx.stats.record_upload(length);
    Ok(())
}

/// Uploads the file at `local` (its first `length` bytes, when given)
/// under `key`; returns the bytes uploaded.
pub(crate) async fn put_file(
    ctx: &Context,
    local: &std::path::Path,
    length: Option<u64>,
    key: &str,
) -> Result<u64, RemoteError> {
    let path = object_path(key)?;
    let mut file = File::open(local).await.map_err(RemoteError::io(PUT_FILE))?;
    let metadata = file.metadata().await.map_err(RemoteError::io(PUT_FILE))?;
    let file_bytes = length.map_or(metadata.len(), |n| n.min(metadata.len()));
    let part_bytes = part_bytes_for(file_bytes, ctx.part_bytes);
    let upload = if file_bytes <= part_bytes {
        put_whole(ctx, &path, key, &mut file, file_bytes, length.is_none()).await
    } else {
        let sizes = (file_bytes, part_bytes);
        put_parts(ctx, &path, key, &mut file, sizes, length.is_none()).await
    };
    ctx.invalidate_key(key);
    upload?;
    ctx.stats.record_upload(file_bytes);
    Ok(file_bytes)
}

/// The part size for a file: the configured one, raised if the file would
/// otherwise need more than `MAX_PARTS` parts.
fn part_bytes_for(file_bytes: u64, configured: u64) -> u64 {
    configured.max(file_bytes.div_ceil(MAX_PARTS))
}

async fn put_whole(
    ctx: &Context,
    path: &Path,
    key: &str,
    file: &mut File,
    file_bytes: u64,
    whole_file: bool,
) -> Result<(), RemoteError> {
    let bytes = read_part(file, file_bytes).await?;
    if whole_file {
        expect_end(file).await?;
    }
    ctx.bounded(PUT_FILE, key, ctx.store.put(path, bytes.into()))
        .await
        .map(drop)
}

async fn put_parts(
    ctx: &Context,
    path: &Path,
    key: &str,
    file: &mut File,
    (file_bytes, part_bytes): (u64, u64),
    whole_file: bool,
) -> Result<(), RemoteError> {
    let mut upload = ctx
        .bounded(PUT_FILE, key, ctx.store.put_multipart(path))
        .await?;
    let sent = send_parts(ctx, key, upload.as_mut(), file, file_bytes, part_bytes).await;
    let sent = match sent {
        Ok(()) if whole_file => expect_end(file).await,
        other => other,
    };
    let completed = match sent {
        Ok(()) => ctx
            .bounded(PUT_FILE, key, upload.complete())
            .await
            .map(drop),
        Err(error) => Err(error),
    };
    let Err(error) = completed else {
        return Ok(());
    };
    // Also after a failed completion: if it did complete, the abort finds
    // no upload and changes nothing.
    if let Err(abort_error) = ctx.bounded(PUT_FILE, key, upload.abort()).await {
        tracing::warn!(
            key,
            %abort_error,
            "abort of a failed multipart upload failed: its parts stay until the bucket's lifecycle rule removes them"
        );
    }
    Err(error)
}

/// Reads the file part by part and uploads each, `PARTS_IN_FLIGHT` at a
/// time. The parts run as tasks, so they progress while the next part is
/// read; on an error the `JoinSet` is dropped, which cancels the rest.
async fn send_parts(
    ctx: &Context,
    key: &str,
    upload: &mut dyn MultipartUpload,
    file: &mut File,
    file_bytes: u64,
    part_bytes: u64,
) -> Result<(), RemoteError> {
    let mut in_flight: JoinSet<PartResult> = JoinSet::new();
    let mut remaining = file_bytes;
    // Bounded: each turn reads one part of at least `part_bytes`, so at
    // most `MAX_PARTS` turns.
    while remaining > 0 {
        if in_flight.len() >= PARTS_IN_FLIGHT {
            part_done(ctx, key, &mut in_flight).await?;
        }
        let part = read_part(file, remaining.min(part_bytes)).await?;
        remaining -= part.len() as u64;
        let put = upload.put_part(part.into());
        in_flight.spawn(tokio::time::timeout(ctx.op_timeout, put));
    }
    while !in_flight.is_empty() {
        part_done(ctx, key, &mut in_flight).await?;
    }
    Ok(())
}

/// Waits for one part's upload to end.
async fn part_done(
    ctx: &Context,
    key: &str,
    in_flight: &mut JoinSet<PartResult>,
) -> Result<(), RemoteError> {
    match in_flight.join_next().await {
        None | Some(Ok(Ok(Ok(())))) => Ok(()),
        Some(Ok(Ok(Err(error)))) => Err(RemoteError::from_store(PUT_FILE, key, error)),
        Some(Ok(Err(_elapsed))) => Err(ctx.timed_out(PUT_FILE)),
        // A panic in object_store is a bug: let it end this job (its
        // caller sees `Closed`) rather than pass it off as a store error.
        Some(Err(join_error)) if join_error.is_panic() => {
            std::panic::resume_unwind(join_error.into_panic())
        }
        Some(Err(join_error)) => Err(RemoteError::Unavailable {
            op: PUT_FILE,
            detail: join_error.to_string(),
        }),
    }
}

/// The next `length` bytes of the file; an error if it ends first (it
/// shrank while it was uploaded).
async fn read_part(file: &mut File, length: u64) -> Result<Bytes, RemoteError> {
    let capacity = usize::try_from(length).map_err(|_| changed("part larger than memory"))?;
    let mut buffer = Vec::with_capacity(capacity);
    let read = (&mut *file)
        .take(length)
        .read_to_end(&mut buffer)
        .await
        .map_err(RemoteError::io(PUT_FILE))?;
    if read as u64 != length {
        return Err(changed("the file shrank while it was uploaded"));
    }
    Ok(buffer.into())
}

/// The file must end where its length said: one that grew is refused
/// rather than uploaded cut short.
async fn expect_end(file: &mut File) -> Result<(), RemoteError> {
    let mut probe = [0u8; 1];
    let read = file
        .read(&mut probe)
        .await
        .map_err(RemoteError::io(PUT_FILE))?;
    if read != 0 {
        return Err(changed("the file grew while it was uploaded"));
    }
    Ok(())
}

fn changed(what: &str) -> RemoteError {
    RemoteError::Io {
        op: PUT_FILE,
        source: io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_files_get_larger_parts() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(part_bytes_for(1024 * MIB, 8 * MIB), 8 * MIB);
        // 100 GiB in 8 MiB parts would be 12,800 parts.
        let part = part_bytes_for(100 * 1024 * MIB, 8 * MIB);
        assert!(part > 8 * MIB);
        assert!((100 * 1024 * MIB).div_ceil(part) <= MAX_PARTS);
    }
}
