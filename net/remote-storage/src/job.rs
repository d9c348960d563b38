//! The requests the handles send to the remote thread, each with the
//! one-shot channel its answer comes back on.
//!
//! The answer channel is `futures`' oneshot, which needs no runtime: a
//! glommio shard awaits it like any future, and the remote thread's tokio
//! runtime completes it.

use crate::error::RemoteError;
use bytes::Bytes;
use futures::channel::oneshot;
use std::ops::Range;
use std::path::PathBuf;

/// Where one job's answer goes.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, RemoteError>>;

/// One operation for the remote thread.
pub(crate) enum Job {
    PutFile {
        local: PathBuf,
        length: Option<u64>,
        key: String,
        reply: Reply<u64>,
    },
    PutBytes {
        key: String,
        bytes: Bytes,
        reply: Reply<()>,
    },
    Get {
        key: String,
        reply: Reply<Bytes>,
    },
    GetRange {
        key: String,
        range: Range<u64>,
        reply: Reply<Bytes>,
    },
    List {
        prefix: String,
        reply: Reply<Vec<(String, u64)>>,
    },
    Delete {
        keys: Vec<String>,
        reply: Reply<()>,
    },
    DeletePrefix {
        prefix: String,
        reply: Reply<usize>,
    },
}
