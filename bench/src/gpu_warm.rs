//! Warming a GPU before a bench times it: a GPU raises its clocks (and its link's) only under
//! sustained work, and PyTorch's peers (`bench/scripts/overhead_peers.py`, `bench/scripts/peers.py`) time
//! only after 0.6 s of it, so Sparkle's side gets the same before anything is timed.

use std::time::Duration;

use sparkle::suite::{self, timing, Case};
use sparkle::Runtime;

use sparkle_cli::CliResult;

/// How long the GPU is kept busy first: what the peers' `warm()` does.
const GPU_WARM_UP: Duration = Duration::from_millis(600);

/// Keeps a GPU busy with a memory-bound saxpy for [`GPU_WARM_UP`]; nothing on a CPU renderer,
/// whose clock is not the GPU's to raise.
pub(super) fn warm_gpu(runtime: &Runtime) -> CliResult<()> {
    if runtime.info().class != sparkle::DeviceClass::Gpu {
        return Ok(());
    }
    let case = suite::saxpy::Saxpy::random(1 << 22, 3);
    let program = runtime.program(&case.spec())?;
    let sets = timing::upload_copies(runtime, &case, Some(&program), 1)?;
    timing::warm(runtime, &program, &case, &sets, GPU_WARM_UP)?;
    Ok(())
}
