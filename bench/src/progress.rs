//! Progress of a benchmark's long runs: a bar on a terminal, and — when stderr is piped or
//! logged, where a bar would be invisible or garbage — one line per finished step with the
//! elapsed time, so a slow run shows where it is.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Starts the command's clock; called once, first thing.
pub fn start_clock() {
    STARTED.get_or_init(Instant::now);
}

/// Time since the command started.
pub fn elapsed() -> Duration {
    STARTED.get_or_init(Instant::now).elapsed()
}

/// A line as every progress line looks: `[   12.3 s] what`.
pub fn line(elapsed: Duration, what: &str) -> String {
    format!("[{:7.1} s] {what}", elapsed.as_secs_f64())
}

/// Counts steps of a known number.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: RefCell<Lines>,
}

struct Lines {
    total: u64,
    done: u64,
    message: String,
    since: Instant,
}

impl Progress {
    /// A bar when stderr is a terminal, else one line per step.
    pub fn new(steps: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(steps);
            if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}") {
                bar.set_style(style);
            }
            bar
        });
        Self::with_bar(bar, steps)
    }

    fn with_bar(bar: Option<ProgressBar>, steps: u64) -> Progress {
        let lines = Lines { total: steps, done: 0, message: String::new(), since: Instant::now() };
        Progress { bar, lines: RefCell::new(lines) }
    }

    /// Names the step now running.
    pub fn set_message(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.to_owned());
        }
        let mut lines = self.lines.borrow_mut();
        lines.message = message.to_owned();
    }

    /// Counts `steps` finished; without a bar, prints a line for them.
    pub fn inc(&self, steps: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(steps);
        }
        let text = self.lines.borrow_mut().finished(steps);
        if self.bar.is_none() {
            eprintln!("{}", line(elapsed(), &text));
        }
    }

    pub fn finish_and_clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Lines {
    /// `startup 3/12: cold (1.21 s)`, and the clock restarted for the next step.
    fn finished(&mut self, steps: u64) -> String {
        self.done += steps;
        let took = self.since.elapsed();
        self.since = Instant::now();
        format!("startup {}/{}: {} ({:.2} s)", self.done, self.total, self.message, took.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_is_one_line_with_its_count_name_and_time() {
        let progress = Progress::with_bar(None, 4);
        progress.set_message("warm, driver cold");
        let text = progress.lines.borrow_mut().finished(1);
        assert!(text.starts_with("startup 1/4: warm, driver cold ("), "{text}");
        assert!(text.ends_with(" s)"), "{text}");
        progress.set_message("cold");
        assert!(progress.lines.borrow_mut().finished(1).starts_with("startup 2/4: cold"));
        assert_eq!(line(Duration::from_millis(12_340), "done"), "[   12.3 s] done");
    }
}
