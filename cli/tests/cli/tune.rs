//! `sparkle tune` as users run it on the gl backend (llvmpipe in CI): a tuned choice is stored
//! in the GPU's cache folder and found by later processes without tuning again unless `--force`
//! asks. (The lab's benchmark timing the tuned variant: its `commands` tests.)

use std::process::Output;

use crate::command::text;
use crate::sparkle;

fn rows(output: &Output) -> Vec<serde_json::Value> {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("JSON rows ({e}): {}", text(output)))
}

#[test]
fn tune_stores_a_choice_that_later_processes_reuse_until_forced() {
    let dir = tempfile::tempdir().unwrap();
    let first = sparkle(&["tune", "saxpy", "4000", "--json"], dir.path());
    assert!(first.status.success(), "{}", text(&first));
    let tuned = rows(&first);
    assert_eq!(tuned.len(), 1);
    assert_eq!(tuned[0]["problem"], "saxpy 4000");
    assert_eq!(tuned[0]["source"], "tuned");
    let variant = tuned[0]["variant"].as_str().unwrap().to_owned();
    assert!(tuned[0]["candidates"].as_u64().unwrap() > 1);

    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("tuning.json"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(files.len(), 1, "one tuning file, in the GPU's folder");
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(stored["choices"]["saxpy 4000"]["variant"], variant.as_str());

    let again = sparkle(&["tune", "saxpy", "4000", "--json"], dir.path());
    assert!(again.status.success(), "{}", text(&again));
    let kept = rows(&again);
    assert_eq!(kept[0]["source"], "stored", "a stored choice is not tuned again");
    assert_eq!(kept[0]["variant"], variant.as_str());

    let forced = sparkle(&["tune", "saxpy", "4000", "--force", "--json"], dir.path());
    assert!(forced.status.success(), "{}", text(&forced));
    assert_eq!(rows(&forced)[0]["source"], "tuned");

    let usage = sparkle(&["tune", "nope"], dir.path());
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));

    // `--transfers` tunes one batch of bench-pipeline's conv2d stage: five sizes, conv2d, and a
    // mode with device copies or mapped buffers (plain takes the plain problem's choice).
    for (args, why) in [
        (&["tune", "conv2d", "2", "4", "16", "16", "--transfers", "staged-in"][..], "five sizes"),
        (
            &["tune", "sgemm", "64", "64", "64", "64", "4", "--transfers", "staged"][..],
            "the kernel is conv2d",
        ),
        (&["tune", "conv2d", "2", "4", "16", "16", "4", "--transfers", "plain"][..], "leave --transfers out"),
        (&["tune", "conv2d", "2", "4", "16", "16", "4", "--transfers", "fast"][..], "staged-in and mapped"),
    ] {
        let refused = sparkle(args, dir.path());
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {}", text(&refused));
        assert!(text(&refused).contains(why), "{args:?}: {}", text(&refused));
    }
}
