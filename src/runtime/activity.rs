//! Which opened device did work last in this process: every runtime's submissions and buffer
//! transfers mark their device, and a [`Placement`](super::Placement) reads the mark before a
//! run to tell a run that follows another device's work from one that follows its own.
//!
//! A placement's own record of where it ran last is not enough: work that does not go through
//! it — the same runtimes used directly, another placement, the benchmark's devices running
//! alone between placed passes — moves the machine from one device to the other all the same.
//! The first placed run after such work pays for the move (on the 2-core machine a llvmpipe
//! run right after the simulator's pass took up to twice its time), and learning it as a run
//! that stayed on its device made that device look slower than it is.

use std::sync::atomic::{AtomicU64, Ordering};

/// The process's mark: the device that did work last.
static MARK: LastDevice = LastDevice::new();

/// The next device id to hand out (ids start at 1, so that 0 means "none").
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The id of the device that did work last (0: none yet).
struct LastDevice {
    id: AtomicU64,
}

impl LastDevice {
    const fn new() -> Self {
        LastDevice { id: AtomicU64::new(0) }
    }

    /// Read first, written only on a change: a stream on one device then only reads a cache
    /// line that every thread may share.
    fn mark(&self, id: u64) {
        if self.id.load(Ordering::Relaxed) != id {
            self.id.store(id, Ordering::Relaxed);
        }
    }

    fn get(&self) -> Option<u64> {
        Some(self.id.load(Ordering::Relaxed)).filter(|&id| id != 0)
    }
}

/// One opened device's identity for the mark.
#[derive(Debug)]
pub(crate) struct DeviceActivity {
    id: u64,
}

impl DeviceActivity {
    /// A device with an id of its own.
    pub(crate) fn new() -> Self {
        DeviceActivity { id: NEXT.fetch_add(1, Ordering::Relaxed) }
    }

    /// Its id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Marks it as the device that did work last.
    pub(crate) fn mark(&self) {
        MARK.mark(self.id);
    }
}

/// The id of the device that did work last in this process, if any did.
pub(crate) fn last() -> Option<u64> {
    MARK.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_device_to_do_work_is_the_one_marked_last() {
        // A mark of its own: the process's is shared with every other test's devices.
        let mark = LastDevice::new();
        assert_eq!(mark.get(), None);
        let (a, b) = (DeviceActivity::new(), DeviceActivity::new());
        assert_ne!(a.id(), b.id());
        mark.mark(a.id());
        assert_eq!(mark.get(), Some(a.id()));
        mark.mark(b.id());
        mark.mark(b.id());
        assert_eq!(mark.get(), Some(b.id()));
        mark.mark(a.id());
        assert_eq!(mark.get(), Some(a.id()));
    }
}
