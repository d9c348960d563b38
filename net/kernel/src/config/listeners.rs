//! Kafka's `listeners` / `advertised.listeners` lists
//! (`NAME://host:port,...`), the client listeners among them and their
//! security protocols (`listener.security.protocol.map`), and the host
//! advertised when the broker binds a wildcard address.

use crate::error::ConfigError;
use security::SecurityProtocol;
use std::net::{SocketAddr, ToSocketAddrs};

/// One entry of a listener list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener name (`PLAINTEXT`, `CONTROLLER`, ...); `PLAINTEXT` when
    /// the entry has no scheme.
    pub name: String,
    /// The host, empty for "every interface" (`PLAINTEXT://:9092`).
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Listener {
    /// `host:port` to bind, an empty host meaning every interface.
    pub fn bind_text(&self) -> String {
        match self.host.as_str() {
            "" => format!("0.0.0.0:{}", self.port),
            host if host.contains(':') => format!("[{host}]:{}", self.port),
            host => format!("{host}:{}", self.port),
        }
    }
}

/// Parses `NAME://host:port,...` (IPv6 hosts in brackets).
pub fn parse_listeners(key: &str, text: &str) -> Result<Vec<Listener>, ConfigError> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let (name, rest) = match entry.split_once("://") {
                Some((name, rest)) => (name.trim().to_ascii_uppercase(), rest),
                None => (String::from("PLAINTEXT"), entry),
            };
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| ConfigError::invalid(key, text, "expected NAME://host:port"))?;
            let port: u16 = port
                .parse()
                .map_err(|_| ConfigError::invalid(key, text, "port is not a number"))?;
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            Ok(Listener { name, host, port })
        })
        .collect()
}

/// The listener clients use: the first that is not a controller listener
/// (`controller.listener.names`, Kafka's `CONTROLLER` by default in its
/// sample files). rill serves Raft on the voters' addresses instead.
pub fn client_listener<'a>(
    listeners: &'a [Listener],
    controller_names: &[String],
) -> Option<&'a Listener> {
    listeners.iter().find(|l| {
        !controller_names
            .iter()
            .any(|c| c.eq_ignore_ascii_case(&l.name))
    })
}

/// Every client listener: those that are not controller listeners.
pub fn client_listeners<'a>(
    listeners: &'a [Listener],
    controller_names: &[String],
) -> Vec<&'a Listener> {
    listeners
        .iter()
        .filter(|l| {
            !controller_names
                .iter()
                .any(|c| c.eq_ignore_ascii_case(&l.name))
        })
        .collect()
}

/// The security protocol of listener `name`: from `map`
/// (`listener.security.protocol.map`, `NAME:PROTOCOL,...`) when given, else
/// Kafka's default map, in which each protocol's own name maps to itself.
pub fn protocol_of(name: &str, map: Option<&str>) -> Result<SecurityProtocol, ConfigError> {
    const KEY: &str = "listener.security.protocol.map";
    if let Some(map) = map {
        for entry in map.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (listener, protocol) = entry
                .split_once(':')
                .ok_or_else(|| ConfigError::invalid(KEY, map, "expected NAME:PROTOCOL,..."))?;
            if listener.trim().eq_ignore_ascii_case(name) {
                return protocol
                    .parse()
                    .map_err(|reason: String| ConfigError::invalid(KEY, map, &reason));
            }
        }
    }
    name.parse().map_err(|_| {
        ConfigError::invalid(
            KEY,
            map.unwrap_or(""),
            &format!("listener {name} has no security protocol; map it, e.g. {name}:SASL_SSL"),
        )
    })
}

/// The advertised entry for the client listener `name`: the one of that
/// name, else the first non-controller one; `None` when it has no host
/// (Kafka then advertises the host's name, as rill does).
pub fn advertised_for<'a>(
    advertised: &'a [Listener],
    name: &str,
    controller_names: &[String],
) -> Option<&'a Listener> {
    advertised
        .iter()
        .find(|l| l.name == name)
        .or_else(|| client_listener(advertised, controller_names))
        .filter(|l| !l.host.is_empty())
}

/// The host clients should dial when the broker listens on `listen`, and
/// why. A concrete address is advertised as it is. A wildcard address is not
/// dialable: like Kafka (which advertises the canonical host name), rill
/// advertises the host's name when it resolves, and loopback otherwise.
pub fn default_advertised_host(listen: &SocketAddr) -> (String, &'static str) {
    if !listen.ip().is_unspecified() {
        return (listen.ip().to_string(), "the listen address");
    }
    match host_name() {
        Some(name) if resolves(&name, listen.port()) => (
            name,
            "the host's name, because the listen address is a wildcard",
        ),
        Some(_) => (
            String::from("127.0.0.1"),
            "loopback: the listen address is a wildcard and the host's name does not resolve",
        ),
        None => (
            String::from("127.0.0.1"),
            "loopback: the listen address is a wildcard and the host has no name",
        ),
    }
}

/// The host's name (`gethostname(2)`).
pub fn host_name() -> Option<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the pointer and length describe `buffer`, which outlives the
    // call; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if rc != 0 {
        return None;
    }
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    let name = std::str::from_utf8(&buffer[..end]).ok()?.trim().to_string();
    (!name.is_empty()).then_some(name)
}

fn resolves(host: &str, port: u16) -> bool {
    (host, port)
        .to_socket_addrs()
        .map(|mut addrs| addrs.next().is_some())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_listener_lists() {
        let l = parse_listeners(
            "listeners",
            "PLAINTEXT://:9092,CONTROLLER://:9093, SSL://[::1]:9094",
        )
        .unwrap();
        assert_eq!(l[0].bind_text(), "0.0.0.0:9092");
        assert_eq!(l[2].bind_text(), "[::1]:9094");
        let controllers = vec![String::from("CONTROLLER")];
        assert_eq!(client_listener(&l, &controllers).unwrap().port, 9092);
        let ad = parse_listeners(
            "advertised.listeners",
            "CONTROLLER://localhost:9093,PLAINTEXT://localhost:9092",
        )
        .unwrap();
        assert_eq!(
            advertised_for(&ad, "PLAINTEXT", &controllers).unwrap().port,
            9092
        );
        let bare = parse_listeners("advertised.listeners", "PLAINTEXT://:9092").unwrap();
        assert!(advertised_for(&bare, "PLAINTEXT", &controllers).is_none());
        assert!(parse_listeners("listeners", "PLAINTEXT://nohost").is_err());
        assert_eq!(
            parse_listeners("listeners", "127.0.0.1:9000").unwrap()[0].name,
            "PLAINTEXT"
        );
    }

    #[test]
    fn protocols_come_from_the_map_or_the_name() {
        assert_eq!(
            protocol_of("SASL_SSL", None).unwrap(),
            SecurityProtocol::SaslSsl
        );
        let map = "INTERNAL:PLAINTEXT, EXTERNAL:SASL_SSL";
        assert_eq!(
            protocol_of("EXTERNAL", Some(map)).unwrap(),
            SecurityProtocol::SaslSsl
        );
        assert_eq!(
            protocol_of("INTERNAL", Some(map)).unwrap(),
            SecurityProtocol::Plaintext
        );
        assert!(protocol_of("OTHER", Some(map)).is_err());
        assert!(protocol_of("EXTERNAL", Some("EXTERNAL:TLS")).is_err());
        let l = parse_listeners("listeners", "A://:1,CONTROLLER://:2,B://:3").unwrap();
        let names: Vec<&str> = client_listeners(&l, &[String::from("CONTROLLER")])
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        assert_eq!(names, ["A", "B"]);
    }

    #[test]
    fn a_concrete_listen_address_is_advertised_as_is() {
        let listen: SocketAddr = "10.1.2.3:9092".parse().unwrap();
        assert_eq!(default_advertised_host(&listen).0, "10.1.2.3");
        let wildcard: SocketAddr = "0.0.0.0:9092".parse().unwrap();
        let (host, _) = default_advertised_host(&wildcard);
        assert!(host == "127.0.0.1" || Some(host) == host_name());
    }
}
