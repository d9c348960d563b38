//! The one error type of the crate, and how `object_store`'s errors map
//! into it.
//!
//! The broker turns these into Kafka error codes, so the variants follow
//! what it must decide: retry later (`Unavailable`), answer "no such data"
//! (`NotFound`, `InvalidRange`), or report a local problem or a bug
//! (`Config`, `InvalidKey`, `Io`, `Closed`).
//!
//! | `object_store::Error`                              | `RemoteError`  |
//! |----------------------------------------------------|----------------|
//! | `NotFound`                                         | `NotFound`     |
//! | `Generic` from the local file system, `JoinError`  | `Io`           |
//! | `Generic` from a cloud store (network, 5xx, retries exhausted) | `Unavailable` |
//! | `AlreadyExists` (409), `Precondition`, `NotModified`, unknown | `Unavailable` |
//! | `PermissionDenied`, `Unauthenticated`, `NotSupported`, `NotImplemented`, `UnknownConfigurationKey` | `Config` |
//! | `InvalidPath`                                      | `InvalidKey`   |
//!
//! A 409 from S3 is a conflicting operation in progress (retriable); rill
//! sends no conditional requests, so the precondition variants can only be a
//! store's oddity, and retrying is the safe answer. Wrong credentials are the
//! operator's to fix: retrying would not help.
//!
//! Messages are redacted before they are kept: a URL's user information and
//! query string (where an Azure SAS token would sit) never reach a log line.

use std::io;

/// The failure of a remote-storage operation.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// No object has this key.
    #[error("object {key:?} not found")]
    NotFound {
        /// The key asked for (relative to the store's key prefix).
        key: String,
    },
    /// A byte range reaches past the end of the object.
    #[error("range {start}..{end} of {key:?} reaches past its end ({object_bytes} bytes)")]
    InvalidRange {
        /// The key asked for.
        key: String,
        /// The first byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// The object's length.
        object_bytes: u64,
    },
    /// The key is not a valid object path (empty segment, `..`, …).
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey {
        /// The key given.
        key: String,
        /// Why it was refused.
        reason: String,
    },
    /// The store did not answer in time, the network failed, or the store
    /// answered with a server error: retriable.
    #[error("object store unavailable during {op}: {detail}")]
    Unavailable {
        /// The operation that failed.
        op: &'static str,
        /// What happened (redacted).
        detail: String,
    },
    /// The configuration cannot work: a bad URL, a missing bucket name,
    /// refused credentials, an unsupported operation.
    #[error("remote storage configuration: {detail}")]
    Config {
        /// What is wrong (redacted).
        detail: String,
    },
    /// A local I/O error: the file to upload, or the `file://` store's disk.
    #[error("local I/O during {op}: {source}")]
    Io {
        /// The operation that failed.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The remote-storage thread has stopped: no operation can run.
    #[error("the remote-storage thread has stopped")]
    Closed,
}

impl RemoteError {
    /// Whether the broker should answer with a retriable error: the same
    /// request may succeed later.
    pub fn is_retriable(&self) -> bool {
        matches!(self, RemoteError::Unavailable { .. })
    }

    /// An error of a configuration check.
    pub(crate) fn config(detail: impl Into<String>) -> RemoteError {
        RemoteError::Config {
            detail: redact_detail(&detail.into()),
        }
    }

    /// A local I/O error during `op`.
    pub(crate) fn io(op: &'static str) -> impl FnOnce(io::Error) -> RemoteError {
        move |source| RemoteError::Io { op, source }
    }

    /// The answer to an operation that ran past its time limit.
    pub(crate) fn timed_out(op: &'static str, timeout_ms: u64) -> RemoteError {
        RemoteError::Unavailable {
            op,
            detail: format!("no answer within {timeout_ms} ms"),
        }
    }

    /// Maps an error of `object_store` on `key` during `op`; the table is in
    /// the module's documentation.
    pub(crate) fn from_store(op: &'static str, key: &str, error: object_store::Error) -> Self {
        use object_store::Error as E;
        let detail = redact_detail(&error.to_string());
        match error {
            E::NotFound { .. } => RemoteError::NotFound {
                key: key.to_string(),
            },
            E::InvalidPath { source } => RemoteError::InvalidKey {
                key: key.to_string(),
                reason: source.to_string(),
            },
            E::Generic { store, source } if store == LOCAL_STORE_NAME => RemoteError::Io {
                op,
                source: io::Error::new(io_kind(source.as_ref()), detail),
            },
            E::JoinError { .. } => RemoteError::Io {
                op,
                source: io::Error::other(detail),
            },
            E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::UnknownConfigurationKey { .. } => RemoteError::Config { detail },
            _ => RemoteError::Unavailable { op, detail },
        }
    }
}

/// The `store` name `object_store`'s local file system puts in its
/// `Generic` errors.
const LOCAL_STORE_NAME: &str = "LocalFileSystem";

/// The kind of the first `io::Error` in an error's chain of sources.
fn io_kind(error: &(dyn std::error::Error + 'static)) -> io::ErrorKind {
    let mut next = Some(error);
    // Bounded: a source chain is finite, and 16 links is far past any seen.
    for _ in 0..16 {
        let Some(current) = next else { break };
        if let Some(found) = current.downcast_ref::<io::Error>() {
            return found.kind();
        }
        next = current.source();
    }
    io::ErrorKind::Other
}

/// Removes what could be a secret from a message: the user information and
/// the query string of every URL in it.
pub(crate) fn redact_detail(message: &str) -> String {
    message
        .split(' ')
        .map(|word| {
            if word.contains("://") {
                redact_url(word)
            } else {
                word.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A URL without its user information (`user:password@`) and query string.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let rest = match rest.split_once(['?', '#']) {
        Some((before, _)) => format!("{before}?…"),
        None => rest.to_string(),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => format!("…@{}", &rest[at + 1..]),
        None => rest,
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{rest}"),
        None => rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_user_information_and_query() {
        assert_eq!(
            redact_url("https://user:secret@minio:9000/bucket/key?sig=abc"),
            "https://…@minio:9000/bucket/key?…"
        );
        assert_eq!(redact_url("s3://bucket/prefix"), "s3://bucket/prefix");
        assert_eq!(
            redact_url("https://host/a@b/c"),
            "https://host/a@b/c",
            "an @ in the path is not user information"
        );
        assert_eq!(
            redact_detail("Error GET https://acct.blob/c/k?sv=1&sig=SECRET in 2s"),
            "Error GET https://acct.blob/c/k?… in 2s"
        );
    }

    #[test]
    fn store_errors_map_by_kind() {
        let not_found = object_store::Error::NotFound {
            path: "a".into(),
            source: "gone".into(),
        };
        assert!(matches!(
            RemoteError::from_store("get", "a", not_found),
            RemoteError::NotFound { key } if key == "a"
        ));
        let network = object_store::Error::Generic {
            store: "S3",
            source: "connection refused".into(),
        };
        let mapped = RemoteError::from_store("get", "a", network);
        assert!(mapped.is_retriable(), "{mapped}");
        let disk = object_store::Error::Generic {
            store: LOCAL_STORE_NAME,
            source: Box::new(io::Error::new(io::ErrorKind::StorageFull, "full")),
        };
        assert!(matches!(
            RemoteError::from_store("put_file", "a", disk),
            RemoteError::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull
        ));
        let denied = object_store::Error::PermissionDenied {
            path: "a".into(),
            source: "403".into(),
        };
        assert!(matches!(
            RemoteError::from_store("get", "a", denied),
            RemoteError::Config { .. }
        ));
    }
}
