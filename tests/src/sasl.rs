//! A broker with a PLAINTEXT listener (first: the harness's, and the one
//! brokers use between them) and a SASL_PLAINTEXT one, for the SASL tests
//! (`sasl::`, `oauthbearer::`).

use crate::{data_dir, free_port, Broker};
use std::net::SocketAddr;

/// The broker and its two listeners.
pub struct SaslBroker {
    /// The broker process.
    pub broker: Broker,
    /// The PLAINTEXT listener.
    pub plain: SocketAddr,
    /// The SASL_PLAINTEXT listener.
    pub sasl: SocketAddr,
    _dir: tempfile::TempDir,
}

impl SaslBroker {
    /// Starts `binary` with both listeners, the properties `extra` and
    /// the environment `envs`, on `cores` shards.
    pub fn start(binary: &str, extra: &str, cores: &str, envs: &[(&str, &str)]) -> SaslBroker {
        let dir = data_dir();
        let (plain_port, sasl_port) = (free_port(), free_port());
        let file = dir.path().join("server.properties");
        std::fs::write(
            &file,
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n\
                 {extra}\n"
            ),
        )
        .expect("write server.properties");
        let plain: SocketAddr = format!("127.0.0.1:{plain_port}").parse().expect("addr");
        let sasl: SocketAddr = format!("127.0.0.1:{sasl_port}").parse().expect("addr");
        let config = file.to_str().expect("utf-8 path");
        let args = ["--cores", cores, "--config", config];
        let broker = Broker::start_listening(binary, dir.path(), plain, &args, envs);
        SaslBroker {
            broker,
            plain,
            sasl,
            _dir: dir,
        }
    }

    /// The SASL listener's address, as a bootstrap string.
    pub fn sasl_bootstrap(&self) -> String {
        self.sasl.to_string()
    }
}

/// `rill_sasl_authentications_total` of `mechanism` and `result`
/// (`succeeded`, `failed`), summed over the broker's shards.
pub fn authentications(broker: &Broker, mechanism: &str, result: &str) -> i64 {
    let line =
        format!("rill_sasl_authentications_total{{mechanism=\"{mechanism}\",result=\"{result}\"}}");
    crate::http_get(broker.admin_addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with(&line))
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(_, v)| v.trim().parse::<i64>().ok())
        .sum()
}
