//! Request framing: a 4-byte big-endian length, then the request. Pure
//! decoders: "not enough bytes yet" is `Ok(None)`, not an error.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use kernel::error::FrameError;

/// Bytes of the length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Checks a frame length against `max_bytes` (`socket.request.max.bytes`).
pub fn check_length(length: i32, max_bytes: usize) -> Result<usize, FrameError> {
    if length < 0 || length as usize > max_bytes {
        return Err(FrameError::BadLength {
            length: i64::from(length),
            max_bytes,
        });
    }
    Ok(length as usize)
}

/// Takes one complete frame (without its prefix) off the front of `buf`, or
/// `Ok(None)` when more bytes are needed. A bad length is an error before the
/// body arrives, so a 2 GiB announcement never allocates.
pub fn try_split_frame(buf: &mut BytesMut, max_bytes: usize) -> Result<Option<Bytes>, FrameError> {
    if buf.len() < LENGTH_PREFIX_BYTES {
        return Ok(None);
    }
    let length = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let length = check_length(length, max_bytes)?;
    if buf.len() < LENGTH_PREFIX_BYTES + length {
        return Ok(None);
    }
    buf.advance(LENGTH_PREFIX_BYTES);
    Ok(Some(buf.split_to(length).freeze()))
}

/// How many bytes the frame at the front of `buf` still needs (for sizing reads).
pub fn bytes_missing(buf: &BytesMut) -> usize {
    if buf.len() < LENGTH_PREFIX_BYTES {
        return LENGTH_PREFIX_BYTES - buf.len();
    }
    let length = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]).max(0) as usize;
    (LENGTH_PREFIX_BYTES + length).saturating_sub(buf.len())
}

/// The length of the frame at the front of `buf` (without its prefix), once
/// the prefix is there; `try_split_frame` has checked it against the limit.
pub fn announced_length(buf: &BytesMut) -> Option<usize> {
    if buf.len() < LENGTH_PREFIX_BYTES {
        return None;
    }
    Some(i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]).max(0) as usize)
}

/// The three fields every request header starts with, readable even when the
/// API or version is unknown (so an error can still be addressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderPrefix {
    /// API key.
    pub api_key: i16,
    /// API version.
    pub api_version: i16,
    /// Correlation id to echo.
    pub correlation_id: i32,
}

/// Reads the fixed prefix of a request header.
pub fn peek_header(frame: &[u8]) -> Result<HeaderPrefix, FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::ShortHeader(frame.len()));
    }
    Ok(HeaderPrefix {
        api_key: i16::from_be_bytes([frame[0], frame[1]]),
        api_version: i16::from_be_bytes([frame[2], frame[3]]),
        correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
    })
}

/// Decodes the full request header of a known API and leaves `frame` at the body.
pub fn decode_header(
    api_key: ApiKey,
    api_version: i16,
    frame: &mut Bytes,
) -> Result<RequestHeader, FrameError> {
    let header_version = api_key.request_header_version(api_version);
    RequestHeader::decode(frame, header_version).map_err(|e| FrameError::BadHeader(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> BytesMut {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(body.len() as i32).to_be_bytes());
        buf.extend_from_slice(body);
        buf
    }

    #[test]
    fn splits_whole_frames_and_waits_for_partial_ones() {
        let mut buf = framed(b"hello");
        buf.extend_from_slice(&framed(b"wor"));
        buf.extend_from_slice(&[0, 0]);
        assert_eq!(
            try_split_frame(&mut buf, 100).unwrap().unwrap(),
            &b"hello"[..]
        );
        assert_eq!(
            try_split_frame(&mut buf, 100).unwrap().unwrap(),
            &b"wor"[..]
        );
        assert_eq!(try_split_frame(&mut buf, 100).unwrap(), None);
        assert_eq!(bytes_missing(&buf), 2);
        assert_eq!(announced_length(&buf), None);
        buf.extend_from_slice(&[0, 9]);
        assert_eq!(announced_length(&buf), Some(9));
    }

    #[test]
    fn refuses_negative_and_oversize_lengths_before_reading_the_body() {
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert!(matches!(
            try_split_frame(&mut buf, 100),
            Err(FrameError::BadLength { length: -1, .. })
        ));
        let mut buf = BytesMut::from(&i32::MAX.to_be_bytes()[..]);
        assert!(matches!(
            try_split_frame(&mut buf, 104_857_600),
            Err(FrameError::BadLength { .. })
        ));
        let mut buf = BytesMut::from(&(101i32).to_be_bytes()[..]);
        assert!(try_split_frame(&mut buf, 100).is_err());
        let mut buf = BytesMut::from(&(100i32).to_be_bytes()[..]);
        assert_eq!(try_split_frame(&mut buf, 100).unwrap(), None);
    }

    #[test]
    fn empty_frame_is_a_frame() {
        let mut buf = framed(b"");
        assert_eq!(try_split_frame(&mut buf, 100).unwrap().unwrap().len(), 0);
    }

    #[test]
    fn header_prefix_needs_eight_bytes() {
        assert_eq!(peek_header(&[0, 18, 0]), Err(FrameError::ShortHeader(3)));
        let prefix = peek_header(&[0, 18, 0, 3, 0, 0, 0, 7]).unwrap();
        assert_eq!(
            prefix,
            HeaderPrefix {
                api_key: 18,
                api_version: 3,
                correlation_id: 7
            }
        );
    }

    #[test]
    fn truncated_header_does_not_decode() {
        // ApiVersions v3 uses header v2: client id then tagged fields; cut in the client id.
        let mut frame = Bytes::from_static(&[0, 18, 0, 3, 0, 0, 0, 7, 0, 9, b'a']);
        assert!(decode_header(ApiKey::ApiVersions, 3, &mut frame).is_err());
    }
}
