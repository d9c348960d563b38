//! Listing and deleting: `list`, `delete`, `delete_prefix`.
//!
//! Prefixes match whole path segments, as object_store lists: `t/0` lists
//! `t/0/…`, not `t/01/…`. Keys come back relative to the store's key
//! prefix, the same keys the caller uploads under. A deleted key's cached
//! chunks are dropped; a missing key is not an error (S3's DELETE answers
//! the same for both, and a retried delete must succeed).

use crate::context::{object_path, prefix_path, Context};
use crate::error::RemoteError;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::ObjectMeta;

const LIST: &str = "list";
const DELETE: &str = "delete";
const DELETE_PREFIX: &str = "delete_prefix";

/// The keys under `prefix` with their lengths, sorted by key.
pub(crate) async fn list(ctx: &Context, prefix: &str) -> Result<Vec<(String, u64)>, RemoteError> {
    let path = prefix_path(prefix)?;
    let listing = ctx
        .store
        .list(path.as_ref())
        .try_collect::<Vec<ObjectMeta>>();
    let listed = ctx.bounded(LIST, prefix, listing).await?;
    let mut objects: Vec<(String, u64)> = listed
        .into_iter()
        .map(|meta| (meta.location.to_string(), meta.size))
        .collect();
    objects.sort_unstable();
    Ok(objects)
}

/// Deletes `keys`; those already gone are skipped.
pub(crate) async fn delete(ctx: &Context, keys: &[String]) -> Result<(), RemoteError> {
    let paths = keys
        .iter()
        .map(|key| object_path(key))
        .collect::<Result<Vec<Path>, RemoteError>>()?;
    let deleted = delete_paths(ctx, DELETE, paths).await;
    for key in keys {
        ctx.invalidate_key(key);
    }
    deleted
}

/// Deletes every object under `prefix`; returns how many there were. The
/// empty prefix is refused: it would empty the whole store.
pub(crate) async fn delete_prefix(ctx: &Context, prefix: &str) -> Result<usize, RemoteError> {
    if prefix_path(prefix)?.is_none() {
        return Err(RemoteError::InvalidKey {
            key: prefix.to_string(),
            reason: "delete_prefix of the empty prefix would delete every object".to_string(),
        });
    }
    let objects = list(ctx, prefix).await?;
    let paths = objects
        .iter()
        .map(|(key, _)| object_path(key))
        .collect::<Result<Vec<Path>, RemoteError>>()?;
    let deleted = delete_paths(ctx, DELETE_PREFIX, paths).await;
    ctx.invalidate_prefix(prefix);
    deleted.map(|()| objects.len())
}

/// Deletes in bulk (S3: 1,000 keys per request), all within one timeout.
async fn delete_paths(
    ctx: &Context,
    op: &'static str,
    paths: Vec<Path>,
) -> Result<(), RemoteError> {
    if paths.is_empty() {
        return Ok(());
    }
    let locations = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
    let deleting = ctx.store.delete_stream(locations).collect::<Vec<_>>();
    let Ok(answers) = tokio::time::timeout(ctx.op_timeout, deleting).await else {
        return Err(ctx.timed_out(op));
    };
    for answer in answers {
        match answer {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(error) => return Err(RemoteError::from_store(op, "", error)),
        }
    }
    Ok(())
}
