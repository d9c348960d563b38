//! The splice path (default): file → pipe → socket with `IORING_OP_SPLICE`.
//!
//! Both splices run on the shard's second io_uring. io_uring always hands
//! splices to its io-wq workers, so reading cold data (segments are written
//! with `O_DIRECT` and may not be in the page cache) blocks a kernel worker
//! instead of the shard. Each step fills the pipe from the file, then drains
//! it into the socket (short splices and a full socket handled), so a pipe is
//! always empty between steps and can be reused by the next send.

use super::Sender;
use engine::FileSlice;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Pipe size asked for with `F_SETPIPE_SZ` (the default `pipe-max-size`).
const PIPE_CAPACITY_BYTES: usize = 1 << 20;
/// Idle pipes kept for reuse by one sender; more are opened when many
/// connections send at once, and closed when they come back.
pub(super) const PIPES_IDLE_MAX: usize = 8;

/// A pipe used as the in-kernel buffer between file and socket.
pub(super) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity_bytes: usize,
}

impl Pipe {
    fn open() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded; both fds are open and owned by us alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // A larger pipe means fewer ring round trips per range. The kernel may
        // refuse (per-user pipe page limits): keep whatever size it has then.
        // SAFETY: fcntl on an fd we own, integer argument.
        let resized = unsafe {
            libc::fcntl(
                write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_CAPACITY_BYTES as libc::c_int,
            )
        };
        let capacity_bytes = if resized > 0 {
            resized as usize
        } else {
            // SAFETY: as above.
            let current = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if current <= 0 {
                return Err(io::Error::last_os_error());
            }
            current as usize
        };
        Ok(Pipe {
            read,
            write,
            capacity_bytes,
        })
    }

    /// Bytes waiting in the pipe.
    fn queued_bytes(&self) -> io::Result<usize> {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int into `queued`.
        if unsafe { libc::ioctl(self.read.as_raw_fd(), libc::FIONREAD, &mut queued) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(queued as usize)
    }
}

/// A pipe on loan from the sender's pool. It returns to the pool only when
/// known empty; a pipe left with data (an error, or a future dropped halfway)
/// is closed, so no stale bytes ever reach another connection.
struct PipeLease<'a> {
    sender: &'a Sender,
    pipe: Option<Pipe>,
}

impl Drop for PipeLease<'_> {
    fn drop(&mut self) {
        let Some(pipe) = self.pipe.take() else {
            return;
        };
        if matches!(pipe.queued_bytes(), Ok(0)) {
            let mut idle = self.sender.pipes.borrow_mut();
            if idle.len() < PIPES_IDLE_MAX {
                idle.push(pipe);
            }
        }
    }
}

pub(super) async fn send_file_range(
    sender: &Sender,
    socket: RawFd,
    slice: &FileSlice,
) -> io::Result<()> {
    let pipe = match sender.pipes.borrow_mut().pop() {
        Some(pipe) => pipe,
        None => Pipe::open()?,
    };
    let lease = PipeLease {
        sender,
        pipe: Some(pipe),
    };
    let Some(pipe) = lease.pipe.as_ref() else {
        return Err(io::Error::other("pipe lease is empty"));
    };
    let file = slice.file.as_raw_fd();
    let mut position = slice.position;
    let mut left_bytes = slice.length;
    while left_bytes > 0 {
        let step_bytes = left_bytes.min(pipe.capacity_bytes);
        let filled_bytes = sender
            .ring
            .splice(
                file,
                position as i64,
                pipe.write.as_raw_fd(),
                step_bytes as u32,
            )
            .await?;
        if filled_bytes == 0 {
            return Err(super::range_past_end(slice));
        }
        drain_pipe(sender, pipe, socket, filled_bytes).await?;
        position += filled_bytes as u64;
        left_bytes -= filled_bytes;
    }
    drop(lease);
    Ok(())
}

/// Splices `queued_bytes` from the pipe into the socket.
async fn drain_pipe(
    sender: &Sender,
    pipe: &Pipe,
    socket: RawFd,
    mut queued_bytes: usize,
) -> io::Result<()> {
    while queued_bytes > 0 {
        let moved = sender
            .ring
            .splice(pipe.read.as_raw_fd(), -1, socket, queued_bytes as u32)
            .await;
        match moved {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "socket accepted no bytes",
                ))
            }
            Ok(moved_bytes) => queued_bytes -= moved_bytes.min(queued_bytes),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                sender.ring.wait_writable(socket).await?
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
