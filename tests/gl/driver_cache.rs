//! The GL driver's shader cache as the library places it: the first runtime of a process
//! decides where the driver's cache goes (drivers read its location once per process), and a
//! second runtime with another cache dir keeps that choice. Where it lands and what the user's
//! variables do, in fresh processes of the `sparkle` command: the command's `driver_cache`
//! tests.

use crate::gl_support::DRIVER_VARS;
use crate::isolated;
use sparkle::cache::CacheConfig;
use sparkle::{BackendChoice, Runtime};

/// In a process of its own: the first runtime decides; a second one with another cache dir says
/// that the driver's cache stayed with the first.
#[test]
fn a_second_runtime_with_another_cache_dir_keeps_the_first_choice() {
    // The first runtime of a process decides, and every earlier test of this binary would have
    // been first: a new process, with no driver variable inherited from this one.
    let unset: Vec<_> = DRIVER_VARS.iter().map(|&var| (var, None)).collect();
    if isolated::ran_in_own_process(
        module_path!(),
        "a_second_runtime_with_another_cache_dir_keeps_the_first_choice",
        &unset,
    ) {
        return;
    }
    let first_dir = tempfile::tempdir().unwrap();
    let second_dir = tempfile::tempdir().unwrap();
    let detail = |runtime: &Runtime| {
        runtime.info().details.iter().find(|(n, _)| n == "driver shader cache").unwrap().1.clone()
    };
    let first = Runtime::open(BackendChoice::Only("gl"), &CacheConfig::in_dir(first_dir.path())).unwrap();
    let second = Runtime::open(BackendChoice::Only("gl"), &CacheConfig::in_dir(second_dir.path())).unwrap();
    let (first_text, second_text) = (detail(&first), detail(&second));
    assert!(!first_text.contains("once per process"), "{first_text}");
    assert!(second_text.contains("once per process"), "{second_text}");
    assert!(second_text.contains(&first_dir.path().display().to_string()), "{second_text}");
    assert!(!second_dir.path().join("drivers").exists());
}
