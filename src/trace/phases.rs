//! Open phases: the steps of opening a runtime (finding the EGL device, creating the context,
//! probing it, opening the program cache…) with when each began and how long it took, kept
//! whether or not a trace is written, for [`Runtime::open_timings`](crate::Runtime::open_timings)
//! and `sparkle info --timings`.
//!
//! Opening is rare and has a dozen steps, so every open records them: a phase is a trace span
//! (it appears in a trace when one is written) that also goes into a small process-wide list
//! while an open is in progress. Steps that run on another thread during the open (the GL
//! thread creates the context while the opener waits) are recorded with their thread's name;
//! work that goes on after the open returned (the fence thread's context, a background
//! prewarm) is not a phase of it.

use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::record::Span;

/// One step of an open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenPhase {
    /// What the step did ("create the GL context", …).
    pub name: Cow<'static, str>,
    /// What it did it to, where that varies (the backend opened, the context version asked
    /// for, …).
    pub detail: Option<String>,
    /// The thread it ran on.
    pub thread: String,
    /// When it began, from the start of the open.
    pub start: Duration,
    /// How long it took.
    pub duration: Duration,
}

/// How long opening a runtime took, and its steps in the order they began.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenTimings {
    /// From the call that opened the runtime to its return.
    pub total: Duration,
    /// The steps recorded during the open, in the order they began; nested steps follow the
    /// step that contains them.
    pub phases: Vec<OpenPhase>,
}

impl OpenTimings {
    /// The first phase named `name`, if one was recorded.
    pub fn phase(&self, name: &str) -> Option<&OpenPhase> {
        self.phases.iter().find(|phase| phase.name == name)
    }
}

/// Opens in progress: phases are recorded only while one is.
static OPENS: AtomicUsize = AtomicUsize::new(0);

/// Phases recorded since the first open in progress began, with their start instants.
static RECORDED: Mutex<Vec<(Instant, OpenPhase)>> = Mutex::new(Vec::new());

/// Most phases kept per open: a runaway caller must not grow the list.
const MAX_PHASES: usize = 256;

/// A phase of an open, from now until the guard drops; also a trace span in category `cat`.
pub(crate) fn phase(cat: &'static str, name: &'static str) -> Phase {
    let recording = OPENS.load(Ordering::Acquire) > 0;
    Phase { span: super::record::span(cat, name), name, detail: None, started: recording.then(Instant::now) }
}

/// A running phase (see [`phase`]).
pub(crate) struct Phase {
    span: Span,
    name: &'static str,
    detail: Option<String>,
    started: Option<Instant>,
}

impl Phase {
    /// Says what the phase works on: an argument of its trace span, and its detail in the
    /// open's timings.
    pub(crate) fn detail(&mut self, key: &'static str, value: impl Into<String>) {
        let value = value.into();
        if self.started.is_some() {
            self.detail = Some(value.clone());
        }
        self.span.arg(key, value);
    }

    /// Adds an argument made only when the phase's trace span records.
    pub(crate) fn arg_with<V: Into<super::Arg>>(&mut self, key: &'static str, value: impl FnOnce() -> V) {
        self.span.arg_with(key, value);
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        let Some(started) = self.started else { return };
        let duration = started.elapsed();
        let thread = std::thread::current().name().unwrap_or("unnamed").to_owned();
        let mut recorded = RECORDED.lock().unwrap_or_else(PoisonError::into_inner);
        if recorded.len() < MAX_PHASES {
            recorded.push((
                started,
                OpenPhase {
                    name: Cow::Borrowed(self.name),
                    detail: self.detail.take(),
                    thread,
                    start: Duration::ZERO,
                    duration,
                },
            ));
        }
    }
}

/// Records the phases of an open until [`OpenRecorder::finish`].
pub(crate) struct OpenRecorder {
    started: Instant,
    finished: bool,
}

impl OpenRecorder {
    /// Starts recording the phases of an open that begins now.
    pub(crate) fn start() -> OpenRecorder {
        OPENS.fetch_add(1, Ordering::AcqRel);
        OpenRecorder { started: Instant::now(), finished: false }
    }

    /// The open's timings: the phases that began during it (those of an open running beside
    /// it in another thread too, which is rare and says so by their names).
    pub(crate) fn finish(mut self) -> OpenTimings {
        self.finished = true;
        let total = self.started.elapsed();
        let mut recorded = RECORDED.lock().unwrap_or_else(PoisonError::into_inner);
        let mut phases: Vec<(Instant, OpenPhase)> =
            recorded.iter().filter(|(began, _)| *began >= self.started).cloned().collect();
        if OPENS.fetch_sub(1, Ordering::AcqRel) == 1 {
            recorded.clear();
        }
        drop(recorded);
        phases.sort_by_key(|(began, phase)| (*began, std::cmp::Reverse(phase.duration)));
        let phases = phases
            .into_iter()
            .map(|(began, phase)| OpenPhase { start: began.duration_since(self.started), ..phase })
            .collect();
        OpenTimings { total, phases }
    }
}

impl Drop for OpenRecorder {
    fn drop(&mut self) {
        // An open that failed: stop recording for it.
        if !self.finished && OPENS.fetch_sub(1, Ordering::AcqRel) == 1 {
            RECORDED.lock().unwrap_or_else(PoisonError::into_inner).clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_of_an_open_are_kept_in_order_with_their_threads() {
        let before = phase("test", "not in the open");
        let recorder = OpenRecorder::start();
        drop(before);
        {
            let _outer = phase("test", "outer");
            std::thread::sleep(Duration::from_millis(2));
            std::thread::Builder::new()
                .name("helper".into())
                .spawn(|| drop(phase("test", "on another thread")))
                .unwrap()
                .join()
                .unwrap();
        }
        let timings = recorder.finish();
        // Other tests may open runtimes meanwhile: only this test's phases are looked at.
        let ours = ["not in the open", "outer", "on another thread", "after"];
        let names: Vec<&str> =
            timings.phases.iter().map(|p| p.name.as_ref()).filter(|name| ours.contains(name)).collect();
        assert_eq!(names, ["outer", "on another thread"]);
        assert_eq!(timings.phase("on another thread").unwrap().thread, "helper");
        let outer = timings.phase("outer").unwrap();
        assert!(outer.duration >= Duration::from_millis(2));
        assert!(outer.start + outer.duration <= timings.total);
        // After the open, phases are no longer recorded.
        drop(phase("test", "after"));
        assert!(RECORDED.lock().unwrap().iter().all(|(_, p)| p.name != "after"));
    }
}
