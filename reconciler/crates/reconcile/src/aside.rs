//! Freeing large values off the loop's thread.
//!
//! A changed revision's iteration replaces the last plan: freeing one of
//! 100,000 pending jobs (their names and reasons) takes over a millisecond
//! that the iteration need not wait for.

use std::sync::Arc;

/// Drops `value` on a thread of its own when this holds its last strong
/// reference (on this thread otherwise, or when no thread can be had).
/// Weak references do not keep it here: the status page's record of the
/// last plan holds one, and the value is freed when the last strong one
/// goes, whoever holds a weak one.
pub(crate) fn drop_last_aside<T: Send + Sync + 'static>(value: Arc<T>) {
    if Arc::strong_count(&value) == 1 {
        // A failed spawn drops the closure, and the value with it, here.
        let _ = std::thread::Builder::new()
            .name("gitfleet-free".into())
            .spawn(move || drop(value));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may stop at the first surprise
mod tests {
    use super::*;

    /// Says on which thread it was dropped.
    struct Telling(std::sync::mpsc::Sender<std::thread::ThreadId>);

    impl Drop for Telling {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }

    #[test]
    fn a_last_reference_is_freed_on_another_thread_a_shared_one_not_at_all() {
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Telling(tx.clone()));
        drop_last_aside(shared.clone());
        assert!(rx.try_recv().is_err(), "still held: not dropped");
        drop_last_aside(shared);
        let on = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_ne!(on, std::thread::current().id(), "dropped aside");
    }

    #[test]
    fn a_last_strong_reference_with_weak_ones_is_freed_on_another_thread() {
        let (tx, rx) = std::sync::mpsc::channel();
        let value = Arc::new(Telling(tx));
        let weak = Arc::downgrade(&value);
        drop_last_aside(value);
        let on = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_ne!(on, std::thread::current().id(), "dropped aside");
        assert!(weak.upgrade().is_none(), "freed");
    }
}
