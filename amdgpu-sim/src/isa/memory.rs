//! The global memory seen by waves: the trait the simulated driver's GPU VA space implements.

use super::error::MemoryFault;

/// Byte-addressed GPU virtual memory. Every method refuses an access it does not allow with a
/// [`MemoryFault`], which the interpreter reports as a GPU page fault naming the kernel and PC.
///
/// Workgroups run one after another on the calling thread with `&mut` access, so the default
/// read-modify-write atomics are atomic; an implementation shared with other threads must override
/// them with a locked version.
pub trait GlobalMemory {
    /// Data read (vector and scalar loads, atomics' read half).
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault>;
    /// Data write (stores, atomics' write half).
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault>;
    /// Instruction fetch: must refuse addresses that are not mapped executable.
    fn fetch(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault>;

    /// 32-bit atomic read-modify-write at a 4-byte aligned address; returns the old value.
    fn atomic32(&mut self, addr: u64, op: &mut dyn FnMut(u32) -> u32) -> Result<u32, MemoryFault> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        let old = u32::from_le_bytes(b);
        self.write(addr, &op(old).to_le_bytes())?;
        Ok(old)
    }

    /// 64-bit atomic read-modify-write at an 8-byte aligned address; returns the old value.
    fn atomic64(&mut self, addr: u64, op: &mut dyn FnMut(u64) -> u64) -> Result<u64, MemoryFault> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        let old = u64::from_le_bytes(b);
        self.write(addr, &op(old).to_le_bytes())?;
        Ok(old)
    }
}

pub(crate) fn read_u32(mem: &mut dyn GlobalMemory, addr: u64) -> Result<u32, MemoryFault> {
    let mut b = [0u8; 4];
    mem.read(addr, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

pub(crate) fn fetch_u32(mem: &mut dyn GlobalMemory, addr: u64) -> Result<u32, MemoryFault> {
    let mut b = [0u8; 4];
    mem.fetch(addr, &mut b)?;
    Ok(u32::from_le_bytes(b))
}
