//! Errors of the networking crate.

/// A broker setting could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid TOML.
    #[error("config file is not valid TOML: {0}")]
    Toml(String),
    /// A value was refused.
    #[error("invalid value '{value}' for {name}: {reason}")]
    Invalid {
        /// Setting name.
        name: String,
        /// Offered value.
        value: String,
        /// Why.
        reason: String,
    },
}

impl ConfigError {
    /// `value` read as a number of at least `min`; otherwise the error
    /// naming `name`, saying `expected` ("a number of ms, at least 1").
    pub fn parse_at_least<T: std::str::FromStr + PartialOrd>(
        name: &str,
        value: &str,
        min: T,
        expected: &str,
    ) -> Result<T, ConfigError> {
        (value.trim().parse().ok())
            .filter(|number: &T| *number >= min)
            .ok_or_else(|| ConfigError::invalid(name, value, expected))
    }

    /// Builds [`ConfigError::Invalid`].
    pub fn invalid(name: &str, value: &str, reason: &str) -> Self {
        ConfigError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// A request frame or header that cannot be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The 4-byte length is negative or larger than `socket.request.max.bytes`.
    #[error("frame length {length} outside 0..={max_bytes}")]
    BadLength {
        /// The length read.
        length: i64,
        /// The limit.
        max_bytes: usize,
    },
    /// The peer closed the connection in the middle of a frame.
    #[error("connection closed mid-frame ({have} of {want} bytes)")]
    Truncated {
        /// Bytes received.
        have: usize,
        /// Bytes announced.
        want: usize,
    },
    /// The frame is too short to hold a request header.
    #[error("request header truncated ({0} bytes)")]
    ShortHeader(usize),
    /// The request header failed to decode.
    #[error("request header does not decode: {0}")]
    BadHeader(String),
}

/// Why a request got no normal answer.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The body failed to decode: Kafka closes such a connection.
    #[error("{api} v{version} body does not decode: {reason}")]
    Decode {
        /// API name.
        api: &'static str,
        /// Version.
        version: i16,
        /// Decoder message.
        reason: String,
    },
    /// The response failed to encode (a bug or a field set that the version lacks).
    #[error("{api} v{version} response does not encode: {reason}")]
    Encode {
        /// API name.
        api: &'static str,
        /// Version.
        version: i16,
        /// Encoder message.
        reason: String,
    },
    /// A shard stopped answering (shutting down).
    #[error("shard {0} is gone")]
    ShardGone(usize),
}
