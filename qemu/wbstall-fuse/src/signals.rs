//! SIGTERM/SIGINT handling without a signal crate: the signals are blocked in every thread
//! (the mask is inherited by threads spawned later) and a dedicated thread collects them
//! with `sigwaitinfo(2)`, so the handling code runs in normal thread context.

use std::io;
use std::mem::MaybeUninit;
use std::thread;

/// The set of shutdown signals.
#[derive(Clone, Copy)]
pub struct ShutdownSignals {
    set: libc::sigset_t,
}

impl std::fmt::Debug for ShutdownSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShutdownSignals(SIGTERM, SIGINT)")
    }
}

impl ShutdownSignals {
    /// Blocks SIGTERM and SIGINT in the calling thread. Call this first in `main`, before any
    /// thread exists, so that every thread inherits the mask and only the waiter sees them.
    pub fn block() -> io::Result<Self> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the set; sigaddset/pthread_sigmask get valid
        // pointers to it.
        let set = unsafe {
            if libc::sigemptyset(set.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut set = set.assume_init();
            for sig in [libc::SIGTERM, libc::SIGINT] {
                if libc::sigaddset(&mut set, sig) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            set
        };
        Ok(ShutdownSignals { set })
    }

    /// Waits for the next blocked signal and returns its number.
    pub fn wait(&self) -> io::Result<i32> {
        loop {
            // SAFETY: `self.set` is an initialised sigset; a null siginfo pointer is allowed.
            let sig = unsafe { libc::sigwaitinfo(&self.set, std::ptr::null_mut()) };
            if sig >= 0 {
                return Ok(sig);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// Spawns a thread that waits for the first signal and runs `handler` with it.
    pub fn spawn_handler<F>(self, handler: F) -> io::Result<thread::JoinHandle<()>>
    where
        F: FnOnce(i32) + Send + 'static,
    {
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || match self.wait() {
                Ok(sig) => handler(sig),
                Err(e) => log::error!("waiting for signals failed: {e}"),
            })
    }
}

/// The name of a shutdown signal, for messages.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}
