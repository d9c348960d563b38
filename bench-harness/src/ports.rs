//! Free loopback ports for the brokers the harness starts.
//!
//! Each port is taken by a socket bound to port 0 and never listening, all
//! held until every port is chosen (so the kernel cannot hand one out
//! twice). A listening socket would be a trap: a thread spawning a process
//! at that instant forks a child holding a copy of it until its exec, so it
//! goes on listening after it is dropped, and a readiness connect meant for
//! the broker started on that port lands in its queue and is reset later.

use std::net::SocketAddr;

/// `count` distinct free ports on 127.0.0.1.
pub fn free_ports(count: usize) -> std::io::Result<Vec<u16>> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let any = SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0)));
    let sockets = (0..count)
        .map(|_| {
            let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
            socket.bind(&any)?;
            Ok(socket)
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    sockets
        .iter()
        .map(|socket| {
            socket
                .local_addr()?
                .as_socket()
                .map(|address| address.port())
                .ok_or_else(|| std::io::Error::other("not an IP socket"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_nobody_answers_on_them() {
        let mut ports = free_ports(9).unwrap();
        for &port in &ports {
            let refused = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
            assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 9);
    }
}
