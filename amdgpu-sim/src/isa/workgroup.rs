//! Runs workgroups: all waves of a group take turns (round-robin), a wave at `s_barrier` waits
//! until every live wave of its group has arrived, and the whole dispatch shares one instruction
//! budget so that a hung kernel ends in a timeout error.

use super::code_cache::CodeCache;
use super::dispatch::{initial_waves, Dispatch};
use super::error::SimError;
use super::exec::execute;
use super::memory::GlobalMemory;
use super::wave::WaveStatus;

/// Instructions a wave runs before the next wave of its group gets a turn. Waves only interact
/// through LDS, atomics and barriers, so any interleaving is a valid schedule; the quantum keeps
/// a wave that spins on another wave's store from starving it.
const QUANTUM: u32 = 1024;

/// What a dispatch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchStats {
    /// Workgroups run.
    pub workgroups: u64,
    /// Waves run.
    pub waves: u64,
    /// Wave instructions executed (each counts once however many lanes were active).
    pub instructions: u64,
}

/// Per-dispatch execution state shared by its workgroups: the decoded code and the budget.
pub struct DispatchRun<'d> {
    dispatch: &'d Dispatch,
    code: CodeCache,
    stats: DispatchStats,
}

impl<'d> DispatchRun<'d> {
    /// Checks `dispatch` and prepares to run its workgroups.
    pub fn new(dispatch: &'d Dispatch) -> Result<Self, SimError> {
        dispatch.validate()?;
        Ok(DispatchRun {
            dispatch,
            code: CodeCache::new(dispatch.code_address, dispatch.gfx),
            stats: DispatchStats::default(),
        })
    }

    /// Runs every wave of workgroup `group` to `s_endpgm`.
    pub fn run_workgroup(&mut self, group: [u32; 3], mem: &mut dyn GlobalMemory) -> Result<(), SimError> {
        let d = self.dispatch;
        let kernel = d.kernel_name.as_str();
        let mut waves = initial_waves(d, group)?;
        let mut lds = vec![0u8; d.lds_bytes() as usize];
        self.stats.workgroups += 1;
        self.stats.waves += waves.len() as u64;
        loop {
            for w in waves.iter_mut() {
                let mut n = 0;
                while w.status == WaveStatus::Running && n < QUANTUM {
                    let pc = w.pc;
                    if self.stats.instructions >= d.instruction_budget {
                        return Err(SimError::Timeout {
                            budget: d.instruction_budget,
                            kernel: kernel.to_string(),
                            pc,
                        });
                    }
                    let inst = self.code.get(pc, mem).map_err(|f| f.at(kernel, pc))?;
                    execute(w, inst, mem, &mut lds).map_err(|f| f.at(kernel, pc))?;
                    self.stats.instructions += 1;
                    n += 1;
                }
            }
            if waves.iter().all(|w| w.status == WaveStatus::Ended) {
                return Ok(());
            }
            // Every live wave waits at the barrier: release them all.
            if waves.iter().all(|w| w.status != WaveStatus::Running) {
                for w in waves.iter_mut().filter(|w| w.status == WaveStatus::AtBarrier) {
                    w.status = WaveStatus::Running;
                }
            }
        }
    }

    /// Runs every workgroup of the grid, x fastest.
    pub fn run_all(&mut self, mem: &mut dyn GlobalMemory) -> Result<DispatchStats, SimError> {
        let [gx, gy, gz] = self.dispatch.grid_workgroups;
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    self.run_workgroup([x, y, z], mem)?;
                }
            }
        }
        Ok(self.stats)
    }
}

/// Runs a whole dispatch on `mem`: the entry point the simulated driver calls for DISPATCH_DIRECT.
pub fn run_dispatch(dispatch: &Dispatch, mem: &mut dyn GlobalMemory) -> Result<DispatchStats, SimError> {
    let stats = DispatchRun::new(dispatch)?.run_all(mem)?;
    tracing::debug!(kernel = %dispatch.kernel_name, ?stats, "simulated dispatch finished");
    Ok(stats)
}
