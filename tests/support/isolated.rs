//! Tests in a process of their own. A test binary runs its tests on several threads of one
//! process, so a test that changes what belongs to the whole process (an environment variable
//! the library reads once, a fault injected into every cache write, the GL driver's cache placed
//! by the first runtime) or that counts it (GL objects alive, resident memory) would disturb the
//! tests beside it, or be disturbed by them. Such a test starts with
//!
//! ```ignore
//! if isolated::ran_in_own_process(module_path!(), "the_test_function", &[("VARIABLE", Some("value"))]) {
//!     return;
//! }
//! ```
//!
//! which runs the test again, alone, in a new process of this same test binary (with the
//! environment changed as asked) and passes or fails with it; in that process it returns false
//! and the test's body runs. Also: the name the harness gives a test, for the tests whose helper
//! processes run one test of this binary by name (`--exact`).
//! Included with `#[path]` by the library's test binaries that need it.

#![allow(dead_code)]

use std::process::Command;

/// The variable that tells a process of this test binary which test it was started to run.
const OWN_PROCESS_ENV: &str = "SPARKLE_TEST_OWN_PROCESS";

/// The name the test harness gives `function` of the module `module` (pass `module_path!()`):
/// the module's path without the crate's name, then the function, as `--list` shows it.
pub fn test_name(module: &str, function: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{function}"),
        None => function.to_owned(),
    }
}

/// Runs the test `function` of `module` (pass `module_path!()`) alone in a new process of this
/// test binary, with `env` applied (`Some` sets a variable, `None` removes it), and returns true
/// once it passed; panics with its output when it failed. In that new process it returns false
/// at once: there the caller goes on and runs the test's body. Ignored tests run too (the
/// caller's own run was asked for them).
pub fn ran_in_own_process(module: &str, function: &str, env: &[(&str, Option<&str>)]) -> bool {
    let name = test_name(module, function);
    if std::env::var(OWN_PROCESS_ENV).is_ok_and(|running| running == name) {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's own path");
    let mut command = Command::new(exe);
    command.args([name.as_str(), "--exact", "--include-ignored", "--test-threads=1", "--nocapture"]);
    command.env(OWN_PROCESS_ENV, &name);
    for (variable, value) in env {
        match value {
            Some(value) => command.env(variable, value),
            None => command.env_remove(variable),
        };
    }
    let output = command.output().expect("the test binary starts again");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    // Shown as the test's own output (with --nocapture, or when it fails).
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(output.status.success(), "{name} failed in its own process ({})", output.status);
    assert!(stdout.contains("test result: ok. 1 passed"), "{name} did not run in its own process");
    true
}
