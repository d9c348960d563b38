//! The direct-IO writer of the active segment.
//!
//! Writes go to the `.log` file opened with `O_DIRECT` through glommio DMA
//! buffers, aligned to the larger of the device's logical block and the
//! filesystem block. Because an O_DIRECT write must cover whole blocks, the
//! last partial block (the *tail page*) is kept in memory and written again,
//! with the next bytes appended, on the next write: the file is always a
//! prefix of valid batches followed by zeros. The tail block goes out as a
//! write of its own, so that no write spans an already written block and
//! preallocated (unwritten) ones: ext4 serves writes within one kind of
//! extent under a shared lock without blocking, and punts any other to an
//! io-wq thread where it runs synchronously (measured: 650 → 1,000 MiB/s
//! for 1 MiB appends, 1.2 k → 9.9 k single fdatasync'd 1 KiB appends/s).
//!
//! The file is preallocated in steps ahead of the write position
//! (`fallocate`), so appends never extend the file: measured here, an
//! extending O_DIRECT write goes through io-wq and costs milliseconds, an
//! in-place one microseconds. The step starts small and doubles up to the
//! configured maximum, so that ten thousand idle partitions do not reserve
//! gigabytes.
//!
//! While a group-commit round's appends arrive, [`Appender::stream`] hands
//! the whole blocks they have filled to the shard's stream writer (see
//! `stream_writer`), so the disk writes them beside the appends; the round's
//! own write then covers the rest, and waits for the streamed blocks before
//! anything counts as written.
//!
//! Appends whose bytes lie in memory at the same offset within a block as
//! they will in the file (a connection placed them so, see
//! [`crate::placement`]) have their whole blocks written from that memory;
//! only the blocks around them are copied into DMA buffers ([`plan`]).

use crate::disk::{self, DataFile, WritePart};
use crate::disk_space::{Allowance, LowSpace};
use crate::error::EngineError;
use crate::stream_writer::{AlignedBuf, StreamDone, StreamWriter};
use bytes::Bytes;
use std::fs::File;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// Largest single O_DIRECT write; bigger appends are split and issued together.
const WRITE_PIECE_BYTES: usize = 256 << 10;

/// Copies the bytes of `tail ++ parts[0] ++ parts[1] ++ ...` that fall in
/// `[piece_start, piece_start + piece.len())` into `piece`, zero-filling past
/// the end of the data. Several parts (a group commit's appends) go straight
/// into the DMA buffer, without being joined first.
fn fill_piece(piece: &mut [u8], piece_start: usize, tail: &[u8], parts: &[&[u8]]) {
    let mut cursor = 0usize;
    // Start of the current source in the logical stream.
    let mut source_start = 0usize;
    for source in std::iter::once(tail).chain(parts.iter().copied()) {
        if cursor == piece.len() {
            break;
        }
        let source_end = source_start + source.len();
        let want = piece_start + cursor;
        if want < source_end {
            let from = want - source_start;
            let n = (source.len() - from).min(piece.len() - cursor);
            piece[cursor..cursor + n].copy_from_slice(&source[from..from + n]);
            cursor += n;
        }
        source_start = source_end;
    }
    piece[cursor..].fill(0);
}

/// The last `keep` bytes of `tail ++ parts`.
fn last_bytes(keep: usize, tail: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![0u8; keep];
    let mut remaining = keep;
    for source in parts.iter().rev().copied().chain(std::iter::once(tail)) {
        if remaining == 0 {
            break;
        }
        let n = source.len().min(remaining);
        out[remaining - n..remaining].copy_from_slice(&source[source.len() - n..]);
        remaining -= n;
    }
    out
}

/// Smallest run of whole blocks written straight from a part's memory: a
/// shorter one saves less copying than its extra write costs.
const DIRECT_MIN_BYTES: usize = 32 << 10;

/// One aligned piece of a write, `at` bytes after the write's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// Copied into a DMA buffer (see [`fill_piece`]).
    Copied { at: usize, len: usize },
    /// Written from part `part`'s own memory, from its byte `from`.
    Direct {
        at: usize,
        len: usize,
        part: usize,
        from: usize,
    },
}

impl Piece {
    fn len(&self) -> usize {
        match *self {
            Piece::Copied { len, .. } | Piece::Direct { len, .. } => len,
        }
    }

    fn at(&self) -> usize {
        match *self {
            Piece::Copied { at, .. } | Piece::Direct { at, .. } => at,
        }
    }
}

/// The pieces of a [`plan`] grouped into writes, as ranges of their
/// indices: consecutive pieces go out as one vectored write of at most
/// `max_bytes`, except the rewritten tail block (the first piece when there
/// is a tail), which stays a write of its own for the reason `plan` gives.
/// A round of small appends is otherwise a write per piece: the tail
/// block, the direct run of each append, the block where it meets the
/// next, the last block.
fn group_writes(pieces: &[Piece], has_tail: bool, max_bytes: usize) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let (mut first, mut bytes) = (0usize, 0usize);
    for (i, piece) in pieces.iter().enumerate() {
        let after_tail_block = has_tail && i == 1;
        if i > first && (after_tail_block || bytes + piece.len() > max_bytes) {
            groups.push(first..i);
            (first, bytes) = (i, 0);
        }
        bytes += piece.len();
    }
    if first < pieces.len() {
        groups.push(first..pieces.len());
    }
    groups
}

/// The pieces of a write of `tail ++ parts`, padded to whole blocks of
/// `alignment`, where `tail` is `tail_bytes` long and each part is given
/// by its address and length.
///
/// O_DIRECT needs the memory address, the file position and the length of
/// a write aligned. A part whose bytes lie in memory at the same offset
/// within a block as they will in the file (the connection received them
/// there, see `api::connection`) has its whole blocks written from where
/// they lie: at [`DIRECT_MIN_BYTES`] or more, pieces of it go to the disk
/// without the copy. Everything else (the tail block, the blocks where one
/// part meets the next, parts that do not line up) is copied into DMA
/// buffers, in pieces of at most `piece_max`. The rewritten tail block is a
/// piece of its own: it is written on disk, the rest is preallocated, and
/// ext4 only takes its non-blocking path for a write within one kind of
/// extent.
fn plan(
    tail_bytes: usize,
    parts: &[(usize, usize)],
    alignment: usize,
    piece_max: usize,
) -> Vec<Piece> {
    let total: usize = tail_bytes + parts.iter().map(|&(_, len)| len).sum::<usize>();
    let padded = total.div_ceil(alignment) * alignment;
    let mut pieces = Vec::new();
    let mut copy_from = 0usize;
    let mut part_start = tail_bytes;
    for (part, &(address, len)) in parts.iter().enumerate() {
        let part_end = part_start + len;
        let lo = part_start.next_multiple_of(alignment);
        let hi = part_end / alignment * alignment;
        let lines_up = (address + (lo - part_start)).is_multiple_of(alignment);
        if hi > lo && hi - lo >= DIRECT_MIN_BYTES.max(alignment) && lines_up {
            copied_pieces(
                &mut pieces,
                copy_from..lo,
                tail_bytes > 0,
                alignment,
                piece_max,
            );
            let mut at = lo;
            while at < hi {
                let piece_len = piece_max.min(hi - at);
                let from = at - part_start;
                pieces.push(Piece::Direct {
                    at,
                    len: piece_len,
                    part,
                    from,
                });
                at += piece_len;
            }
            copy_from = hi;
        }
        part_start = part_end;
    }
    copied_pieces(
        &mut pieces,
        copy_from..padded,
        tail_bytes > 0,
        alignment,
        piece_max,
    );
    pieces
}

/// Copied pieces covering `range` (aligned), the tail block (the first
/// block, when there is a tail) alone.
fn copied_pieces(
    pieces: &mut Vec<Piece>,
    range: std::ops::Range<usize>,
    has_tail: bool,
    alignment: usize,
    piece_max: usize,
) {
    let mut at = range.start;
    while at < range.end {
        let len = if at == 0 && has_tail {
            alignment
        } else {
            piece_max.min(range.end - at)
        };
        pieces.push(Piece::Copied { at, len });
        at += len;
    }
}

/// Writes one group of pieces (see [`group_writes`]) of a write that
/// starts at file position `start`, once the shard's `budget` has room for
/// it: each piece copied from `tail ++ slices` or written from its part's
/// memory (see [`Piece`]). The bytes written.
async fn write_group(
    file: &DataFile,
    group: &[Piece],
    start: u64,
    (tail, slices, parts): (&[u8], &[&[u8]], &[Bytes]),
    budget: &WriteBudget,
) -> std::io::Result<usize> {
    // The DMA buffers too are taken only once there is room: the budget
    // bounds the shard's write memory as well.
    let bytes = group.iter().map(Piece::len).sum();
    let _permit = budget.reserve(bytes).await;
    let part = |piece: &Piece| match *piece {
        Piece::Copied { at, len } => {
            let mut buffer = file.alloc(len);
            fill_piece(buffer.as_bytes_mut(), at, tail, slices);
            WritePart::Filled(buffer)
        }
        Piece::Direct {
            len, part, from, ..
        } => WritePart::Shared(parts[part].slice(from..from + len)),
    };
    let Some(first) = group.first() else {
        return Ok(0);
    };
    let position = start + first.at() as u64;
    match group {
        // A copied piece alone goes from glommio's registered buffers.
        [_] => match part(first) {
            WritePart::Filled(buffer) => file.write_at(buffer, position).await,
            WritePart::Shared(bytes) => file.write_shared(bytes, position).await,
        },
        _ => {
            let parts = group.iter().map(part).collect();
            file.write_vectored(parts, position).await
        }
    }
}

/// Waits for `streams`; the first failure is returned.
async fn settle(streams: Vec<StreamDone>, path: &Path) -> Result<(), EngineError> {
    for done in streams {
        let outcome = done
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the stream writer stopped")));
        outcome.map_err(|e| EngineError::io(path, e))?;
    }
    Ok(())
}

/// A shard's budget of O_DIRECT write bytes in flight (see
/// [`crate::io_sizing`]), shared by its appenders: a piece waits for room
/// before it is filled and submitted, so a shard never queues more at the
/// device than the disk drains in the target time.
pub struct WriteBudget {
    semaphore: glommio::sync::Semaphore,
    capacity: u64,
}

impl WriteBudget {
    /// A budget of `bytes` (at least one byte).
    pub fn new(bytes: usize) -> WriteBudget {
        let capacity = (bytes as u64).max(1);
        WriteBudget {
            semaphore: glommio::sync::Semaphore::new(capacity),
            capacity,
        }
    }

    /// The budget's size in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Waits for room for `bytes` (a piece larger than the whole budget
    /// takes all of it, so it still runs, alone).
    async fn reserve(&self, bytes: usize) -> Option<glommio::sync::Permit<'_>> {
        // The semaphore is never closed; should it be, the write goes on
        // without a permit rather than failing.
        self.semaphore
            .acquire_permit((bytes as u64).min(self.capacity))
            .await
            .ok()
    }
}

/// First preallocation step of a new segment file.
const FIRST_PREALLOCATE_BYTES: u64 = 1 << 20;

/// Direct-IO appender of one segment file. Shard-local.
pub struct Appender {
    /// Shared with [`SyncHandle`]s, so a sync can run while the next write
    /// is in flight.
    file: Rc<DataFile>,
    path: PathBuf,
    alignment: u64,
    /// Logical end: bytes of valid data written to the file.
    written_bytes: u64,
    /// Bytes of the partial last block, kept to be rewritten.
    tail: Vec<u8>,
    /// Bytes the file has been preallocated to.
    preallocated_bytes: u64,
    /// Next preallocation step.
    step_bytes: u64,
    max_step_bytes: u64,
    /// A duplicate of the file's descriptor for the stream writer, made on
    /// the first streamed write.
    stream_file: Option<Arc<File>>,
    /// Streamed writes not yet waited for, oldest first.
    streams: Vec<StreamDone>,
}

impl Appender {
    /// Opens (creating if needed) a segment file whose valid data ends at
    /// `written_bytes`; the tail block is read back so it can be rewritten.
    pub async fn open(
        path: &Path,
        written_bytes: u64,
        max_step_bytes: u64,
    ) -> Result<Appender, EngineError> {
        let file = disk::open_data(path, true)
            .await
            .map_err(|e| EngineError::io(path, e))?;
        // Writes are aligned to the filesystem block, not only to the
        // device's logical block: ext4 treats a direct write that is not
        // fs-block aligned, or that spans a written and an unwritten extent,
        // as needing the inode lock exclusively, and io_uring then punts it
        // to an io-wq thread where it waits synchronously (milliseconds).
        let fs_block_bytes = disk::block_bytes(path).clamp(512, 64 << 10);
        let alignment = file.alignment().max(512).max(fs_block_bytes);
        let size = file
            .file_size()
            .await
            .map_err(|e| EngineError::io(path, e))?;
        let tail_start = written_bytes - written_bytes % alignment;
        let mut tail = Vec::with_capacity(alignment as usize);
        if written_bytes > tail_start {
            let read = file
                .read_at_aligned(tail_start, alignment as usize)
                .await
                .map_err(|e| EngineError::io(path, e))?;
            let keep = (written_bytes - tail_start) as usize;
            if read.len() < keep {
                return Err(EngineError::io(
                    path,
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "tail block shorter than the recovered log",
                    ),
                ));
            }
            tail.extend_from_slice(&read[..keep]);
        }
        Ok(Appender {
            file: Rc::new(file),
            path: path.to_path_buf(),
            alignment,
            written_bytes,
            tail,
            preallocated_bytes: size,
            step_bytes: FIRST_PREALLOCATE_BYTES.min(max_step_bytes.max(alignment)),
            max_step_bytes: max_step_bytes.max(alignment),
            stream_file: None,
            streams: Vec::new(),
        })
    }

    /// Logical bytes written.
    pub fn written_bytes(&self) -> u64 {
        self.written_bytes
    }

    /// Block alignment of the file.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Hands the whole blocks of `tail ++ parts` (the bytes right after the
    /// current end) to the stream writer, if they come to at least
    /// `min_bytes` and lie within the preallocated space; the partial last
    /// block stays for the next write. Returns the bytes of `parts` taken.
    ///
    /// The bytes count as written from here on (`written_bytes` moves past
    /// them, so the next write starts after them), but every later
    /// operation first waits for the streamed writes and fails if one did.
    pub(crate) fn stream(
        &mut self,
        writer: Option<&StreamWriter>,
        parts: &[&[u8]],
        min_bytes: usize,
    ) -> usize {
        let alignment = self.alignment as usize;
        let data_bytes: usize = parts.iter().map(|p| p.len()).sum();
        let start = self.written_bytes - self.tail.len() as u64;
        let whole = (self.tail.len() + data_bytes) / alignment * alignment;
        if whole < min_bytes.max(alignment) || start + whole as u64 > self.preallocated_bytes {
            return 0;
        }
        let mut buf = AlignedBuf::with_capacity(whole, alignment);
        buf.extend_from_slice(&self.tail);
        let mut remaining = whole - self.tail.len();
        for part in parts {
            let n = part.len().min(remaining);
            buf.extend_from_slice(&part[..n]);
            remaining -= n;
        }
        assert_eq!(remaining, 0, "the whole blocks lie within the parts");
        let Some(done) = self.submit_stream(writer, start, buf) else {
            return 0;
        };
        self.streams.push(done);
        let taken = whole - self.tail.len();
        self.written_bytes = start + whole as u64;
        self.tail.clear();
        taken
    }

    /// Hands `buf` (whole blocks at `start`) to the stream writer; on a
    /// simulated disk, to a task of this thread that writes it the same
    /// way (the bytes count as written before the write completes).
    fn submit_stream(
        &mut self,
        writer: Option<&StreamWriter>,
        start: u64,
        buf: AlignedBuf,
    ) -> Option<StreamDone> {
        if let DataFile::Sim(file) = &*self.file {
            let (sender, done) = futures::channel::oneshot::channel();
            let file = file.clone();
            glommio::spawn_local(async move {
                let written = file.write_at(buf.as_slice(), start).await.map(drop);
                let _ = sender.send(written);
            })
            .detach();
            return Some(done);
        }
        let file = match self.stream_file() {
            Ok(file) if writer.is_some() => file,
            Ok(_) => return None,
            Err(e) => {
                tracing::debug!(path = %self.path.display(), error = %e, "no streamed writes");
                return None;
            }
        };
        writer?.submit(file, start, buf)
    }

    /// The descriptor the stream writer writes through.
    fn stream_file(&mut self) -> std::io::Result<Arc<File>> {
        if let Some(file) = &self.stream_file {
            return Ok(file.clone());
        }
        let Some(raw_fd) = self.file.raw_fd() else {
            return Err(std::io::Error::other("no descriptor on a simulated disk"));
        };
        // SAFETY: the DmaFile owns this descriptor and is alive for the
        // duration of the borrow; the duplicate is owned independently.
        let fd = unsafe { BorrowedFd::borrow_raw(raw_fd) }.try_clone_to_owned()?;
        let file = Arc::new(File::from(fd));
        self.stream_file = Some(file.clone());
        Ok(file)
    }

    /// Waits for the streamed writes; the first failure is returned.
    async fn settle_streams(&mut self) -> Result<(), EngineError> {
        settle(std::mem::take(&mut self.streams), &self.path).await
    }

    /// Writes `parts`, one after the other, right after the current end;
    /// each piece waits for room in the shard's `budget` first. Returns the
    /// bytes written straight from the parts' memory (see [`plan`]).
    pub async fn write(
        &mut self,
        parts: &[Bytes],
        budget: &WriteBudget,
        space: &LowSpace,
        allowance: Allowance,
    ) -> Result<u64, EngineError> {
        // What was streamed lies before these parts: it is written before
        // they count as written.
        let streams = std::mem::take(&mut self.streams);
        let data_bytes: usize = parts.iter().map(|p| p.len()).sum();
        if data_bytes == 0 {
            return settle(streams, &self.path).await.map(|()| 0);
        }
        let start = self.written_bytes - self.tail.len() as u64;
        debug_assert_eq!(start % self.alignment, 0);
        let end = self.written_bytes + data_bytes as u64;
        self.ensure_preallocated(end, space, allowance).await?;
        let spans: Vec<(usize, usize)> = parts
            .iter()
            .map(|p| (p.as_ptr() as usize, p.len()))
            .collect();
        // Large writes go out as several aligned pieces at once: each copied
        // piece fits glommio's registered buffer pool (no mmap per write),
        // and the device sees a queue depth above one, like a tuned fio run.
        let piece_bytes = WRITE_PIECE_BYTES.max(self.alignment as usize);
        let pieces = plan(
            self.tail.len(),
            &spans,
            self.alignment as usize,
            piece_bytes,
        );
        let slices: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        let (file, tail, slices) = (&self.file, &self.tail, &slices);
        let direct_bytes: u64 = pieces
            .iter()
            .filter(|p| matches!(p, Piece::Direct { .. }))
            .map(|p| p.len() as u64)
            .sum();
        let writes: Vec<_> = group_writes(&pieces, !tail.is_empty(), piece_bytes)
            .into_iter()
            .map(|group| write_group(file, &pieces[group], start, (tail, slices, parts), budget))
            .collect();
        // The streamed blocks before these are still in flight: both go on
        // together, and neither counts until both are done.
        let (streamed, results) = futures::future::join(
            settle(streams, &self.path),
            futures::future::join_all(writes),
        )
        .await;
        streamed?;
        let mut written = 0usize;
        for result in results {
            written += result.map_err(|e| EngineError::io(&self.path, e))?;
        }
        let padded = (self.tail.len() + data_bytes).div_ceil(self.alignment as usize)
            * self.alignment as usize;
        if written != padded {
            return Err(EngineError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::WriteZero, "short direct write"),
            ));
        }
        self.written_bytes = end;
        let keep = (end % self.alignment) as usize;
        self.tail = last_bytes(keep, &self.tail, slices);
        Ok(direct_bytes)
    }

    /// Preallocates past `end` in the next step, counted against `space`
    /// before it is issued, so a full disk refuses appends instead of
    /// failing a preallocation. A step takes at most a quarter of the room
    /// left above the floor of `allowance`, and no less than the write
    /// needs (the append itself was counted when it was taken): the free
    /// space a check sees counts preallocated, unwritten blocks as used, so
    /// a big last step would leave them idle while appends are refused.
    async fn ensure_preallocated(
        &mut self,
        end: u64,
        space: &LowSpace,
        allowance: Allowance,
    ) -> Result<(), EngineError> {
        if end <= self.preallocated_bytes {
            return Ok(());
        }
        let mut target = self.preallocated_bytes;
        while target < end {
            target += self.step_bytes;
            self.step_bytes = (self.step_bytes * 2).min(self.max_step_bytes);
        }
        let affordable = self
            .preallocated_bytes
            .saturating_add(space.room_bytes(allowance) / 4);
        let target = self.file.align_up(target.min(affordable).max(end));
        debug_assert!(target >= end);
        space.charge(target - self.preallocated_bytes);
        self.file
            .pre_allocate(target)
            .await
            .map_err(|e| EngineError::io(&self.path, e))?;
        self.preallocated_bytes = target;
        Ok(())
    }

    /// `fdatasync`: makes every completed write durable.
    pub async fn sync(&self) -> Result<(), EngineError> {
        fdatasync(&self.file, &self.path).await
    }

    /// A handle that syncs this file independently of the appender, so the
    /// group commit can sync one round while it writes the next.
    pub fn sync_handle(&self) -> SyncHandle {
        SyncHandle {
            file: self.file.clone(),
            path: self.path.clone(),
        }
    }

    /// Trims the preallocated space (segment sealed or broker stopping) and syncs.
    pub async fn seal(mut self) -> Result<(), EngineError> {
        self.settle_streams().await?;
        self.file
            .truncate(self.written_bytes)
            .await
            .map_err(|e| EngineError::io(&self.path, e))?;
        self.sync().await?;
        // A sync handle still held elsewhere closes the file when dropped.
        self.file
            .close_rc()
            .await
            .map_err(|e| EngineError::io(&self.path, e))
    }

    /// Cuts the logical end back to `size_bytes` (replication truncation,
    /// recovery), zeroing what follows so no stale batch survives.
    pub async fn truncate(&mut self, size_bytes: u64) -> Result<(), EngineError> {
        assert!(size_bytes <= self.written_bytes);
        // A streamed write landing after the cut would bring bytes back.
        self.settle_streams().await?;
        self.file
            .truncate(size_bytes)
            .await
            .map_err(|e| EngineError::io(&self.path, e))?;
        self.preallocated_bytes = size_bytes;
        let tail_start = size_bytes - size_bytes % self.alignment;
        let keep = (size_bytes - tail_start) as usize;
        let mut tail = Vec::with_capacity(self.alignment as usize);
        if keep > 0 {
            let read = self
                .file
                .read_at_aligned(tail_start, self.alignment as usize)
                .await
                .map_err(|e| EngineError::io(&self.path, e))?;
            tail.extend_from_slice(&read[..keep.min(read.len())]);
        }
        self.tail = tail;
        self.written_bytes = size_bytes;
        self.sync().await
    }
}

async fn fdatasync(file: &DataFile, path: &Path) -> Result<(), EngineError> {
    file.fdatasync().await.map_err(|e| EngineError::io(path, e))
}

/// Syncs one segment file; see [`Appender::sync_handle`].
#[derive(Clone)]
pub struct SyncHandle {
    file: Rc<DataFile>,
    path: PathBuf,
}

impl SyncHandle {
    /// `fdatasync` of the file: every write completed before it is durable.
    pub async fn sync(&self) -> Result<(), EngineError> {
        fdatasync(&self.file, &self.path).await
    }

    /// Whether both handles sync the same open file.
    pub fn same_file(&self, other: &SyncHandle) -> bool {
        Rc::ptr_eq(&self.file, &other.file)
    }
}

/// Makes glommio probe the data dir's device for io_uring polled I/O with a
/// file that has data.
///
/// Glommio decides once per device whether DMA reads may go to its polling
/// ring, by reading the first block of the first file opened there. If that
/// file is empty the probe read "succeeds" with 0 bytes, glommio concludes
/// the device supports polling, and every later read on a device that does
/// not (virtio disks, most VMs) fails with EOPNOTSUPP. Opening a file with a
/// full block of data first makes the probe see the real answer.
pub async fn prime_iopoll_probe(dir: &Path) -> Result<(), EngineError> {
    if disk::is_simulated() {
        return Ok(());
    }
    // One file per executor thread: shards start concurrently on one dir.
    static PROBE_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBE_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(".rill-iopoll-probe-{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir).map_err(|e| EngineError::io(dir, e))?;
    std::fs::write(&path, vec![0u8; 64 << 10]).map_err(|e| EngineError::io(&path, e))?;
    let opened = glommio::io::OpenOptions::new()
        .read(true)
        .dma_open(&path)
        .await;
    let _ = std::fs::remove_file(&path);
    let file = opened.map_err(|e| EngineError::io(&path, e.into()))?;
    file.close()
        .await
        .map_err(|e| EngineError::io(&path, e.into()))
}

#[cfg(test)]
mod tests {
    use super::{fill_piece, group_writes, last_bytes, plan, Piece};

    /// The pieces cover the padded write in order without gaps, and each
    /// direct piece is whole blocks of one part, at an aligned address, at
    /// the part's own place in the write.
    fn check_cover(pieces: &[Piece], tail: usize, parts: &[(usize, usize)], alignment: usize) {
        let total = tail + parts.iter().map(|p| p.1).sum::<usize>();
        let mut at = 0;
        for piece in pieces {
            match *piece {
                Piece::Copied { at: a, len } => {
                    assert_eq!(a, at);
                    at += len;
                }
                Piece::Direct {
                    at: a,
                    len,
                    part,
                    from,
                } => {
                    assert_eq!(a, at);
                    let part_start = tail + parts[..part].iter().map(|p| p.1).sum::<usize>();
                    assert_eq!(a, part_start + from, "{piece:?}");
                    assert!(from + len <= parts[part].1, "{piece:?}");
                    assert_eq!((parts[part].0 + from) % alignment, 0, "{piece:?}");
                    assert_eq!(len % alignment, 0, "{piece:?}");
                    at += len;
                }
            }
            assert!(piece.len() <= 256 << 10);
        }
        assert_eq!(at, total.div_ceil(alignment) * alignment);
    }

    /// The groups take every piece once, in order, each at most
    /// `max_bytes` and the tail block alone, and none could have taken the
    /// next group's first piece.
    fn check_groups(pieces: &[Piece], has_tail: bool, max_bytes: usize) {
        let groups = group_writes(pieces, has_tail, max_bytes);
        let mut next = 0;
        for (i, group) in groups.iter().enumerate() {
            assert_eq!(group.start, next, "{groups:?}");
            assert!(group.end > group.start, "{groups:?}");
            next = group.end;
            let bytes: usize = pieces[group.clone()].iter().map(Piece::len).sum();
            assert!(
                bytes <= max_bytes.max(pieces[group.start].len()),
                "{groups:?}"
            );
            if has_tail && i == 0 {
                assert_eq!(group.len(), 1, "the tail block alone: {groups:?}");
            } else if let Some(following) = groups.get(i + 1) {
                assert!(
                    bytes + pieces[following.start].len() > max_bytes,
                    "{groups:?}"
                );
            }
        }
        assert_eq!(next, pieces.len());
    }

    #[test]
    fn a_round_of_small_appends_in_line_is_two_writes() {
        // Two appends of 100 KiB, each received in line with the file: the
        // tail block, then their direct runs, the block where they meet and
        // the last block in one vectored write.
        let first = 100 << 10;
        let parts = [
            (0x40_0000 + 100, first),
            (0x80_0000 + (100 + first) % 4096, first),
        ];
        let pieces = plan(100, &parts, 4096, 256 << 10);
        check_cover(&pieces, 100, &parts, 4096);
        assert_eq!(pieces.len(), 5, "{pieces:?}");
        check_groups(&pieces, true, 256 << 10);
        assert_eq!(group_writes(&pieces, true, 256 << 10), vec![0..1, 1..5]);
        // Without a tail, the first block joins the rest.
        let parts = [(0x40_0000, first), (0x80_0000 + first % 4096, first)];
        let pieces = plan(0, &parts, 4096, 256 << 10);
        assert_eq!(
            group_writes(&pieces, false, 256 << 10),
            vec![0..pieces.len()]
        );
    }

    #[test]
    fn parts_that_do_not_line_up_are_all_copied_the_tail_block_alone() {
        let parts = [(0x10_0001, 300 << 10), (0x20_0000 + 7, 100 << 10)];
        let pieces = plan(100, &parts, 4096, 256 << 10);
        check_cover(&pieces, 100, &parts, 4096);
        assert!(pieces.iter().all(|p| matches!(p, Piece::Copied { .. })));
        assert_eq!(pieces[0], Piece::Copied { at: 0, len: 4096 });
    }

    #[test]
    fn a_part_received_in_line_with_the_file_is_written_from_its_memory() {
        // A tail of 100 bytes: the part's bytes lie 100 bytes into a block
        // in memory as they will in the file.
        let parts = [(0x40_0000 + 100, 600 << 10)];
        let pieces = plan(100, &parts, 4096, 256 << 10);
        check_cover(&pieces, 100, &parts, 4096);
        let direct: usize = pieces
            .iter()
            .filter(|p| matches!(p, Piece::Direct { .. }))
            .map(Piece::len)
            .sum();
        // All but the first block (the tail's) and the last partial one.
        assert_eq!(direct, (600 << 10) + 100 - 4096 - 100);
        assert_eq!(pieces[0], Piece::Copied { at: 0, len: 4096 });
        assert!(matches!(pieces.last(), Some(Piece::Copied { .. })));
    }

    #[test]
    fn only_the_parts_in_line_skip_the_copy_and_small_ones_never() {
        let (first, second) = ((200 << 10) + 5, 20 << 10);
        let parts = [
            // Out of line.
            (0x10_0000 + 7, first),
            // In line, but too small.
            (0x80_0000 + first % 4096, second),
            // In line.
            (0x90_0000 + (first + second) % 4096, 300 << 10),
        ];
        let pieces = plan(0, &parts, 4096, 256 << 10);
        check_cover(&pieces, 0, &parts, 4096);
        let direct_parts: Vec<usize> = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Direct { part, .. } => Some(*part),
                Piece::Copied { .. } => None,
            })
            .collect();
        assert!(!direct_parts.is_empty());
        assert!(direct_parts.iter().all(|&p| p == 2), "{pieces:?}");
    }

    #[test]
    fn planned_pieces_always_cover_the_write() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        };
        for _ in 0..2_000 {
            let alignment = [512, 4096][next(2)];
            let tail = next(alignment);
            let mut start = tail;
            let parts: Vec<(usize, usize)> = (0..1 + next(5))
                .map(|_| {
                    let len = next(700 << 10);
                    // Half the parts in line with where they land.
                    let address = if next(2) == 0 {
                        0x100_0000 + start % alignment
                    } else {
                        0x100_0000 + next(alignment)
                    };
                    start += len;
                    (address, len)
                })
                .collect();
            let pieces = plan(tail, &parts, alignment, 256 << 10);
            check_cover(&pieces, tail, &parts, alignment);
            check_groups(&pieces, tail > 0, 256 << 10);
            if tail > 0 {
                assert_eq!(
                    pieces[0],
                    Piece::Copied {
                        at: 0,
                        len: alignment
                    }
                );
            }
        }
    }

    #[test]
    fn pieces_reassemble_tail_and_parts() {
        let tail: Vec<u8> = (0..100u8).collect();
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut expected = tail.clone();
        expected.extend_from_slice(&data);
        expected.resize(1536, 0);
        for split in [&[1000usize][..], &[0, 1000], &[1, 998, 1], &[300, 300, 400]] {
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut at = 0;
            for &len in split {
                parts.push(&data[at..at + len]);
                at += len;
            }
            for piece_bytes in [512usize, 1024, 1536] {
                let mut joined = Vec::new();
                let mut start = 0;
                while start < 1536 {
                    let len = piece_bytes.min(1536 - start);
                    let mut piece = vec![0xAAu8; len];
                    fill_piece(&mut piece, start, &tail, &parts);
                    joined.extend_from_slice(&piece);
                    start += len;
                }
                assert_eq!(
                    joined, expected,
                    "piece size {piece_bytes}, split {split:?}"
                );
            }
            for keep in [0usize, 1, 99, 100, 101, 600, 1100] {
                let whole = &expected[..1100];
                assert_eq!(
                    last_bytes(keep, &tail, &parts),
                    whole[1100 - keep..].to_vec(),
                    "keep {keep}, split {split:?}"
                );
            }
        }
    }
}
