//! The benchmark chart (SVG): time to first result under each cache scenario (cold vs warm
//! startup), and throughput of each backend against the peers (PyTorch, where `--peers` ran),
//! drawn from a `sparkle-bench bench` JSON report — the one just measured (`sparkle-bench bench --chart`) or a
//! saved one (`sparkle chart REPORT.json OUT.svg`).
//!
//! The report is read leniently: a missing section, scenario or value (a NaN is saved as `null`)
//! is drawn as "n/a", never as a zero-length bar that would read as "instant".

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;

use super::CliResult;

const WIDTH: u32 = 960;
const LABEL_WIDTH: i32 = 300;
const MARGIN: i32 = 20;
const BAR_HEIGHT: i32 = 16;
const ROW_GAP: i32 = 10;
const PANEL_HEADER: i32 = 56;
const PANEL_GAP: i32 = 24;
/// Room right of the longest bar for its value.
const VALUE_ROOM: i32 = 110;

const STARTUP_COLOR: RGBColor = RGBColor(0x4c, 0x72, 0xb0);
const PEER_COLOR: RGBColor = RGBColor(0xdd, 0x84, 0x52);
const BACKEND_COLORS: [RGBColor; 3] =
    [RGBColor(0x55, 0xa8, 0x68), RGBColor(0x81, 0x72, 0xb3), RGBColor(0x93, 0x78, 0x60)];

/// The parts of a `sparkle-bench bench` report the chart draws.
#[derive(Debug, Default, Deserialize)]
struct ReportView {
    #[serde(default)]
    device: String,
    #[serde(default)]
    backend: String,
    #[serde(default)]
    scenarios: Vec<ScenarioView>,
    #[serde(default)]
    throughput: Vec<ThroughputView>,
    #[serde(default)]
    peers: Option<PeersView>,
}

#[derive(Debug, Deserialize)]
struct ScenarioView {
    name: String,
    #[serde(default)]
    median_suite_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct ThroughputView {
    case: String,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    gflops: Option<f64>,
    #[serde(default)]
    gbytes_per_s: Option<f64>,
    #[serde(default)]
    peer: Option<PeerView>,
}

#[derive(Debug, Deserialize)]
struct PeerView {
    #[serde(default)]
    ratio: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct PeersView {
    #[serde(default)]
    torch: String,
}

/// One horizontal bar chart: categories down, one bar per series in each.
struct Panel {
    title: String,
    unit: &'static str,
    /// Series names and colors, for the legend.
    series: Vec<(String, RGBColor)>,
    /// Category label and, per series, its value (`None`: not measured).
    rows: Vec<(String, Vec<Option<f64>>)>,
}

impl Panel {
    fn height(&self) -> i32 {
        let per_row = BAR_HEIGHT * self.series.len().max(1) as i32 + ROW_GAP;
        PANEL_HEADER + per_row * self.rows.len().max(1) as i32
    }
}

/// Draws the chart of `report` (a `sparkle-bench bench` JSON report) into `out`.
pub fn write(report: &serde_json::Value, out: &Path) -> CliResult<()> {
    let svg = render(report)?;
    std::fs::write(out, svg).map_err(|err| format!("cannot write the chart to {}: {err}", out.display()))?;
    Ok(())
}

/// `sparkle chart REPORT.json OUT.svg`.
pub fn from_file(report: &Path, out: &Path) -> CliResult<std::process::ExitCode> {
    let text = std::fs::read_to_string(report)
        .map_err(|err| format!("cannot read the report {}: {err}", report.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|err| {
        format!(
            "{} is not a JSON report ({err}); write one with `sparkle-bench bench --json-out FILE`",
            report.display()
        )
    })?;
    write(&value, out)?;
    eprintln!("chart written to {}", out.display());
    Ok(std::process::ExitCode::SUCCESS)
}

/// The SVG text of the chart of `report`.
pub fn render(report: &serde_json::Value) -> CliResult<String> {
    if report.get("scenarios").is_none() && report.get("throughput").is_none() {
        return Err("this JSON has neither `scenarios` nor `throughput`: it is not a report of \
                    `sparkle-bench bench --json-out FILE`"
            .into());
    }
    let view: ReportView = serde_json::from_value(report.clone()).map_err(|err| {
        format!("the report does not have the shape `sparkle-bench bench --json` writes: {err}")
    })?;
    let panels = panels(&view);
    let height = MARGIN * 2 + 30 + panels.iter().map(|p| p.height() + PANEL_GAP).sum::<i32>();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height as u32)).into_drawing_area();
        draw(&root, &view, &panels).map_err(|err| format!("could not draw the chart: {err}"))?;
        root.present().map_err(|err| format!("could not draw the chart: {err}"))?;
    }
    Ok(svg)
}

fn panels(view: &ReportView) -> Vec<Panel> {
    let mut panels = vec![Panel {
        title: "Time to first correct result of the suite (fresh process, median)".into(),
        unit: "ms",
        series: vec![("startup".into(), STARTUP_COLOR)],
        rows: view.scenarios.iter().map(|s| (s.name.clone(), vec![finite(s.median_suite_ms)])).collect(),
    }];
    let mut backends: Vec<String> = Vec::new();
    for t in &view.throughput {
        let backend = t.backend.clone().unwrap_or_else(|| view.backend.clone());
        if !backends.contains(&backend) {
            backends.push(backend);
        }
    }
    let has_peers = view.throughput.iter().any(|t| t.peer.is_some());
    let mut series: Vec<(String, RGBColor)> = backends
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("Sparkle {b}"), BACKEND_COLORS[i % BACKEND_COLORS.len()]))
        .collect();
    if has_peers {
        let torch = view.peers.as_ref().map(|p| p.torch.as_str()).filter(|t| !t.is_empty());
        series.push((torch.map_or_else(|| "PyTorch".into(), |t| format!("PyTorch {t}")), PEER_COLOR));
    }
    for (unit, bandwidth) in [("GFLOP/s", false), ("GB/s", true)] {
        let mut rows: Vec<(String, Vec<Option<f64>>)> = Vec::new();
        for t in view.throughput.iter().filter(|t| t.case.starts_with("saxpy") == bandwidth) {
            let ours = finite(if bandwidth { t.gbytes_per_s } else { t.gflops });
            let backend = t.backend.clone().unwrap_or_else(|| view.backend.clone());
            let column = backends.iter().position(|b| *b == backend).unwrap_or(0);
            let index = match rows.iter().position(|(case, _)| *case == t.case) {
                Some(index) => index,
                None => {
                    rows.push((t.case.clone(), vec![None; series.len()]));
                    rows.len() - 1
                }
            };
            rows[index].1[column] = ours;
            if has_peers {
                let peer = t.peer.as_ref().and_then(|p| finite(p.ratio)).and_then(|r| ours.map(|o| o * r));
                if let Some(peer) = peer {
                    rows[index].1[backends.len()] = Some(peer);
                }
            }
        }
        let what = if bandwidth { "memory bandwidth" } else { "compute" };
        let against = if has_peers { " against PyTorch" } else { "" };
        panels.push(Panel {
            title: format!("Throughput, {what} ({unit}){against}"),
            unit,
            series: series.clone(),
            rows,
        });
    }
    panels
}

fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

/// A value as its bar is labelled.
pub fn format_value(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult<'a> = Result<(), DrawingAreaErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>>;

fn draw<'a>(root: &Area<'a>, view: &ReportView, panels: &[Panel]) -> DrawResult<'a> {
    root.fill(&WHITE)?;
    let title = match (view.device.is_empty(), view.backend.is_empty()) {
        (true, _) => "Sparkle benchmark".to_owned(),
        (false, true) => format!("Sparkle benchmark on {}", view.device),
        (false, false) => format!("Sparkle benchmark on {} ({} backend)", view.device, view.backend),
    };
    root.draw(&Text::new(title, (MARGIN, MARGIN), ("sans-serif", 18).into_font()))?;
    let mut top = MARGIN + 30;
    for panel in panels {
        draw_panel(root, panel, top)?;
        top += panel.height() + PANEL_GAP;
    }
    Ok(())
}

fn draw_panel<'a>(root: &Area<'a>, panel: &Panel, top: i32) -> DrawResult<'a> {
    let bold = ("sans-serif", 15).into_font().style(FontStyle::Bold);
    root.draw(&Text::new(panel.title.clone(), (MARGIN, top), bold))?;
    let small = ("sans-serif", 12).into_font();
    let mut x = MARGIN;
    for (name, color) in &panel.series {
        root.draw(&Rectangle::new([(x, top + 24), (x + 12, top + 36)], color.filled()))?;
        root.draw(&Text::new(name.clone(), (x + 16, top + 24), small.clone()))?;
        x += 30 + 8 * name.chars().count() as i32;
    }
    let left = MARGIN + LABEL_WIDTH;
    let span = WIDTH as i32 - MARGIN - VALUE_ROOM - left;
    let body = top + PANEL_HEADER;
    if panel.rows.is_empty() {
        root.draw(&Text::new("not measured in this report", (left, body), small))?;
        return Ok(());
    }
    let max = panel.rows.iter().flat_map(|(_, values)| values.iter().flatten()).copied().fold(0.0, f64::max);
    let per_row = BAR_HEIGHT * panel.series.len() as i32 + ROW_GAP;
    root.draw(&PathElement::new(
        vec![(left, body - 4), (left, body + per_row * panel.rows.len() as i32 - ROW_GAP + 4)],
        BLACK,
    ))?;
    let right_aligned = TextStyle::from(small.clone()).pos(Pos::new(HPos::Right, VPos::Center));
    let centered = TextStyle::from(small.clone()).pos(Pos::new(HPos::Left, VPos::Center));
    for (row, (label, values)) in panel.rows.iter().enumerate() {
        let row_top = body + row as i32 * per_row;
        let middle = row_top + BAR_HEIGHT * panel.series.len() as i32 / 2;
        root.draw(&Text::new(label.clone(), (left - 8, middle), right_aligned.clone()))?;
        for (i, ((_, color), value)) in panel.series.iter().zip(values).enumerate() {
            let y0 = row_top + i as i32 * BAR_HEIGHT;
            let Some(value) = value else {
                root.draw(&Text::new("n/a", (left + 6, y0 + BAR_HEIGHT / 2), centered.clone()))?;
                continue;
            };
            let length = if max > 0.0 { (value / max * f64::from(span)).round() as i32 } else { 0 };
            root.draw(&Rectangle::new(
                [(left, y0 + 1), (left + length, y0 + BAR_HEIGHT - 1)],
                color.filled(),
            ))?;
            let text = format!("{} {}", format_value(*value), panel.unit);
            root.draw(&Text::new(text, (left + length + 6, y0 + BAR_HEIGHT / 2), centered.clone()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/bench-report.json");

    /// The text of every `<text>` element, unescaped.
    fn texts(svg: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find("<text") {
            rest = &rest[start..];
            let Some(open_end) = rest.find('>') else { break };
            let Some(close) = rest.find("</text>") else { break };
            out.push(
                rest[open_end + 1..close]
                    .trim()
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&amp;", "&"),
            );
            rest = &rest[close + 7..];
        }
        out
    }

    /// `(width, fill)` of every `<rect>`.
    fn rects(svg: &str) -> Vec<(f64, String)> {
        let attribute = |element: &str, name: &str| {
            let key = format!(" {name}=\"");
            let start = element.find(&key)? + key.len();
            let end = element[start..].find('"')? + start;
            Some(element[start..end].to_owned())
        };
        svg.split("<rect")
            .skip(1)
            .filter_map(|r| {
                let element = &r[..r.find("/>")?];
                Some((attribute(element, "width")?.parse().ok()?, attribute(element, "fill")?.to_lowercase()))
            })
            .collect()
    }

    #[test]
    fn the_chart_of_a_fixture_names_every_series_and_value_and_scales_its_bars() {
        let report: serde_json::Value = serde_json::from_str(FIXTURE).unwrap();
        let svg = render(&report).unwrap();
        let texts = texts(&svg);
        for expected in [
            "Sparkle gl",
            "Sparkle amdgpu-sim",
            "PyTorch 2.11.0",
            "cold",
            "warm",
            "driver-cache",
            "1250 ms",
            "40.0 ms",
            "sgemm 4096x4096x4096",
            "7300 GFLOP/s",
            // The peer's throughput: ours × (peer time / our time) = 7300 × 7.0.
            "51100 GFLOP/s",
            "saxpy n=67108864",
            "2120 GB/s",
            "3010 GB/s",
            "Throughput, memory bandwidth (GB/s) against PyTorch",
        ] {
            assert!(texts.iter().any(|t| t == expected), "no text {expected:?} in {texts:?}");
        }
        // `warm-driver-cold` was saved as null (NaN) and the simulator has no saxpy row: both n/a.
        assert!(texts.iter().any(|t| t == "warm-driver-cold"), "{texts:?}");
        assert!(texts.iter().filter(|t| *t == "n/a").count() >= 2, "{texts:?}");

        let startup: Vec<f64> =
            rects(&svg).into_iter().filter(|(_, fill)| fill == "#4c72b0").map(|(w, _)| w).collect();
        // cold 1250, driver-cache 300, warm 40; the legend's square is 12 wide.
        let bars: Vec<f64> = startup.into_iter().filter(|&w| w != 12.0).collect();
        assert_eq!(bars.len(), 3, "{bars:?}");
        let longest = bars[0];
        for (width, value) in bars.iter().zip([1250.0, 300.0, 40.0]) {
            let want = value / 1250.0 * longest;
            assert!((width - want).abs() <= 1.5, "bar {width} for {value}: want {want}");
        }
    }

    #[test]
    fn a_report_without_sections_still_draws_and_says_so() {
        let empty =
            serde_json::json!({"device": "llvmpipe", "backend": "gl", "scenarios": [], "throughput": []});
        let drawn = texts(&render(&empty).unwrap());
        assert_eq!(drawn.iter().filter(|t| *t == "not measured in this report").count(), 3, "{drawn:?}");
        // `--no-startup`: no scenarios at all, throughput only.
        let drawn = texts(&render(&serde_json::json!({"throughput": []})).unwrap());
        assert!(drawn.iter().any(|t| t == "Sparkle benchmark"), "{drawn:?}");
        assert!(render(&serde_json::json!({"scenarios": "cold"})).is_err(), "a malformed report is refused");
        let err = render(&serde_json::json!({"variants": []})).unwrap_err().to_string();
        assert!(err.contains("not a report of `sparkle-bench bench"), "another JSON is refused: {err}");
    }
}
