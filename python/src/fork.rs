//! A child forked from a process holding sessions exits without running the exit handlers it inherited. Mesa's
//! drivers (lavapipe, llvmpipe) register one that joins each device's worker threads; in a child those threads
//! do not exist, and once glibc has reclaimed their stacks at fork the second join reads unmapped memory
//! (SIGSEGV at exit, with two devices open). A handler registered in the child runs before every inherited one
//! (exit runs handlers in reverse order of registration): it flushes C's streams and ends the process with the
//! status exit was given. Python has finalized by then (its own atexit callbacks and the bindings' drops ran),
//! so what is skipped is only what the parent's libraries registered. A child of a process holding no session
//! exits as any process does.
//!
//! A child of a process holding a GL session cannot use GL itself: the EGL display it inherits waits for the
//! parent's driver threads, which it does not have, so its first pipeline would wait for ever. Such a child's
//! GL sessions are refused as forked (`forked_with_gl`); Vulkan opens as anywhere.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Sessions of this process holding a device: opened and not yet closed or dropped.
static HELD: AtomicUsize = AtomicUsize::new(0);
/// Of those, the ones on GL.
static HELD_ON_GL: AtomicUsize = AtomicUsize::new(0);
/// Whether this process was forked while its parent held a GL session.
static FORKED_WITH_GL: AtomicBool = AtomicBool::new(false);

pub fn opened(on_gl: bool) {
    HELD.fetch_add(1, Ordering::SeqCst);
    if on_gl {
        HELD_ON_GL.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn released(on_gl: bool) {
    let less = |held: usize| held.checked_sub(1);
    let _ = HELD.fetch_update(Ordering::SeqCst, Ordering::SeqCst, less);
    if on_gl {
        let _ = HELD_ON_GL.fetch_update(Ordering::SeqCst, Ordering::SeqCst, less);
    }
}

/// Whether a GL session opened here would hang: this process was forked while its parent held one.
pub fn forked_with_gl() -> bool {
    FORKED_WITH_GL.load(Ordering::SeqCst)
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
        use std::sync::atomic::Ordering;
        if super::HELD_ON_GL.load(Ordering::SeqCst) > 0 {
            super::FORKED_WITH_GL.store(true, Ordering::SeqCst);
        }
        if super::HELD.load(Ordering::SeqCst) > 0 {
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
