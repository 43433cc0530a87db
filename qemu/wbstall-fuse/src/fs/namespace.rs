//! The namespace operations but RENAME: LOOKUP, FORGET, CREATE, MKNOD, MKDIR, UNLINK, RMDIR.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::time::SystemTime;

use fuser::Errno;

use super::check_name;
use super::data::Data;
use super::node::Body;
use super::node::Node;
use super::node::NodeState;
use super::node::Table;
use super::Attr;
use super::Fs;
use super::Kind;
use super::MAX_NAME_LEN;

impl Fs {
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
    pub(super) fn insert(
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
}
