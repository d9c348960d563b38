//! The store's URL, parsed: which backend, which bucket, and the key prefix
//! joined in front of every key. Pure, so that every accepted and refused
//! form is a unit test.
//!
//! `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`,
//! `file:///absolute/path`. The URL names a place, never a credential: a URL
//! with user information (`s3://key:secret@bucket`) is refused, so that no
//! secret sits in a config file that is logged or shown to an operator.

use crate::error::RemoteError;
use object_store::path::Path;
use std::path::PathBuf;

/// Where the objects live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// Amazon S3 or an S3-compatible store.
    S3 { bucket: String },
    /// Google Cloud Storage.
    Gcs { bucket: String },
    /// Azure Blob Storage (the account comes from the environment).
    Azure { container: String },
    /// A directory on a local file system.
    File { root: PathBuf },
}

/// A parsed store URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub backend: Backend,
    /// Joined in front of every key, without leading or trailing `/`;
    /// empty for none.
    pub prefix: String,
}

impl Backend {
    /// The URL scheme, for messages.
    pub fn scheme(&self) -> &'static str {
        match self {
            Backend::S3 { .. } => "s3",
            Backend::Gcs { .. } => "gs",
            Backend::Azure { .. } => "az",
            Backend::File { .. } => "file",
        }
    }
}

/// Parses a store URL.
pub(crate) fn parse(url: &str) -> Result<Location, RemoteError> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(RemoteError::config(format!(
            "{url:?} is not a URL (want s3://, gs://, az:// or file://)"
        )));
    };
    if rest.contains(['?', '#']) {
        return Err(RemoteError::config(
            "a store URL takes no query or fragment: set options in the configuration",
        ));
    }
    if scheme == "file" {
        return parse_file(rest);
    }
    let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if name.is_empty() {
        return Err(RemoteError::config(format!(
            "{scheme}:// URL without a bucket or container name"
        )));
    }
    if name.contains('@') || name.contains(':') {
        return Err(RemoteError::config(
            "credentials do not belong in the store URL: the environment supplies them",
        ));
    }
    let name = name.to_string();
    let backend = match scheme {
        "s3" | "s3a" => Backend::S3 { bucket: name },
        "gs" => Backend::Gcs { bucket: name },
        "az" | "azure" => Backend::Azure { container: name },
        other => {
            return Err(RemoteError::config(format!(
                "unsupported store scheme {other:?} (want s3, gs, az or file)"
            )))
        }
    };
    Ok(Location {
        backend,
        prefix: parse_prefix(prefix)?,
    })
}

/// `file:///absolute/path`: the directory is the store's root, with no key
/// prefix of its own.
fn parse_file(rest: &str) -> Result<Location, RemoteError> {
    // `file://localhost/path` names the same place as `file:///path`.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(RemoteError::config(
            "a file:// URL takes an absolute path: file:///path/to/dir",
        ));
    }
    if path.split('/').any(|segment| segment == "..") {
        return Err(RemoteError::config("a file:// path may not contain .."));
    }
    Ok(Location {
        backend: Backend::File {
            root: PathBuf::from(path),
        },
        prefix: String::new(),
    })
}

/// A key prefix: segments joined by `/`, each a valid object path segment.
fn parse_prefix(prefix: &str) -> Result<String, RemoteError> {
    let trimmed = prefix.trim_matches('/');
    match Path::parse(trimmed) {
        Ok(path) => Ok(path.to_string()),
        Err(error) => Err(RemoteError::config(format!(
            "invalid key prefix {prefix:?}: {error}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend_and_prefix(url: &str) -> (Backend, String) {
        let location = parse(url).unwrap();
        (location.backend, location.prefix)
    }

    #[test]
    fn cloud_urls_name_a_bucket_and_a_prefix() {
        assert_eq!(
            backend_and_prefix("s3://logs/rill/cluster-1/"),
            (
                Backend::S3 {
                    bucket: "logs".into()
                },
                "rill/cluster-1".into()
            )
        );
        assert_eq!(
            backend_and_prefix("gs://b"),
            (Backend::Gcs { bucket: "b".into() }, String::new())
        );
        assert_eq!(
            backend_and_prefix("az://container/p"),
            (
                Backend::Azure {
                    container: "container".into()
                },
                "p".into()
            )
        );
    }

    #[test]
    fn file_urls_take_an_absolute_path() {
        assert_eq!(
            backend_and_prefix("file:///var/lib/rill/remote"),
            (
                Backend::File {
                    root: "/var/lib/rill/remote".into()
                },
                String::new()
            )
        );
        assert!(parse("file://relative/dir").is_err());
        assert!(parse("file:///a/../etc").is_err());
    }

    #[test]
    fn bad_urls_are_config_errors() {
        for url in [
            "bucket/prefix",
            "s3://",
            "s3:///prefix",
            "s3://key:secret@bucket/p",
            "s3://bucket/p?region=x",
            "ftp://host/p",
            "s3://bucket/a//b/../c",
        ] {
            assert!(
                matches!(parse(url), Err(RemoteError::Config { .. })),
                "{url} was accepted"
            );
        }
    }

    #[test]
    fn refusals_do_not_print_the_secret() {
        let error = parse("s3://key:secret@bucket/p").unwrap_err();
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
