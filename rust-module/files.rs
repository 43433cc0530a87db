// SPDX-License-Identifier: GPL-2.0

//! The debugfs directory `wbstall/`, with `file_operations` that name this module as owner.
//!
//! Why not `kernel::debugfs`: in 7.3 its `file_operations` leave `owner` NULL, so an open file
//! does not pin the module. A file held open across `rmmod` then makes the close run
//! `full_proxy_release()` on `file_operations` that were in the unloaded module's memory: an
//! Oops, reproduced in QEMU by `rmmod` while `cat stats` ran in a loop. Here `owner` is set, so
//! debugfs takes a module reference for each open file: `rmmod` fails with `EWOULDBLOCK`
//! while a file is open, and an open racing with unload gets `ENXIO`.
//!
//! The show and write logic lives in the crate root; this file only adapts it to `seq_file`
//! and to `write()`.

use crate::table::Table;
use core::marker::PhantomData;
use kernel::{
    bindings,
    error::from_err_ptr,
    fmt,
    module::this_module,
    prelude::*,
    seq_file::SeqFile,
    seq_print,
    str::CStrExt,
    uaccess::{
        UserPtr,
        UserSlice,
        UserSliceReader, //
    },
};

/// A read-only file: how it renders the table.
pub(crate) trait Show: Sized + 'static {
    /// Writes the file's text.
    fn show(table: &Table, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// The file's `file_operations`: `seq_file` via `single_open()`, owned by this module.
    const FOPS: Fops = Fops(bindings::file_operations {
        owner: this_module::<crate::WbStall>().as_ptr(),
        open: Some(show_open::<Self>),
        read: Some(bindings::seq_read),
        llseek: Some(bindings::seq_lseek),
        release: Some(bindings::single_release),
        ..pin_init::zeroed()
    });
}

/// A write-only file: what a write does.
pub(crate) trait Store: Sized + 'static {
    /// Handles one `write()` of the whole user buffer.
    fn store(table: &Table, reader: &mut UserSliceReader) -> Result;

    /// The file's `file_operations`, owned by this module.
    const FOPS: Fops = Fops(bindings::file_operations {
        owner: this_module::<crate::WbStall>().as_ptr(),
        open: Some(bindings::simple_open),
        write: Some(store_write::<Self>),
        llseek: Some(bindings::noop_llseek),
        ..pin_init::zeroed()
    });
}

/// `file_operations` that can live in a `static`.
///
/// # Invariants
///
/// The functions in it expect the inode's `i_private` to point to a `'static` [`Table`].
pub(crate) struct Fops(bindings::file_operations);

// SAFETY: The struct is never written after compilation; its pointers are to functions and to
// this module's `struct module`, which all CPUs may use.
unsafe impl Sync for Fops {}

/// Displays a table through `S::show`.
struct Render<'a, S>(&'a Table, PhantomData<S>);

impl<S: Show> fmt::Display for Render<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        S::show(self.0, f)
    }
}

/// `open` of a [`Show`] file.
///
/// # Safety
///
/// Called by the VFS with a live `inode` whose `i_private` is the `'static` [`Table`] given to
/// [`DebugfsDir::file`], and a `file` being opened.
unsafe extern "C" fn show_open<S: Show>(
    inode: *mut bindings::inode,
    file: *mut bindings::file,
) -> c_int {
    // SAFETY: `inode` is live (caller's guarantee).
    let data = unsafe { (*inode).i_private };
    // SAFETY: `file` is being opened (caller's guarantee); `show_seq::<S>` has the type
    // `single_open()` wants and reads `data` as a `'static` `Table`, which it is.
    unsafe { bindings::single_open(file, Some(show_seq::<S>), data) }
}

/// `show` of the `seq_file` a [`Show`] file opened.
///
/// # Safety
///
/// Called by `seq_read()` with the live `seq_file` of one open file, whose `private` is the
/// `'static` [`Table`] `show_open` passed to `single_open()`.
unsafe extern "C" fn show_seq<S: Show>(seq: *mut bindings::seq_file, _v: *mut c_void) -> c_int {
    // SAFETY: `private` is the `'static` `Table` (caller's guarantee); only shared
    // references to it ever exist.
    let table = unsafe { &*(*seq).private.cast::<Table>() };
    // SAFETY: `seq` is live, and `seq_read()` holds its mutex for the whole call.
    let seq = unsafe { SeqFile::from_raw(seq) };
    seq_print!(seq, "{}", Render::<S>(table, PhantomData));
    0
}

/// `write` of a [`Store`] file: the whole buffer, or an errno.
///
/// # Safety
///
/// Called by `vfs_write()` for a file opened with `simple_open()` (so `private_data` is the
/// `'static` [`Table`] of the inode), with `buf` a user pointer valid for `count` bytes.
unsafe extern "C" fn store_write<S: Store>(
    file: *mut bindings::file,
    buf: *const c_char,
    count: usize,
    _ppos: *mut bindings::loff_t,
) -> isize {
    // SAFETY: `private_data` is the `'static` `Table` (caller's guarantee).
    let table = unsafe { &*(*file).private_data.cast::<Table>() };
    let mut reader = UserSlice::new(UserPtr::from_ptr(buf.cast_mut().cast()), count).reader();
    match S::store(table, &mut reader) {
        Ok(()) => isize::try_from(count).unwrap_or(isize::MAX),
        Err(e) => e.to_errno() as isize,
    }
}

/// A debugfs directory at the root, removed with everything in it on drop.
///
/// # Invariants
///
/// `self.0` is what `debugfs_create_dir()` returned: a dentry, or an `ERR_PTR` (debugfs off or
/// the name taken), both of which `debugfs_create_file_full()` and `debugfs_remove()` accept.
pub(crate) struct DebugfsDir(*mut bindings::dentry);

// SAFETY: The dentry is only handed to debugfs functions, which do their own locking.
unsafe impl Send for DebugfsDir {}

// SAFETY: As for `Send`; `&DebugfsDir` allows nothing but creating files, which debugfs
// serialises.
unsafe impl Sync for DebugfsDir {}

impl DebugfsDir {
    /// Creates `/sys/kernel/debug/<name>`. Failing debugfs is not an error for the module
    /// (debugfs convention): it logs a warning and the files are simply absent.
    pub(crate) fn new(name: &CStr) -> Self {
        // SAFETY: `name` is NUL-terminated; a NULL parent is the debugfs root.
        let dentry =
            unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), core::ptr::null_mut()) };
        if let Err(e) = from_err_ptr(dentry) {
            pr_warn!("debugfs directory not created: {}\n", e.to_errno());
        }
        // INVARIANT: `dentry` is what `debugfs_create_dir()` returned.
        Self(dentry)
    }

    /// Creates file `name` with `mode`, served by `fops` over `table`. Removed with the
    /// directory.
    pub(crate) fn file(&self, name: &CStr, mode: u16, table: &'static Table, fops: &'static Fops) {
        let data = core::ptr::from_ref(table).cast_mut().cast::<c_void>();
        // SAFETY: `self.0` is a dentry or an `ERR_PTR` (type invariant), both accepted; `name`
        // is NUL-terminated; `fops` is `'static` and its functions expect `i_private` to be a
        // `'static` `Table` (`Fops` invariant), which `data` is. The module owns `fops`, so an
        // open file pins the module and `fops` outlives every use.
        let dentry = unsafe {
            bindings::debugfs_create_file_full(
                name.as_char_ptr(),
                mode,
                self.0,
                data,
                core::ptr::null(),
                &fops.0,
            )
        };
        if let Err(e) = from_err_ptr(dentry) {
            pr_warn!(
                "debugfs file {} not created: {}\n",
                name.to_str().unwrap_or("?"),
                e.to_errno()
            );
        }
    }
}

impl Drop for DebugfsDir {
    fn drop(&mut self) {
        // SAFETY: `self.0` is a dentry or an `ERR_PTR` (type invariant); `debugfs_remove()`
        // removes the tree and waits for every read or write in progress on its files.
        unsafe { bindings::debugfs_remove(self.0) };
    }
}
