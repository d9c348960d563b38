//! Listening sockets: every shard binds the same client port (SO_REUSEPORT,
//! the kernel spreads connections across the shards), and no other process
//! may share it.
//!
//! SO_REUSEPORT alone would let a second broker of the same user, started
//! on the same port by mistake, bind it too and silently take part of the
//! first one's connections. So the main thread first binds each port once
//! without SO_REUSEPORT ([`check_unused`]), which fails with EADDRINUSE on a
//! port another socket listens on, as Kafka's start would. The shards'
//! sockets set SO_REUSEADDR as well ([`bind_shared`]): a connection they
//! accepted and closed lingers in TIME_WAIT for a minute, and without the
//! flag that remnant would fail the check at a restart.
//!
//! A broker that just exited can still hold its listening sockets for a
//! moment: io_uring tears a ring down after the process is gone, and the
//! sockets its pending accepts hold close with it. So the start waits a few
//! seconds for a held port ([`wait_until_unused`]) before it refuses. Binding
//! beside such a socket would be worse than waiting: connections queued on
//! it are never accepted.
//!
//! [`peer_has_closed`] tells whether the other end of a one-way connection
//! went away, before a write that TCP would otherwise accept and lose.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};

/// Pending connections the kernel queues per listening socket (what
/// glommio's own bind asks for; the kernel caps it at `net.core.somaxconn`).
const LISTEN_BACKLOG: i32 = 1024;

/// Whether the peer of `socket`, a connection it never writes on, has
/// closed it (or reset it): the socket reads as end of stream or an error.
/// A write to such a socket is accepted into the send buffer and lost: the
/// peer's RST comes back only after it, and only the next write fails. A
/// link that writes one-shot messages (a Raft vote answer) checks first.
pub fn peer_has_closed(socket: &impl AsRawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `byte` is one writable byte; recv(2) with MSG_PEEK writes at
    // most one byte there and consumes nothing; MSG_DONTWAIT never blocks.
    let received = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            std::ptr::addr_of_mut!(byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match received {
        0 => true,
        n if n > 0 => false,
        _ => !matches!(
            io::Error::last_os_error().kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        ),
    }
}

/// Binds `address` once without SO_REUSEPORT and lets it go: an error when
/// any socket already listens on it. Port 0 (any free port) passes.
pub fn check_unused(address: SocketAddr) -> io::Result<()> {
    if address.port() == 0 {
        return Ok(());
    }
    probe_socket(address).map(drop)
}

/// The check's socket: bound (SO_REUSEADDR, so TIME_WAIT remnants pass and
/// listeners do not) but never listening. A listening probe, as
/// `std::net::TcpListener::bind` makes, would accept a client's connection
/// for an instant and reset it, and a client that saw the port answer would
/// then find it refused until the shards bind.
fn probe_socket(address: SocketAddr) -> io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&SockAddr::from(address))?;
    Ok(socket)
}

/// [`check_unused`] until it passes or `patience` has gone by (the last
/// error then). Logs once when it has to wait.
pub fn wait_until_unused(address: SocketAddr, patience: std::time::Duration) -> io::Result<()> {
    let deadline = std::time::Instant::now() + patience;
    let mut logged = false;
    loop {
        match check_unused(address) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                if std::time::Instant::now() >= deadline {
                    return Err(e);
                }
                if !logged {
                    logged = true;
                    tracing::info!(
                        %address,
                        patience_s = patience.as_secs(),
                        "port in use; waiting for it (a broker that just stopped may still be closing its sockets)"
                    );
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A listening socket on `address` for the current glommio executor, with
/// SO_REUSEPORT (shards share the port) and SO_REUSEADDR (see the module
/// note).
pub fn bind_shared(address: SocketAddr) -> io::Result<glommio::net::TcpListener> {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    let domain = if address.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&SockAddr::from(address))?;
    socket.listen(LISTEN_BACKLOG)?;
    // SAFETY: the descriptor is a bound, listening TCP socket that this
    // function owns and hands over whole (into_raw_fd gives up ownership).
    Ok(unsafe { glommio::net::TcpListener::from_raw_fd(socket.into_raw_fd()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_someone_listens_on_fails_the_check_and_a_closed_one_passes() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = held.local_addr().expect("address");
        let error = check_unused(address).expect_err("port in use");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        drop(held);
        check_unused(address).expect("port free again");
        check_unused("127.0.0.1:0".parse().expect("address")).expect("port 0");
    }

    #[test]
    fn the_check_holds_the_port_without_answering_on_it() {
        let address = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let probe = probe_socket(address).expect("free");
        let refused = std::net::TcpStream::connect(address).expect_err("nobody listens");
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        drop(probe);
    }

    #[test]
    fn a_port_released_while_waiting_passes_and_one_kept_fails_after_the_patience() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = held.local_addr().expect("address");
        let started = std::time::Instant::now();
        let error = wait_until_unused(address, std::time::Duration::from_millis(300))
            .expect_err("still held");
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert!(started.elapsed() >= std::time::Duration::from_millis(300));
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(held);
        });
        wait_until_unused(address, std::time::Duration::from_secs(10)).expect("released");
        release.join().expect("join");
    }

    #[test]
    fn shards_share_a_port_and_its_time_wait_remnants_do_not_block_a_restart() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let first = bind_shared("127.0.0.1:0".parse().expect("address")).expect("bind");
                let address = first.local_addr().expect("address");
                let second = bind_shared(address).expect("a second shard shares the port");
                assert_eq!(
                    check_unused(address).expect_err("listened on").kind(),
                    io::ErrorKind::AddrInUse
                );
                // A connection the server closes first leaves a TIME_WAIT
                // socket on the port.
                let client = std::net::TcpStream::connect(address).expect("connect");
                let accepted = match futures::future::select(
                    Box::pin(first.accept()),
                    Box::pin(second.accept()),
                )
                .await
                {
                    futures::future::Either::Left((s, _))
                    | futures::future::Either::Right((s, _)) => s.expect("accept"),
                };
                drop(accepted);
                drop(client);
                drop(first);
                drop(second);
                check_unused(address).expect("TIME_WAIT remnants do not hold the port");
            })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn a_closed_peer_is_seen_before_the_write_that_would_be_lost() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        assert!(!peer_has_closed(&client), "an open, quiet connection");
        drop(server);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !peer_has_closed(&client) {
            assert!(std::time::Instant::now() < deadline, "the close is seen");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
