//! The simulated GPU virtual address space: GEM_VA mappings with their permissions, checked the
//! way the kernel checks them (page alignment, inside the VA range, inside the buffer, no
//! overlap, unmap by exact address), and the view a running submission gets of it.
//!
//! A submission captures the mappings at CS time ([`VaSpace::snapshot`]) and, while it runs,
//! locks the buffers of its BO list ([`SubmissionMemory`]). Every GPU access — instruction
//! fetch, loads and stores of waves, and the command processor's own reads and writes — goes
//! through [`GlobalMemory`] on that view, which refuses unmapped addresses, writes to read-only
//! mappings, fetches from non-executable ones, and buffers missing from the BO list.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::MutexGuard;

use crate::buffers::{lock, Storage, PAGE_SIZE};
use crate::errno::{einval, enoent};
use crate::isa::{Access, GlobalMemory, MemoryFault};
use sparkle_amdgpu_kmd::error::Result;
use sparkle_amdgpu_kmd::kmd::{BoHandle, VaFlags};

/// One GEM_VA mapping: `size` bytes of `bo` from offset 0 at `start`.
#[derive(Debug, Clone)]
pub struct VaMapping {
    pub start: u64,
    pub size: u64,
    pub flags: VaFlags,
    pub bo: BoHandle,
    /// Held, not read: a mapping keeps its buffer's pages alive, as the kernel's does.
    #[expect(dead_code, reason = "held for its lifetime, never read")]
    pub storage: Storage,
}

impl VaMapping {
    fn end(&self) -> u64 {
        self.start + self.size
    }
}

/// Every mapping of the device file, by start address.
#[derive(Debug)]
pub struct VaSpace {
    start: u64,
    end: u64,
    mappings: BTreeMap<u64, VaMapping>,
}

impl VaSpace {
    /// User space may map `[start, end)`.
    pub fn new(start: u64, end: u64) -> Self {
        Self { start, end, mappings: BTreeMap::new() }
    }

    /// GEM_VA map.
    pub fn map(
        &mut self,
        bo: BoHandle,
        storage: Storage,
        bo_size: u64,
        va: u64,
        size: u64,
        flags: VaFlags,
    ) -> Result<()> {
        let what = format!("GEM_VA map of buffer {} at {va:#x}+{size:#x}", bo.0);
        if va % PAGE_SIZE != 0 || size % PAGE_SIZE != 0 {
            return Err(einval(what, format!("address and size must be multiples of {PAGE_SIZE} bytes")));
        }
        let end = va
            .checked_add(size)
            .filter(|_| size > 0)
            .ok_or_else(|| einval(&what, "empty or wrapping range"))?;
        if va < self.start || end > self.end {
            return Err(einval(
                what,
                format!("the range is outside the usable VA range {:#x}..{:#x}", self.start, self.end),
            ));
        }
        if size > bo_size {
            return Err(einval(what, format!("the buffer has only {bo_size} bytes")));
        }
        if let Some(other) = self.overlapping(va, end) {
            return Err(einval(
                what,
                format!(
                    "the range conflicts with buffer {}'s mapping at {:#x}..{:#x}",
                    other.bo.0,
                    other.start,
                    other.end()
                ),
            ));
        }
        self.mappings.insert(va, VaMapping { start: va, size, flags, bo, storage });
        Ok(())
    }

    fn overlapping(&self, start: u64, end: u64) -> Option<&VaMapping> {
        // The mapping starting last before `end` is the only one that can overlap, since
        // mappings never overlap each other.
        self.mappings.range(..end).next_back().map(|(_, m)| m).filter(|m| m.end() > start)
    }

    /// GEM_VA unmap: the mapping of `bo` that starts exactly at `va` (the kernel ignores the size).
    pub fn unmap(&mut self, bo: BoHandle, va: u64, size: u64) -> Result<()> {
        let what = format!("GEM_VA unmap of buffer {} at {va:#x}+{size:#x}", bo.0);
        match self.mappings.get(&va) {
            Some(m) if m.bo == bo => {
                self.mappings.remove(&va);
                Ok(())
            }
            Some(m) => Err(enoent(what, format!("the mapping at {va:#x} belongs to buffer {}", m.bo.0))),
            None => Err(enoent(what, format!("buffer {} has no mapping starting at {va:#x}", bo.0))),
        }
    }

    /// Drops every mapping of `bo` (GEM_CLOSE does this); returns how many there were.
    pub fn unmap_all(&mut self, bo: BoHandle) -> usize {
        let before = self.mappings.len();
        self.mappings.retain(|_, m| m.bo != bo);
        before - self.mappings.len()
    }

    /// The mapping containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&VaMapping> {
        self.mappings.range(..=addr).next_back().map(|(_, m)| m).filter(|m| addr < m.end())
    }

    /// Every mapping, for a submission to run against.
    pub fn snapshot(&self) -> Vec<VaMapping> {
        self.mappings.values().cloned().collect()
    }
}

/// A mapping as a running submission sees it.
struct LiveMapping {
    start: u64,
    end: u64,
    flags: VaFlags,
    bo: BoHandle,
    /// Index into the locked buffers; `None` when the buffer is not in the BO list.
    slot: Option<usize>,
}

/// Why the last access faulted, in words (the interpreter only reports address and kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultNote {
    pub addr: u64,
    pub access: Access,
    pub reason: String,
}

/// The GPU's view of memory while one submission runs: its mappings and the locked bytes of the
/// buffers in its BO list.
pub struct SubmissionMemory<'a> {
    mappings: Vec<LiveMapping>,
    locked: Vec<MutexGuard<'a, Vec<u8>>>,
    /// The mapping the last access hit (accesses cluster).
    last: usize,
    /// Explains the most recent fault.
    pub note: Option<FaultNote>,
}

impl<'a> SubmissionMemory<'a> {
    /// Locks `buffers` (the BO list, each handle once, in handle order so that two views can
    /// never deadlock) and indexes `mappings` against them.
    pub fn new(mappings: &[VaMapping], buffers: &'a [(BoHandle, Storage)]) -> Self {
        let locked: Vec<_> = buffers.iter().map(|(_, s)| lock(s)).collect();
        let mut live: Vec<LiveMapping> = mappings
            .iter()
            .map(|m| LiveMapping {
                start: m.start,
                end: m.end(),
                flags: m.flags,
                bo: m.bo,
                slot: buffers.iter().position(|(bo, _)| *bo == m.bo),
            })
            .collect();
        live.sort_by_key(|m| m.start);
        Self { mappings: live, locked, last: 0, note: None }
    }

    fn index_of(&mut self, addr: u64) -> Option<usize> {
        if let Some(m) = self.mappings.get(self.last) {
            if m.start <= addr && addr < m.end {
                return Some(self.last);
            }
        }
        let i = self.mappings.partition_point(|m| m.start <= addr).checked_sub(1)?;
        (addr < self.mappings[i].end).then(|| {
            self.last = i;
            i
        })
    }

    fn fault(&mut self, addr: u64, access: Access, reason: String) -> MemoryFault {
        self.note = Some(FaultNote { addr, access, reason });
        MemoryFault { addr, access }
    }

    /// Finds the bytes `[addr, addr + len)` may touch within one mapping: the mapping's slot,
    /// the offset in the buffer and how many bytes of the range lie in it.
    fn resolve(
        &mut self,
        addr: u64,
        len: usize,
        access: Access,
    ) -> Result<(usize, usize, usize), MemoryFault> {
        let Some(i) = self.index_of(addr) else {
            let reason = "no buffer is mapped there".to_string();
            return Err(self.fault(addr, access, reason));
        };
        let m = &self.mappings[i];
        let allowed = match access {
            Access::Read => m.flags.readable,
            Access::Write => m.flags.writeable,
            Access::Fetch => m.flags.executable,
        };
        let (start, end, bo, flags, slot) = (m.start, m.end, m.bo, m.flags, m.slot);
        if !allowed {
            let reason = format!(
                "buffer {} is mapped at {start:#x}..{end:#x} without {} permission ({})",
                bo.0,
                match access {
                    Access::Read => "read",
                    Access::Write => "write",
                    Access::Fetch => "execute",
                },
                describe_flags(flags)
            );
            return Err(self.fault(addr, access, reason));
        }
        let Some(slot) = slot else {
            let reason = format!(
                "buffer {} is mapped at {start:#x}..{end:#x} but is not in the submission's BO list \
                 (the kernel may have moved or evicted it: add it to the list)",
                bo.0
            );
            return Err(self.fault(addr, access, reason));
        };
        let offset = (addr - start) as usize;
        let n = len.min((end - addr) as usize);
        Ok((slot, offset, n))
    }

    /// Copies out of GPU memory with the permission `access` needs.
    pub fn load(&mut self, addr: u64, buf: &mut [u8], access: Access) -> Result<(), MemoryFault> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.wrapping_add(done as u64);
            let (slot, offset, n) = self.resolve(at, buf.len() - done, access)?;
            buf[done..done + n].copy_from_slice(&self.locked[slot][offset..offset + n]);
            done += n;
        }
        Ok(())
    }

    /// Copies into GPU memory (write permission).
    pub fn store(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        let mut done = 0;
        while done < data.len() {
            let at = addr.wrapping_add(done as u64);
            let (slot, offset, n) = self.resolve(at, data.len() - done, Access::Write)?;
            self.locked[slot][offset..offset + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// The bytes of the buffer mapped at `addr`, from the start of its mapping, and the offset
    /// of `addr` in them (to find which kernel a code address belongs to).
    pub fn mapped_buffer(&self, addr: u64) -> Option<(&[u8], u64)> {
        let i = self.mappings.partition_point(|m| m.start <= addr).checked_sub(1)?;
        let m = &self.mappings[i];
        if addr >= m.end {
            return None;
        }
        let bytes = &self.locked[m.slot?][..(m.end - m.start) as usize];
        Some((bytes, addr - m.start))
    }

    /// The explanation of the fault at `fault`, if the last fault was that one.
    pub fn explain(&self, fault: &MemoryFault) -> Option<&str> {
        self.note
            .as_ref()
            .filter(|n| n.addr == fault.addr && n.access == fault.access)
            .map(|n| n.reason.as_str())
    }
}

fn describe_flags(flags: VaFlags) -> String {
    let mut s = String::new();
    for (set, name) in [(flags.readable, "read"), (flags.writeable, "write"), (flags.executable, "execute")] {
        if set {
            if !s.is_empty() {
                s.push_str(" + ");
            }
            let _ = write!(s, "{name}");
        }
    }
    if s.is_empty() {
        "no access".into()
    } else {
        format!("{s} only")
    }
}

impl GlobalMemory for SubmissionMemory<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        self.load(addr, buf, Access::Read)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        self.store(addr, data)
    }

    fn fetch(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        self.load(addr, buf, Access::Fetch)
    }
}
