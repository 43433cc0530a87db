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
//!
//! # Files
//!
//! * `mod.rs`: the types the server sees ([`Fs`], [`Attr`], [`SetAttr`], ...) and the data
//!   operations (open, readdir, read, write, setattr, fallocate, access, statfs).
//! * `node.rs`: the inode table and its nodes; `data.rs`: a file's contents.
//! * `namespace.rs`: lookup, forget, create, mknod, mkdir, unlink, rmdir; `rename.rs`: rename.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::sync::Arc;
use std::sync::RwLock;
use std::sync::RwLockReadGuard;
use std::sync::RwLockWriteGuard;
use std::time::SystemTime;

use fuser::Errno;
use fuser::TimeOrNow;
use serde::Serialize;

use node::Body;
use node::Node;
use node::NodeState;
use node::Table;

mod data;
mod namespace;
mod node;
mod rename;

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
