//! The filesystem model: namespace, metadata and (optionally) file contents.
//!
//! This module knows nothing about the FUSE wire protocol; [`crate::server`] adapts it to
//! `fuser`. Every operation returns `Result<_, Errno>` so that a bad request becomes an errno
//! reply, never a panic.
//!
//! # Concurrency
//!
//! The model is shared by all FUSE worker threads. It uses two lock levels:
//!
//! * `Fs::table` (an `RwLock`) maps inode numbers to nodes and protects the *shape* of the
//!   namespace: directory entries only change while it is held for writing (create, mkdir,
//!   unlink, rmdir, rename, forget). Lookups and readdir hold it for reading.
//! * Each node has its own `Mutex` around its attributes and body. Data operations (read,
//!   write, setattr, fallocate, getattr) only take the table lock long enough to clone the
//!   node's `Arc`, then lock that single node, so writes to different files run in parallel.
//!
//! Lock order is always table, then at most one node at a time, so there is no deadlock.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::RwLock;
use std::sync::RwLockReadGuard;
use std::sync::RwLockWriteGuard;
use std::time::SystemTime;

use fuser::Errno;
use fuser::TimeOrNow;
use serde::Serialize;

/// Inode number of the root directory (fixed by the FUSE protocol).
pub const ROOT_INO: u64 = 1;
/// Granularity of the sparse in-memory storage of `mem` mode.
pub const PAGE_SIZE: usize = 4096;
/// Longest accepted file name, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// Largest file size (and end offset of any write) accepted.
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;
/// Block size reported by `statfs` and `stat`.
pub const BLOCK_SIZE: u32 = 4096;
/// Fake total capacity reported by `statfs` (1 PiB), so no benchmark ever sees ENOSPC.
pub const FAKE_CAPACITY: u64 = 1 << 50;
/// Fake inode capacity reported by `statfs`.
pub const FAKE_INODES: u64 = 1 << 32;

/// `FALLOC_FL_KEEP_SIZE`
const FALLOC_KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;
/// `FALLOC_FL_PUNCH_HOLE`
const FALLOC_PUNCH_HOLE: i32 = libc::FALLOC_FL_PUNCH_HOLE;
/// `FALLOC_FL_ZERO_RANGE`
const FALLOC_ZERO_RANGE: i32 = libc::FALLOC_FL_ZERO_RANGE;

/// What happens to the bytes of WRITE requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backing {
    /// Discard written data; reads return zeros up to the file size.
    Sink,
    /// Keep written data in (sparse) memory so it can be read back and verified.
    Mem,
}

impl Backing {
    /// The name used on the command line and in the JSON reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Backing::Sink => "sink",
            Backing::Mem => "mem",
        }
    }
}

/// Kind of a node. Only regular files and directories exist in this filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// The attributes of a node, as reported to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// Permission bits (`mode & 0o7777`).
    pub perm: u16,
    /// Number of hard links (directories: 2 + number of subdirectories).
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Last access.
    pub atime: SystemTime,
    /// Last data modification.
    pub mtime: SystemTime,
    /// Last status change.
    pub ctime: SystemTime,
}

impl Attr {
    fn new(ino: u64, kind: Kind, perm: u16, uid: u32, gid: u32) -> Self {
        let now = SystemTime::now();
        Attr {
            ino,
            kind,
            perm: perm & 0o7777,
            nlink: match kind {
                Kind::File => 1,
                Kind::Dir => 2,
            },
            uid,
            gid,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }

    /// Number of 512-byte blocks reported by `stat` (the file is presented as fully allocated).
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(512)
    }
}

/// Attribute changes requested by SETATTR. `None` leaves a field unchanged.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    /// New mode; only the permission bits are used.
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<TimeOrNow>,
    /// New modification time.
    pub mtime: Option<TimeOrNow>,
    /// New status change time.
    pub ctime: Option<SystemTime>,
}

/// One directory entry returned by [`Fs::readdir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode of the entry.
    pub ino: u64,
    /// Kind of the entry.
    pub kind: Kind,
    /// Name of the entry (`.` and `..` included).
    pub name: OsString,
    /// Offset to pass to the next READDIR to continue after this entry.
    pub next_offset: u64,
}

/// Values reported by STATFS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Free blocks for unprivileged users.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Block size.
    pub bsize: u32,
    /// Maximum name length.
    pub namelen: u32,
    /// Fragment size.
    pub frsize: u32,
}

/// File contents.
#[derive(Debug)]
enum Data {
    /// Contents are not stored; everything below the size reads as zero.
    Sink,
    /// Sparse contents: page index -> page. Missing pages read as zero. Invariant: every byte
    /// at or beyond the file size inside a stored page is zero.
    Mem(BTreeMap<u64, Box<[u8; PAGE_SIZE]>>),
}

impl Data {
    fn new(backing: Backing) -> Self {
        match backing {
            Backing::Sink => Data::Sink,
            Backing::Mem => Data::Mem(BTreeMap::new()),
        }
    }

    /// Stores `buf` at `offset`. The caller has checked that the range fits `MAX_FILE_SIZE`.
    fn write(&mut self, offset: u64, buf: &[u8]) {
        let Data::Mem(pages) = self else { return };
        let mut pos = offset;
        let mut rest = buf;
        while !rest.is_empty() {
            let index = pos / PAGE_SIZE as u64;
            let in_page = (pos % PAGE_SIZE as u64) as usize;
            let n = rest.len().min(PAGE_SIZE - in_page);
            let page = pages
                .entry(index)
                .or_insert_with(|| Box::new([0u8; PAGE_SIZE]));
            page[in_page..in_page + n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            pos += n as u64;
        }
    }

    /// Reads `len` bytes at `offset` (the caller has clamped the range to the file size).
    fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let Data::Mem(pages) = self else { return out };
        if len == 0 {
            return out;
        }
        let end = offset + len as u64;
        let first = offset / PAGE_SIZE as u64;
        let last = (end - 1) / PAGE_SIZE as u64;
        for (&index, page) in pages.range(first..=last) {
            let page_start = index * PAGE_SIZE as u64;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_SIZE as u64);
            let src = &page[(from - page_start) as usize..(to - page_start) as usize];
            out[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
        }
        out
    }

    /// Zeroes `[offset, end)`, dropping pages that become entirely zero.
    fn zero_range(&mut self, offset: u64, end: u64) {
        let Data::Mem(pages) = self else { return };
        if end <= offset {
            return;
        }
        let first = offset / PAGE_SIZE as u64;
        let last = (end - 1) / PAGE_SIZE as u64;
        let indices: Vec<u64> = pages.range(first..=last).map(|(&i, _)| i).collect();
        for index in indices {
            let page_start = index * PAGE_SIZE as u64;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_SIZE as u64);
            if from == page_start && to == page_start + PAGE_SIZE as u64 {
                pages.remove(&index);
            } else if let Some(page) = pages.get_mut(&index) {
                page[(from - page_start) as usize..(to - page_start) as usize].fill(0);
            }
        }
    }

    /// Discards everything at or beyond `size` (keeps the zero-beyond-EOF invariant).
    fn truncate(&mut self, size: u64) {
        let Data::Mem(pages) = self else { return };
        let keep = size.div_ceil(PAGE_SIZE as u64);
        drop(pages.split_off(&keep));
        let tail = (size % PAGE_SIZE as u64) as usize;
        if tail != 0 {
            if let Some(page) = pages.get_mut(&(size / PAGE_SIZE as u64)) {
                page[tail..].fill(0);
            }
        }
    }

    /// Number of stored pages (for tests).
    #[cfg(test)]
    fn stored_pages(&self) -> usize {
        match self {
            Data::Sink => 0,
            Data::Mem(pages) => pages.len(),
        }
    }
}

/// The body of a node.
#[derive(Debug)]
enum Body {
    /// A regular file and its contents.
    File(Data),
    /// A directory: its parent and its entries (excluding `.` and `..`).
    Dir {
        parent: u64,
        entries: BTreeMap<OsString, u64>,
    },
}

/// The mutable state of a node.
#[derive(Debug)]
struct NodeState {
    attr: Attr,
    /// Kernel references (LOOKUP/CREATE/MKDIR replies minus FORGETs).
    lookups: u64,
    body: Body,
}

impl NodeState {
    fn entries(&self) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match &self.body {
            Body::Dir { entries, .. } => Ok(entries),
            Body::File(_) => Err(Errno::ENOTDIR),
        }
    }

    fn entries_mut(&mut self) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match &mut self.body {
            Body::Dir { entries, .. } => Ok(entries),
            Body::File(_) => Err(Errno::ENOTDIR),
        }
    }

    fn data_mut(&mut self) -> Result<&mut Data, Errno> {
        match &mut self.body {
            Body::File(data) => Ok(data),
            Body::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    /// Marks a change of the directory's entries.
    fn touch_dir(&mut self) {
        let now = SystemTime::now();
        self.attr.mtime = now;
        self.attr.ctime = now;
    }

    /// Whether the node can be dropped from the inode table.
    fn reapable(&self) -> bool {
        self.attr.ino != ROOT_INO && self.attr.nlink == 0 && self.lookups == 0
    }
}

/// A node of the inode table.
#[derive(Debug)]
struct Node {
    state: Mutex<NodeState>,
}

impl Node {
    fn new(state: NodeState) -> Arc<Self> {
        Arc::new(Node {
            state: Mutex::new(state),
        })
    }

    /// Locks the node, ignoring poisoning (a panicking thread must not wedge the server).
    fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The inode table.
#[derive(Debug)]
struct Table {
    nodes: HashMap<u64, Arc<Node>>,
    next_ino: u64,
}

impl Table {
    fn get(&self, ino: u64) -> Result<Arc<Node>, Errno> {
        self.nodes.get(&ino).cloned().ok_or(Errno::ENOENT)
    }

    fn alloc_ino(&mut self) -> Result<u64, Errno> {
        let ino = self.next_ino;
        self.next_ino = ino.checked_add(1).ok_or(Errno::ENOSPC)?;
        Ok(ino)
    }

    /// Looks `name` up in directory `parent`.
    fn child(&self, parent: u64, name: &OsStr) -> Result<Option<u64>, Errno> {
        let node = self.get(parent)?;
        let state = node.lock();
        Ok(state.entries()?.get(name).copied())
    }

    /// Drops `ino` from the table if it is unlinked and unreferenced.
    fn reap_if_unused(&mut self, ino: u64) {
        let reap = match self.nodes.get(&ino) {
            Some(node) => node.lock().reapable(),
            None => false,
        };
        if reap {
            self.nodes.remove(&ino);
        }
    }
}

/// The whole filesystem.
#[derive(Debug)]
pub struct Fs {
    backing: Backing,
    table: RwLock<Table>,
}

/// Rejects names the filesystem cannot store.
fn check_name(name: &OsStr) -> Result<(), Errno> {
    let len = name.len();
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    if len > MAX_NAME_LEN {
        return Err(Errno::ENAMETOOLONG);
    }
    if name == "." || name == ".." {
        return Err(Errno::EEXIST);
    }
    Ok(())
}

/// Resolves a SETATTR time.
fn resolve_time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Fs {
    /// Creates an empty filesystem whose root directory (mode 0755) belongs to `uid`/`gid`.
    pub fn new(backing: Backing, uid: u32, gid: u32) -> Self {
        let root = NodeState {
            attr: Attr::new(ROOT_INO, Kind::Dir, 0o755, uid, gid),
            lookups: 0,
            body: Body::Dir {
                parent: ROOT_INO,
                entries: BTreeMap::new(),
            },
        };
        let mut nodes = HashMap::new();
        nodes.insert(ROOT_INO, Node::new(root));
        Fs {
            backing,
            table: RwLock::new(Table {
                nodes,
                next_ino: ROOT_INO + 1,
            }),
        }
    }

    fn read_table(&self) -> RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_table(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    fn node(&self, ino: u64) -> Result<Arc<Node>, Errno> {
        self.read_table().get(ino)
    }

    /// Number of inodes currently in the table (root included).
    pub fn inode_count(&self) -> usize {
        self.read_table().nodes.len()
    }

    /// Number of stored data pages of `ino` (always 0 in `sink` mode).
    #[cfg(test)]
    pub fn stored_pages(&self, ino: u64) -> Result<usize, Errno> {
        let node = self.node(ino)?;
        let mut state = node.lock();
        Ok(state.data_mut()?.stored_pages())
    }

    /// GETATTR.
    pub fn getattr(&self, ino: u64) -> Result<Attr, Errno> {
        Ok(self.node(ino)?.lock().attr)
    }

    /// LOOKUP: resolves `name` in `parent` and takes a kernel reference on the result.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Attr, Errno> {
        if name.len() > MAX_NAME_LEN {
            return Err(Errno::ENAMETOOLONG);
        }
        let table = self.read_table();
        let ino = if name == "." {
            parent
        } else if name == ".." {
            let node = table.get(parent)?;
            let state = node.lock();
            match &state.body {
                Body::Dir { parent, .. } => *parent,
                Body::File(_) => return Err(Errno::ENOTDIR),
            }
        } else {
            table.child(parent, name)?.ok_or(Errno::ENOENT)?
        };
        let node = table.get(ino)?;
        let mut state = node.lock();
        state.lookups += 1;
        Ok(state.attr)
    }

    /// FORGET: drops `nlookup` kernel references; unlinked nodes without references are freed.
    pub fn forget(&self, ino: u64, nlookup: u64) {
        let mut table = self.write_table();
        if let Some(node) = table.nodes.get(&ino) {
            let mut state = node.lock();
            state.lookups = state.lookups.saturating_sub(nlookup);
        }
        table.reap_if_unused(ino);
    }

    /// Inserts a new node named `name` into directory `parent`; `owner` is (uid, gid).
    fn insert(
        &self,
        table: &mut Table,
        parent: u64,
        name: &OsStr,
        kind: Kind,
        mode: u32,
        owner: (u32, u32),
    ) -> Result<Attr, Errno> {
        check_name(name)?;
        let parent_node = table.get(parent)?;
        if parent_node.lock().entries()?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = table.alloc_ino()?;
        let attr = Attr::new(ino, kind, (mode & 0o7777) as u16, owner.0, owner.1);
        let body = match kind {
            Kind::File => Body::File(Data::new(self.backing)),
            Kind::Dir => Body::Dir {
                parent,
                entries: BTreeMap::new(),
            },
        };
        table.nodes.insert(
            ino,
            Node::new(NodeState {
                attr,
                lookups: 1,
                body,
            }),
        );
        let mut parent_state = parent_node.lock();
        parent_state.entries_mut()?.insert(name.to_owned(), ino);
        if kind == Kind::Dir {
            parent_state.attr.nlink += 1;
        }
        parent_state.touch_dir();
        Ok(attr)
    }

    /// CREATE: creates and opens a regular file. If the name already exists (a race with
    /// another creator) the existing file is opened instead, unless `O_EXCL` is set.
    /// Returns the attributes and whether a new file was created. Takes a kernel reference.
    pub fn create(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        flags: i32,
        uid: u32,
        gid: u32,
    ) -> Result<(Attr, bool), Errno> {
        let mut table = self.write_table();
        if let Some(ino) = table.child(parent, name)? {
            if flags & libc::O_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            let node = table.get(ino)?;
            let mut state = node.lock();
            if state.attr.kind == Kind::Dir {
                return Err(Errno::EISDIR);
            }
            if flags & libc::O_TRUNC != 0 {
                Self::set_size(&mut state, 0)?;
            }
            state.lookups += 1;
            return Ok((state.attr, false));
        }
        let attr = self.insert(&mut table, parent, name, Kind::File, mode, (uid, gid))?;
        Ok((attr, true))
    }

    /// MKNOD: only regular files are supported (others get `EPERM`). Takes a kernel reference.
    pub fn mknod(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        let fmt = mode & libc::S_IFMT;
        if fmt != 0 && fmt != libc::S_IFREG {
            return Err(Errno::EPERM);
        }
        let mut table = self.write_table();
        self.insert(&mut table, parent, name, Kind::File, mode, (uid, gid))
    }

    /// MKDIR. Takes a kernel reference.
    pub fn mkdir(
        &self,
        parent: u64,
        name: &OsStr,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Attr, Errno> {
        let mut table = self.write_table();
        self.insert(&mut table, parent, name, Kind::Dir, mode, (uid, gid))
    }

    /// UNLINK: removes a non-directory entry. The node lives on while the kernel references it.
    pub fn unlink(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        let mut table = self.write_table();
        let ino = table.child(parent, name)?.ok_or(Errno::ENOENT)?;
        let node = table.get(ino)?;
        {
            let mut state = node.lock();
            if state.attr.kind == Kind::Dir {
                return Err(Errno::EISDIR);
            }
            state.attr.nlink = state.attr.nlink.saturating_sub(1);
            state.attr.ctime = SystemTime::now();
        }
        let parent_node = table.get(parent)?;
        {
            let mut parent_state = parent_node.lock();
            parent_state.entries_mut()?.remove(name);
            parent_state.touch_dir();
        }
        table.reap_if_unused(ino);
        Ok(())
    }

    /// RMDIR: removes an empty directory.
    pub fn rmdir(&self, parent: u64, name: &OsStr) -> Result<(), Errno> {
        if name == "." {
            return Err(Errno::EINVAL);
        }
        if name == ".." {
            return Err(Errno::ENOTEMPTY);
        }
        let mut table = self.write_table();
        let ino = table.child(parent, name)?.ok_or(Errno::ENOENT)?;
        let node = table.get(ino)?;
        {
            let mut state = node.lock();
            if !state.entries()?.is_empty() {
                return Err(Errno::ENOTEMPTY);
            }
            state.attr.nlink = 0;
            state.attr.ctime = SystemTime::now();
        }
        let parent_node = table.get(parent)?;
        {
            let mut parent_state = parent_node.lock();
            parent_state.entries_mut()?.remove(name);
            parent_state.attr.nlink = parent_state.attr.nlink.saturating_sub(1);
            parent_state.touch_dir();
        }
        table.reap_if_unused(ino);
        Ok(())
    }

    /// Whether directory `dir` is `ancestor` or lies below it.
    fn is_within(table: &Table, mut dir: u64, ancestor: u64) -> Result<bool, Errno> {
        loop {
            if dir == ancestor {
                return Ok(true);
            }
            if dir == ROOT_INO {
                return Ok(false);
            }
            let node = table.get(dir)?;
            let state = node.lock();
            dir = match &state.body {
                Body::Dir { parent, .. } => *parent,
                Body::File(_) => return Err(Errno::ENOTDIR),
            };
        }
    }

    /// Sets the parent pointer of directory `ino` (no-op for files).
    fn set_parent(table: &Table, ino: u64, new_parent: u64) -> Result<(), Errno> {
        let node = table.get(ino)?;
        let mut state = node.lock();
        if let Body::Dir { parent, .. } = &mut state.body {
            *parent = new_parent;
        }
        state.attr.ctime = SystemTime::now();
        Ok(())
    }

    /// Adds `delta` to the link count of directory `ino` and marks it modified.
    fn adjust_dir(table: &Table, ino: u64, delta: i32) -> Result<(), Errno> {
        let node = table.get(ino)?;
        let mut state = node.lock();
        state.attr.nlink = state.attr.nlink.saturating_add_signed(delta);
        state.touch_dir();
        Ok(())
    }

    /// RENAME (renameat2 flags: `RENAME_NOREPLACE` and `RENAME_EXCHANGE` are supported).
    pub fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        if flags & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 || (noreplace && exchange)
        {
            return Err(Errno::EINVAL);
        }
        check_name(newname)?;
        let mut table = self.write_table();
        let src = table.child(parent, name)?.ok_or(Errno::ENOENT)?;
        let dst = table.child(newparent, newname)?;
        let src_kind = table.get(src)?.lock().attr.kind;
        let dst_kind = match dst {
            Some(ino) => Some(table.get(ino)?.lock().attr.kind),
            None => None,
        };

        if exchange {
            let dst = dst.ok_or(Errno::ENOENT)?;
            let dst_kind = dst_kind.ok_or(Errno::ENOENT)?;
            if src == dst {
                return Ok(());
            }
            // Neither directory may end up inside itself.
            if (src_kind == Kind::Dir && Self::is_within(&table, newparent, src)?)
                || (dst_kind == Kind::Dir && Self::is_within(&table, parent, dst)?)
            {
                return Err(Errno::EINVAL);
            }
            table
                .get(parent)?
                .lock()
                .entries_mut()?
                .insert(name.to_owned(), dst);
            table
                .get(newparent)?
                .lock()
                .entries_mut()?
                .insert(newname.to_owned(), src);
            Self::set_parent(&table, src, newparent)?;
            Self::set_parent(&table, dst, parent)?;
            // A directory changing parents moves one link (its `..`) along with it.
            let src_dir = i32::from(src_kind == Kind::Dir);
            let dst_dir = i32::from(dst_kind == Kind::Dir);
            if newparent == parent {
                Self::adjust_dir(&table, parent, 0)?;
            } else {
                Self::adjust_dir(&table, parent, dst_dir - src_dir)?;
                Self::adjust_dir(&table, newparent, src_dir - dst_dir)?;
            }
            return Ok(());
        }

        if let Some(dst) = dst {
            if noreplace {
                return Err(Errno::EEXIST);
            }
            if dst == src {
                return Ok(());
            }
        }
        if src_kind == Kind::Dir && Self::is_within(&table, newparent, src)? {
            return Err(Errno::EINVAL);
        }
        if let (Some(dst), Some(dst_kind)) = (dst, dst_kind) {
            match (src_kind, dst_kind) {
                (Kind::Dir, Kind::File) => return Err(Errno::ENOTDIR),
                (Kind::File, Kind::Dir) => return Err(Errno::EISDIR),
                _ => {}
            }
            let node = table.get(dst)?;
            let mut state = node.lock();
            if dst_kind == Kind::Dir {
                if !state.entries()?.is_empty() {
                    return Err(Errno::ENOTEMPTY);
                }
                state.attr.nlink = 0;
            } else {
                state.attr.nlink = state.attr.nlink.saturating_sub(1);
            }
            state.attr.ctime = SystemTime::now();
            drop(state);
            if dst_kind == Kind::Dir {
                Self::adjust_dir(&table, newparent, -1)?;
            }
        }
        table.get(parent)?.lock().entries_mut()?.remove(name);
        table
            .get(newparent)?
            .lock()
            .entries_mut()?
            .insert(newname.to_owned(), src);
        Self::set_parent(&table, src, newparent)?;
        let moved_dir = i32::from(src_kind == Kind::Dir && parent != newparent);
        Self::adjust_dir(&table, parent, -moved_dir)?;
        if newparent != parent {
            Self::adjust_dir(&table, newparent, moved_dir)?;
        }
        if let Some(dst) = dst {
            table.reap_if_unused(dst);
        }
        Ok(())
    }

    /// OPEN of a regular file; honours `O_TRUNC` (in case the kernel passes it through).
    pub fn open(&self, ino: u64, flags: i32) -> Result<(), Errno> {
        let node = self.node(ino)?;
        let mut state = node.lock();
        state.data_mut()?;
        if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
            Self::set_size(&mut state, 0)?;
        }
        Ok(())
    }

    /// OPENDIR.
    pub fn opendir(&self, ino: u64) -> Result<(), Errno> {
        self.node(ino)?.lock().entries().map(|_| ())
    }

    /// READDIR: the entries from position `offset` on (0 is `.`, 1 is `..`, then the names in
    /// byte order).
    pub fn readdir(&self, ino: u64, offset: u64) -> Result<Vec<DirEntry>, Errno> {
        let table = self.read_table();
        let node = table.get(ino)?;
        let (parent, children): (u64, Vec<(OsString, u64)>) = {
            let state = node.lock();
            match &state.body {
                Body::Dir { parent, entries } => (
                    *parent,
                    entries.iter().map(|(n, &i)| (n.clone(), i)).collect(),
                ),
                Body::File(_) => return Err(Errno::ENOTDIR),
            }
        };
        let mut all = vec![
            (OsString::from("."), ino, Kind::Dir),
            (OsString::from(".."), parent, Kind::Dir),
        ];
        for (name, child) in children {
            // Entries always point at live nodes; skip defensively if one does not.
            if let Ok(node) = table.get(child) {
                let kind = node.lock().attr.kind;
                all.push((name, child, kind));
            }
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        Ok(all
            .into_iter()
            .enumerate()
            .skip(skip)
            .map(|(i, (name, ino, kind))| DirEntry {
                ino,
                kind,
                name,
                next_offset: i as u64 + 1,
            })
            .collect())
    }

    /// READ: up to `size` bytes at `offset`, clamped to the file size (zeros in `sink` mode and
    /// in holes).
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let node = self.node(ino)?;
        let mut state = node.lock();
        let file_size = state.attr.size;
        let data = state.data_mut()?;
        if offset >= file_size {
            return Ok(Vec::new());
        }
        let len = (file_size - offset).min(u64::from(size)) as usize;
        Ok(data.read(offset, len))
    }

    /// WRITE: stores (or discards) `buf` at `offset` and extends the size. Returns the count.
    pub fn write(&self, ino: u64, offset: u64, buf: &[u8]) -> Result<u32, Errno> {
        let count = u32::try_from(buf.len()).map_err(|_| Errno::EINVAL)?;
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= MAX_FILE_SIZE)
            .ok_or(Errno::EFBIG)?;
        let node = self.node(ino)?;
        let mut state = node.lock();
        state.data_mut()?.write(offset, buf);
        if end > state.attr.size {
            state.attr.size = end;
        }
        let now = SystemTime::now();
        state.attr.mtime = now;
        state.attr.ctime = now;
        Ok(count)
    }

    /// Changes the size of a file node (truncate or extend with zeros).
    fn set_size(state: &mut NodeState, size: u64) -> Result<(), Errno> {
        if size > MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        let data = state.data_mut()?;
        data.truncate(size);
        state.attr.size = size;
        let now = SystemTime::now();
        state.attr.mtime = now;
        state.attr.ctime = now;
        Ok(())
    }

    /// SETATTR.
    pub fn setattr(&self, ino: u64, set: SetAttr) -> Result<Attr, Errno> {
        let node = self.node(ino)?;
        let mut state = node.lock();
        if let Some(size) = set.size {
            Self::set_size(&mut state, size)?;
        }
        if let Some(mode) = set.mode {
            state.attr.perm = (mode & 0o7777) as u16;
        }
        if let Some(uid) = set.uid {
            state.attr.uid = uid;
        }
        if let Some(gid) = set.gid {
            state.attr.gid = gid;
        }
        if let Some(atime) = set.atime {
            state.attr.atime = resolve_time(atime);
        }
        if let Some(mtime) = set.mtime {
            state.attr.mtime = resolve_time(mtime);
        }
        state.attr.ctime = set.ctime.unwrap_or_else(SystemTime::now);
        Ok(state.attr)
    }

    /// FALLOCATE: mode 0 and `ZERO_RANGE` extend the size (unless `KEEP_SIZE`); `PUNCH_HOLE`
    /// (which requires `KEEP_SIZE`) zeroes the range. Other modes get `EOPNOTSUPP`.
    pub fn fallocate(&self, ino: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        if length == 0 {
            return Err(Errno::EINVAL);
        }
        let end = offset
            .checked_add(length)
            .filter(|&end| end <= MAX_FILE_SIZE)
            .ok_or(Errno::EFBIG)?;
        let keep_size = mode & FALLOC_KEEP_SIZE != 0;
        let op = mode & !FALLOC_KEEP_SIZE;
        let node = self.node(ino)?;
        let mut state = node.lock();
        let size = state.attr.size;
        let data = state.data_mut()?;
        match op {
            0 => {}
            FALLOC_PUNCH_HOLE if keep_size => data.zero_range(offset, end.min(size)),
            FALLOC_ZERO_RANGE => data.zero_range(offset, end.min(size)),
            _ => return Err(Errno::EOPNOTSUPP),
        }
        if !keep_size && end > size {
            state.attr.size = end;
        }
        let now = SystemTime::now();
        state.attr.mtime = now;
        state.attr.ctime = now;
        Ok(())
    }

    /// ACCESS: classic owner/group/other permission check (root may do anything except
    /// execute a file without any execute bit).
    pub fn access(&self, ino: u64, uid: u32, gid: u32, mask: i32) -> Result<(), Errno> {
        let attr = self.getattr(ino)?;
        let want = (mask & (libc::R_OK | libc::W_OK | libc::X_OK)) as u16;
        if want == 0 {
            return Ok(());
        }
        if uid == 0 {
            let exec_denied = want & (libc::X_OK as u16) != 0
                && attr.kind == Kind::File
                && attr.perm & 0o111 == 0;
            return if exec_denied {
                Err(Errno::EACCES)
            } else {
                Ok(())
            };
        }
        let bits = if uid == attr.uid {
            attr.perm >> 6
        } else if gid == attr.gid {
            attr.perm >> 3
        } else {
            attr.perm
        } & 0o7;
        if want & !bits != 0 {
            Err(Errno::EACCES)
        } else {
            Ok(())
        }
    }

    /// STATFS: a huge, almost empty filesystem.
    pub fn statfs(&self) -> StatFs {
        let blocks = FAKE_CAPACITY / u64::from(BLOCK_SIZE);
        let files = FAKE_INODES;
        let used_files = self.inode_count() as u64;
        StatFs {
            blocks,
            bfree: blocks,
            bavail: blocks,
            files,
            ffree: files.saturating_sub(used_files),
            bsize: BLOCK_SIZE,
            namelen: MAX_NAME_LEN as u32,
            frsize: BLOCK_SIZE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    fn sink() -> Fs {
        Fs::new(Backing::Sink, 0, 0)
    }

    fn mem() -> Fs {
        Fs::new(Backing::Mem, 0, 0)
    }

    fn names(fs: &Fs, dir: u64) -> Vec<String> {
        fs.readdir(dir, 0)
            .unwrap()
            .into_iter()
            .map(|e| e.name.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn root_exists() {
        let fs = sink();
        let attr = fs.getattr(ROOT_INO).unwrap();
        assert_eq!(attr.kind, Kind::Dir);
        assert_eq!(attr.perm, 0o755);
        assert_eq!(attr.nlink, 2);
        assert_eq!(names(&fs, ROOT_INO), [".", ".."]);
    }

    #[test]
    fn create_lookup_getattr() {
        let fs = sink();
        let (attr, created) = fs
            .create(ROOT_INO, name("f"), 0o100644, libc::O_RDWR, 7, 8)
            .unwrap();
        assert!(created);
        assert_eq!(attr.kind, Kind::File);
        assert_eq!(attr.perm, 0o644);
        assert_eq!((attr.uid, attr.gid, attr.size, attr.nlink), (7, 8, 0, 1));
        assert_eq!(fs.lookup(ROOT_INO, name("f")).unwrap(), attr);
        assert_eq!(fs.getattr(attr.ino).unwrap(), attr);
        assert_eq!(fs.lookup(ROOT_INO, name("nope")), Err(Errno::ENOENT));
        assert_eq!(names(&fs, ROOT_INO), [".", "..", "f"]);
    }

    #[test]
    fn create_existing() {
        let fs = sink();
        let (a, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        fs.write(a.ino, 0, &[1; 100]).unwrap();
        let excl = libc::O_CREAT | libc::O_EXCL;
        assert_eq!(
            fs.create(ROOT_INO, name("f"), 0o644, excl, 0, 0),
            Err(Errno::EEXIST)
        );
        let (b, created) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        assert!(!created);
        assert_eq!((b.ino, b.size), (a.ino, 100));
        let (c, _) = fs
            .create(ROOT_INO, name("f"), 0o644, libc::O_TRUNC, 0, 0)
            .unwrap();
        assert_eq!(c.size, 0);
        assert_eq!(
            fs.mkdir(ROOT_INO, name("f"), 0o755, 0, 0),
            Err(Errno::EEXIST)
        );
    }

    #[test]
    fn name_errors() {
        let fs = sink();
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(
            fs.create(ROOT_INO, name(&long), 0o644, 0, 0, 0),
            Err(Errno::ENAMETOOLONG)
        );
        assert_eq!(fs.lookup(ROOT_INO, name(&long)), Err(Errno::ENAMETOOLONG));
        assert_eq!(
            fs.mkdir(ROOT_INO, name(".."), 0o755, 0, 0),
            Err(Errno::EEXIST)
        );
        let ok = "y".repeat(MAX_NAME_LEN);
        fs.create(ROOT_INO, name(&ok), 0o644, 0, 0, 0).unwrap();
    }

    #[test]
    fn errno_on_wrong_kind_or_missing() {
        let fs = sink();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        assert_eq!(
            fs.create(f.ino, name("x"), 0o644, 0, 0, 0),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(fs.lookup(f.ino, name("x")), Err(Errno::ENOTDIR));
        assert_eq!(fs.readdir(f.ino, 0), Err(Errno::ENOTDIR));
        assert_eq!(fs.opendir(f.ino), Err(Errno::ENOTDIR));
        assert_eq!(fs.open(ROOT_INO, 0), Err(Errno::EISDIR));
        assert_eq!(fs.read(ROOT_INO, 0, 10), Err(Errno::EISDIR));
        assert_eq!(fs.write(ROOT_INO, 0, b"x"), Err(Errno::EISDIR));
        assert_eq!(fs.getattr(999), Err(Errno::ENOENT));
        assert_eq!(fs.write(999, 0, b"x"), Err(Errno::ENOENT));
        assert_eq!(fs.unlink(ROOT_INO, name("nope")), Err(Errno::ENOENT));
        assert_eq!(fs.rmdir(ROOT_INO, name("f")), Err(Errno::ENOTDIR));
        assert_eq!(fs.write(f.ino, u64::MAX - 1, b"xy"), Err(Errno::EFBIG));
        assert_eq!(fs.write(f.ino, MAX_FILE_SIZE, b"x"), Err(Errno::EFBIG));
        let too_big = SetAttr {
            size: Some(MAX_FILE_SIZE + 1),
            ..SetAttr::default()
        };
        assert_eq!(fs.setattr(f.ino, too_big), Err(Errno::EFBIG));
        let dir_size = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        assert_eq!(fs.setattr(ROOT_INO, dir_size), Err(Errno::EISDIR));
        assert_eq!(
            fs.mknod(ROOT_INO, name("fifo"), libc::S_IFIFO | 0o644, 0, 0),
            Err(Errno::EPERM)
        );
    }

    #[test]
    fn write_extends_size_and_sink_reads_zero() {
        let fs = sink();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        assert_eq!(fs.write(f.ino, 1000, &[0xAB; 5000]).unwrap(), 5000);
        assert_eq!(fs.getattr(f.ino).unwrap().size, 6000);
        assert_eq!(fs.write(f.ino, 0, &[0xCD; 10]).unwrap(), 10);
        assert_eq!(fs.getattr(f.ino).unwrap().size, 6000);
        assert_eq!(fs.read(f.ino, 0, 1 << 20).unwrap(), vec![0u8; 6000]);
        assert_eq!(fs.read(f.ino, 5990, 100).unwrap(), vec![0u8; 10]);
        assert!(fs.read(f.ino, 6000, 100).unwrap().is_empty());
        assert!(fs.read(f.ino, 1 << 40, 100).unwrap().is_empty());
        assert_eq!(fs.stored_pages(f.ino).unwrap(), 0);
        assert_eq!(fs.getattr(f.ino).unwrap().blocks(), 12);
    }

    #[test]
    fn mem_round_trip_unaligned() {
        let fs = mem();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        let pattern: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        fs.write(f.ino, 4093, &pattern).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 4093 + 20_000);
        let back = fs.read(f.ino, 4093, 20_000).unwrap();
        assert_eq!(back, pattern);
        // The hole before the data reads as zero.
        assert_eq!(fs.read(f.ino, 0, 4093).unwrap(), vec![0u8; 4093]);
        // A read straddling the hole and the data.
        let mixed = fs.read(f.ino, 4000, 200).unwrap();
        assert_eq!(&mixed[..93], &[0u8; 93][..]);
        assert_eq!(&mixed[93..], &pattern[..107]);
        // Pages 0 (partially) .. 5 are stored, but not more.
        assert_eq!(fs.stored_pages(f.ino).unwrap(), 6);
    }

    #[test]
    fn mem_sparse_far_offset() {
        let fs = mem();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        let off = 1u64 << 40;
        fs.write(f.ino, off, b"hello").unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, off + 5);
        assert_eq!(fs.stored_pages(f.ino).unwrap(), 1);
        assert_eq!(fs.read(f.ino, off - 2, 10).unwrap(), b"\0\0hello");
    }

    #[test]
    fn mem_truncate_zeroes_tail() {
        let fs = mem();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        fs.write(f.ino, 0, &[0xFF; 3 * PAGE_SIZE]).unwrap();
        let shrink = SetAttr {
            size: Some(100),
            ..SetAttr::default()
        };
        assert_eq!(fs.setattr(f.ino, shrink).unwrap().size, 100);
        assert_eq!(fs.stored_pages(f.ino).unwrap(), 1);
        let grow = SetAttr {
            size: Some(2 * PAGE_SIZE as u64),
            ..SetAttr::default()
        };
        assert_eq!(fs.setattr(f.ino, grow).unwrap().size, 2 * PAGE_SIZE as u64);
        let back = fs.read(f.ino, 0, 2 * PAGE_SIZE as u32).unwrap();
        assert_eq!(&back[..100], &[0xFF; 100][..]);
        assert!(back[100..].iter().all(|&b| b == 0));
        // Truncate to zero drops everything.
        fs.open(f.ino, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 0);
        assert_eq!(fs.stored_pages(f.ino).unwrap(), 0);
    }

    #[test]
    fn open_rdonly_trunc_is_ignored() {
        let fs = mem();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        fs.write(f.ino, 0, b"abc").unwrap();
        fs.open(f.ino, libc::O_RDONLY | libc::O_TRUNC).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 3);
    }

    #[test]
    fn setattr_metadata() {
        let fs = sink();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let set = SetAttr {
            mode: Some(libc::S_IFREG | 0o4711),
            uid: Some(5),
            gid: Some(6),
            atime: Some(TimeOrNow::SpecificTime(t)),
            mtime: Some(TimeOrNow::SpecificTime(t)),
            ..SetAttr::default()
        };
        let a = fs.setattr(f.ino, set).unwrap();
        assert_eq!((a.perm, a.uid, a.gid), (0o4711, 5, 6));
        assert_eq!((a.atime, a.mtime), (t, t));
        assert!(a.ctime > t);
        let now = SetAttr {
            mtime: Some(TimeOrNow::Now),
            ..SetAttr::default()
        };
        assert!(fs.setattr(f.ino, now).unwrap().mtime > t);
    }

    #[test]
    fn fallocate_modes() {
        let fs = mem();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        fs.fallocate(f.ino, 0, 10_000, 0).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 10_000);
        fs.fallocate(f.ino, 0, 50_000, FALLOC_KEEP_SIZE).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 10_000);
        // Shrinking never happens.
        fs.fallocate(f.ino, 0, 10, 0).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 10_000);

        fs.write(f.ino, 0, &[9; 10_000]).unwrap();
        fs.fallocate(f.ino, 100, 8400, FALLOC_PUNCH_HOLE | FALLOC_KEEP_SIZE)
            .unwrap();
        let back = fs.read(f.ino, 0, 10_000).unwrap();
        assert!(back[..100].iter().all(|&b| b == 9));
        assert!(back[100..8500].iter().all(|&b| b == 0));
        assert!(back[8500..].iter().all(|&b| b == 9));
        // Page 1 (4096..8192) lay entirely inside the hole and was dropped.
        assert_eq!(fs.stored_pages(f.ino).unwrap(), 2);

        fs.fallocate(f.ino, 9000, 2000, FALLOC_ZERO_RANGE).unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().size, 11_000);
        assert!(fs.read(f.ino, 9000, 2000).unwrap().iter().all(|&b| b == 0));

        assert_eq!(
            fs.fallocate(f.ino, 0, 10, FALLOC_PUNCH_HOLE),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            fs.fallocate(f.ino, 0, 10, libc::FALLOC_FL_COLLAPSE_RANGE),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(fs.fallocate(f.ino, 0, 0, 0), Err(Errno::EINVAL));
        assert_eq!(fs.fallocate(f.ino, u64::MAX, 2, 0), Err(Errno::EFBIG));
        assert_eq!(fs.fallocate(ROOT_INO, 0, 1, 0), Err(Errno::EISDIR));
    }

    #[test]
    fn mkdir_rmdir_nlink() {
        let fs = sink();
        let d = fs.mkdir(ROOT_INO, name("d"), 0o40755, 0, 0).unwrap();
        assert_eq!((d.kind, d.perm, d.nlink), (Kind::Dir, 0o755, 2));
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
        let (f, _) = fs.create(d.ino, name("f"), 0o644, 0, 0, 0).unwrap();
        assert_eq!(fs.rmdir(ROOT_INO, name("d")), Err(Errno::ENOTEMPTY));
        assert_eq!(fs.unlink(ROOT_INO, name("d")), Err(Errno::EISDIR));
        // `..` of the subdirectory is the root.
        assert_eq!(fs.lookup(d.ino, name("..")).unwrap().ino, ROOT_INO);
        let listing = fs.readdir(d.ino, 0).unwrap();
        assert_eq!(listing[1].ino, ROOT_INO);
        assert_eq!(listing[2].ino, f.ino);
        fs.unlink(d.ino, name("f")).unwrap();
        fs.rmdir(ROOT_INO, name("d")).unwrap();
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 2);
        assert_eq!(fs.lookup(ROOT_INO, name("d")), Err(Errno::ENOENT));
    }

    #[test]
    fn readdir_offsets_resume() {
        let fs = sink();
        for n in ["c", "a", "b"] {
            fs.create(ROOT_INO, name(n), 0o644, 0, 0, 0).unwrap();
        }
        let all = fs.readdir(ROOT_INO, 0).unwrap();
        let got: Vec<_> = all.iter().map(|e| e.name.clone()).collect();
        assert_eq!(got, [".", "..", "a", "b", "c"]);
        let rest = fs.readdir(ROOT_INO, all[2].next_offset).unwrap();
        let got: Vec<_> = rest.iter().map(|e| e.name.clone()).collect();
        assert_eq!(got, ["b", "c"]);
        assert!(fs.readdir(ROOT_INO, 5).unwrap().is_empty());
        assert!(fs.readdir(ROOT_INO, u64::MAX).unwrap().is_empty());
    }

    #[test]
    fn unlinked_file_lives_until_forgotten() {
        let fs = mem();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o644, 0, 0, 0).unwrap();
        let before = fs.inode_count();
        fs.unlink(ROOT_INO, name("f")).unwrap();
        // Still referenced by the kernel (the CREATE reply): writeback may still come.
        fs.write(f.ino, 0, b"late").unwrap();
        assert_eq!(fs.getattr(f.ino).unwrap().nlink, 0);
        assert_eq!(fs.inode_count(), before);
        fs.forget(f.ino, 1);
        assert_eq!(fs.inode_count(), before - 1);
        assert_eq!(fs.getattr(f.ino), Err(Errno::ENOENT));
        // Forgetting a linked node keeps it.
        let (g, _) = fs.create(ROOT_INO, name("g"), 0o644, 0, 0, 0).unwrap();
        fs.forget(g.ino, 1);
        assert!(fs.getattr(g.ino).is_ok());
        // Forgetting unknown inodes is harmless.
        fs.forget(12345, 1);
        fs.forget(ROOT_INO, 10);
        assert!(fs.getattr(ROOT_INO).is_ok());
    }

    #[test]
    fn rename_file_and_replace() {
        let fs = mem();
        let (a, _) = fs.create(ROOT_INO, name("a"), 0o644, 0, 0, 0).unwrap();
        let (b, _) = fs.create(ROOT_INO, name("b"), 0o644, 0, 0, 0).unwrap();
        fs.write(a.ino, 0, b"AAA").unwrap();
        let d = fs.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap();
        fs.rename(ROOT_INO, name("a"), d.ino, name("x"), 0).unwrap();
        assert_eq!(fs.lookup(d.ino, name("x")).unwrap().ino, a.ino);
        assert_eq!(fs.lookup(ROOT_INO, name("a")), Err(Errno::ENOENT));
        // Replace b.
        fs.rename(d.ino, name("x"), ROOT_INO, name("b"), 0).unwrap();
        assert_eq!(fs.lookup(ROOT_INO, name("b")).unwrap().ino, a.ino);
        assert_eq!(fs.getattr(b.ino).unwrap().nlink, 0);
        assert_eq!(fs.read(a.ino, 0, 10).unwrap(), b"AAA");
        assert_eq!(
            fs.rename(ROOT_INO, name("b"), ROOT_INO, name("d"), 0),
            Err(Errno::EISDIR)
        );
        assert_eq!(
            fs.rename(ROOT_INO, name("d"), ROOT_INO, name("b"), 0),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            fs.rename(ROOT_INO, name("zz"), ROOT_INO, name("b"), 0),
            Err(Errno::ENOENT)
        );
        // Renaming onto itself is a no-op.
        fs.rename(ROOT_INO, name("b"), ROOT_INO, name("b"), 0)
            .unwrap();
        assert_eq!(fs.lookup(ROOT_INO, name("b")).unwrap().ino, a.ino);
    }

    #[test]
    fn rename_dirs() {
        let fs = sink();
        let p = fs.mkdir(ROOT_INO, name("p"), 0o755, 0, 0).unwrap();
        let q = fs.mkdir(ROOT_INO, name("q"), 0o755, 0, 0).unwrap();
        let c = fs.mkdir(p.ino, name("c"), 0o755, 0, 0).unwrap();
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 4);
        assert_eq!(fs.getattr(p.ino).unwrap().nlink, 3);
        // A directory cannot move into itself or below itself.
        assert_eq!(
            fs.rename(ROOT_INO, name("p"), c.ino, name("p2"), 0),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            fs.rename(ROOT_INO, name("p"), p.ino, name("p2"), 0),
            Err(Errno::EINVAL)
        );
        fs.rename(p.ino, name("c"), q.ino, name("c"), 0).unwrap();
        assert_eq!(fs.getattr(p.ino).unwrap().nlink, 2);
        assert_eq!(fs.getattr(q.ino).unwrap().nlink, 3);
        assert_eq!(fs.lookup(c.ino, name("..")).unwrap().ino, q.ino);
        // Replacing a non-empty directory fails, an empty one works.
        assert_eq!(
            fs.rename(ROOT_INO, name("p"), ROOT_INO, name("q"), 0),
            Err(Errno::ENOTEMPTY)
        );
        fs.rename(ROOT_INO, name("q"), ROOT_INO, name("p"), 0)
            .unwrap();
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
        assert_eq!(fs.lookup(ROOT_INO, name("p")).unwrap().ino, q.ino);
        assert_eq!(fs.getattr(p.ino).unwrap().nlink, 0);
    }

    #[test]
    fn rename_flags() {
        let fs = sink();
        let (a, _) = fs.create(ROOT_INO, name("a"), 0o644, 0, 0, 0).unwrap();
        let d = fs.mkdir(ROOT_INO, name("d"), 0o755, 0, 0).unwrap();
        let (b, _) = fs.create(d.ino, name("b"), 0o644, 0, 0, 0).unwrap();
        assert_eq!(
            fs.rename(
                ROOT_INO,
                name("a"),
                d.ino,
                name("b"),
                libc::RENAME_NOREPLACE
            ),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            fs.rename(
                ROOT_INO,
                name("a"),
                d.ino,
                name("zz"),
                libc::RENAME_EXCHANGE
            ),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            fs.rename(ROOT_INO, name("a"), d.ino, name("b"), libc::RENAME_WHITEOUT),
            Err(Errno::EINVAL)
        );
        fs.rename(ROOT_INO, name("a"), d.ino, name("b"), libc::RENAME_EXCHANGE)
            .unwrap();
        assert_eq!(fs.lookup(ROOT_INO, name("a")).unwrap().ino, b.ino);
        assert_eq!(fs.lookup(d.ino, name("b")).unwrap().ino, a.ino);
        // Exchange a directory with a file: link counts follow the directory.
        fs.rename(
            ROOT_INO,
            name("d"),
            ROOT_INO,
            name("a"),
            libc::RENAME_EXCHANGE,
        )
        .unwrap();
        assert_eq!(fs.lookup(ROOT_INO, name("a")).unwrap().ino, d.ino);
        assert_eq!(fs.getattr(ROOT_INO).unwrap().nlink, 3);
        let sub = fs.mkdir(d.ino, name("sub"), 0o755, 0, 0).unwrap();
        assert_eq!(
            fs.rename(
                ROOT_INO,
                name("a"),
                sub.ino,
                name("x"),
                libc::RENAME_EXCHANGE
            ),
            Err(Errno::ENOENT)
        );
        fs.create(sub.ino, name("x"), 0o644, 0, 0, 0).unwrap();
        assert_eq!(
            fs.rename(
                ROOT_INO,
                name("a"),
                sub.ino,
                name("x"),
                libc::RENAME_EXCHANGE
            ),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn access_checks() {
        let fs = sink();
        let (f, _) = fs.create(ROOT_INO, name("f"), 0o640, 0, 10, 20).unwrap();
        assert!(fs.access(f.ino, 10, 99, libc::R_OK | libc::W_OK).is_ok());
        assert!(fs.access(f.ino, 11, 20, libc::R_OK).is_ok());
        assert_eq!(fs.access(f.ino, 11, 20, libc::W_OK), Err(Errno::EACCES));
        assert_eq!(fs.access(f.ino, 11, 21, libc::R_OK), Err(Errno::EACCES));
        assert!(fs.access(f.ino, 11, 21, libc::F_OK).is_ok());
        assert!(fs.access(f.ino, 0, 0, libc::R_OK | libc::W_OK).is_ok());
        assert_eq!(fs.access(f.ino, 0, 0, libc::X_OK), Err(Errno::EACCES));
        assert!(fs.access(ROOT_INO, 0, 0, libc::X_OK).is_ok());
        assert_eq!(fs.access(999, 0, 0, libc::F_OK), Err(Errno::ENOENT));
    }

    #[test]
    fn statfs_is_huge() {
        let fs = sink();
        let st = fs.statfs();
        assert_eq!(st.blocks * u64::from(st.bsize), FAKE_CAPACITY);
        assert_eq!(st.bavail, st.blocks);
        assert_eq!(st.ffree, FAKE_INODES - 1);
    }

    #[test]
    fn parallel_writers() {
        let fs = Arc::new(mem());
        let inos: Vec<u64> = (0..4)
            .map(|i| {
                fs.create(ROOT_INO, name(&format!("f{i}")), 0o644, 0, 0, 0)
                    .unwrap()
                    .0
                    .ino
            })
            .collect();
        let handles: Vec<_> = inos
            .iter()
            .map(|&ino| {
                let fs = Arc::clone(&fs);
                std::thread::spawn(move || {
                    for chunk in 0..64u64 {
                        let buf = vec![(ino as u8).wrapping_add(chunk as u8); 8192];
                        fs.write(ino, chunk * 8192, &buf).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        for &ino in &inos {
            assert_eq!(fs.getattr(ino).unwrap().size, 64 * 8192);
            let back = fs.read(ino, 63 * 8192, 8192).unwrap();
            assert!(back.iter().all(|&b| b == (ino as u8).wrapping_add(63)));
        }
    }
}
