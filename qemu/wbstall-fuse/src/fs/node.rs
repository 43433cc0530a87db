//! The inode table and its nodes: each node's attributes, kernel references and body (a file's
//! contents or a directory's entries), behind the node's own lock.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::SystemTime;

use fuser::Errno;

use super::data::Data;
use super::Attr;
use super::ROOT_INO;

/// The body of a node.
#[derive(Debug)]
pub(super) enum Body {
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
pub(super) struct NodeState {
    pub(super) attr: Attr,
    /// Kernel references (LOOKUP/CREATE/MKDIR replies minus FORGETs).
    pub(super) lookups: u64,
    pub(super) body: Body,
}

impl NodeState {
    pub(super) fn entries(&self) -> Result<&BTreeMap<OsString, u64>, Errno> {
        match &self.body {
            Body::Dir { entries, .. } => Ok(entries),
            Body::File(_) => Err(Errno::ENOTDIR),
        }
    }

    pub(super) fn entries_mut(&mut self) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match &mut self.body {
            Body::Dir { entries, .. } => Ok(entries),
            Body::File(_) => Err(Errno::ENOTDIR),
        }
    }

    pub(super) fn data_mut(&mut self) -> Result<&mut Data, Errno> {
        match &mut self.body {
            Body::File(data) => Ok(data),
            Body::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    /// Marks a change of the directory's entries.
    pub(super) fn touch_dir(&mut self) {
        let now = SystemTime::now();
        self.attr.mtime = now;
        self.attr.ctime = now;
    }

    /// Whether the node can be dropped from the inode table.
    pub(super) fn reapable(&self) -> bool {
        self.attr.ino != ROOT_INO && self.attr.nlink == 0 && self.lookups == 0
    }
}

/// A node of the inode table.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) state: Mutex<NodeState>,
}

impl Node {
    pub(super) fn new(state: NodeState) -> Arc<Self> {
        Arc::new(Node {
            state: Mutex::new(state),
        })
    }

    /// Locks the node, ignoring poisoning (a panicking thread must not wedge the server).
    pub(super) fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The inode table.
#[derive(Debug)]
pub(super) struct Table {
    pub(super) nodes: HashMap<u64, Arc<Node>>,
    pub(super) next_ino: u64,
}

impl Table {
    pub(super) fn get(&self, ino: u64) -> Result<Arc<Node>, Errno> {
        self.nodes.get(&ino).cloned().ok_or(Errno::ENOENT)
    }

    pub(super) fn alloc_ino(&mut self) -> Result<u64, Errno> {
        let ino = self.next_ino;
        self.next_ino = ino.checked_add(1).ok_or(Errno::ENOSPC)?;
        Ok(ino)
    }

    /// Looks `name` up in directory `parent`.
    pub(super) fn child(&self, parent: u64, name: &OsStr) -> Result<Option<u64>, Errno> {
        let node = self.get(parent)?;
        let state = node.lock();
        Ok(state.entries()?.get(name).copied())
    }

    /// Drops `ino` from the table if it is unlinked and unreferenced.
    pub(super) fn reap_if_unused(&mut self, ino: u64) {
        let reap = match self.nodes.get(&ino) {
            Some(node) => node.lock().reapable(),
            None => false,
        };
        if reap {
            self.nodes.remove(&ino);
        }
    }
}
