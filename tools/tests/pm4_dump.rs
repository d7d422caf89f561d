//! Runs `pm4-dump` on the golden saxpy IB in both input formats.

use std::process::Command;

const GOLDEN_HEX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../pm4/tests/data/saxpy_gfx1100.hex");

fn dump(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pm4-dump")).args(args).output().expect("pm4-dump runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn hex_and_binary_inputs_decode_the_same() {
    let (ok, text) = dump(&["--gfx", "gfx1100", GOLDEN_HEX]);
    assert!(ok, "{text}");
    for needle in
        ["ACQUIRE_MEM", "COMPUTE_PGM_RSRC1 [0x0b848] = 0xe0bf0000", "DISPATCH_DIRECT", "RELEASE_MEM"]
    {
        assert!(text.contains(needle), "missing {needle:?}");
    }
    let words = pm4::words_from_hex_text(&std::fs::read_to_string(GOLDEN_HEX).unwrap()).unwrap();
    let bin = std::env::temp_dir().join(format!("pm4-dump-test-{}.bin", std::process::id()));
    std::fs::write(&bin, words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let (ok, from_bin) = dump(&["--gfx", "gfx1100", bin.to_str().unwrap()]);
    std::fs::remove_file(&bin).ok();
    assert!(ok);
    assert_eq!(text, from_bin);
}

#[test]
fn errors_give_a_failing_status() {
    let (ok, _) = dump(&["--gfx", "gfx900", GOLDEN_HEX]);
    assert!(!ok);
    let bad = std::env::temp_dir().join(format!("pm4-dump-bad-{}.hex", std::process::id()));
    std::fs::write(&bad, "0xc0019900\n1\n2\n").unwrap();
    let (ok, text) = dump(&["--gfx", "gfx1030", bad.to_str().unwrap()]);
    std::fs::remove_file(&bad).ok();
    assert!(!ok);
    assert!(text.contains("ERROR: unknown opcode 0x99"), "{text}");
}
