//! A stand-in for clang with a chosen identity, for the tests of what a compiler update does to
//! the amdgpu cache (recipes, rebuilds): its `--version` names the build, and it compiles nothing,
//! so the simulator's kernels run from the code objects they carry and any real compile fails.
//! Included with `#[path]` by the test binaries that need it.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Writes the script of compiler `build` into `dir` (once) and returns its path.
pub fn script(dir: &Path, build: &str) -> PathBuf {
    let script = dir.join(format!("clang-{build}"));
    if !script.exists() {
        fs::write(
            &script,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo \"clang version 22.0.0 ({build})\"; exit 0; fi\n\
                 echo \"error: this test's compiler compiles nothing\" >&2\nexit 1\n"
            ),
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    }
    script
}

/// The library's compiler for the script of `build` in `dir`.
#[cfg(feature = "amdgpu")]
pub fn compiler(dir: &Path, build: &str) -> sparkle::amdgpu::Compiler {
    let script = script(dir, build);
    // A process another test thread forks while the script is still open for writing holds it
    // until it execs: running the script meanwhile fails with ETXTBSY. Such a window is short.
    let mut tries = 0;
    loop {
        match sparkle::amdgpu::Compiler::with_tools(script.clone(), PathBuf::from("/bin/false"), None) {
            Ok(compiler) => return compiler,
            Err(err) if err.to_string().contains("Text file busy") && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(err) => panic!("{err}"),
        }
    }
}
