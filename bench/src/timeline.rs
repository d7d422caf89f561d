//! `sparkle-bench timeline TRACE.json OUT.svg`: a picture of a trace (`SPARKLE_TRACE`,
//! `--trace`), for pages that cannot embed a trace viewer: one row per thread and GPU track,
//! nested spans stacked below their parents, colored by category, with the flows from
//! submissions to their GPU work and from cache misses to their compiles as lines. The trace is
//! checked first (`sparkle::trace::check`), so a picture is never drawn from a broken trace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use sparkle::trace::check::{check, Checked};

use sparkle_cli::{CliResult, UsageError};

/// Options of `sparkle-bench timeline`.
#[derive(clap::Args)]
pub struct Options {
    /// The trace (Chrome trace-event JSON, as Sparkle writes it).
    trace: PathBuf,
    /// The SVG to write.
    out: PathBuf,
    /// Start of the window drawn, in milliseconds on the trace's clock (default: its first event).
    #[arg(long)]
    from_ms: Option<f64>,
    /// End of the window drawn, in milliseconds (default: its last event).
    #[arg(long)]
    to_ms: Option<f64>,
    /// Nesting levels drawn per track.
    #[arg(long, default_value_t = 4)]
    depth: usize,
}

const WIDTH: u32 = 1200;
const LABEL_WIDTH: i32 = 230;
const MARGIN: i32 = 16;
const HEADER: i32 = 44;
const LEVEL_HEIGHT: i32 = 16;
const TRACK_GAP: i32 = 8;
const AXIS_HEIGHT: i32 = 30;
const LEGEND_HEIGHT: i32 = 28;

/// Colors by category, in legend order.
const CATEGORIES: [(&str, RGBColor); 6] = [
    ("runtime", RGBColor(0x4c, 0x72, 0xb0)),
    ("cache", RGBColor(0xdd, 0x84, 0x52)),
    ("transfer", RGBColor(0x55, 0xa8, 0x68)),
    ("pipeline", RGBColor(0x81, 0x72, 0xb3)),
    ("gl", RGBColor(0x93, 0x78, 0x60)),
    ("gpu", RGBColor(0xc4, 0x4e, 0x52)),
];
const OTHER_COLOR: RGBColor = RGBColor(0x8c, 0x8c, 0x8c);

fn color_of(cat: &str) -> RGBColor {
    CATEGORIES.iter().find(|(name, _)| *name == cat).map_or(OTHER_COLOR, |(_, color)| *color)
}

pub fn run(options: Options) -> CliResult<ExitCode> {
    let text = std::fs::read_to_string(&options.trace)
        .map_err(|err| UsageError(format!("cannot read the trace {}: {err}", options.trace.display())))?;
    let trace = check(&text).map_err(|problem| {
        UsageError(format!("{} is not a trace to draw: {problem}", options.trace.display()))
    })?;
    let slices: Vec<&Checked> = trace.events.iter().filter(|e| e.ph == "X").collect();
    let (Some(first), Some(last)) =
        (slices.iter().map(|e| e.ts_ns).min(), slices.iter().map(|e| e.ts_ns + e.dur_ns).max())
    else {
        return Err(Box::new(UsageError(format!("{} holds no slices", options.trace.display()))));
    };
    let from = options.from_ms.map_or(first, |ms| (ms * 1e6) as i64);
    let to = options.to_ms.map_or(last, |ms| (ms * 1e6) as i64);
    if to <= from {
        return Err(Box::new(UsageError("--to-ms must be after --from-ms".into())));
    }
    let names: BTreeMap<u64, String> = trace
        .events
        .iter()
        .filter(|e| e.ph == "M" && e.name == "thread_name")
        .filter_map(|e| Some((e.tid, e.arg_str("name")?.to_owned())))
        .collect();
    let tracks = layout(&slices, from, to, options.depth.max(1));
    draw(&options.out, &tracks, &names, &slices, from, to, &options.trace)?;
    eprintln!("timeline: {} ({} tracks)", options.out.display(), tracks.len());
    Ok(ExitCode::SUCCESS)
}

/// A track's slices inside the window, each with its nesting level.
struct Track<'a> {
    tid: u64,
    levels: usize,
    slices: Vec<(usize, &'a Checked)>,
}

/// Tracks with slices in the window: threads first (the busiest first), GPU tracks last.
fn layout<'a>(slices: &[&'a Checked], from: i64, to: i64, depth: usize) -> Vec<Track<'a>> {
    let mut by_tid: BTreeMap<u64, Vec<&'a Checked>> = BTreeMap::new();
    for slice in slices {
        by_tid.entry(slice.tid).or_default().push(slice);
    }
    let mut tracks: Vec<Track<'a>> = Vec::new();
    for (tid, mut list) in by_tid {
        list.sort_by_key(|slice| (slice.ts_ns, -slice.dur_ns));
        let mut open: Vec<i64> = Vec::new();
        let mut placed = Vec::new();
        for slice in list {
            while open.last().is_some_and(|&end| end <= slice.ts_ns) {
                open.pop();
            }
            let level = open.len();
            open.push(slice.ts_ns + slice.dur_ns);
            if level < depth && slice.ts_ns < to && slice.ts_ns + slice.dur_ns > from {
                placed.push((level, slice));
            }
        }
        if !placed.is_empty() {
            let levels = placed.iter().map(|(level, _)| level + 1).max().unwrap_or(1);
            tracks.push(Track { tid, levels, slices: placed });
        }
    }
    let gpu = |track: &Track<'_>| track.slices.iter().all(|(_, slice)| slice.cat == "gpu");
    let busy = |track: &Track<'_>| -> i64 {
        track.slices.iter().filter(|(level, _)| *level == 0).map(|(_, slice)| slice.dur_ns).sum()
    };
    tracks.sort_by_key(|track| (gpu(track), -busy(track)));
    tracks
}

fn draw(
    out: &Path,
    tracks: &[Track<'_>],
    names: &BTreeMap<u64, String>,
    slices: &[&Checked],
    from: i64,
    to: i64,
    source: &Path,
) -> CliResult<()> {
    let rows: i32 = tracks.iter().map(|track| track.levels as i32 * LEVEL_HEIGHT + TRACK_GAP).sum();
    let height = (HEADER + rows + AXIS_HEIGHT + LEGEND_HEIGHT + MARGIN) as u32;
    let root = SVGBackend::new(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let x0 = LABEL_WIDTH;
    // Room right of the axis for its last label.
    let x1 = WIDTH as i32 - MARGIN - 24;
    let x_of = |ns: i64| -> i32 {
        let at = (ns.clamp(from, to) - from) as f64 / (to - from) as f64;
        x0 + (at * f64::from(x1 - x0)).round() as i32
    };
    let title = source.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    root.draw(&Text::new(
        format!("Timeline of {title}: {:.3} ms to {:.3} ms", from as f64 / 1e6, to as f64 / 1e6),
        (MARGIN, MARGIN),
        ("sans-serif", 16).into_font().color(&BLACK),
    ))?;

    // Where each slice is drawn, for the flows.
    let mut boxes: BTreeMap<(u64, bool), (i32, i32)> = BTreeMap::new();
    let mut y = HEADER;
    let label = ("sans-serif", 12).into_font().color(&BLACK);
    let inside = ("sans-serif", 10).into_font().color(&WHITE);
    for track in tracks {
        let track_height = track.levels as i32 * LEVEL_HEIGHT;
        let name = names.get(&track.tid).cloned().unwrap_or_else(|| format!("thread {}", track.tid));
        let name = shorten(&name, 34);
        root.draw(&Text::new(
            name,
            (MARGIN, y + track_height / 2),
            label.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        root.draw(&Rectangle::new(
            [(x0, y), (x1, y + track_height)],
            ShapeStyle::from(&RGBColor(0xf2, 0xf2, 0xf2)).filled(),
        ))?;
        for (level, slice) in &track.slices {
            let top = y + *level as i32 * LEVEL_HEIGHT + 1;
            let (left, right) =
                (x_of(slice.ts_ns), x_of(slice.ts_ns + slice.dur_ns).max(x_of(slice.ts_ns) + 1));
            let color = color_of(&slice.cat);
            root.draw(&Rectangle::new([(left, top), (right, top + LEVEL_HEIGHT - 2)], color.filled()))?;
            if right - left > 6 {
                root.draw(&Rectangle::new(
                    [(left, top), (right, top + LEVEL_HEIGHT - 2)],
                    WHITE.stroke_width(1),
                ))?;
            }
            let room = (right - left - 6) / 6;
            if room >= 4 {
                root.draw(&Text::new(
                    shorten(&slice.name, room as usize),
                    (left + 3, top + (LEVEL_HEIGHT - 2) / 2),
                    inside.clone().pos(Pos::new(HPos::Left, VPos::Center)),
                ))?;
            }
            if let Some((id, out)) = slice.flow {
                boxes.insert((id, out), (left, top + (LEVEL_HEIGHT - 2) / 2));
            }
        }
        y += track_height + TRACK_GAP;
    }
    // Flows whose ends are both drawn.
    let flow_ids: Vec<u64> =
        slices.iter().filter_map(|slice| slice.flow).filter(|(_, out)| *out).map(|(id, _)| id).collect();
    for id in flow_ids {
        if let (Some(&start), Some(&end)) = (boxes.get(&(id, true)), boxes.get(&(id, false))) {
            root.draw(&PathElement::new(vec![start, end], RGBColor(0x30, 0x30, 0x30).stroke_width(1)))?;
            root.draw(&Circle::new(end, 2, RGBColor(0x30, 0x30, 0x30).filled()))?;
        }
    }

    // The time axis.
    let axis_y = y + 4;
    root.draw(&PathElement::new(vec![(x0, axis_y), (x1, axis_y)], BLACK.stroke_width(1)))?;
    let span_ms = (to - from) as f64 / 1e6;
    let step = nice_step(span_ms / 8.0);
    let mut tick = (from as f64 / 1e6 / step).ceil() * step;
    while tick * 1e6 <= to as f64 {
        let x = x_of((tick * 1e6) as i64);
        root.draw(&PathElement::new(vec![(x, axis_y), (x, axis_y + 4)], BLACK.stroke_width(1)))?;
        root.draw(&Text::new(
            format!("{tick:.prec$} ms", prec = decimals(step)),
            (x, axis_y + 6),
            label.clone().pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
        tick += step;
    }

    // The legend.
    let mut x = x0;
    let legend_y = axis_y + AXIS_HEIGHT;
    for (name, color) in CATEGORIES {
        root.draw(&Rectangle::new([(x, legend_y), (x + 12, legend_y + 12)], color.filled()))?;
        root.draw(&Text::new(
            name,
            (x + 16, legend_y + 6),
            label.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        x += 24 + 7 * name.len() as i32 + 16;
    }
    root.draw(&PathElement::new(
        vec![(x, legend_y + 6), (x + 24, legend_y + 6)],
        RGBColor(0x30, 0x30, 0x30).stroke_width(1),
    ))?;
    root.draw(&Text::new("flow", (x + 28, legend_y + 6), label.pos(Pos::new(HPos::Left, VPos::Center))))?;
    root.present()?;
    Ok(())
}

/// A round step (1, 2 or 5 times a power of ten) near `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-6);
    let power = 10f64.powf(raw.log10().floor());
    let scaled = raw / power;
    let nice = if scaled < 1.5 {
        1.0
    } else if scaled < 3.5 {
        2.0
    } else if scaled < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Decimals that show a step of `step` ms.
fn decimals(step: f64) -> usize {
    if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    }
}

/// `text` cut to `chars` characters, with an ellipsis where cut.
fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round_and_labels_cut() {
        assert_eq!(nice_step(0.9), 1.0);
        assert_eq!(nice_step(2.4), 2.0);
        assert_eq!(nice_step(0.06), 0.05);
        assert_eq!(decimals(0.05), 2);
        assert_eq!(shorten("submission", 5), "subm…");
        assert_eq!(shorten("gpu", 5), "gpu");
    }
}
