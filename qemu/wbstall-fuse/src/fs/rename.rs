//! RENAME (with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`) and the directory bookkeeping it
//! needs: parent pointers, link counts, and the no-directory-inside-itself rule.

use std::ffi::OsStr;
use std::time::SystemTime;

use fuser::Errno;

use super::check_name;
use super::node::Body;
use super::node::Table;
use super::Fs;
use super::Kind;
use super::ROOT_INO;

impl Fs {
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
        let dst = match dst {
            Some(ino) => Some((ino, table.get(ino)?.lock().attr.kind)),
            None => None,
        };
        let m = Move {
            parent,
            name,
            newparent,
            newname,
            src,
            src_kind,
        };

        if exchange {
            let (dst, dst_kind) = dst.ok_or(Errno::ENOENT)?;
            return m.exchange(&table, dst, dst_kind);
        }

        if let Some((dst, _)) = dst {
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
        if let Some((dst, dst_kind)) = dst {
            m.unlink_replaced(&table, dst, dst_kind)?;
        }
        m.relink(&table)?;
        if let Some((dst, _)) = dst {
            table.reap_if_unused(dst);
        }
        Ok(())
    }
}

/// What a RENAME moves: node `src` (a `src_kind`), from `name` in directory
/// `parent` to `newname` in directory `newparent`.
struct Move<'a> {
    parent: u64,
    name: &'a OsStr,
    newparent: u64,
    newname: &'a OsStr,
    src: u64,
    src_kind: Kind,
}

impl Move<'_> {
    /// `RENAME_EXCHANGE`: swaps `src` with `dst` (a `dst_kind`), the node
    /// `newname` names now.
    fn exchange(&self, table: &Table, dst: u64, dst_kind: Kind) -> Result<(), Errno> {
        let Move {
            parent,
            name,
            newparent,
            newname,
            src,
            src_kind,
        } = *self;
        if src == dst {
            return Ok(());
        }
        // Neither directory may end up inside itself.
        if (src_kind == Kind::Dir && Fs::is_within(table, newparent, src)?)
            || (dst_kind == Kind::Dir && Fs::is_within(table, parent, dst)?)
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
        Fs::set_parent(table, src, newparent)?;
        Fs::set_parent(table, dst, parent)?;
        // A directory changing parents moves one link (its `..`) along with it.
        let src_dir = i32::from(src_kind == Kind::Dir);
        let dst_dir = i32::from(dst_kind == Kind::Dir);
        if newparent == parent {
            Fs::adjust_dir(table, parent, 0)?;
        } else {
            Fs::adjust_dir(table, parent, dst_dir - src_dir)?;
            Fs::adjust_dir(table, newparent, src_dir - dst_dir)?;
        }
        Ok(())
    }

    /// Drops the link of `dst` (a `dst_kind`), the node `src` replaces: a
    /// directory only for a directory and only when empty, a file only for a
    /// file.
    fn unlink_replaced(&self, table: &Table, dst: u64, dst_kind: Kind) -> Result<(), Errno> {
        match (self.src_kind, dst_kind) {
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
            Fs::adjust_dir(table, self.newparent, -1)?;
        }
        Ok(())
    }

    /// Moves the entry of `src` from `parent` to `newparent` (a directory
    /// takes its `..` link along).
    fn relink(&self, table: &Table) -> Result<(), Errno> {
        let Move {
            parent,
            name,
            newparent,
            newname,
            src,
            src_kind,
        } = *self;
        table.get(parent)?.lock().entries_mut()?.remove(name);
        table
            .get(newparent)?
            .lock()
            .entries_mut()?
            .insert(newname.to_owned(), src);
        Fs::set_parent(table, src, newparent)?;
        let moved_dir = i32::from(src_kind == Kind::Dir && parent != newparent);
        Fs::adjust_dir(table, parent, -moved_dir)?;
        if newparent != parent {
            Fs::adjust_dir(table, newparent, moved_dir)?;
        }
        Ok(())
    }
}
