//! The background writer: takes events off the bounded buffer and streams them into the file
//! as Chrome trace-event JSON (serialized by `serde_json`), then the thread and track names and
//! the trace's metadata.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender};

use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::Serialize;

use super::clock::ClockReport;
use super::record::{Arg, Event, Flow, Kind};
use super::TraceSummary;

/// What the recording side sends the writer.
pub(super) enum Message {
    Event(Event),
    /// The trace is over: write the rest, then reply.
    Finish {
        metadata: Metadata,
        reply: SyncSender<TraceSummary>,
    },
}

/// What the trace's end holds besides its events.
pub(super) struct Metadata {
    pub dropped: u64,
    pub gpu_clocks: Vec<ClockReport>,
    pub threads: Vec<(u64, String)>,
}

/// The format's name for this writer's output, in `otherData.format`.
pub(crate) const FORMAT: &str = "sparkle-trace 1";

pub(super) struct Writer;

impl Writer {
    /// Starts the thread writing what `received` gets into `file`.
    pub(super) fn spawn(file: File, path: PathBuf, received: Receiver<Message>) -> Result<(), String> {
        std::thread::Builder::new()
            .name("sparkle-trace".into())
            .spawn(move || run(file, path, received))
            .map(drop)
            .map_err(|err| format!("cannot start the trace writer thread: {err}"))
    }
}

/// The writer's state while the event stream is being serialized.
struct Stream {
    received: Receiver<Message>,
    pid: u32,
    written: u64,
    tids: BTreeSet<u64>,
    finish: Option<(Metadata, SyncSender<TraceSummary>)>,
}

fn run(file: File, path: PathBuf, received: Receiver<Message>) {
    // The buffer-full test holds the writer back until its burst is recorded.
    #[cfg(test)]
    drop(super::tests::WRITER_GATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let stream = RefCell::new(Stream {
        received,
        pid: std::process::id(),
        written: 0,
        tids: BTreeSet::new(),
        finish: None,
    });
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let outcome = write(&mut out, &stream).and_then(|()| out.flush().map_err(serde_json::Error::io));
    let mut stream = stream.into_inner();
    let mut lost = 0;
    if let Err(error) = &outcome {
        tracing::warn!(path = %path.display(), %error, "writing the trace failed; the rest of it is dropped");
        // Keep taking events, so that the recording threads never wait, until the trace ends.
        while stream.finish.is_none() {
            match stream.received.recv() {
                Ok(Message::Event(_)) => lost += 1,
                Ok(Message::Finish { metadata, reply }) => stream.finish = Some((metadata, reply)),
                Err(_) => break,
            }
        }
    }
    if let Some((metadata, reply)) = stream.finish {
        let summary = TraceSummary {
            path,
            events: if outcome.is_ok() { stream.written } else { 0 },
            dropped: metadata.dropped + lost,
            error: outcome.err().map(|error| error.to_string()),
        };
        // The finisher may have given up waiting.
        let _ = reply.send(summary);
    }
}

fn write(out: &mut BufWriter<File>, stream: &RefCell<Stream>) -> Result<(), serde_json::Error> {
    let mut serializer = serde_json::Serializer::new(out);
    let mut map = serializer.serialize_map(None)?;
    map.serialize_entry("displayTimeUnit", "ns")?;
    map.serialize_entry("traceEvents", &Events(stream))?;
    let stream = stream.borrow();
    if let Some((metadata, _)) = &stream.finish {
        map.serialize_entry(
            "otherData",
            &OtherData {
                format: FORMAT,
                clock: "host monotonic clock; ts in microseconds since the process first traced",
                events: stream.written,
                dropped_events: metadata.dropped,
                gpu_clocks: &metadata.gpu_clocks,
            },
        )?;
    }
    SerializeMap::end(map)
}

/// The event stream, serialized as it arrives.
struct Events<'a>(&'a RefCell<Stream>);

impl Serialize for Events<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut stream = self.0.borrow_mut();
        let mut seq = serializer.serialize_seq(None)?;
        loop {
            match stream.received.recv() {
                Ok(Message::Event(event)) => {
                    seq.serialize_element(&ChromeEvent::of(&event, stream.pid))?;
                    stream.written += 1;
                    stream.tids.insert(event.tid);
                }
                Ok(Message::Finish { metadata, reply }) => {
                    stream.finish = Some((metadata, reply));
                    break;
                }
                Err(_) => break,
            }
        }
        let pid = stream.pid;
        let process = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.file_name().map(|name| name.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "sparkle".into());
        seq.serialize_element(&Named {
            name: "process_name",
            ph: "M",
            pid,
            tid: pid.into(),
            args: NameArg { name: &process },
        })?;
        if let Some((metadata, _)) = &stream.finish {
            for (tid, name) in metadata.threads.iter().filter(|(tid, _)| stream.tids.contains(tid)) {
                seq.serialize_element(&Named {
                    name: "thread_name",
                    ph: "M",
                    pid,
                    tid: *tid,
                    args: NameArg { name },
                })?;
            }
        }
        seq.end()
    }
}

/// One trace event in the Chrome format.
#[derive(Serialize)]
struct ChromeEvent<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'static str,
    /// Microseconds, with nanoseconds in the fraction.
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u64,
    /// An instant's scope: its thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bind_id: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    flow_out: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    flow_in: bool,
    #[serde(skip_serializing_if = "Args::is_empty")]
    args: Args<'a>,
}

impl<'a> ChromeEvent<'a> {
    fn of(event: &'a Event, pid: u32) -> Self {
        let (ph, dur, s) = match event.kind {
            Kind::Complete { dur_ns } => ("X", Some(micros(dur_ns)), None),
            Kind::Instant => ("i", None, Some("t")),
        };
        let (bind_id, flow_out, flow_in) = match event.flow {
            Some(Flow::Out(id)) => (Some(id), true, false),
            Some(Flow::In(id)) => (Some(id), false, true),
            None => (None, false, false),
        };
        ChromeEvent {
            name: &event.name,
            cat: event.cat,
            ph,
            ts: micros(event.ts_ns),
            dur,
            pid,
            tid: event.tid,
            s,
            bind_id,
            flow_out,
            flow_in,
            args: Args(&event.args),
        }
    }
}

fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

struct Args<'a>(&'a [(&'static str, Arg)]);

impl Args<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Args<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Serialize for Arg {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Arg::U64(value) => serializer.serialize_u64(*value),
            Arg::F64(value) => serializer.serialize_f64(*value),
            Arg::Bool(value) => serializer.serialize_bool(*value),
            Arg::Str(value) => serializer.serialize_str(value),
        }
    }
}

/// A metadata event naming a process or a thread.
#[derive(Serialize)]
struct Named<'a> {
    name: &'static str,
    ph: &'static str,
    pid: u32,
    tid: u64,
    args: NameArg<'a>,
}

#[derive(Serialize)]
struct NameArg<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct OtherData<'a> {
    format: &'static str,
    clock: &'static str,
    events: u64,
    dropped_events: u64,
    gpu_clocks: &'a [ClockReport],
}
