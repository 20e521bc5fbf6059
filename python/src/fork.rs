//! A child forked from a process holding sessions exits without running the exit handlers it inherited. Mesa's
//! drivers (lavapipe, llvmpipe) register one that joins each device's worker threads; in a child those threads
//! do not exist, and once glibc has reclaimed their stacks at fork the second join reads unmapped memory
//! (SIGSEGV at exit, with two devices open). A handler registered in the child runs before every inherited one
//! (exit runs handlers in reverse order of registration): it flushes C's streams and ends the process with the
//! status exit was given. Python has finalized by then (its own atexit callbacks and the bindings' drops ran),
//! so what is skipped is only what the parent's libraries registered. A child of a process holding no session
//! exits as any process does.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Sessions of this process holding a device: opened and not yet closed or dropped.
static HELD: AtomicUsize = AtomicUsize::new(0);

pub fn opened() {
    HELD.fetch_add(1, Ordering::SeqCst);
}

pub fn released() {
    let _ = HELD.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
        held.checked_sub(1)
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod handlers {
    use std::ffi::{c_int, c_void};

    extern "C" {
        /// glibc's `on_exit(3)`: as `atexit`, with the status `exit` was given.
        fn on_exit(function: extern "C" fn(c_int, *mut c_void), argument: *mut c_void) -> c_int;
    }

    extern "C" fn leave_now(status: c_int, _: *mut c_void) {
        // SAFETY: fflush(NULL) flushes every C stream; _exit ends the process at once with exit's status.
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(status);
        }
    }

    extern "C" fn in_child() {
        if super::HELD.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            // SAFETY: registers a handler of the right signature; nothing is passed to it.
            unsafe {
                on_exit(leave_now, std::ptr::null_mut());
            }
        }
    }

    pub fn install() {
        // SAFETY: registers a plain function to run in the child after fork; the others are none.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
    }
}

/// Registers the child's handler, once per process (the module is initialised once).
pub fn install() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    handlers::install();
}
