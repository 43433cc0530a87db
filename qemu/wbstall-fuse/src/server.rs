//! The `fuser::Filesystem` implementation: INIT negotiation, request counting, and the
//! translation between FUSE requests and the [`crate::fs`] model.

use std::ffi::OsStr;
use std::io;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use fuser::AccessFlags;
use fuser::Errno;
use fuser::FileAttr;
use fuser::FileHandle;
use fuser::FileType;
use fuser::Filesystem;
use fuser::FopenFlags;
use fuser::Generation;
use fuser::INodeNo;
use fuser::InitFlags;
use fuser::KernelConfig;
use fuser::LockOwner;
use fuser::OpenFlags;
use fuser::RenameFlags;
use fuser::ReplyAttr;
use fuser::ReplyCreate;
use fuser::ReplyData;
use fuser::ReplyDirectory;
use fuser::ReplyEmpty;
use fuser::ReplyEntry;
use fuser::ReplyOpen;
use fuser::ReplyStatfs;
use fuser::ReplyWrite;
use fuser::ReplyXattr;
use fuser::Request;
use fuser::TimeOrNow;
use fuser::WriteFlags;

use crate::fs::Attr;
use crate::fs::Backing;
use crate::fs::Fs;
use crate::fs::Kind;
use crate::fs::SetAttr;
use crate::stats::Event;
use crate::stats::Stats;

/// How long the kernel may cache entries and attributes. All changes go through this
/// kernel, so its caches are always coherent; a long timeout avoids GETATTR/LOOKUP noise
/// (with the writeback cache every write() revalidates the size once the timeout expires).
const TTL: Duration = Duration::from_secs(10);

/// Protocol minor version fuser 0.18 answers INIT with on Linux
/// (`FUSE_KERNEL_MINOR_VERSION` in fuser's `ll/fuse_abi.rs`, which is not exported).
/// The kernel then speaks `min(its own, this)`.
pub const FUSER_PROTO_MINOR: u32 = 40;

/// Capabilities requested when the kernel offers them (the absence of any is harmless).
/// fuser already requests `FUSE_ASYNC_READ`, `FUSE_BIG_WRITES` and `FUSE_MAX_PAGES`.
const OPTIONAL_CAPS: [InitFlags; 5] = [
    InitFlags::FUSE_ASYNC_READ,
    InitFlags::FUSE_BIG_WRITES,
    InitFlags::FUSE_MAX_PAGES,
    InitFlags::FUSE_PARALLEL_DIROPS,
    InitFlags::FUSE_ASYNC_DIO,
];

/// Connection parameters chosen on the command line.
#[derive(Clone, Copy, Debug)]
pub struct InitParams {
    /// `max_write` to answer (bytes).
    pub max_write: u32,
    /// `max_background` to answer.
    pub max_background: u16,
    /// Answer OPEN with `FOPEN_KEEP_CACHE`.
    pub keep_cache: bool,
}

/// What INIT negotiated (filled in by [`Server::init`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Kernel protocol version (major, minor).
    pub kernel_version: (u32, u32),
    /// Flags offered by the kernel.
    pub kernel_flags: u64,
    /// Flags answered (offered & requested), as fuser computes them.
    pub flags: u64,
    /// Whether `FUSE_WRITEBACK_CACHE` is on.
    pub writeback_cache: bool,
    /// Answered `max_write`.
    pub max_write: u32,
    /// Answered `max_readahead`.
    pub max_readahead: u32,
    /// Answered `max_pages` (computed the way fuser does).
    pub max_pages: u16,
    /// Answered `max_background`.
    pub max_background: u16,
}

impl Negotiated {
    /// Negotiated protocol minor version.
    pub fn proto_minor(&self) -> u32 {
        self.kernel_version.1.min(FUSER_PROTO_MINOR)
    }
}

/// The FUSE server: the model, the counters and the INIT outcome.
#[derive(Debug)]
pub struct Server {
    fs: Fs,
    stats: Arc<Stats>,
    params: InitParams,
    negotiated: Arc<Mutex<Option<Negotiated>>>,
}

/// The system page size.
fn page_size() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
    }
}

fn to_file_attr(attr: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(attr.ino),
        size: attr.size,
        blocks: attr.blocks(),
        atime: attr.atime,
        mtime: attr.mtime,
        ctime: attr.ctime,
        crtime: attr.ctime,
        kind: file_type(attr.kind),
        perm: attr.perm,
        nlink: attr.nlink,
        uid: attr.uid,
        gid: attr.gid,
        rdev: 0,
        blksize: crate::fs::BLOCK_SIZE,
        flags: 0,
    }
}

impl Server {
    /// Creates a server over an empty filesystem whose root belongs to the current user.
    pub fn new(
        backing: Backing,
        params: InitParams,
        stats: Arc<Stats>,
        negotiated: Arc<Mutex<Option<Negotiated>>>,
    ) -> Self {
        // SAFETY: getuid/getgid cannot fail and have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Server {
            fs: Fs::new(backing, uid, gid),
            stats,
            params,
            negotiated,
        }
    }

    fn open_flags(&self) -> FopenFlags {
        if self.params.keep_cache {
            FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::empty()
        }
    }

    fn reply_entry(result: Result<Attr, Errno>, reply: ReplyEntry) {
        match result {
            Ok(attr) => reply.entry(&TTL, &to_file_attr(&attr), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn reply_empty(result: Result<(), Errno>, reply: ReplyEmpty) {
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl Filesystem for Server {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let kernel_flags = config.capabilities();
        let version = config.kernel_abi();
        let wb = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
        for cap in OPTIONAL_CAPS {
            // Unsupported optional capabilities are simply not requested.
            let _ = config.add_capabilities(cap);
        }
        let max_write = match config.set_max_write(self.params.max_write) {
            Ok(_) => self.params.max_write,
            Err(nearest) => {
                // Cannot fail: fuser proposes a value it accepts.
                let _ = config.set_max_write(nearest);
                nearest
            }
        };
        // KernelConfig has no getter for max_readahead; asking for too much makes it tell us
        // the kernel's limit, which we then set explicitly (it is also fuser's default).
        let max_readahead = match config.set_max_readahead(u32::MAX) {
            Ok(_) => u32::MAX,
            Err(limit) => {
                let _ = config.set_max_readahead(limit);
                limit
            }
        };
        let max_background = match config.set_max_background(self.params.max_background) {
            Ok(_) => self.params.max_background,
            Err(nearest) => {
                let _ = config.set_max_background(nearest);
                nearest
            }
        };
        let page = page_size();
        let max_pages =
            u16::try_from((max_write.max(max_readahead).max(1) - 1) / page + 1).unwrap_or(u16::MAX);
        let requested = OPTIONAL_CAPS
            .iter()
            .fold(InitFlags::FUSE_WRITEBACK_CACHE, |acc, &c| acc | c);
        let negotiated = Negotiated {
            kernel_version: (version.0, version.1),
            kernel_flags: kernel_flags.bits(),
            flags: (kernel_flags & requested).bits(),
            writeback_cache: wb.is_ok(),
            max_write,
            max_readahead,
            max_pages,
            max_background,
        };
        *self.negotiated.lock().unwrap_or_else(|e| e.into_inner()) = Some(negotiated);
        match wb {
            Ok(()) => Ok(()),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "the kernel (FUSE {}.{}, INIT flags {:#x}) does not offer FUSE_WRITEBACK_CACHE",
                    version.0,
                    version.1,
                    kernel_flags.bits()
                ),
            )),
        }
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        Self::reply_entry(self.fs.lookup(parent.0, name), reply);
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs.forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &to_file_attr(&attr)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.stats.count(Event::Setattr);
        let set = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            ctime,
        };
        match self.fs.setattr(ino.0, set) {
            Ok(attr) => reply.attr(&TTL, &to_file_attr(&attr)),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        self.stats.count(Event::Create);
        let result = self.fs.mknod(parent.0, name, mode, req.uid(), req.gid());
        Self::reply_entry(result, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let result = self.fs.mkdir(parent.0, name, mode, req.uid(), req.gid());
        Self::reply_entry(result, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(self.fs.unlink(parent.0, name), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        Self::reply_empty(self.fs.rmdir(parent.0, name), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let result = self
            .fs
            .rename(parent.0, name, newparent.0, newname, flags.bits());
        Self::reply_empty(result, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.stats.count(Event::Open);
        match self.fs.open(ino.0, flags.0) {
            Ok(()) => reply.opened(FileHandle(0), self.open_flags()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.fs.read(ino.0, offset, size) {
            Ok(data) => {
                self.stats.record_read(data.len());
                reply.data(&data);
            }
            Err(e) => {
                self.stats.record_read(0);
                reply.error(e);
            }
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.stats.record_write(
            data.len(),
            write_flags.contains(WriteFlags::FUSE_WRITE_CACHE),
        );
        match self.fs.write(ino.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Event::Flush);
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Event::Release);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Event::Fsync);
        Self::reply_empty(self.fs.getattr(ino.0).map(|_| ()), reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.opendir(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        match self.fs.readdir(ino.0, offset) {
            Ok(entries) => {
                for entry in entries {
                    let full = reply.add(
                        INodeNo(entry.ino),
                        entry.next_offset,
                        file_type(entry.kind),
                        &entry.name,
                    );
                    if full {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(self.fs.opendir(ino.0), reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let st = self.fs.statfs();
        reply.statfs(
            st.blocks, st.bfree, st.bavail, st.files, st.ffree, st.bsize, st.namelen, st.frsize,
        );
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        // ENOSYS makes the kernel stop asking (fc->no_setxattr) and fail with EOPNOTSUPP.
        reply.error(Errno::ENOSYS);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        // ENOSYS is remembered by the kernel (fc->no_getxattr): no per-write
        // security.capability lookups reach the server.
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let result = self.fs.access(ino.0, req.uid(), req.gid(), mask.bits());
        Self::reply_empty(result, reply);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.stats.count(Event::Create);
        match self
            .fs
            .create(parent.0, name, mode, flags, req.uid(), req.gid())
        {
            Ok((attr, _created)) => reply.created(
                &TTL,
                &to_file_attr(&attr),
                Generation(0),
                FileHandle(0),
                self.open_flags(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Event::Fallocate);
        Self::reply_empty(self.fs.fallocate(ino.0, offset, length, mode), reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_conversion() {
        let fs = Fs::new(Backing::Sink, 3, 4);
        let attr = fs.getattr(crate::fs::ROOT_INO).unwrap();
        let fa = to_file_attr(&attr);
        assert_eq!(fa.ino, INodeNo::ROOT);
        assert_eq!(fa.kind, FileType::Directory);
        assert_eq!((fa.uid, fa.gid, fa.perm, fa.nlink), (3, 4, 0o755, 2));
    }

    #[test]
    fn proto_minor_is_min() {
        let mut n = Negotiated {
            kernel_version: (7, 45),
            kernel_flags: 0,
            flags: 0,
            writeback_cache: true,
            max_write: 1 << 20,
            max_readahead: 1 << 17,
            max_pages: 256,
            max_background: 16,
        };
        assert_eq!(n.proto_minor(), FUSER_PROTO_MINOR);
        n.kernel_version = (7, 31);
        assert_eq!(n.proto_minor(), 31);
    }

    #[test]
    fn page_size_sane() {
        assert!(page_size().is_power_of_two());
    }
}
