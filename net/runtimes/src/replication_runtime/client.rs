//! A follower's connection to its leader: Kafka requests over one TCP
//! connection, encoded and decoded by the `kafka-protocol` crate — the same
//! protocol and listener any client uses (KIP-392's "followers are
//! clients"), so replication needs no port of its own. On an SSL or
//! SASL_SSL inter-broker listener it speaks TLS (the broker's own client,
//! `security::tls_client`); on a SASL one it logs in first (PLAIN or SCRAM,
//! the broker's own login), and once the session's lifetime (KIP-368) has
//! passed it refuses further requests, so that its owner connects and logs
//! in anew.

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kernel::config::sasl::InterBrokerLogin;
use kernel::config::BrokerConfig;
use security::sasl::client::SaslClient;
use security::tls_client::ClientTlsStream;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The largest response a follower accepts (a fetch answers at most its
/// `max_bytes`, 8 MiB here, plus headers).
const RESPONSE_BYTES_MAX: usize = 64 << 20;

/// A connection to one broker.
pub struct KafkaConnection {
    stream: Stream,
    correlation_id: i32,
    client_id: StrBytes,
    /// When the SASL session stops holding (KIP-368), if it ends.
    session_ends: Option<Instant>,
}

/// The connection's bytes: plain TCP or TLS.
enum Stream {
    Plain(TcpStream),
    Tls(Box<ClientTlsStream>),
}

impl Stream {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    async fn read_exact(&mut self, bytes: &mut [u8]) -> std::io::Result<()> {
        match self {
            Stream::Plain(s) => s.read_exact(bytes).await,
            Stream::Tls(s) => s.read_exact(bytes).await,
        }
    }
}

impl KafkaConnection {
    /// Connects to the broker at `host` (`address`), over TLS and logged
    /// in as `config`'s inter-broker settings say, all within `timeout`.
    pub async fn connect(
        config: &BrokerConfig,
        (host, address): (&str, SocketAddr),
        timeout: Duration,
        client_id: String,
    ) -> Result<KafkaConnection, String> {
        let opening = Self::open(config, (host, address), timeout, client_id);
        let too_late = async {
            glommio::timer::sleep(timeout).await;
            Err(format!(
                "connecting to {host} ({address}) took over {timeout:?}"
            ))
        };
        futures_lite::future::or(opening, too_late).await
    }

    async fn open(
        config: &BrokerConfig,
        (host, address): (&str, SocketAddr),
        timeout: Duration,
        client_id: String,
    ) -> Result<KafkaConnection, String> {
        let tcp = TcpStream::connect_timeout(address, timeout)
            .await
            .map_err(|e| format!("cannot connect to {address}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let stream = match &config.inter_broker_tls {
            Some(tls) => Stream::Tls(Box::new(tls.connect(host, tcp).await?)),
            None => Stream::Plain(tcp),
        };
        let mut connection = KafkaConnection {
            stream,
            correlation_id: 0,
            client_id: StrBytes::from_string(client_id),
            session_ends: None,
        };
        if let Some(login) = &config.inter_broker_login {
            connection.log_in(login).await?;
        }
        Ok(connection)
    }

    /// SaslHandshake, then SaslAuthenticate until the exchange ends.
    async fn log_in(&mut self, login: &InterBrokerLogin) -> Result<(), String> {
        let mechanism = login.mechanism.name();
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_static_str(mechanism);
        let answer: SaslHandshakeResponse =
            self.request(ApiKey::SaslHandshake, 1, &handshake).await?;
        if answer.error_code != 0 {
            return Err(format!(
                "SaslHandshake {mechanism}: error {}",
                answer.error_code
            ));
        }
        let mut client = SaslClient::new(login.mechanism, &login.user, &login.password)?;
        let mut message = client.first();
        loop {
            let mut request = SaslAuthenticateRequest::default();
            request.auth_bytes = Bytes::from(message);
            let answer: SaslAuthenticateResponse =
                self.request(ApiKey::SaslAuthenticate, 2, &request).await?;
            if answer.error_code != 0 {
                let why = answer.error_message.as_deref().unwrap_or_default();
                return Err(format!("login as {} refused: {why}", login.user));
            }
            match client.step(&answer.auth_bytes)? {
                Some(next) => message = next,
                None => {
                    let lifetime_ms = u64::try_from(answer.session_lifetime_ms).unwrap_or(0);
                    self.session_ends = (lifetime_ms > 0)
                        .then(|| Instant::now() + Duration::from_millis(lifetime_ms));
                    return Ok(());
                }
            }
        }
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
        if self.session_ends.is_some_and(|end| Instant::now() >= end) {
            return Err(String::from(
                "the SASL session ended; connect and log in again",
            ));
        }
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
