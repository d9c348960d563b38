//! A segment data file opened for direct I/O, on the real disk (a glommio
//! [`DmaFile`] on io_uring) or a simulated one (a [`SimulatedFile`], which
//! `sim::SimFile` is). An enum rather than a trait object: the appender's
//! writes are the hot path, and a match costs nothing next to them.

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions, ReadResult};
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::rc::Rc;

/// An open segment data file.
pub enum DataFile {
    /// The real file.
    Dma(DmaFile),
    /// A simulated one.
    Sim(Rc<dyn SimulatedFile>),
}

/// A data file of a simulated disk (declared here, implemented by the
/// simulation, so the data path does not depend on it).
pub trait SimulatedFile {
    /// The alignment direct I/O asks for.
    fn alignment(&self) -> u64;
    /// The file's size.
    fn size(&self) -> u64;
    /// Writes `bytes` at `position`.
    fn write_at<'a>(
        &'a self,
        bytes: &'a [u8],
        position: u64,
    ) -> LocalBoxFuture<'a, io::Result<usize>>;
    /// Up to `length` bytes at `position`.
    fn read_at(&self, position: u64, length: usize) -> LocalBoxFuture<'_, io::Result<Vec<u8>>>;
    /// `fdatasync`.
    fn fdatasync(&self) -> LocalBoxFuture<'_, io::Result<()>>;
    /// Grows the file to `size`.
    fn pre_allocate(&self, size: u64) -> LocalBoxFuture<'_, io::Result<()>>;
    /// Sets the file's size.
    fn truncate(&self, size: u64) -> LocalBoxFuture<'_, io::Result<()>>;
}

/// A buffer for one write: DMA memory for the real file.
pub enum DataBuf {
    /// glommio's aligned (often registered) memory.
    Dma(DmaBuffer),
    /// Plain memory, for the simulated disk.
    Heap(Vec<u8>),
}

impl DataBuf {
    /// The buffer's bytes, to fill.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            DataBuf::Dma(b) => b.as_bytes_mut(),
            DataBuf::Heap(v) => v,
        }
    }
}

/// One part of a vectored write ([`DataFile::write_vectored`]).
pub enum WritePart {
    /// A buffer filled for the write.
    Filled(DataBuf),
    /// Bytes written from where they lie (see [`DataFile::write_shared`]).
    Shared(Bytes),
}

impl WritePart {
    fn as_bytes(&self) -> &[u8] {
        match self {
            WritePart::Filled(DataBuf::Dma(b)) => b.as_ref(),
            WritePart::Filled(DataBuf::Heap(v)) => v,
            WritePart::Shared(bytes) => bytes,
        }
    }
}

/// `buf` as a DMA buffer of `file`'s (plain memory is copied into one).
fn dma(file: &DmaFile, buf: DataBuf) -> DmaBuffer {
    match buf {
        DataBuf::Dma(b) => b,
        DataBuf::Heap(v) => {
            let mut b = file.alloc_dma_buffer(v.len());
            b.as_bytes_mut().copy_from_slice(&v);
            b
        }
    }
}

/// `bytes` as a DMA buffer over their own memory, which the buffer keeps
/// alive.
fn foreign(bytes: Bytes) -> DmaBuffer {
    let (data, size) = (bytes.as_ptr(), bytes.len());
    // SAFETY: `bytes` owns the `size` bytes at `data` (a `Bytes` never
    // moves its contents) and goes into the buffer as their owner, so they
    // live as long as it does; the buffer is only written from, and a
    // `Bytes` is never written to.
    unsafe { DmaBuffer::from_foreign(data, size, Box::new(bytes)) }
}

/// The bytes of a read.
pub enum ReadBytes {
    /// A glommio read, without a copy.
    Dma(ReadResult),
    /// A copy.
    Heap(Vec<u8>),
}

impl Deref for ReadBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ReadBytes::Dma(r) => r,
            ReadBytes::Heap(v) => v,
        }
    }
}

fn io_error(e: glommio::GlommioError<()>) -> io::Error {
    e.into()
}

impl DataFile {
    /// Opens a real file for reads and writes (`create`) or reads.
    pub(super) async fn open_dma(path: &Path, create: bool) -> io::Result<DataFile> {
        let mut options = OpenOptions::new();
        options.read(true);
        if create {
            options.write(true).create(true);
        }
        let file = options.dma_open(path).await.map_err(io_error)?;
        Ok(DataFile::Dma(file))
    }

    /// The alignment direct I/O needs.
    pub fn alignment(&self) -> u64 {
        match self {
            DataFile::Dma(f) => f.alignment(),
            DataFile::Sim(f) => f.alignment(),
        }
    }

    /// `v` rounded up to the alignment.
    pub fn align_up(&self, v: u64) -> u64 {
        let alignment = self.alignment().max(1);
        v.div_ceil(alignment) * alignment
    }

    /// A buffer of `size` bytes for [`DataFile::write_at`].
    pub fn alloc(&self, size: usize) -> DataBuf {
        match self {
            DataFile::Dma(f) => DataBuf::Dma(f.alloc_dma_buffer(size)),
            DataFile::Sim(_) => DataBuf::Heap(vec![0; size]),
        }
    }

    /// Writes `buf` at `position` (aligned); the bytes written.
    pub async fn write_at(&self, buf: DataBuf, position: u64) -> io::Result<usize> {
        match (self, buf) {
            (DataFile::Dma(f), buf) => f.write_at(dma(f, buf), position).await.map_err(io_error),
            (DataFile::Sim(f), DataBuf::Heap(v)) => f.write_at(&v, position).await,
            (DataFile::Sim(f), DataBuf::Dma(b)) => f.write_at(b.as_ref(), position).await,
        }
    }

    /// Writes `bytes` at `position` straight from their memory, without
    /// copying them into a DMA buffer; the bytes written. Their address,
    /// `position` and their length must be aligned for direct I/O. The
    /// memory stays alive until the kernel is done with it, even if this
    /// future is dropped first (the buffer owns a reference).
    pub async fn write_shared(&self, bytes: Bytes, position: u64) -> io::Result<usize> {
        match self {
            DataFile::Dma(f) => f.write_at(foreign(bytes), position).await.map_err(io_error),
            DataFile::Sim(f) => f.write_at(&bytes, position).await,
        }
    }

    /// Writes `parts`, one after the other, at `position` with one
    /// vectored write; the bytes written, which a short write makes fewer
    /// than the parts hold. Every part's address and length, and
    /// `position`, must be aligned for direct I/O. One write instead of one
    /// per part: each write costs a submission, a bio, a doorbell and a
    /// completion, whatever its size.
    pub async fn write_vectored(&self, parts: Vec<WritePart>, position: u64) -> io::Result<usize> {
        match self {
            DataFile::Dma(f) => {
                let buffers: Vec<DmaBuffer> = parts
                    .into_iter()
                    .map(|part| match part {
                        WritePart::Filled(buf) => dma(f, buf),
                        WritePart::Shared(bytes) => foreign(bytes),
                    })
                    .collect();
                f.write_many_at(buffers, position).await.map_err(io_error)
            }
            // Part after part: a simulated power failure may keep any
            // prefix of them, as the device may of one real write.
            DataFile::Sim(f) => {
                let mut written = 0usize;
                for part in &parts {
                    let bytes = part.as_bytes();
                    let n = f.write_at(bytes, position + written as u64).await?;
                    written += n;
                    if n < bytes.len() {
                        break;
                    }
                }
                Ok(written)
            }
        }
    }

    /// Reads up to `length` bytes at `position` (any alignment).
    pub async fn read_at(&self, position: u64, length: usize) -> io::Result<ReadBytes> {
        match self {
            DataFile::Dma(f) => f
                .read_at(position, length)
                .await
                .map(ReadBytes::Dma)
                .map_err(io_error),
            DataFile::Sim(f) => f.read_at(position, length).await.map(ReadBytes::Heap),
        }
    }

    /// Reads up to `length` bytes at an aligned `position`.
    pub async fn read_at_aligned(&self, position: u64, length: usize) -> io::Result<ReadBytes> {
        match self {
            DataFile::Dma(f) => f
                .read_at_aligned(position, length)
                .await
                .map(ReadBytes::Dma)
                .map_err(io_error),
            DataFile::Sim(f) => f.read_at(position, length).await.map(ReadBytes::Heap),
        }
    }

    /// `fdatasync`: every completed write is durable.
    pub async fn fdatasync(&self) -> io::Result<()> {
        match self {
            DataFile::Dma(f) => f.fdatasync().await.map_err(io_error),
            DataFile::Sim(f) => f.fdatasync().await,
        }
    }

    /// Reserves the file's blocks up to `size` bytes (the file grows).
    pub async fn pre_allocate(&self, size: u64) -> io::Result<()> {
        match self {
            DataFile::Dma(f) => f.pre_allocate(size, false).await.map_err(io_error),
            DataFile::Sim(f) => f.pre_allocate(size).await,
        }
    }

    /// Cuts (or extends with zeros) the file to `size` bytes.
    pub async fn truncate(&self, size: u64) -> io::Result<()> {
        match self {
            DataFile::Dma(f) => f.truncate(size).await.map_err(io_error),
            DataFile::Sim(f) => f.truncate(size).await,
        }
    }

    /// The file's size in bytes.
    pub async fn file_size(&self) -> io::Result<u64> {
        match self {
            DataFile::Dma(f) => f.file_size().await.map_err(io_error),
            DataFile::Sim(f) => Ok(f.size()),
        }
    }

    /// The descriptor of a real file (the stream writer writes through a
    /// duplicate of it); `None` on the simulated disk.
    pub fn raw_fd(&self) -> Option<RawFd> {
        match self {
            DataFile::Dma(f) => Some(f.as_raw_fd()),
            DataFile::Sim(_) => None,
        }
    }

    /// Closes the file if this is its last handle (others close it when
    /// they drop).
    pub async fn close_rc(self: Rc<DataFile>) -> io::Result<()> {
        match Rc::try_unwrap(self) {
            Ok(DataFile::Dma(f)) => f.close().await.map_err(io_error),
            Ok(DataFile::Sim(_)) | Err(_) => Ok(()),
        }
    }
}
