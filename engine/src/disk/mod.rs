//! The engine's file I/O behind one narrow seam, [`Disk`], with two
//! implementations: [`RealDisk`] (today's: glommio DMA files on io_uring
//! for segment data, `std::fs` for the small files and the directories)
//! and [`sim::SimDisk`], a deterministic in-memory disk that loses unsynced
//! writes at a crash, tears writes at sector boundaries, fails with ENOSPC
//! and EIO, and delays and reorders completions (TigerBeetle's VOPR idea,
//! and raft-rs's storage contract: what was synced survives, nothing else
//! is promised).
//!
//! Why a per-thread current disk rather than a handle in every type: the
//! engine opens files from a few dozen places (segments, indexes,
//! checkpoints, snapshots), and all of them run on the shard's thread. The
//! seam is the free functions below; each asks the thread's current disk,
//! which is the real one unless a simulation installed its own
//! ([`install`]) on the thread that runs it. The real path costs one
//! thread-local read per call.
//!
//! The stream writer's thread writes through a duplicate of the real
//! file's descriptor; on a simulated disk the same streamed writes go to a
//! task of the shard's thread instead, with the same rule (the bytes count
//! as written before the write completes, and every later operation waits
//! for it). The log cleaner's rewrites go through the seam as well (on a
//! simulated disk the pass runs on the shard's thread, whose disk it is).
//! What stays outside it, on the real disk only: moves between log dirs,
//! and `sendfile` file slices.

pub mod data_file;
pub mod sim;

pub use data_file::{DataBuf, DataFile, ReadBytes, SimulatedFile, WritePart};

#[cfg(test)]
mod sim_tests;

use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

/// File-system operations of the engine. Paths are absolute or relative
/// to the process's directory, as `std::fs` takes them.
pub trait Disk {
    /// Opens a segment data file for direct I/O (created when `create`).
    fn open_data<'a>(
        &'a self,
        path: &'a Path,
        create: bool,
    ) -> futures::future::LocalBoxFuture<'a, io::Result<DataFile>>;
    /// `mkdir -p`.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// The names in a directory.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// A whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Creates or replaces a file with `bytes`, synced when `sync`.
    fn write(&self, path: &Path, bytes: &[u8], sync: bool) -> io::Result<()>;
    /// Cuts (or extends with zeros) a file to `len` bytes and syncs it.
    fn set_len_synced(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Renames a file (or directory) within its file system.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Deletes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Deletes a directory and everything in it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// `fsync` of a directory: its entries survive a crash.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// `syncfs` of the file system holding `path`.
    fn sync_filesystem(&self, path: &Path) -> io::Result<()>;
    /// A file's length in bytes.
    fn len(&self, path: &Path) -> io::Result<u64>;
    /// When a file was last written.
    fn modified(&self, path: &Path) -> io::Result<SystemTime>;
    /// The file system's block size at `path` (512 when unknown).
    fn block_bytes(&self, path: &Path) -> u64;
    /// Opens a file for buffered sequential reads.
    fn open_reader(&self, path: &Path) -> io::Result<FileReader>;
    /// Opens a file for appending writes, made durable by
    /// [`FileWriter::sync`].
    fn create_writer(&self, path: &Path) -> io::Result<FileWriter>;
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<dyn Disk>>> = const { RefCell::new(None) };
}

/// Makes `disk` this thread's disk until the guard is dropped (a
/// simulation, on the thread that runs it).
pub fn install(disk: Rc<dyn Disk>) -> Installed {
    let previous = CURRENT.with(|c| c.borrow_mut().replace(disk));
    Installed { previous }
}

/// Restores the thread's previous disk when dropped.
pub struct Installed {
    previous: Option<Rc<dyn Disk>>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// Runs `f` with this thread's disk.
fn with<T>(f: impl FnOnce(&dyn Disk) -> T) -> T {
    let installed = CURRENT.with(|c| c.borrow().clone());
    match installed {
        Some(disk) => f(disk.as_ref()),
        None => f(&RealDisk),
    }
}

/// Whether this thread runs on a simulated disk (streams and file slices
/// are then off).
pub fn is_simulated() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Runs blocking file work `f` off the shard's thread (glommio's blocking
/// pool), or inline on a simulated disk, which lives on this thread.
pub async fn off_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    if is_simulated() {
        return f();
    }
    glommio::executor().spawn_blocking(f).await
}

/// See [`Disk::open_data`].
pub async fn open_data(path: &Path, create: bool) -> io::Result<DataFile> {
    let installed = CURRENT.with(|c| c.borrow().clone());
    match installed {
        Some(disk) => disk.open_data(path, create).await,
        None => RealDisk.open_data(path, create).await,
    }
}

/// See [`Disk::create_dir_all`].
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    with(|d| d.create_dir_all(path))
}

/// See [`Disk::is_dir`].
pub fn is_dir(path: &Path) -> bool {
    with(|d| d.is_dir(path))
}

/// See [`Disk::read_dir`].
pub fn read_dir(path: &Path) -> io::Result<Vec<String>> {
    with(|d| d.read_dir(path))
}

/// See [`Disk::read`].
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    with(|d| d.read(path))
}

/// A whole file as UTF-8 text.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// See [`Disk::write`].
pub fn write(path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    with(|d| d.write(path, bytes, sync))
}

/// See [`Disk::set_len_synced`].
pub fn set_len_synced(path: &Path, len: u64) -> io::Result<()> {
    with(|d| d.set_len_synced(path, len))
}

/// See [`Disk::rename`].
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    with(|d| d.rename(from, to))
}

/// See [`Disk::remove_file`].
pub fn remove_file(path: &Path) -> io::Result<()> {
    with(|d| d.remove_file(path))
}

/// See [`Disk::remove_dir_all`].
pub fn remove_dir_all(path: &Path) -> io::Result<()> {
    with(|d| d.remove_dir_all(path))
}

/// See [`Disk::sync_dir`].
pub fn sync_dir(path: &Path) -> io::Result<()> {
    with(|d| d.sync_dir(path))
}

/// See [`Disk::sync_filesystem`].
pub fn sync_filesystem(path: &Path) -> io::Result<()> {
    with(|d| d.sync_filesystem(path))
}

/// See [`Disk::len`].
pub fn len(path: &Path) -> io::Result<u64> {
    with(|d| d.len(path))
}

/// See [`Disk::modified`].
pub fn modified(path: &Path) -> io::Result<SystemTime> {
    with(|d| d.modified(path))
}

/// See [`Disk::block_bytes`].
pub fn block_bytes(path: &Path) -> u64 {
    with(|d| d.block_bytes(path))
}

/// See [`Disk::open_reader`].
pub fn open_reader(path: &Path) -> io::Result<FileReader> {
    with(|d| d.open_reader(path))
}

/// See [`Disk::create_writer`].
pub fn create_writer(path: &Path) -> io::Result<FileWriter> {
    with(|d| d.create_writer(path))
}

/// A file read sequentially (recovery's scan, snapshots).
pub enum FileReader {
    /// A real file.
    Real(std::fs::File),
    /// A simulated file's content when it was opened.
    Sim(io::Cursor<Vec<u8>>),
}

impl io::Read for FileReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            FileReader::Real(f) => f.read(buf),
            FileReader::Sim(c) => c.read(buf),
        }
    }
}

impl io::Seek for FileReader {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        match self {
            FileReader::Real(f) => f.seek(pos),
            FileReader::Sim(c) => c.seek(pos),
        }
    }
}

/// A file written front to back and then synced (cleaned segments).
pub enum FileWriter {
    /// A real file, buffered.
    Real(io::BufWriter<std::fs::File>),
    /// A simulated file: its path and the bytes so far, written whole to
    /// the thread's disk at `sync`.
    Sim(PathBuf, Vec<u8>),
}

impl io::Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            FileWriter::Real(w) => w.write(buf),
            FileWriter::Sim(_, bytes) => {
                bytes.extend_from_slice(buf);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            FileWriter::Real(w) => w.flush(),
            FileWriter::Sim(..) => Ok(()),
        }
    }
}

impl FileWriter {
    /// Flushes the file, and `fsync`s it when `sync`.
    pub fn finish(self, sync: bool) -> io::Result<()> {
        match self {
            FileWriter::Real(w) => {
                let file = w.into_inner().map_err(|e| e.into_error())?;
                if sync {
                    file.sync_all()?;
                }
                Ok(())
            }
            FileWriter::Sim(path, bytes) => write(&path, &bytes, sync),
        }
    }
}

/// The real disk: glommio DMA files and `std::fs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealDisk;

impl Disk for RealDisk {
    fn open_data<'a>(
        &'a self,
        path: &'a Path,
        create: bool,
    ) -> futures::future::LocalBoxFuture<'a, io::Result<DataFile>> {
        Box::pin(DataFile::open_dma(path, create))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn write(&self, path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::File::create(path)?;
        file.write_all(bytes)?;
        if sync {
            file.sync_data()?;
        }
        Ok(())
    }

    fn set_len_synced(&self, path: &Path, len: u64) -> io::Result<()> {
        let file = std::fs::OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }

    fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path)?;
        // SAFETY: `file` is an open descriptor for the call's duration.
        if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }

    fn modified(&self, path: &Path) -> io::Result<SystemTime> {
        std::fs::metadata(path)?.modified()
    }

    fn block_bytes(&self, path: &Path) -> u64 {
        std::fs::metadata(path)
            .map(|m| std::os::unix::fs::MetadataExt::blksize(&m))
            .unwrap_or(512)
    }

    fn open_reader(&self, path: &Path) -> io::Result<FileReader> {
        std::fs::File::open(path).map(FileReader::Real)
    }

    fn create_writer(&self, path: &Path) -> io::Result<FileWriter> {
        let file = std::fs::File::create(path)?;
        Ok(FileWriter::Real(io::BufWriter::with_capacity(
            1 << 20,
            file,
        )))
    }
}
