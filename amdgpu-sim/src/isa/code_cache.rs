//! Decoded-instruction cache: each PC is fetched and decoded once per dispatch.

use pm4::Gfx;

use super::decode::{decode, Decoded};
use super::error::{ExecResult, Fault};
use super::memory::{fetch_u32, GlobalMemory};

/// Code further than this from the entry point is decoded on every visit (still correct).
const MAX_SLOTS: usize = 1 << 20;

pub(crate) struct CodeCache {
    base: u64,
    gfx: Gfx,
    slots: Vec<Option<Decoded>>,
    uncached: Option<Decoded>,
}

fn decode_at(gfx: Gfx, pc: u64, mem: &mut dyn GlobalMemory) -> ExecResult<Decoded> {
    decode(gfx, &mut |i| fetch_u32(mem, pc.wrapping_add(4 * i as u64)).map_err(Fault::from))
}

impl CodeCache {
    /// A cache for code around `base` (the kernel entry point).
    pub(crate) fn new(base: u64, gfx: Gfx) -> CodeCache {
        CodeCache { base, gfx, slots: Vec::new(), uncached: None }
    }

    /// The instruction at `pc`, fetched through `mem` (fetch permission) on first use.
    pub(crate) fn get(&mut self, pc: u64, mem: &mut dyn GlobalMemory) -> ExecResult<&Decoded> {
        if pc % 4 != 0 {
            return Err(Fault::unsupported(format!("PC {pc:#x} is not 4-byte aligned")));
        }
        let index = pc.wrapping_sub(self.base) / 4;
        if pc >= self.base && (index as usize) < MAX_SLOTS {
            let i = index as usize;
            if i >= self.slots.len() {
                self.slots.resize(i + 64, None);
            }
            let slot = &mut self.slots[i];
            if slot.is_none() {
                *slot = Some(decode_at(self.gfx, pc, mem)?);
            }
            return slot
                .as_ref()
                .ok_or_else(|| Fault::unsupported("instruction cache slot empty after decode"));
        }
        let d = decode_at(self.gfx, pc, mem)?;
        Ok(self.uncached.insert(d))
    }
}
