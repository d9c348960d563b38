//! A deterministic simulated disk, for seeded simulations of the engine
//! (`engine/tests/simulation.rs`).
//!
//! What survives a [`SimDisk::crash`], and nothing more:
//! - **File data:** what an `fdatasync` (or a synced whole-file write)
//!   covered. A sync covers the writes that had *completed* when it was
//!   issued, not those completing while it runs. Of the writes after that,
//!   each independently survives whole, torn (only its first sectors), or
//!   not at all; size changes (preallocation, truncation) survive as a
//!   prefix, in order.
//! - **Names:** the directory operations (create, rename, unlink, mkdir)
//!   up to the last `fsync` of the directory they touch, plus a random
//!   prefix of the later ones (a journal commits in order). Strict POSIX: a
//!   file's sync does not make its name durable.
//!
//! Faults: writes past `capacity_bytes` fail with ENOSPC; data writes and
//! syncs fail with EIO at `eio_per_million`. Every asynchronous operation
//! completes after a random number of executor yields, so operations in
//! flight together complete in a seed-chosen order; its effect lands when
//! it completes.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use futures::future::LocalBoxFuture;

/// A deliberately broken variant of the engine, switched on for one
/// thread to show that the simulation catches it (never in a broker: only
/// a simulation sets it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// The engine as it is.
    None,
    /// The group commit acknowledges appends without its `fdatasync`.
    AckBeforeSync,
    /// A new segment's file is not made durable in its directory.
    NoDirSyncOnRoll,
    /// The cleaner's rewrite of a segment is renamed in without its sync.
    UnsyncedCleanedSegment,
}

thread_local! {
    static BUG: Cell<Bug> = const { Cell::new(Bug::None) };
}

/// Switches `bug` on for this thread (see [`Bug`]).
pub fn set_bug(bug: Bug) {
    BUG.with(|b| b.set(bug));
}

/// The bug switched on for this thread.
pub fn bug() -> Bug {
    BUG.with(Cell::get)
}

/// How the simulated disk behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// The seed of every choice the disk makes.
    pub seed: u64,
    /// The unit a write tears at.
    pub sector_bytes: u64,
    /// The alignment direct I/O asks for.
    pub alignment_bytes: u64,
    /// Bytes the files may hold in all; past it writes fail with ENOSPC.
    pub capacity_bytes: u64,
    /// The chance in a million that a data write or a sync fails with EIO.
    pub eio_per_million: u32,
    /// The most yields an operation waits before it completes.
    pub max_delay_yields: u32,
}

impl SimConfig {
    /// A disk of 1 GiB with 512-byte sectors and 4 KiB alignment, no
    /// errors, completions delayed by up to 8 yields.
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            sector_bytes: 512,
            alignment_bytes: 4096,
            capacity_bytes: 1 << 30,
            eio_per_million: 0,
            max_delay_yields: 8,
        }
    }
}

/// SplitMix64: a tiny PRNG whose sequence never changes across versions,
/// so a seed replays the same run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }

    /// True with probability `per_million` / 1,000,000.
    pub fn chance(&mut self, per_million: u32) -> bool {
        self.below(1_000_000) < u64::from(per_million)
    }
}

/// An operation on a file's content since its last sync.
#[derive(Debug, Clone)]
enum DataOp {
    Write { position: u64, bytes: Vec<u8> },
    Resize { size: u64 },
}

/// One file's content.
#[derive(Debug, Clone, Default)]
struct Inode {
    /// What reads see.
    current: Vec<u8>,
    /// What a crash keeps for sure.
    durable: Vec<u8>,
    /// Completed operations not yet synced, with their completion number.
    unsynced: Vec<(u64, DataOp)>,
    /// The last change's tick (modification time).
    modified_tick: u64,
}

/// A directory operation not yet durable.
#[derive(Debug, Clone)]
enum NameOp {
    Link { path: PathBuf, inode: u64 },
    Unlink { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf },
    Mkdir { path: PathBuf },
    Rmdir { path: PathBuf },
}

impl NameOp {
    /// Whether an `fsync` of `dir` makes it durable.
    fn in_dir(&self, dir: &Path) -> bool {
        let parent_is = |p: &Path| p.parent() == Some(dir);
        match self {
            NameOp::Link { path, .. }
            | NameOp::Unlink { path }
            | NameOp::Mkdir { path }
            | NameOp::Rmdir { path } => parent_is(path),
            NameOp::Rename { from, to } => parent_is(from) || parent_is(to),
        }
    }
}

/// A namespace: file paths to inodes, and directories.
#[derive(Debug, Clone, Default)]
struct Names {
    files: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
}

impl Names {
    fn apply(&mut self, op: &NameOp) {
        match op {
            NameOp::Link { path, inode } => {
                self.files.insert(path.clone(), *inode);
            }
            NameOp::Unlink { path } => {
                self.files.remove(path);
            }
            NameOp::Rename { from, to } => {
                if let Some(inode) = self.files.remove(from) {
                    self.files.insert(to.clone(), inode);
                } else if self.dirs.contains(from) {
                    self.rename_dir(from, to);
                }
            }
            NameOp::Mkdir { path } => {
                self.dirs.insert(path.clone());
            }
            NameOp::Rmdir { path } => {
                self.dirs.retain(|d| !d.starts_with(path));
                self.files.retain(|f, _| !f.starts_with(path));
            }
        }
    }

    fn rename_dir(&mut self, from: &Path, to: &Path) {
        let moved = |p: &PathBuf| match p.strip_prefix(from) {
            Ok(rest) => to.join(rest),
            Err(_) => p.clone(),
        };
        self.dirs = self.dirs.iter().map(moved).collect();
        self.files = self.files.iter().map(|(p, i)| (moved(p), *i)).collect();
    }

    /// Drops what lies in a directory that does not exist.
    fn prune(&mut self) {
        let dirs = self.dirs.clone();
        let rooted = |p: &Path| match p.parent() {
            None => true,
            Some(parent) => {
                parent.as_os_str().is_empty() || parent == Path::new("/") || dirs.contains(parent)
            }
        };
        self.files.retain(|p, _| rooted(p));
        let mut kept = BTreeSet::new();
        for dir in &self.dirs {
            if dir
                .ancestors()
                .skip(1)
                .all(|a| a.as_os_str().is_empty() || a == Path::new("/") || self.dirs.contains(a))
            {
                kept.insert(dir.clone());
            }
        }
        self.dirs = kept;
    }
}

/// The whole simulated state.
#[derive(Debug)]
struct State {
    rng: Rng,
    inodes: BTreeMap<u64, Inode>,
    next_inode: u64,
    current: Names,
    durable: Names,
    pending_names: Vec<NameOp>,
    /// Completion counter: orders writes against syncs.
    completed: u64,
    tick: u64,
    crashes: u64,
}

/// A simulated disk; see the module docs.
#[derive(Debug)]
pub struct SimDisk {
    config: SimConfig,
    state: RefCell<State>,
}

/// A data file open on a [`SimDisk`].
#[derive(Debug, Clone)]
pub struct SimFile {
    disk: Rc<SimDisk>,
    inode: u64,
    /// The crash generation it was opened in: after a crash it fails.
    generation: u64,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

impl SimDisk {
    /// An empty disk with the root directory `/`.
    pub fn new(config: SimConfig) -> Rc<SimDisk> {
        let mut names = Names::default();
        names.dirs.insert(PathBuf::from("/"));
        Rc::new(SimDisk {
            config,
            state: RefCell::new(State {
                rng: Rng::new(config.seed),
                inodes: BTreeMap::new(),
                next_inode: 1,
                current: names.clone(),
                durable: names,
                pending_names: Vec::new(),
                completed: 0,
                tick: 0,
                crashes: 0,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> SimConfig {
        self.config
    }

    /// Power loss: every file and name falls back to what was durable
    /// (plus what the module docs say may survive); open files fail from
    /// now on.
    pub fn crash(&self) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let keep = state.rng.below(state.pending_names.len() as u64 + 1) as usize;
        for op in state.pending_names.drain(..).take(keep) {
            state.durable.apply(&op);
        }
        state.durable.prune();
        state.current = state.durable.clone();
        let sector = self.config.sector_bytes.max(1);
        for inode in state.inodes.values_mut() {
            let mut image = std::mem::take(&mut inode.durable);
            let mut resizes_kept = true;
            for (_, op) in std::mem::take(&mut inode.unsynced) {
                match op {
                    DataOp::Resize { size } => {
                        resizes_kept &= state.rng.below(2) == 0;
                        if resizes_kept {
                            image.resize(size as usize, 0);
                        }
                    }
                    DataOp::Write { position, bytes } => {
                        let sectors = (bytes.len() as u64).div_ceil(sector);
                        let kept = match state.rng.below(3) {
                            0 => 0,
                            1 => sectors,
                            _ => state.rng.below(sectors + 1),
                        };
                        let kept_bytes = (kept * sector).min(bytes.len() as u64) as usize;
                        apply_write(&mut image, position, &bytes[..kept_bytes]);
                    }
                }
            }
            inode.current = image.clone();
            inode.durable = image;
        }
        let linked: BTreeSet<u64> = state.current.files.values().copied().collect();
        state.inodes.retain(|i, _| linked.contains(i));
        state.crashes += 1;
    }

    /// Every file with its size, for a failed check's message.
    pub fn listing(&self) -> String {
        let state = self.state.borrow();
        let mut out = String::new();
        for (path, inode) in &state.current.files {
            let size = state.inodes.get(inode).map_or(0, |i| i.current.len());
            out.push_str(&format!("{} {size}\n", path.display()));
        }
        out
    }

    /// How many crashes the disk went through.
    pub fn crashes(&self) -> u64 {
        self.state.borrow().crashes
    }

    /// Bytes the files hold now.
    pub fn used_bytes(&self) -> u64 {
        let state = self.state.borrow();
        state.inodes.values().map(|i| i.current.len() as u64).sum()
    }

    /// A completion delay: up to `max_delay_yields` yields, seed-chosen.
    async fn delay(&self) {
        let yields = {
            let mut state = self.state.borrow_mut();
            state.rng.below(u64::from(self.config.max_delay_yields) + 1)
        };
        for _ in 0..yields {
            futures_lite::future::yield_now().await;
        }
    }

    /// EIO now and then, as configured.
    fn maybe_eio(&self) -> io::Result<()> {
        let failed = self
            .state
            .borrow_mut()
            .rng
            .chance(self.config.eio_per_million);
        if failed {
            return Err(errno(libc::EIO));
        }
        Ok(())
    }

    /// ENOSPC when growing a file by `growth` bytes would pass the capacity.
    fn check_room(&self, growth: u64) -> io::Result<()> {
        if growth > 0 && self.used_bytes() + growth > self.config.capacity_bytes {
            return Err(errno(libc::ENOSPC));
        }
        Ok(())
    }

    fn inode_of(&self, path: &Path) -> io::Result<u64> {
        let state = self.state.borrow();
        state
            .current
            .files
            .get(path)
            .copied()
            .ok_or_else(|| not_found(path))
    }

    fn parent_exists(&self, path: &Path) -> io::Result<()> {
        let state = self.state.borrow();
        match path.parent() {
            Some(parent) if !state.current.dirs.contains(parent) => Err(not_found(parent)),
            _ => Ok(()),
        }
    }

    fn name_op(&self, op: NameOp) {
        let mut state = self.state.borrow_mut();
        state.current.apply(&op);
        state.pending_names.push(op);
    }

    /// The inode at `path`, created (empty) when missing.
    fn create(&self, path: &Path) -> io::Result<u64> {
        if let Ok(inode) = self.inode_of(path) {
            return Ok(inode);
        }
        self.parent_exists(path)?;
        let inode = {
            let mut state = self.state.borrow_mut();
            let inode = state.next_inode;
            state.next_inode += 1;
            state.inodes.insert(inode, Inode::default());
            inode
        };
        self.name_op(NameOp::Link {
            path: path.to_path_buf(),
            inode,
        });
        Ok(inode)
    }

    /// Applies a completed data operation to an inode.
    fn complete(&self, inode: u64, op: DataOp) -> io::Result<()> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.completed += 1;
        state.tick += 1;
        let (completed, tick) = (state.completed, state.tick);
        let file = state
            .inodes
            .get_mut(&inode)
            .ok_or_else(|| errno(libc::EBADF))?;
        match &op {
            DataOp::Write { position, bytes } => apply_write(&mut file.current, *position, bytes),
            DataOp::Resize { size } => file.current.resize(*size as usize, 0),
        }
        file.unsynced.push((completed, op));
        file.modified_tick = tick;
        Ok(())
    }

    /// Makes the inode's operations completed by `upto` durable.
    fn make_durable(&self, inode: u64, upto: u64) {
        let mut state = self.state.borrow_mut();
        let Some(file) = state.inodes.get_mut(&inode) else {
            return;
        };
        let (done, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut file.unsynced)
            .into_iter()
            .partition(|(n, _)| *n <= upto);
        for (_, op) in done {
            match op {
                DataOp::Write { position, bytes } => {
                    apply_write(&mut file.durable, position, &bytes)
                }
                DataOp::Resize { size } => file.durable.resize(size as usize, 0),
            }
        }
        file.unsynced = rest;
    }

    fn generation(&self) -> u64 {
        self.state.borrow().crashes
    }
}

/// Views of the internals for the disk's own tests.
#[cfg(test)]
impl SimDisk {
    pub(crate) fn completions(&self) -> u64 {
        self.state.borrow().completed
    }

    pub(crate) fn inode_at(&self, path: &Path) -> io::Result<u64> {
        self.inode_of(path)
    }

    pub(crate) fn sync_upto(&self, inode: u64, upto: u64) {
        self.make_durable(inode, upto);
    }

    pub(crate) fn durable_bytes(&self, inode: u64) -> Vec<u8> {
        let state = self.state.borrow();
        state
            .inodes
            .get(&inode)
            .map(|i| i.durable.clone())
            .unwrap_or_default()
    }
}

fn apply_write(image: &mut Vec<u8>, position: u64, bytes: &[u8]) {
    let end = position as usize + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[position as usize..end].copy_from_slice(bytes);
}

impl SimFile {
    fn disk(&self) -> io::Result<&SimDisk> {
        if self.disk.generation() != self.generation {
            return Err(errno(libc::EBADF));
        }
        Ok(&self.disk)
    }

    /// The alignment direct I/O asks for.
    pub fn alignment(&self) -> u64 {
        self.disk.config.alignment_bytes
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        let state = self.disk.state.borrow();
        state
            .inodes
            .get(&self.inode)
            .map_or(0, |i| i.current.len() as u64)
    }

    /// Writes `bytes` at `position`.
    pub async fn write_at(&self, bytes: &[u8], position: u64) -> io::Result<usize> {
        self.disk()?.delay().await;
        let disk = self.disk()?;
        disk.maybe_eio()?;
        let growth = (position + bytes.len() as u64).saturating_sub(self.size());
        disk.check_room(growth)?;
        disk.complete(
            self.inode,
            DataOp::Write {
                position,
                bytes: bytes.to_vec(),
            },
        )?;
        Ok(bytes.len())
    }

    /// Up to `length` bytes at `position`.
    pub async fn read_at(&self, position: u64, length: usize) -> io::Result<Vec<u8>> {
        self.disk()?.delay().await;
        let disk = self.disk()?;
        let state = disk.state.borrow();
        let file = state
            .inodes
            .get(&self.inode)
            .ok_or_else(|| errno(libc::EBADF))?;
        let start = (position as usize).min(file.current.len());
        let end = (start + length).min(file.current.len());
        Ok(file.current[start..end].to_vec())
    }

    /// `fdatasync`: the writes completed before it was issued are durable.
    pub async fn fdatasync(&self) -> io::Result<()> {
        let issued = self.disk()?.state.borrow().completed;
        self.disk()?.delay().await;
        let disk = self.disk()?;
        disk.maybe_eio()?;
        disk.make_durable(self.inode, issued);
        Ok(())
    }

    /// Grows the file to `size` (never shrinks it).
    pub async fn pre_allocate(&self, size: u64) -> io::Result<()> {
        self.disk()?.delay().await;
        let disk = self.disk()?;
        let growth = size.saturating_sub(self.size());
        if growth == 0 {
            return Ok(());
        }
        disk.check_room(growth)?;
        disk.complete(self.inode, DataOp::Resize { size })
    }

    /// Sets the file's size.
    pub async fn truncate(&self, size: u64) -> io::Result<()> {
        self.disk()?.delay().await;
        let disk = self.disk()?;
        disk.check_room(size.saturating_sub(self.size()))?;
        disk.complete(self.inode, DataOp::Resize { size })
    }
}

impl super::data_file::SimulatedFile for SimFile {
    fn alignment(&self) -> u64 {
        SimFile::alignment(self)
    }

    fn size(&self) -> u64 {
        SimFile::size(self)
    }

    fn write_at<'a>(
        &'a self,
        bytes: &'a [u8],
        position: u64,
    ) -> LocalBoxFuture<'a, io::Result<usize>> {
        Box::pin(SimFile::write_at(self, bytes, position))
    }

    fn read_at(&self, position: u64, length: usize) -> LocalBoxFuture<'_, io::Result<Vec<u8>>> {
        Box::pin(SimFile::read_at(self, position, length))
    }

    fn fdatasync(&self) -> LocalBoxFuture<'_, io::Result<()>> {
        Box::pin(SimFile::fdatasync(self))
    }

    fn pre_allocate(&self, size: u64) -> LocalBoxFuture<'_, io::Result<()>> {
        Box::pin(SimFile::pre_allocate(self, size))
    }

    fn truncate(&self, size: u64) -> LocalBoxFuture<'_, io::Result<()>> {
        Box::pin(SimFile::truncate(self, size))
    }
}

impl super::Disk for Rc<SimDisk> {
    fn open_data<'a>(
        &'a self,
        path: &'a Path,
        create: bool,
    ) -> futures::future::LocalBoxFuture<'a, io::Result<super::DataFile>> {
        Box::pin(async move {
            self.delay().await;
            let inode = if create {
                self.create(path)?
            } else {
                self.inode_of(path)?
            };
            Ok(super::DataFile::Sim(Rc::new(SimFile {
                disk: self.clone(),
                inode,
                generation: self.generation(),
            })))
        })
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let missing: Vec<PathBuf> = {
            let state = self.state.borrow();
            let mut missing: Vec<PathBuf> = path
                .ancestors()
                .filter(|a| !a.as_os_str().is_empty() && !state.current.dirs.contains(*a))
                .map(Path::to_path_buf)
                .collect();
            missing.reverse();
            missing
        };
        for dir in missing {
            self.name_op(NameOp::Mkdir { path: dir });
        }
        Ok(())
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.state.borrow().current.dirs.contains(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let state = self.state.borrow();
        if !state.current.dirs.contains(path) {
            return Err(not_found(path));
        }
        let child = |p: &Path| {
            (p.parent() == Some(path))
                .then(|| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .flatten()
        };
        let files = state.current.files.keys().filter_map(|p| child(p));
        let dirs = state.current.dirs.iter().filter_map(|p| child(p));
        Ok(files.chain(dirs).collect())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let inode = self.inode_of(path)?;
        let state = self.state.borrow();
        Ok(state
            .inodes
            .get(&inode)
            .map(|i| i.current.clone())
            .unwrap_or_default())
    }

    fn write(&self, path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
        let growth = (bytes.len() as u64).saturating_sub(
            self.inode_of(path)
                .map_or(0, |_| self.len(path).unwrap_or(0)),
        );
        self.check_room(growth)?;
        let inode = self.create(path)?;
        self.complete(inode, DataOp::Resize { size: 0 })?;
        self.complete(
            inode,
            DataOp::Write {
                position: 0,
                bytes: bytes.to_vec(),
            },
        )?;
        if sync {
            let upto = self.state.borrow().completed;
            self.make_durable(inode, upto);
        }
        Ok(())
    }

    fn set_len_synced(&self, path: &Path, len: u64) -> io::Result<()> {
        let inode = self.inode_of(path)?;
        self.check_room(len.saturating_sub(self.len(path)?))?;
        self.complete(inode, DataOp::Resize { size: len })?;
        let upto = self.state.borrow().completed;
        self.make_durable(inode, upto);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let exists = {
            let state = self.state.borrow();
            state.current.files.contains_key(from) || state.current.dirs.contains(from)
        };
        if !exists {
            return Err(not_found(from));
        }
        self.parent_exists(to)?;
        self.name_op(NameOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inode_of(path)?;
        self.name_op(NameOp::Unlink {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        if !self.state.borrow().current.dirs.contains(path) {
            return Err(not_found(path));
        }
        self.name_op(NameOp::Rmdir {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        if !state.current.dirs.contains(path) {
            return Err(not_found(path));
        }
        let (synced, rest): (Vec<NameOp>, Vec<NameOp>) = std::mem::take(&mut state.pending_names)
            .into_iter()
            .partition(|op| op.in_dir(path));
        for op in &synced {
            state.durable.apply(op);
        }
        state.pending_names = rest;
        Ok(())
    }

    fn sync_filesystem(&self, _path: &Path) -> io::Result<()> {
        let inodes: Vec<u64> = self.state.borrow().inodes.keys().copied().collect();
        let upto = self.state.borrow().completed;
        for inode in inodes {
            self.make_durable(inode, upto);
        }
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        for op in std::mem::take(&mut state.pending_names) {
            state.durable.apply(&op);
        }
        Ok(())
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        let inode = self.inode_of(path)?;
        let state = self.state.borrow();
        Ok(state
            .inodes
            .get(&inode)
            .map_or(0, |i| i.current.len() as u64))
    }

    fn modified(&self, path: &Path) -> io::Result<SystemTime> {
        let inode = self.inode_of(path)?;
        let state = self.state.borrow();
        let tick = state.inodes.get(&inode).map_or(0, |i| i.modified_tick);
        Ok(SystemTime::UNIX_EPOCH + Duration::from_micros(tick))
    }

    fn block_bytes(&self, _path: &Path) -> u64 {
        self.config.alignment_bytes
    }

    fn open_reader(&self, path: &Path) -> io::Result<super::FileReader> {
        Ok(super::FileReader::Sim(io::Cursor::new(self.read(path)?)))
    }

    fn create_writer(&self, path: &Path) -> io::Result<super::FileWriter> {
        self.write(path, &[], false)?;
        Ok(super::FileWriter::Sim(path.to_path_buf(), Vec::new()))
    }
}
