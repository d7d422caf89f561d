//! Checks a trace file's structure: what the tests assert of every trace they write, kept with
//! the writer so the two change together.
//!
//! - every event is well formed (name, phase, process, thread, time; a slice's duration);
//! - slices nest on each thread and track (a slice that starts inside another ends inside it);
//! - every flow that ends at a slice starts at an earlier one;
//! - every GPU slice of a submission lies between the submission's span on the CPU and the
//!   moment its fence was seen signalled.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// One event of a checked trace.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its name.
    pub name: String,
    /// Its category.
    pub cat: String,
    /// Its phase (`X`, `i`, `M`).
    pub ph: String,
    /// Thread or track id.
    pub tid: u64,
    /// Start, in nanoseconds.
    pub ts_ns: i64,
    /// Duration in nanoseconds (0 for an instant).
    pub dur_ns: i64,
    /// Its arguments.
    pub args: serde_json::Map<String, Value>,
    /// The flow it starts (`true`) or ends (`false`), by id.
    pub flow: Option<(u64, bool)>,
}

impl Checked {
    /// An unsigned integer argument.
    pub fn arg_u64(&self, key: &str) -> Option<u64> {
        self.args.get(key).and_then(Value::as_u64)
    }

    /// A string argument.
    pub fn arg_str(&self, key: &str) -> Option<&str> {
        self.args.get(key).and_then(Value::as_str)
    }
}

/// A trace that passed the checks.
#[derive(Debug, Clone)]
pub struct CheckedTrace {
    /// Its events, metadata events included, in file order.
    pub events: Vec<Checked>,
    /// Its `otherData`.
    pub other: Value,
    /// Flows that start and end at slices.
    pub flows: usize,
    /// GPU slices checked against their submission's window.
    pub gpu_in_windows: usize,
}

impl CheckedTrace {
    /// The slices and instants called `name`.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Checked> + 'a {
        self.events.iter().filter(move |event| event.name == name && event.ph != "M")
    }

    /// The id of the thread whose name contains `part` (a test's thread is named after the
    /// test), if one recorded.
    pub fn thread_named(&self, part: &str) -> Option<u64> {
        self.events
            .iter()
            .find(|event| {
                event.ph == "M"
                    && event.name == "thread_name"
                    && event.arg_str("name").is_some_and(|name| name.contains(part))
            })
            .map(|event| event.tid)
    }

    /// The events of category `cat`.
    pub fn in_category<'a>(&'a self, cat: &'a str) -> impl Iterator<Item = &'a Checked> + 'a {
        self.events.iter().filter(move |event| event.cat == cat)
    }
}

fn ns(value: &Value) -> Option<i64> {
    value.as_f64().map(|micros| (micros * 1000.0).round() as i64)
}

/// Parses `text` and checks it; the first problem found otherwise.
pub fn check(text: &str) -> Result<CheckedTrace, String> {
    let root: Value = serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
    let list = root.get("traceEvents").and_then(Value::as_array).ok_or("no traceEvents array")?;
    let mut events = Vec::with_capacity(list.len());
    let mut flows_out: HashMap<u64, i64> = HashMap::new();
    let mut flows_in: Vec<(u64, i64, usize)> = Vec::new();
    for (at, raw) in list.iter().enumerate() {
        let field = |key: &str| raw.get(key).ok_or_else(|| format!("event {at} has no `{key}`: {raw}"));
        let name = field("name")?.as_str().ok_or_else(|| format!("event {at}: name is not a string"))?;
        let ph = field("ph")?.as_str().ok_or_else(|| format!("event {at}: ph is not a string"))?;
        field("pid")?.as_u64().ok_or_else(|| format!("event {at}: pid is not a number"))?;
        let tid = field("tid")?.as_u64().ok_or_else(|| format!("event {at}: tid is not a number"))?;
        let args = raw.get("args").and_then(Value::as_object).cloned().unwrap_or_default();
        let (ts_ns, dur_ns) = match ph {
            "M" => (0, 0),
            "X" | "i" => {
                let ts =
                    ns(field("ts")?).filter(|&ts| ts >= 0).ok_or_else(|| format!("event {at}: bad ts"))?;
                let dur = if ph == "X" {
                    ns(field("dur")?).filter(|&dur| dur >= 0).ok_or_else(|| format!("event {at}: bad dur"))?
                } else {
                    0
                };
                (ts, dur)
            }
            other => return Err(format!("event {at}: unexpected phase {other:?}")),
        };
        let mut flow = None;
        if let Some(id) = raw.get("bind_id") {
            let id = id.as_u64().ok_or_else(|| format!("event {at}: bind_id is not a number"))?;
            let out = raw.get("flow_out").and_then(Value::as_bool).unwrap_or(false);
            let into = raw.get("flow_in").and_then(Value::as_bool).unwrap_or(false);
            match (out, into) {
                (true, false) => {
                    if flows_out.insert(id, ts_ns).is_some() {
                        return Err(format!("event {at}: flow {id} starts twice"));
                    }
                    flow = Some((id, true));
                }
                (false, true) => {
                    flows_in.push((id, ts_ns, at));
                    flow = Some((id, false));
                }
                _ => return Err(format!("event {at}: flow {id} has no single direction")),
            }
        }
        events.push(Checked {
            name: name.to_owned(),
            cat: raw.get("cat").and_then(Value::as_str).unwrap_or_default().to_owned(),
            ph: ph.to_owned(),
            tid,
            ts_ns,
            dur_ns,
            args,
            flow,
        });
    }
    for &(id, ts, at) in &flows_in {
        let start =
            flows_out.get(&id).ok_or_else(|| format!("event {at}: flow {id} ends but never starts"))?;
        if *start > ts {
            return Err(format!("event {at}: flow {id} ends at {ts} ns before it starts at {start} ns"));
        }
    }
    check_nesting(&events)?;
    let gpu_in_windows = check_gpu_windows(&events)?;
    Ok(CheckedTrace {
        events,
        other: root.get("otherData").cloned().unwrap_or(Value::Null),
        flows: flows_in.len(),
        gpu_in_windows,
    })
}

/// Slices on one thread or track nest.
fn check_nesting(events: &[Checked]) -> Result<(), String> {
    let mut by_tid: BTreeMap<u64, Vec<&Checked>> = BTreeMap::new();
    for event in events.iter().filter(|event| event.ph == "X" || event.ph == "i") {
        by_tid.entry(event.tid).or_default().push(event);
    }
    for (tid, mut slices) in by_tid {
        // Parents first: earlier start, then longer.
        slices.sort_by_key(|slice| (slice.ts_ns, -slice.dur_ns));
        let mut open: Vec<&Checked> = Vec::new();
        for slice in slices {
            while open.last().is_some_and(|top| top.ts_ns + top.dur_ns <= slice.ts_ns && slice.dur_ns > 0)
                || open.last().is_some_and(|top| top.ts_ns + top.dur_ns < slice.ts_ns)
            {
                open.pop();
            }
            if let Some(top) = open.last() {
                if slice.ts_ns + slice.dur_ns > top.ts_ns + top.dur_ns {
                    return Err(format!(
                        "on thread {tid}, `{}` ({} + {} ns) starts inside `{}` ({} + {} ns) and ends after it",
                        slice.name, slice.ts_ns, slice.dur_ns, top.name, top.ts_ns, top.dur_ns
                    ));
                }
            }
            if slice.ph == "X" {
                open.push(slice);
            }
        }
    }
    Ok(())
}

/// Every GPU slice with a `device` and `fence` lies after its submission's span started and
/// before the first "fence signalled" of that device covering it. The number checked.
fn check_gpu_windows(events: &[Checked]) -> Result<usize, String> {
    let key = |event: &Checked| Some((event.arg_u64("device")?, event.arg_u64("fence")?));
    let mut submitted: HashMap<(u64, u64), i64> = HashMap::new();
    let mut signalled: HashMap<u64, Vec<(u64, i64)>> = HashMap::new();
    for event in events {
        match (event.name.as_str(), key(event)) {
            ("submit", Some(at)) if event.cat == "runtime" => {
                submitted.insert(at, event.ts_ns);
            }
            ("fence signalled", Some((device, fence))) => {
                signalled.entry(device).or_default().push((fence, event.ts_ns))
            }
            _ => {}
        }
    }
    let mut checked = 0;
    for slice in events.iter().filter(|event| event.cat == "gpu" && event.ph == "X") {
        let Some((device, fence)) = key(slice) else { continue };
        let start = submitted
            .get(&(device, fence))
            .ok_or_else(|| format!("GPU slice `{}` of fence {fence} has no submission span", slice.name))?;
        let seen = signalled
            .get(&device)
            .and_then(|seen| seen.iter().filter(|(f, _)| *f >= fence).map(|(_, ts)| *ts).min())
            .ok_or_else(|| {
                format!("GPU slice `{}` of fence {fence}: its fence was never seen signalled", slice.name)
            })?;
        if slice.ts_ns < *start || slice.ts_ns + slice.dur_ns > seen {
            return Err(format!(
                "GPU slice `{}` of fence {fence} ({} + {} ns) lies outside its window {start}..{seen} ns",
                slice.name, slice.ts_ns, slice.dur_ns
            ));
        }
        checked += 1;
    }
    Ok(checked)
}
