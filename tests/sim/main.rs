//! The amdgpu backend on the simulated GPU (feature `amdgpu-sim`): the backend end to end on the
//! simulated gfx1100 and gfx1030, the simulated kernel driver, its command processor, dispatches
//! and faults, the executor on it, and the ISA coverage corpus. One test binary; a module per
//! area.

#[path = "../support/amdgpu_common/mod.rs"]
mod amdgpu_common;
mod isa_corpus_support;
mod support;

mod backend;
mod cp;
mod dispatch;
mod driver;
mod executor;
mod faults;
mod fuzz;
mod gfx1030;
mod isa_corpus;
mod isa_corpus_cpu;
mod options;
mod trace;
