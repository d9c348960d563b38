//! Request and response framing: `length i32 | header | body`. Pure
//! functions over buffers, so they are tested without sockets.

use crate::error::{BenchError, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Largest response frame we accept (a fetch of many partitions can be big).
pub const MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// Appends one framed request to `buf`.
pub fn encode_request<R: Request>(
    buf: &mut BytesMut,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    body: &R,
) -> Result<()> {
    let api_key = ApiKey::try_from(R::KEY)
        .map_err(|_| BenchError::Protocol(format!("unknown api key {}", R::KEY)))?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let header_version = api_key.request_header_version(version);
    let start = buf.len();
    buf.put_i32(0); // patched below
    header
        .encode(buf, header_version)
        .map_err(|error| BenchError::Protocol(format!("encode header: {error}")))?;
    body.encode(buf, version)
        .map_err(|error| BenchError::Protocol(format!("encode {api_key:?} v{version}: {error}")))?;
    let frame_len = (buf.len() - start - 4) as i32;
    buf[start..start + 4].copy_from_slice(&frame_len.to_be_bytes());
    Ok(())
}

/// The correlation id of a response frame (without its length prefix); it
/// leads every response header version.
pub fn peek_correlation_id(frame: &[u8]) -> Result<i32> {
    frame
        .get(0..4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| BenchError::Protocol("response frame shorter than its header".into()))
}

/// Decodes a response frame (without its length prefix) of request type `R`.
pub fn decode_response<R: Request>(mut frame: Bytes, version: i16) -> Result<(i32, R::Response)> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|error| BenchError::Protocol(format!("decode response header: {error}")))?;
    let body = R::Response::decode(&mut frame, version).map_err(|error| {
        BenchError::Protocol(format!(
            "decode response to api {} v{version}: {error}",
            R::KEY
        ))
    })?;
    if frame.has_remaining() {
        return Err(BenchError::Protocol(format!(
            "{} trailing bytes after response to api {} v{version}",
            frame.remaining(),
            R::KEY
        )));
    }
    Ok((header.correlation_id, body))
}

/// Splits one complete frame off the front of `buf`, if one is there.
/// "Not enough bytes yet" is `Ok(None)`, not an error.
pub fn split_frame(buf: &mut BytesMut) -> Result<Option<Bytes>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 || len as usize > MAX_FRAME_BYTES {
        return Err(BenchError::Protocol(format!("bad frame length {len}")));
    }
    if buf.len() < 4 + len as usize {
        buf.reserve(4 + len as usize - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len as usize).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{
        ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    };
    use kafka_protocol::protocol::decode_request_header_from_buffer;

    #[test]
    fn request_frame_has_length_header_and_body() {
        let mut buf = BytesMut::new();
        let client = StrBytes::from_static_str("rill-bench");
        encode_request(
            &mut buf,
            9,
            42,
            &client,
            &MetadataRequest::default().with_topics(None),
        )
        .unwrap();
        let declared = i32::from_be_bytes(buf[0..4].try_into().unwrap()) as usize;
        assert_eq!(declared, buf.len() - 4);
        let mut frame = buf.split_off(4).freeze();
        let header = decode_request_header_from_buffer(&mut frame).unwrap();
        assert_eq!(header.request_api_key, 3);
        assert_eq!(header.request_api_version, 9);
        assert_eq!(header.correlation_id, 42);
        assert_eq!(header.client_id.as_deref(), Some("rill-bench"));
        let body = MetadataRequest::decode(&mut frame, 9).unwrap();
        assert!(body.topics.is_none());
    }

    #[test]
    fn decodes_canned_api_versions_response() {
        // ApiVersions responses always use header v0 (no tagged fields), even
        // at flexible body versions.
        let response = ApiVersionsResponse::default().with_api_keys(vec![ApiVersion::default()
            .with_api_key(0)
            .with_min_version(3)
            .with_max_version(9)]);
        let mut buf = BytesMut::new();
        buf.put_i32(7); // correlation id, header v0
        response.encode(&mut buf, 3).unwrap();
        let frame = buf.freeze();
        assert_eq!(peek_correlation_id(&frame).unwrap(), 7);
        let (correlation_id, decoded) = decode_response::<ApiVersionsRequest>(frame, 3).unwrap();
        assert_eq!(correlation_id, 7);
        assert_eq!(decoded.api_keys[0].max_version, 9);
    }

    #[test]
    fn decodes_flexible_header_and_rejects_trailing_bytes() {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(5)
            .encode(&mut buf, 1)
            .unwrap();
        MetadataResponse::default().encode(&mut buf, 9).unwrap();
        let (correlation_id, _) =
            decode_response::<MetadataRequest>(buf.clone().freeze(), 9).unwrap();
        assert_eq!(correlation_id, 5);
        buf.put_u8(0);
        assert!(decode_response::<MetadataRequest>(buf.freeze(), 9).is_err());
    }

    #[test]
    fn split_frame_waits_for_whole_frames() {
        let mut buf = BytesMut::new();
        buf.put_i32(3);
        buf.put_slice(b"ab");
        assert!(split_frame(&mut buf).unwrap().is_none());
        buf.put_slice(b"cX");
        assert_eq!(&split_frame(&mut buf).unwrap().unwrap()[..], b"abc");
        assert_eq!(&buf[..], b"X");
        let mut bad = BytesMut::new();
        bad.put_i32(-1);
        assert!(split_frame(&mut bad).is_err());
    }
}
