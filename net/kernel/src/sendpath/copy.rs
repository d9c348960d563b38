//! The copy path: `pread(2)` a file range into a user buffer, then write it.
//!
//! The baseline the zero-copy paths are measured against. The read is
//! synchronous on the shard's thread (a cold read stalls the shard, as
//! `sendfile` does); the write waits for writability on the ring.

use super::Sender;
use engine::FileSlice;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Size of one read-then-write step.
pub(super) const COPY_BUFFER_BYTES: usize = 1 << 20;
/// Idle buffers kept for reuse by one sender.
pub(super) const BUFFERS_IDLE_MAX: usize = 4;

pub(super) async fn send_file_range(
    sender: &Sender,
    socket: RawFd,
    slice: &FileSlice,
) -> io::Result<()> {
    let mut buffer = sender
        .copy_buffers
        .borrow_mut()
        .pop()
        .unwrap_or_else(|| vec![0; COPY_BUFFER_BYTES]);
    let result = copy_range(sender, socket, slice, &mut buffer).await;
    let mut idle = sender.copy_buffers.borrow_mut();
    if idle.len() < BUFFERS_IDLE_MAX {
        idle.push(buffer);
    }
    result
}

async fn copy_range(
    sender: &Sender,
    socket: RawFd,
    slice: &FileSlice,
    buffer: &mut [u8],
) -> io::Result<()> {
    let file = slice.file.as_raw_fd();
    let mut position = slice.position;
    let mut left_bytes = slice.length;
    while left_bytes > 0 {
        let step_bytes = left_bytes.min(buffer.len());
        let read_bytes = pread(file, &mut buffer[..step_bytes], position)?;
        if read_bytes == 0 {
            return Err(super::range_past_end(slice));
        }
        sender.write_all(socket, &buffer[..read_bytes]).await?;
        position += read_bytes as u64;
        left_bytes -= read_bytes;
    }
    Ok(())
}

fn pread(file: RawFd, buffer: &mut [u8], position: u64) -> io::Result<usize> {
    loop {
        // SAFETY: `buffer` is a live, writable slice of the given length.
        let read = unsafe {
            libc::pread(
                file,
                buffer.as_mut_ptr() as *mut libc::c_void,
                buffer.len(),
                position as libc::off_t,
            )
        };
        if read >= 0 {
            return Ok(read as usize);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}
