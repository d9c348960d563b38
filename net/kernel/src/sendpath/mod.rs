//! Fetch send paths: how response chunks reach the socket.
//!
//! Every write to a client connection goes through a shard's [`Sender`]
//! (one per shard, shared by its connections through `Rc`). Framing and other
//! in-memory bytes are written with `sendmsg(2)` (gathering adjacent chunks);
//! file ranges ([`OutChunk::File`]) go by the configured [`SendPath`]:
//!
//! - [`copy`]: `pread(2)` into a user buffer, then write it. The baseline.
//! - [`sendfile`]: `sendfile(2)` from the segment file to the socket. Zero
//!   copy, but synchronous: segments are written with `O_DIRECT`, so fresh
//!   data is not in the page cache and a cold `sendfile` reads the disk on the
//!   shard's thread, stalling every connection of the shard (40 ms seen).
//! - [`splice`] (default): file → pipe → socket with `IORING_OP_SPLICE` on the
//!   shard's second io_uring ([`ring`]). io_uring runs splices on io-wq
//!   workers, so a cold read blocks a kernel worker, never the shard. A
//!   range wholly in the page cache ([`page_cache`], `cachestat(2)`) goes by
//!   `sendfile(2)` instead: it cannot block on the disk, and it spares the
//!   two hand-offs to a worker thread.
//!
//! The socket is put in non-blocking mode; when it is full the path awaits
//! writability with `IORING_OP_POLL_ADD(POLLOUT)` on the ring instead of
//! spinning. glommio itself always passes `MSG_DONTWAIT` or uses io_uring,
//! so the flag does not change how it reads the same socket.
//!
//! Batches still in the shard's batch cache (the tail that tailing consumers
//! read) never reach these paths as file ranges: the engine hands them over
//! as bytes (`ReadMode::CachedOrFileSlice`), since O_DIRECT left them out of
//! the page cache and a file send would read them back from the disk.
//!
//! All three paths put byte-identical streams on the wire (tested).

mod copy;
mod page_cache;
mod ring;
mod sendfile;
mod splice;

use bytes::Bytes;
use engine::FileSlice;
use ring::Ring;
use std::cell::RefCell;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::str::FromStr;

/// A piece of an outgoing response: bytes in memory or a range of a file.
pub enum OutChunk {
    /// Bytes in memory (framing, or records already in memory).
    Bytes(Bytes),
    /// A byte range of a segment file, sent without copying where the path allows.
    File(FileSlice),
}

impl OutChunk {
    /// Number of bytes this chunk puts on the wire.
    pub fn len(&self) -> usize {
        match self {
            OutChunk::Bytes(bytes) => bytes.len(),
            OutChunk::File(slice) => slice.length,
        }
    }

    /// Whether this chunk puts no bytes on the wire.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Most iovecs gathered into one `sendmsg(2)` (Linux's `UIO_MAXIOV`).
const IOVECS_MAX: usize = 1024;

/// How file ranges are moved to the socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendPath {
    /// Read into a user buffer, then write.
    Copy,
    /// `sendfile(2)` on the shard's thread.
    Sendfile,
    /// io_uring `IORING_OP_SPLICE` file → pipe → socket (the default).
    #[default]
    Splice,
}

impl FromStr for SendPath {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "copy" => Ok(SendPath::Copy),
            "sendfile" => Ok(SendPath::Sendfile),
            "splice" => Ok(SendPath::Splice),
            other => Err(format!(
                "unknown send path {other:?} (expected copy, sendfile or splice)"
            )),
        }
    }
}

impl fmt::Display for SendPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            SendPath::Copy => "copy",
            SendPath::Sendfile => "sendfile",
            SendPath::Splice => "splice",
        })
    }
}

/// Writes response chunks to sockets; one per shard.
pub struct Sender {
    path: SendPath,
    ring: Rc<Ring>,
    /// Idle splice pipes, reused across sends (bounded by `splice::PIPES_IDLE_MAX`).
    pipes: RefCell<Vec<splice::Pipe>>,
    /// Idle copy buffers, reused across sends (bounded by `copy::BUFFERS_IDLE_MAX`).
    copy_buffers: RefCell<Vec<Vec<u8>>>,
}

impl Sender {
    /// Creates a shard's sender, with its io_uring. Call it on the shard
    /// (inside its glommio executor) that will use it.
    pub fn new(path: SendPath) -> io::Result<Rc<Sender>> {
        Ok(Rc::new(Sender {
            path,
            ring: Ring::new()?,
            pipes: RefCell::new(Vec::new()),
            copy_buffers: RefCell::new(Vec::new()),
        }))
    }

    /// The path file ranges take.
    pub fn path(&self) -> SendPath {
        self.path
    }

    /// Writes all chunks in order to the socket. All writes to a connection go
    /// through this. If the future is dropped before it finishes, an unknown
    /// prefix of the chunks has been written: the connection must be closed.
    pub async fn send(
        &self,
        stream: &glommio::net::TcpStream,
        chunks: Vec<OutChunk>,
    ) -> io::Result<()> {
        let socket = stream.as_raw_fd();
        set_nonblocking(socket)?;
        let mut chunks = chunks.into_iter().peekable();
        let mut gathered: Vec<Bytes> = Vec::new();
        while let Some(chunk) = chunks.next() {
            match chunk {
                OutChunk::Bytes(bytes) => {
                    if !bytes.is_empty() {
                        gathered.push(bytes);
                    }
                    let next_is_bytes = matches!(chunks.peek(), Some(OutChunk::Bytes(_)));
                    if !next_is_bytes || gathered.len() == IOVECS_MAX {
                        self.write_all_bytes(socket, &gathered).await?;
                        gathered.clear();
                    }
                }
                OutChunk::File(slice) => {
                    if slice.length == 0 {
                        continue;
                    }
                    match self.path {
                        SendPath::Copy => copy::send_file_range(self, socket, &slice).await?,
                        SendPath::Sendfile => {
                            sendfile::send_file_range(self, socket, &slice).await?
                        }
                        SendPath::Splice
                            if page_cache::fully_cached(
                                slice.file.as_raw_fd(),
                                slice.position,
                                slice.length,
                            ) =>
                        {
                            sendfile::send_file_range(self, socket, &slice).await?
                        }
                        SendPath::Splice => splice::send_file_range(self, socket, &slice).await?,
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes `pieces` fully with gathered `sendmsg(2)`s, waiting for
    /// writability when the socket is full.
    async fn write_all_bytes(&self, socket: RawFd, pieces: &[Bytes]) -> io::Result<()> {
        let mut piece_index = 0;
        let mut piece_offset = 0;
        while piece_index < pieces.len() {
            let iovecs: Vec<libc::iovec> = pieces[piece_index..]
                .iter()
                .enumerate()
                .map(|(index, piece)| {
                    let start = if index == 0 { piece_offset } else { 0 };
                    libc::iovec {
                        iov_base: piece[start..].as_ptr() as *mut libc::c_void,
                        iov_len: piece.len() - start,
                    }
                })
                .collect();
            let written = match send_iovecs(socket, &iovecs) {
                Ok(written) => written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.ring.wait_writable(socket).await?;
                    continue;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            let mut left = written;
            while left > 0 {
                let piece_left = pieces[piece_index].len() - piece_offset;
                if left >= piece_left {
                    left -= piece_left;
                    piece_index += 1;
                    piece_offset = 0;
                } else {
                    piece_offset += left;
                    left = 0;
                }
            }
        }
        Ok(())
    }

    /// Writes `buffer` fully to the socket.
    async fn write_all(&self, socket: RawFd, buffer: &[u8]) -> io::Result<()> {
        let mut written_total = 0;
        while written_total < buffer.len() {
            let rest = &buffer[written_total..];
            let iovec = libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            };
            match send_iovecs(socket, std::slice::from_ref(&iovec)) {
                Ok(written) => written_total += written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.ring.wait_writable(socket).await?
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

/// One non-blocking `sendmsg(2)`; `MSG_NOSIGNAL` so a closed peer is an error,
/// not a SIGPIPE.
fn send_iovecs(socket: RawFd, iovecs: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: zeroed msghdr is valid (no name, no control data).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iovecs.as_ptr() as *mut libc::iovec;
    message.msg_iovlen = iovecs.len() as _;
    // SAFETY: the iovecs point into live buffers borrowed for this call, and
    // `message` references only them.
    let sent = unsafe { libc::sendmsg(socket, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// The error for a file range that runs past the end of its file (the
/// segment was truncated or the range is wrong): never loop on a zero read.
fn range_past_end(slice: &engine::FileSlice) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!(
            "file range {}+{} runs past the end of the file",
            slice.position, slice.length
        ),
    )
}

/// Sets `O_NONBLOCK` on the socket (idempotent; `sendfile(2)` and splice
/// honour only the file flag).
fn set_nonblocking(socket: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a caller-provided open fd with no pointer arguments.
    let flags = unsafe { libc::fcntl(socket, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK != 0 {
        return Ok(());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(socket, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
