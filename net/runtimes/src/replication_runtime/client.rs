//! A follower's connection to its leader: Kafka requests over one TCP
//! connection, encoded and decoded by the `kafka-protocol` crate — the same
//! protocol and listener any client uses (KIP-392's "followers are
//! clients"), so replication needs no port of its own.

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use std::net::SocketAddr;
use std::time::Duration;

/// The largest response a follower accepts (a fetch answers at most its
/// `max_bytes`, 8 MiB here, plus headers).
const RESPONSE_BYTES_MAX: usize = 64 << 20;

/// A connection to one broker.
pub struct KafkaConnection {
    stream: TcpStream,
    correlation_id: i32,
    client_id: StrBytes,
}

impl KafkaConnection {
    /// Connects to `address` within `timeout`.
    pub async fn connect(
        address: SocketAddr,
        timeout: Duration,
        client_id: String,
    ) -> Result<KafkaConnection, String> {
        let stream = TcpStream::connect_timeout(address, timeout)
            .await
            .map_err(|e| format!("cannot connect to {address}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(KafkaConnection {
            stream,
            correlation_id: 0,
            client_id: StrBytes::from_string(client_id),
        })
    }

    /// Sends one request and reads its response.
    pub async fn request<Req, Resp>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, String>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, Req::header_version(version))
            .map_err(|e| e.to_string())?;
        request
            .encode(&mut body, version)
            .map_err(|e| e.to_string())?;
        let length = u32::try_from(body.len()).map_err(|e| e.to_string())?;
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&length.to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| e.to_string())?;
        let mut length = [0u8; 4];
        self.stream
            .read_exact(&mut length)
            .await
            .map_err(|e| e.to_string())?;
        let length = u32::from_be_bytes(length) as usize;
        if length > RESPONSE_BYTES_MAX {
            return Err(format!("a response of {length} bytes is over the limit"));
        }
        let mut answer = vec![0u8; length];
        self.stream
            .read_exact(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Bytes::from(answer);
        let response_header = ResponseHeader::decode(&mut answer, Resp::header_version(version))
            .map_err(|e| e.to_string())?;
        if response_header.correlation_id != correlation_id {
            return Err(format!(
                "correlation id {} answers request {correlation_id}",
                response_header.correlation_id
            ));
        }
        let response = Resp::decode(&mut answer, version).map_err(|e| e.to_string())?;
        if answer.has_remaining() {
            return Err(format!(
                "{} trailing bytes in a response",
                answer.remaining()
            ));
        }
        Ok(response)
    }
}
