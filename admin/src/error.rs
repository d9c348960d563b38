//! The admin tool's error type. A broker's refusal, an answer that does
//! not fit what was asked, a bad flag: each is a value here, printed as one
//! line by `rill admin`, which then exits non-zero. Nothing panics.

use bench_harness::BenchError;
use kafka_protocol::error::ParseResponseErrorCode;

/// Everything an admin command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The connection, its handshake or a codec error (rill-bench's client).
    #[error("{0}")]
    Client(#[from] BenchError),
    /// The broker answered with an error code.
    #[error("{context}: {name} (error {code}){detail}")]
    Broker {
        context: String,
        code: i16,
        /// Kafka's name of the code (`TopicAlreadyExists`).
        name: String,
        /// `: ` and the broker's message, when it sent one.
        detail: String,
    },
    /// The broker's answer does not match the question.
    #[error("unexpected answer: {0}")]
    Answer(String),
    /// A flag or argument the command cannot use.
    #[error("{0}")]
    Usage(String),
    /// The tool will not do what was asked in the cluster's present state
    /// (reset the offsets of a group with members).
    #[error("{0}")]
    Refused(String),
    /// What the command names does not exist (a group Kafka calls Dead).
    #[error("{0}")]
    NotFound(String),
    /// The broker did not answer in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// Reading stdin, building the runtime.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Writing JSON.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Some items of a command failed; each was reported in its output.
    #[error("{0}")]
    Partial(String),
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, AdminError>;

/// Kafka's name of an error code, `None` for 0.
pub fn error_name(code: i16) -> Option<String> {
    code.err().map(|error| match error {
        kafka_protocol::error::ResponseError::Unknown(code) => format!("UnknownErrorCode{code}"),
        known => format!("{known:?}"),
    })
}

/// `Ok` for error code 0, else [`AdminError::Broker`] naming `context`.
pub fn check(code: i16, message: Option<&str>, context: impl Into<String>) -> Result<()> {
    match error_name(code) {
        None => Ok(()),
        Some(name) => Err(AdminError::Broker {
            context: context.into(),
            code,
            name,
            detail: message
                .filter(|m| !m.is_empty())
                .map(|m| format!(": {m}"))
                .unwrap_or_default(),
        }),
    }
}

/// The status column of a per-item result: `OK`, or the error's name and
/// the broker's message.
pub fn status(code: i16, message: Option<&str>) -> String {
    match error_name(code) {
        None => String::from("OK"),
        Some(name) => match message.filter(|m| !m.is_empty()) {
            Some(message) => format!("{name}: {message}"),
            None => name,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_as_kafka_names() {
        assert_eq!(error_name(0), None);
        assert_eq!(error_name(36).as_deref(), Some("TopicAlreadyExists"));
        assert_eq!(status(0, Some("ignored")), "OK");
        assert_eq!(status(3, None), "UnknownTopicOrPartition");
        assert_eq!(status(3, Some("no t")), "UnknownTopicOrPartition: no t");
        let error = check(41, Some(""), "create topic t").unwrap_err();
        assert_eq!(
            error.to_string(),
            "create topic t: NotController (error 41)"
        );
        assert!(check(0, None, "x").is_ok());
    }
}
