//! The sendfile path: `sendfile(2)` from the segment file to the socket.
//!
//! Zero copy, but it runs on the shard's thread: segment data is written with
//! `O_DIRECT`, so it is not in the page cache until something reads it, and the
//! first `sendfile` of fresh data reads the disk synchronously, stalling every
//! connection on the shard (40 ms seen). Offered for comparison; splice is the
//! default. A full socket returns `EAGAIN` (the socket is non-blocking) and the
//! path awaits writability on the ring.

use super::Sender;
use engine::FileSlice;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Largest single `sendfile(2)` request; the kernel caps one call near 2 GiB.
const SENDFILE_STEP_BYTES: usize = 1 << 30;

pub(super) async fn send_file_range(
    sender: &Sender,
    socket: RawFd,
    slice: &FileSlice,
) -> io::Result<()> {
    let file = slice.file.as_raw_fd();
    let mut offset = slice.position as libc::off_t;
    let mut left_bytes = slice.length;
    while left_bytes > 0 {
        // SAFETY: `offset` is a live off_t the call updates; fds are open.
        let sent = unsafe {
            libc::sendfile(
                socket,
                file,
                &mut offset,
                left_bytes.min(SENDFILE_STEP_BYTES),
            )
        };
        if sent > 0 {
            left_bytes -= sent as usize;
            continue;
        }
        if sent == 0 {
            return Err(super::range_past_end(slice));
        }
        let error = io::Error::last_os_error();
        match error.kind() {
            io::ErrorKind::WouldBlock => sender.ring.wait_writable(socket).await?,
            io::ErrorKind::Interrupted => {}
            _ => return Err(error),
        }
    }
    Ok(())
}
