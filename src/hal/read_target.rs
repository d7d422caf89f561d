//! The host memory a read of a device buffer fills: the caller's bytes, which need not be
//! initialised. Zeroing a fresh 16 MiB `Vec` before a read cost as much as the read out of a
//! mapping itself (H100 guest: 0.8 of a 1.4 ms read-back), so the runtime can hand a backend
//! memory it never wrote. A backend writes it through [`ReadTarget::as_mut_ptr`] (a copy on
//! several threads, a driver call) and then says so with [`ReadTarget::assume_filled`], or asks
//! for a slice with [`ReadTarget::bytes_mut`], which zeroes uninitialised memory first. The
//! runtime gives its caller memory it did not initialise only once the target reports itself
//! filled, so a backend that forgets to say so costs an error, never uninitialised bytes.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Where a read puts its bytes: `len` bytes of host memory the caller lent for the read.
pub struct ReadTarget<'a> {
    start: NonNull<u8>,
    len: usize,
    /// Every byte holds a value: the caller's initialised slice, zeroed, or written by a
    /// backend that said so.
    filled: bool,
    _lent: PhantomData<&'a mut [MaybeUninit<u8>]>,
}

// SAFETY: a `ReadTarget` is an exclusive borrow of plain bytes, which may move between threads
// like the `&mut [MaybeUninit<u8>]` it stands for.
unsafe impl Send for ReadTarget<'_> {}

impl<'a> ReadTarget<'a> {
    /// A target over initialised bytes, which the read overwrites.
    pub fn new(out: &'a mut [u8]) -> Self {
        Self { start: NonNull::from(&mut *out).cast(), len: out.len(), filled: true, _lent: PhantomData }
    }

    /// A target over memory that may hold no values yet (a `Vec`'s spare capacity).
    pub fn uninit(out: &'a mut [MaybeUninit<u8>]) -> Self {
        Self { start: NonNull::from(&mut *out).cast(), len: out.len(), filled: false, _lent: PhantomData }
    }

    /// Bytes the read must fill.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the read moves no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every byte holds a value: the target was made from initialised bytes, or
    /// [`bytes_mut`](Self::bytes_mut) or [`assume_filled`](Self::assume_filled) was called.
    pub fn is_filled(&self) -> bool {
        self.filled
    }

    /// The first byte, for writes by raw pointer: copies split over threads, a driver writing
    /// into host memory. Call [`assume_filled`](Self::assume_filled) once all `len` bytes are
    /// written.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.start.as_ptr()
    }

    /// The bytes as a slice, for a backend whose driver call takes one; memory that held no
    /// values is zeroed first (once), which costs a pass over it.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        if !self.filled {
            // SAFETY: `start` is valid for writes of `len` bytes for the borrow `'a`, which
            // `&mut self` is inside.
            unsafe { self.start.as_ptr().write_bytes(0, self.len) };
            self.filled = true;
        }
        // SAFETY: every byte now holds a value, and `start..start + len` is exclusively ours.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }

    /// Marks every byte as written.
    ///
    /// # Safety
    /// All `len` bytes from [`as_mut_ptr`](Self::as_mut_ptr) must have been written (by this
    /// thread, or by threads or a driver whose writes this thread has since synchronised with).
    pub unsafe fn assume_filled(&mut self) {
        self.filled = true;
    }
}

impl std::fmt::Debug for ReadTarget<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTarget").field("len", &self.len).field("filled", &self.filled).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::ReadTarget;
    use std::mem::MaybeUninit;

    #[test]
    fn initialised_bytes_are_filled_and_kept_until_overwritten() {
        let mut bytes = [7u8; 5];
        let mut target = ReadTarget::new(&mut bytes);
        assert!(target.is_filled());
        assert_eq!(target.len(), 5);
        assert_eq!(target.bytes_mut(), &[7; 5], "an initialised target is not zeroed");
        target.bytes_mut()[1] = 3;
        assert_eq!(bytes, [7, 3, 7, 7, 7]);
    }

    #[test]
    fn uninitialised_memory_is_filled_only_by_a_slice_or_a_promise() {
        let mut memory = [MaybeUninit::<u8>::uninit(); 4];
        let mut target = ReadTarget::uninit(&mut memory);
        assert!(!target.is_filled());
        assert_eq!(target.bytes_mut(), &[0; 4], "a slice of uninitialised memory is zeroed first");
        assert!(target.is_filled());

        let mut memory = [MaybeUninit::<u8>::uninit(); 3];
        let mut target = ReadTarget::uninit(&mut memory);
        let start = target.as_mut_ptr();
        for i in 0..3 {
            // SAFETY: the target lends 3 bytes from `start`.
            unsafe { start.add(i).write(i as u8 + 1) };
        }
        assert!(!target.is_filled(), "raw writes alone do not mark the target");
        // SAFETY: all three bytes were written just above.
        unsafe { target.assume_filled() };
        assert_eq!(target.bytes_mut(), &[1, 2, 3], "a filled target is not zeroed again");
    }
}
