//! Timing suite kernels the way a benchmark must on a GPU whose clock follows its load: warm it
//! with continuous work first, then time each dispatch both on the GPU (timer queries, where
//! the device has them) and as dispatch + wait on the host, and batches of back-to-back
//! dispatches on the GPU (the way a peer's many launches between two events are timed),
//! rotating between several copies of inputs small enough to stay in the GPU's last-level
//! cache, and report medians.

use std::time::{Duration, Instant};

use super::{Case, DISPATCH_TIMEOUT};
use crate::runtime::{Buffer, Commands, Program, Runtime, Submission};
use crate::Result;

/// Inputs smaller than this are rotated through several copies, so that each run reads memory
/// the previous runs did not leave in cache (H100's L2 is 50 MB).
pub const ROTATE_BELOW_BYTES: f64 = 256e6;

/// Most input copies a rotation uses.
const MAX_COPIES: usize = 8;

/// Median times of one kernel.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// GPU time of one dispatch; `None` if the device cannot measure it.
    pub gpu: Option<Duration>,
    /// Dispatch + wait on the host.
    pub wall: Duration,
    /// Timed runs the figures are the median of.
    pub runs: usize,
}

impl Timing {
    /// The time throughput figures use: GPU time where measured, else wall time.
    pub fn best(&self) -> Duration {
        self.gpu.unwrap_or(self.wall)
    }
}

/// How many copies of its inputs `case` should rotate through: memory-bound problems whose
/// bytes fit under [`ROTATE_BELOW_BYTES`] get enough copies to exceed it.
pub fn copies_for(case: &dyn Case) -> usize {
    let work = case.work();
    let memory_bound = work.flops < 4.0 * work.bytes;
    if !memory_bound || work.bytes >= ROTATE_BELOW_BYTES || work.bytes <= 0.0 {
        return 1;
    }
    ((ROTATE_BELOW_BYTES / work.bytes).ceil() as usize).clamp(1, MAX_COPIES)
}

/// Uploads `copies` independent sets of `case`'s inputs: what `program` needs, or with `None`
/// what every variant needs.
pub fn upload_copies(
    backend: &Runtime,
    case: &dyn Case,
    program: Option<&Program>,
    copies: usize,
) -> Result<Vec<Vec<Buffer>>> {
    (0..copies.max(1))
        .map(|_| match program {
            Some(program) => case.upload_for(backend, program),
            None => case.upload(backend),
        })
        .collect()
}

/// Keeps the GPU busy with `case` for at least `duration` (two submissions in flight, so it
/// never idles), so that its clock has risen before anything is timed.
pub fn warm(
    backend: &Runtime,
    program: &Program,
    case: &dyn Case,
    sets: &[Vec<Buffer>],
    duration: Duration,
) -> Result<usize> {
    let started = Instant::now();
    let mut in_flight: Vec<Submission> = Vec::new();
    let mut dispatches = 0;
    while started.elapsed() < duration {
        let mut commands = backend.commands();
        for i in 0..4 {
            case.record(&mut commands, program, &sets[(dispatches + i) % sets.len()])?;
        }
        dispatches += 4;
        in_flight.push(backend.submit(commands)?);
        if in_flight.len() > 2 {
            in_flight.remove(0).wait(DISPATCH_TIMEOUT)?;
        }
    }
    for submission in in_flight {
        submission.wait(DISPATCH_TIMEOUT)?;
    }
    Ok(dispatches)
}

/// Times single dispatches of `case`, rotating through `sets`: at least `min_runs`, then more
/// until `budget` is spent (at most 1000). Each run is one timed submission waited for at once.
pub fn time(
    backend: &Runtime,
    program: &Program,
    case: &dyn Case,
    sets: &[Vec<Buffer>],
    min_runs: usize,
    budget: Duration,
) -> Result<Timing> {
    let mut gpu = Vec::new();
    let mut wall = Vec::new();
    let started = Instant::now();
    while wall.len() < min_runs.max(1) || (wall.len() < 1000 && started.elapsed() < budget) {
        let set = &sets[wall.len() % sets.len()];
        let t = Instant::now();
        let mut commands = backend.commands();
        case.record(&mut commands, program, set)?;
        let submission = backend.submit_timed(commands)?;
        submission.wait(DISPATCH_TIMEOUT)?;
        wall.push(t.elapsed());
        if let Some(time) = submission.gpu_time() {
            gpu.push(time);
        }
    }
    let runs = wall.len();
    tracing::debug!(
        kernel = %program.name(),
        runs,
        gpu_min = ?gpu.iter().min(),
        gpu_max = ?gpu.iter().max(),
        wall_min = ?wall.iter().min(),
        "timed one dispatch at a time"
    );
    let wall = median(&mut wall);
    let gpu = (gpu.len() == runs).then(|| median(&mut gpu)).filter(|&gpu| {
        // Software renderers end the query before their threads run the work.
        let plausible = gpu * 1000 >= wall;
        if !plausible {
            tracing::warn!(
                ?gpu,
                ?wall,
                "the device's timer queries report implausibly short times; using wall time"
            );
        }
        plausible
    });
    Ok(Timing { gpu, wall, runs })
}

/// Back-to-back batches last about this long each.
const BATCH: Duration = Duration::from_millis(20);
/// Fewest and most dispatches in one back-to-back batch.
const LAUNCHES: (usize, usize) = (10, 200);

/// How many dispatches one back-to-back batch of a kernel taking `per_dispatch` holds: about
/// 20 ms of work, between 10 and 200 dispatches.
pub fn launches_for(per_dispatch: Duration) -> usize {
    let per = per_dispatch.as_secs_f64().max(1e-7);
    ((BATCH.as_secs_f64() / per) as usize).clamp(LAUNCHES.0, LAUNCHES.1)
}

/// GPU time per dispatch of `launches` dispatches of `case` in a row, rotating through `sets`:
/// one timed submission holds them all (dispatches that write what an earlier one touched are
/// ordered by a barrier, as a stream orders a peer's launches), and its GPU time over
/// `launches` is one sample; the median of at least three batches, up to seven within `budget`.
/// `None` where the device cannot measure GPU time or its timer queries are implausible.
pub fn back_to_back(
    backend: &Runtime,
    program: &Program,
    case: &dyn Case,
    sets: &[Vec<Buffer>],
    launches: usize,
    budget: Duration,
) -> Result<Option<Duration>> {
    if !backend.measures_gpu_time() {
        return Ok(None);
    }
    let launches = launches.max(1);
    let mut per_dispatch = Vec::new();
    let started = Instant::now();
    while per_dispatch.len() < 7 && (per_dispatch.len() < 3 || started.elapsed() < budget) {
        match timed_batch(backend, program, case, sets, launches)? {
            Some(time) => per_dispatch.push(time),
            None => return Ok(None),
        }
    }
    Ok(Some(median(&mut per_dispatch)))
}

/// One timed submission of `launches` dispatches of `case` in a row, rotating through `sets`:
/// its GPU time per dispatch, or `None` where the timer query is implausible.
fn timed_batch(
    backend: &Runtime,
    program: &Program,
    case: &dyn Case,
    sets: &[Vec<Buffer>],
    launches: usize,
) -> Result<Option<Duration>> {
    timed_launches(backend, launches, |commands, i| case.record(commands, program, &sets[i % sets.len()]))
}

/// One timed submission of `launches` launches, each recorded by `record(commands, i)`: its GPU
/// time per launch, or `None` where the timer query is implausible (as in `time`: software
/// renderers end the query before their threads run the work).
pub fn timed_launches(
    backend: &Runtime,
    launches: usize,
    mut record: impl FnMut(&mut Commands, usize) -> Result<()>,
) -> Result<Option<Duration>> {
    let mut commands = backend.commands();
    for i in 0..launches {
        record(&mut commands, i)?;
    }
    let t = Instant::now();
    let submission = backend.submit_timed(commands)?;
    submission.wait(DISPATCH_TIMEOUT)?;
    let wall = t.elapsed();
    Ok(submission.gpu_time().filter(|&time| time * 1000 >= wall).map(|time| time / launches.max(1) as u32))
}

/// Batches of about 20 ms whose GPU time per dispatch is within this fraction of the batch
/// before count as settled in [`warm_until_steady`].
const SETTLED: f64 = 0.02;

/// Keeps the GPU busy with `case` until its GPU time per dispatch has settled (two batches of
/// about 20 ms in a row within 2%), for at most `max`; just 20 ms where the device cannot time
/// its work (no timer queries, or implausible ones). A GPU the CPU kept waiting (compiling,
/// checking a result against the CPU reference) runs slower for a while: on an H100 a Winograd
/// conv2d timed after 20 ms of warm-up, following 0.4 s of checking per variant, read 1.5-3.7×
/// its speed.
pub fn warm_until_steady(
    backend: &Runtime,
    program: &Program,
    case: &dyn Case,
    sets: &[Vec<Buffer>],
    max: Duration,
) -> Result<()> {
    let started = Instant::now();
    let dispatches = warm(backend, program, case, sets, BATCH)?;
    if !backend.measures_gpu_time() {
        return Ok(());
    }
    let launches = launches_for(started.elapsed() / dispatches.max(1) as u32);
    let mut previous: Option<f64> = None;
    while started.elapsed() < max {
        // Nothing to settle where the timer queries are implausible.
        let Some(time) = timed_batch(backend, program, case, sets, launches)? else { return Ok(()) };
        let per_dispatch = time.as_secs_f64();
        if settled(previous, per_dispatch) {
            break;
        }
        previous = Some(per_dispatch);
    }
    Ok(())
}

/// Whether a batch's GPU time per dispatch, `now`, is within [`SETTLED`] of the batch before.
fn settled(before: Option<f64>, now: f64) -> bool {
    before.is_some_and(|before| (now - before).abs() <= SETTLED * before)
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_has_settled_when_two_batches_in_a_row_agree_within_two_percent() {
        assert!(!settled(None, 0.12), "one batch alone is no evidence");
        assert!(!settled(Some(0.48), 0.30), "still speeding up");
        assert!(!settled(Some(0.30), 0.125), "still speeding up");
        assert!(settled(Some(0.1220), 0.1200));
        assert!(settled(Some(0.1200), 0.1220));
        assert!(!settled(Some(0.1200), 0.1230), "2.5% apart");
    }
}
