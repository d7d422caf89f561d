//! Fault injection on the gl backend's persisted programs (Mesa's llvmpipe in CI): every entry of
//! a warm cache of the suite is damaged in turn — single-byte flips at every header offset and a
//! stride through the payload, truncations, extensions, a zeroed file, the entry of another
//! kernel, an entry re-sealed for another GPU or a future format version — and each must be
//! rejected by verification before `glProgramBinary` sees it, compiled again, and compute the
//! right result. The counts are printed (`-- --nocapture`).
//!
//! The per-entry runner (`cache_support/faults.rs`) takes a `Runtime` opener, so the same cases
//! run on amdgpu-sim (`amdgpu_sim_faults`).

use std::path::Path;

use crate::faults::damage_every_entry;
use sparkle::cache::{CacheConfig, HEADER_LEN};
use sparkle::suite::{self, Case};
use sparkle::Runtime;

fn open_gl(dir: &Path) -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::in_dir(dir))
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

fn cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(777, 5)),
        Box::new(suite::sgemm::Sgemm::random(19, 23, 17, 5)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 2, h: 7, w: 9, k: 2 }, 5)),
    ]
}

#[test]
fn every_damaged_gl_entry_is_rejected_before_the_driver_and_recompiled_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let tally = damage_every_entry(dir.path(), &open_gl, &cases(), 256);
    eprintln!("gl fault injection: {tally}");
    assert!(tally.cases >= 3 * (HEADER_LEN + 256));
    assert_eq!(tally.driver_refused, 0);
}
