//! `sparkle chart` as users run it: a chart drawn from a report that `sparkle-bench bench` saved,
//! without measuring anything, and a missing report named in the error.

use std::path::Path;

use crate::command::text;
use crate::sparkle;

#[test]
fn a_chart_is_drawn_from_a_saved_report_without_measuring() {
    let dir = tempfile::tempdir().unwrap();
    // The workspace's fixture, which the chart's unit tests read too.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/bench-report.json");
    let out = dir.path().join("chart.svg");
    let output = sparkle(&["chart", fixture.to_str().unwrap(), out.to_str().unwrap()], dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
    for name in [">Sparkle gl<", ">PyTorch 2.11.0<", ">cold<", ">7300 GFLOP/s<"] {
        assert!(svg.replace(['\n', ' '], "").contains(&name.replace(' ', "")), "{name} missing");
    }

    let output = sparkle(&["chart", "no-such-report.json", out.to_str().unwrap()], dir.path());
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("no-such-report.json"), "{}", text(&output));
}
