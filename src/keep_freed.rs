//! mimalloc keeps the memory a plan frees for the next plan: by default it
//! gives freed pages back to the system 10 ms later (`purge_delay`), so a
//! reconcile loop's every plan on a large fleet faulted its tables' pages
//! in again (6.6 million page faults in `cargo bench --bench reconcile --
//! large`; 0.4 million kept). The resident size stays at the largest a
//! plan needed, as glibc's malloc would keep it; the peak is unchanged.

use std::ffi::{c_int, c_long};

// mimalloc's `mi_option_set` (mimalloc.h), in the static library the
// `mimalloc` crate links.
unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (the 16th
/// option in the v2 and v3 headers `libmimalloc-sys` 0.1.49 builds).
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// Never gives freed memory back to the system (purge delay −1).
pub fn keep_freed_memory() {
    // SAFETY: sets one of mimalloc's options, by its number in the header
    // of the library linked; any thread may call it at any time.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}
