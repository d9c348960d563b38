//! Streamed writes: the whole blocks of a group-commit round, written while
//! the round's appends are still arriving.
//!
//! Why a thread: glommio submits its io_uring queue only when the task queue
//! runs dry, and the 256 producers a sync wakes all run before that, so a
//! write queued from an append waits for the last of them. Here a round
//! therefore went append CPU → write → fdatasync, one after the other; the
//! write of 276 KiB alone was about 40% of the round. This writer takes the
//! blocks the appends have filled so far and writes them at once from
//! another thread (one per shard, started on first use): the device and the
//! kernel's submission work run beside the appends instead of after them,
//! and the round's own write is left with the last, partial blocks.
//!
//! Only whole blocks within the preallocated space are streamed (the first
//! may be the tail page, rewritten with the bytes that complete it), as
//! `O_DIRECT` writes from an aligned buffer through a duplicate of the
//! segment's descriptor. Nothing streamed counts as written: the round's
//! writer waits for its streamed blocks (see `Appender::settle_streams`)
//! before it advances `written`, so no sync claims a block still in flight.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::sync::Arc;

/// A buffer whose data starts on an `alignment` boundary, as `O_DIRECT`
/// requires. Owned memory, so it can travel to the writer thread.
pub(crate) struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
}

impl AlignedBuf {
    /// An empty buffer for `capacity` bytes aligned to `alignment` (a power
    /// of two).
    pub(crate) fn with_capacity(capacity: usize, alignment: usize) -> AlignedBuf {
        let mut storage = Vec::<u8>::with_capacity(capacity + alignment);
        let start = storage.as_ptr().align_offset(alignment);
        assert!(start < alignment, "a byte buffer can always be aligned");
        storage.resize(start, 0);
        AlignedBuf { storage, start }
    }

    /// Appends `bytes`; the buffer never grows past its capacity (growing
    /// would move it off the boundary).
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        assert!(
            self.storage.len() + bytes.len() <= self.storage.capacity(),
            "an aligned buffer never grows"
        );
        self.storage.extend_from_slice(bytes);
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..]
    }
}

/// One streamed write and where to report its outcome.
struct Job {
    file: Arc<File>,
    position: u64,
    buf: AlignedBuf,
    done: futures::channel::oneshot::Sender<std::io::Result<()>>,
}

/// The shard's stream-writer thread. Dropping it ends the thread once the
/// queued writes are done.
pub(crate) struct StreamWriter {
    jobs: mpsc::Sender<Job>,
}

/// The outcome of a streamed write, awaited by the round's writer.
pub(crate) type StreamDone = futures::channel::oneshot::Receiver<std::io::Result<()>>;

impl StreamWriter {
    /// Starts the thread.
    pub(crate) fn start() -> std::io::Result<StreamWriter> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("rill-stream-writer".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    let result = job.file.write_all_at(job.buf.as_slice(), job.position);
                    // The round may have been dropped (partition closed); its
                    // outcome then has no reader.
                    let _ = job.done.send(result);
                }
            })?;
        Ok(StreamWriter { jobs })
    }

    /// Queues `buf` to be written at `position` of `file`; `None` if the
    /// thread is gone (the caller then writes the bytes itself).
    pub(crate) fn submit(
        &self,
        file: Arc<File>,
        position: u64,
        buf: AlignedBuf,
    ) -> Option<StreamDone> {
        let (done, outcome) = futures::channel::oneshot::channel();
        self.jobs
            .send(Job {
                file,
                position,
                buf,
                done,
            })
            .ok()?;
        Some(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::AlignedBuf;

    #[test]
    fn aligned_buffers_start_on_the_boundary() {
        for alignment in [512usize, 4096] {
            for len in [0usize, 1, 4096, 65536] {
                let mut buf = AlignedBuf::with_capacity(len, alignment);
                let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let (a, b) = data.split_at(len / 3);
                buf.extend_from_slice(a);
                buf.extend_from_slice(b);
                assert_eq!(buf.as_slice(), &data[..]);
                assert_eq!(buf.as_slice().as_ptr() as usize % alignment, 0);
            }
        }
    }

    #[test]
    #[should_panic(expected = "never grows")]
    fn an_aligned_buffer_refuses_to_grow() {
        let mut buf = AlignedBuf::with_capacity(512, 4096);
        buf.extend_from_slice(&[1u8; 8192]);
    }
}
