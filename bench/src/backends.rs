//! `sparkle-bench bench --backends gl,amdgpu-sim`: the backends a benchmark puts side by side, by their
//! `SPARKLE_BACKEND` names, each opened once with the problem sizes its device can take in
//! reasonable time (CPU renderers and the simulator get the small ones).

use std::sync::OnceLock;

use sparkle::cache::CacheConfig;
use sparkle::runtime::{BACKENDS, BACKEND_ENV};
use sparkle::{BackendChoice, DeviceClass, Runtime};

use sparkle_cli::{CliResult, UsageError};

/// One backend of the benchmark.
pub struct Opened {
    pub runtime: Runtime,
    /// Whether it runs the small problems.
    pub quick: bool,
}

/// The backend the fresh-process startup runs use, when `--backends` named one.
static CHILD_BACKEND: OnceLock<&'static str> = OnceLock::new();

/// The backend startup children must open (`None`: what their environment says).
pub fn child_backend() -> Option<&'static str> {
    CHILD_BACKEND.get().copied()
}

/// Parses a comma list of backend names (`auto` allowed); duplicates are dropped.
pub fn parse(list: &str) -> Result<Vec<BackendChoice>, UsageError> {
    let mut chosen = Vec::new();
    for name in list.split(',').map(str::trim) {
        let choice = if name.is_empty() { None } else { BackendChoice::parse(Some(name)).ok() };
        let Some(choice) = choice else {
            return Err(UsageError(format!(
                "--backends: `{name}` is not a backend of this build; valid names are: {}",
                valid_names()
            )));
        };
        if !chosen.contains(&choice) {
            chosen.push(choice);
        }
    }
    Ok(chosen)
}

fn valid_names() -> String {
    let mut names: Vec<&str> = BACKENDS.iter().map(|entry| entry.name).collect();
    names.push("auto");
    names.join(", ")
}

/// Opens each backend of `choices` (none: the one `SPARKLE_BACKEND` picks), in order. The first
/// is the benchmark's main one: startup runs and peers are about it.
pub fn open(choices: &[BackendChoice], quick_asked: bool) -> CliResult<Vec<Opened>> {
    let cache = CacheConfig::from_env()?;
    let runtimes = if choices.is_empty() {
        vec![Runtime::open(BackendChoice::from_env()?, &cache)?]
    } else {
        choices.iter().map(|&choice| Runtime::open(choice, &cache)).collect::<Result<Vec<_>, _>>()?
    };
    if let (Some(first), false) = (runtimes.first(), choices.is_empty()) {
        let _ = CHILD_BACKEND.set(first.backend());
    }
    let mut opened: Vec<Opened> = Vec::with_capacity(runtimes.len());
    for runtime in runtimes {
        // `auto` and the name it resolves to are one backend.
        if opened.iter().any(|o| o.runtime.backend() == runtime.backend()) {
            continue;
        }
        // A CPU renderer or a simulator would take hours over the GPU-sized problems.
        let quick = quick_asked || runtime.info().class != DeviceClass::Gpu;
        if quick && !quick_asked {
            eprintln!(
                "{} ({}) runs kernels on the CPU: using the small problems (--quick)",
                runtime.info().name,
                runtime.backend()
            );
        }
        opened.push(Opened { runtime, quick });
    }
    Ok(opened)
}

/// The variable startup children read their backend from.
pub const CHILD_ENV: &str = BACKEND_ENV;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_parsed_deduplicated_and_unknown_ones_listed() {
        let names: Vec<&str> = BACKENDS.iter().map(|e| e.name).collect();
        let list = format!("{},{}", names[0], names[0]);
        assert_eq!(parse(&list).unwrap(), vec![BackendChoice::Only(names[0])]);
        assert_eq!(parse(" auto ").unwrap(), vec![BackendChoice::Auto]);
        let err = parse("gl,vulkan").unwrap_err().0;
        assert!(err.contains("`vulkan`") && err.contains("auto"), "{err}");
        for name in names {
            assert!(err.contains(name), "{err}");
        }
        assert!(parse("gl,,gl").is_err(), "an empty name is not a backend");
    }
}
