//! GPU tracks: a device's clock tied to the host's by anchors (both clocks read together),
//! GPU slices placed on the host's clock and kept inside the window their submission allows,
//! and what the trace's metadata says about each clock.
// Only backends that stamp GPU work use the tracks (gl, amdgpu).
#![cfg_attr(not(any(feature = "gl", feature = "amdgpu")), allow(dead_code))]

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::record::{name_track, ns_of, Arg, Event, Flow};

/// How often a GPU clock is read against the host's again while tracing.
pub(crate) const REANCHOR_EVERY: Duration = Duration::from_secs(1);

/// Track ids of GPU tracks start here, above any Linux thread id.
const GPU_TRACK_BASE: u64 = 1 << 30;

/// Every GPU track's statistics, for the trace's metadata.
static TRACKS: Mutex<Vec<Arc<Mutex<ClockReport>>>> = Mutex::new(Vec::new());

/// Called before a trace is finished: backends hand over GPU events they still hold.
static FLUSHERS: Mutex<Vec<Arc<dyn Fn() + Send + Sync>>> = Mutex::new(Vec::new());

/// What the trace's metadata says about one GPU clock (reset when a new trace starts).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ClockReport {
    /// The track's name.
    pub track: String,
    /// The track's id (its `tid` in the trace).
    pub tid: u64,
    /// The clock is a simulator's, not a device's.
    pub simulated: bool,
    /// Times the GPU clock was read against the host's.
    pub anchors: u64,
    /// GPU time minus host time at the newest anchor, in nanoseconds.
    pub offset_ns: i64,
    /// Half the host interval around the newest GPU clock read: how far the anchor may be off.
    pub uncertainty_ns: u64,
    /// The largest of those over the trace.
    pub max_uncertainty_ns: u64,
    /// The largest change of the offset between two consecutive anchors: the drift (and the
    /// anchors' own error) a slice placed by one anchor may carry.
    pub max_skew_ns: u64,
    /// GPU slices written.
    pub slices: u64,
    /// Slices moved into their submission's window (they began before it was issued or ended
    /// after its fence was seen, by the anchor).
    pub clamped: u64,
    /// The largest such move, in nanoseconds.
    pub max_clamp_ns: u64,
    #[serde(skip)]
    generation: u64,
}

/// Registers `flush`, called before a trace is finished, for as long as the returned handle
/// lives.
#[cfg_attr(not(any(test, feature = "gl")), allow(dead_code))]
pub(crate) fn on_flush(flush: Arc<dyn Fn() + Send + Sync>) {
    FLUSHERS.lock().unwrap_or_else(PoisonError::into_inner).push(flush);
}

pub(super) fn flush_all() {
    let flushers: Vec<_> = FLUSHERS.lock().unwrap_or_else(PoisonError::into_inner).clone();
    for flush in flushers {
        flush();
    }
}

/// The metadata of every GPU track that wrote slices or anchors in the current trace.
pub(super) fn report() -> Vec<ClockReport> {
    let generation = super::generation();
    TRACKS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|track| track.lock().unwrap_or_else(PoisonError::into_inner).clone())
        .filter(|report| report.generation == generation && generation != 0)
        .collect()
}

/// A track for one GPU.
#[derive(Clone)]
pub(crate) struct GpuTrack {
    tid: u64,
    report: Arc<Mutex<ClockReport>>,
}

impl GpuTrack {
    /// A new track named `name`; `simulated` marks a simulator's clock.
    pub(crate) fn new(name: String, simulated: bool) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tid = GPU_TRACK_BASE + NEXT.fetch_add(1, Ordering::Relaxed);
        name_track(tid, name.clone());
        let report =
            Arc::new(Mutex::new(ClockReport { track: name, tid, simulated, ..ClockReport::default() }));
        TRACKS.lock().unwrap_or_else(PoisonError::into_inner).push(report.clone());
        GpuTrack { tid, report }
    }

    /// The track's id.
    #[cfg(test)]
    pub(crate) fn tid(&self) -> u64 {
        self.tid
    }

    /// Updates this trace's report, starting it afresh in a new trace.
    fn update(&self, change: impl FnOnce(&mut ClockReport)) {
        let generation = super::generation();
        let mut report = self.report.lock().unwrap_or_else(PoisonError::into_inner);
        if report.generation != generation {
            let fresh = ClockReport {
                track: std::mem::take(&mut report.track),
                tid: report.tid,
                simulated: report.simulated,
                generation,
                ..ClockReport::default()
            };
            *report = fresh;
        }
        change(&mut report);
    }
}

/// The tie between a GPU's clock and the host's.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    /// GPU time minus host time, in nanoseconds.
    offset_ns: i64,
    /// When it was taken.
    at: Instant,
    /// In which trace.
    generation: u64,
    /// Where the offset comes from bounds ([`GpuClock::bound`]): the range still possible.
    #[cfg_attr(not(any(test, feature = "amdgpu")), allow(dead_code))]
    bounds: Option<(i128, i128)>,
}

/// A GPU's clock on its track: anchors, and the placing of slices.
pub(crate) struct GpuClock {
    track: GpuTrack,
    anchor: Option<Anchor>,
    /// Where the newest slice placed ends: slices of one queue never overlap.
    last_end_ns: u64,
}

/// One GPU slice to place: its times on the GPU's clock and the host-clock window its
/// submission allows.
pub(crate) struct GpuSlice {
    pub name: Cow<'static, str>,
    pub gpu_start_ns: u64,
    pub gpu_end_ns: u64,
    /// When its submission was issued to the device (host clock).
    pub issued_ns: u64,
    /// When its fence was seen signalled (host clock).
    pub seen_ns: u64,
    pub args: Vec<(&'static str, Arg)>,
    pub flow: Option<Flow>,
}

impl GpuClock {
    pub(crate) fn new(track: GpuTrack) -> Self {
        GpuClock { track, anchor: None, last_end_ns: 0 }
    }

    /// Whether the clock should be read against the host's now: never yet in this trace, or
    /// not for [`REANCHOR_EVERY`].
    #[cfg_attr(not(any(test, feature = "gl")), allow(dead_code))]
    pub(crate) fn needs_anchor(&self) -> bool {
        match self.anchor {
            None => true,
            Some(anchor) => anchor.generation != super::generation() || anchor.at.elapsed() >= REANCHOR_EVERY,
        }
    }

    /// Reads the GPU's clock (`read`: nanoseconds) between two reads of the host's and ties
    /// them at the middle. `None` from `read` leaves the anchor as it was.
    #[cfg_attr(not(any(test, feature = "gl")), allow(dead_code))]
    pub(crate) fn anchor(&mut self, read: impl FnOnce() -> Option<u64>) {
        let before = Instant::now();
        let Some(gpu_ns) = read() else { return };
        let after = Instant::now();
        let (before_ns, after_ns) = (ns_of(before), ns_of(after));
        let middle = before_ns + (after_ns - before_ns) / 2;
        let offset_ns =
            (i128::from(gpu_ns) - i128::from(middle)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
        let uncertainty_ns = (after_ns - before_ns).div_ceil(2);
        let generation = super::generation();
        let previous = self.anchor.filter(|anchor| anchor.generation == generation);
        self.track.update(|report| {
            report.anchors += 1;
            report.offset_ns = offset_ns;
            report.uncertainty_ns = uncertainty_ns;
            report.max_uncertainty_ns = report.max_uncertainty_ns.max(uncertainty_ns);
            if let Some(previous) = previous {
                report.max_skew_ns = report.max_skew_ns.max(offset_ns.abs_diff(previous.offset_ns));
            }
        });
        self.anchor = Some(Anchor { offset_ns, at: after, generation, bounds: None });
    }

    /// Ties the clocks where the GPU's cannot be read on demand: work stamped from `gpu_start_ns`
    /// to `gpu_end_ns` on the GPU's clock began after it was issued (`issued_ns`, host) and
    /// ended before its completion was seen (`seen_ns`), so the offset lies between
    /// `gpu_end_ns - seen_ns` and `gpu_start_ns - issued_ns`. Bounds from every stamped
    /// submission of an anchor period (about a second) narrow the range; the offset is its
    /// middle and the uncertainty half its width. A period whose bounds no longer meet (the
    /// clocks drifted apart) starts afresh, and the jump is the skew.
    #[cfg_attr(not(any(test, feature = "amdgpu")), allow(dead_code))]
    pub(crate) fn bound(&mut self, gpu_start_ns: u64, gpu_end_ns: u64, issued_ns: u64, seen_ns: u64) {
        let low = i128::from(gpu_end_ns) - i128::from(seen_ns);
        let high = i128::from(gpu_start_ns) - i128::from(issued_ns);
        if low > high {
            // The stamps say the work took longer than its window: no bound to learn from.
            return;
        }
        let generation = super::generation();
        let current = self.anchor.filter(|anchor| anchor.generation == generation);
        let narrowed = current.and_then(|anchor| {
            let (lo, hi) = anchor.bounds?;
            let (lo, hi) = (lo.max(low), hi.min(high));
            (lo <= hi && anchor.at.elapsed() < REANCHOR_EVERY).then_some((lo, hi, anchor.at))
        });
        let fresh = narrowed.is_none();
        let (lo, hi, at) = narrowed.unwrap_or((low, high, Instant::now()));
        let middle = lo + (hi - lo) / 2;
        let offset_ns = middle.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
        let uncertainty_ns = u64::try_from((hi - lo + 1) / 2).unwrap_or(u64::MAX);
        self.track.update(|report| {
            if fresh {
                report.anchors += 1;
                if let Some(previous) = current {
                    report.max_skew_ns = report.max_skew_ns.max(offset_ns.abs_diff(previous.offset_ns));
                }
            }
            report.offset_ns = offset_ns;
            report.uncertainty_ns = uncertainty_ns;
            report.max_uncertainty_ns = report.max_uncertainty_ns.max(uncertainty_ns);
        });
        self.anchor = Some(Anchor { offset_ns, at, generation, bounds: Some((lo, hi)) });
    }

    /// `gpu_ns` on the host's clock (trace nanoseconds); `None` before the first anchor.
    fn to_host(&self, gpu_ns: u64) -> Option<u64> {
        let anchor = self.anchor?;
        let host = i128::from(gpu_ns) - i128::from(anchor.offset_ns);
        Some(host.clamp(0, i128::from(u64::MAX)) as u64)
    }

    /// Places `slice` on the host's clock, inside its window and after the previous slice, and
    /// writes it. Nothing without an anchor.
    pub(crate) fn write(&mut self, slice: GpuSlice) {
        let (Some(start), Some(end)) = (self.to_host(slice.gpu_start_ns), self.to_host(slice.gpu_end_ns))
        else {
            return;
        };
        let end = end.max(start);
        let floor = slice.issued_ns.max(self.last_end_ns);
        let ceiling = slice.seen_ns.max(floor);
        let placed_start = start.clamp(floor, ceiling);
        let placed_end = end.clamp(placed_start, ceiling);
        let moved = placed_start.abs_diff(start).max(placed_end.abs_diff(end));
        self.last_end_ns = placed_end;
        self.track.update(|report| {
            report.slices += 1;
            if moved > 0 {
                report.clamped += 1;
                report.max_clamp_ns = report.max_clamp_ns.max(moved);
            }
        });
        let mut event =
            Event::slice("gpu", slice.name, self.track.tid, placed_start, placed_end - placed_start);
        event.args = slice.args;
        if moved > 0 {
            event.args.push(("moved_ns", Arg::U64(moved)));
        }
        event.flow = slice.flow;
        event.send();
    }
}
