//! `sparkle cache …` through the real binary: ages and sizes mean on the command line what they
//! mean in the environment, bad values are usage errors (exit code 2, never a panic), `verify`
//! exits 1 while problems are left and `--fix` removes them, and log settings never hide
//! warnings.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cache_support::{entry_path, gpu, Counts, Source};
use sparkle::cache::{CacheConfig, ProgramCache};

/// Runs `sparkle` with only the variables given (and none inherited that the cache or the
/// logging reads).
fn sparkle(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sparkle"));
    command.args(args);
    for name in [
        "SPARKLE_CACHE_DIR",
        "SPARKLE_CACHE_MAX_SIZE",
        "SPARKLE_CACHE_MAX_AGE_DAYS",
        "SPARKLE_CACHE_READ_ONLY",
        "XDG_CACHE_HOME",
        "HOME",
        "SPARKLE_LOG",
        "RUST_LOG",
    ] {
        command.env_remove(name);
    }
    command.envs(vars.iter().copied());
    command.output().unwrap()
}

fn in_cache<'a>(dir: &'a Path, args: &[&'a str]) -> Output {
    sparkle(args, &[("SPARKLE_CACHE_DIR", dir.to_str().unwrap())])
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Three entries last used two days ago.
fn seed(dir: &Path) -> Vec<PathBuf> {
    let gpu = gpu("cli");
    let counts = Arc::new(Counts::default());
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir));
    let old = SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
    (0..3)
        .map(|i| {
            let source = Source::new(&gpu, &format!("cli {i}"), &counts);
            cache.get(&source.key, &source).unwrap();
            let path = entry_path(&cache.gpu_dir().unwrap(), &source);
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
            path
        })
        .collect()
}

#[test]
fn max_age_days_zero_means_no_limit_as_in_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = seed(tmp.path());
    for no_limit in ["0", "off", "never"] {
        let output = in_cache(tmp.path(), &["cache", "prune", "--max-age-days", no_limit]);
        assert!(output.status.success(), "{no_limit}: {}", stderr(&output));
        assert!(paths.iter().all(|p| p.exists()), "--max-age-days {no_limit} removed entries");
    }
    let output = in_cache(tmp.path(), &["cache", "prune", "--max-age-days", "1"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(paths.iter().all(|p| !p.exists()), "entries two days old survived --max-age-days 1");
}

#[test]
fn bad_values_are_usage_errors_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = seed(tmp.path());
    for (flag, value) in [
        ("--max-age-days", "1e300"),
        ("--max-age-days", "-1"),
        ("--max-age-days", "soon"),
        ("--max-size", "0"),
        ("--max-size", "1K"),
        ("--max-size", "12X"),
    ] {
        let output = in_cache(tmp.path(), &["cache", "prune", flag, value]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {text}");
        assert!(text.contains(flag) && text.contains(value), "{flag} {value}: {text}");
        assert!(!text.contains("panicked"), "{flag} {value}: {text}");
    }
    assert!(paths.iter().all(|p| p.exists()));
}

#[test]
fn bad_environment_values_name_the_variable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    for (var, value, example) in [
        ("SPARKLE_CACHE_MAX_SIZE", "0", "512M"),
        ("SPARKLE_CACHE_MAX_SIZE", "1000", "512M"),
        ("SPARKLE_CACHE_READ_ONLY", "maybe", "=1"),
        ("SPARKLE_CACHE_MAX_AGE_DAYS", "1e300", "=30"),
    ] {
        let output = sparkle(&["cache", "stats"], &[("SPARKLE_CACHE_DIR", dir), (var, value)]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{var}={value}: {text}");
        assert!(text.contains(var) && text.contains(example), "{var}={value}: {text}");
    }
}

#[test]
fn verify_exits_1_while_problems_are_left_and_fix_removes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = seed(tmp.path());
    let blocked =
        paths[0].with_file_name(format!("{}0", &paths[0].file_name().unwrap().to_str().unwrap()[..31]));
    assert_ne!(blocked, paths[0]);
    std::fs::create_dir(&blocked).unwrap();

    let output = in_cache(tmp.path(), &["cache", "verify"]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stdout}{}", stderr(&output));
    assert!(stdout.contains("a folder at an entry's path"), "{stdout}");
    assert!(stderr(&output).contains("--fix"), "{}", stderr(&output));
    assert!(blocked.exists());

    let list = in_cache(tmp.path(), &["cache", "list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("a folder at an entry's path"));

    let output = in_cache(tmp.path(), &["cache", "verify", "--fix"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!blocked.exists());
    let output = in_cache(tmp.path(), &["cache", "verify"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(paths.iter().all(|p| p.exists()));
}

/// With no cache folder at all (no HOME either), the configuration warns; no log setting may
/// hide that warning.
#[test]
fn log_settings_never_hide_warnings() {
    const WARNING: &str = "no cache folder";
    for (vars, complaint) in [
        (vec![], false),
        (vec![("SPARKLE_LOG", "")], false),
        (vec![("RUST_LOG", "")], false),
        (vec![("SPARKLE_LOG", "sparkle=loud")], true),
        (vec![("SPARKLE_LOG", "[broken"), ("RUST_LOG", "off")], true),
    ] {
        let output = sparkle(&["cache", "stats"], &vars);
        let text = stderr(&output);
        assert!(text.contains(WARNING), "{vars:?}: {text}");
        let complaints: Vec<&str> =
            text.lines().filter(|l| l.contains("is not a valid log filter")).collect();
        assert_eq!(complaints.len(), usize::from(complaint), "{vars:?}: {text}");
        if complaint {
            assert!(complaints[0].contains("SPARKLE_LOG=sparkle=debug"), "{text}");
        }
    }
    // SPARKLE_LOG wins over RUST_LOG: `off` there silences the warning, whatever RUST_LOG says.
    let output = sparkle(&["cache", "stats"], &[("SPARKLE_LOG", "off"), ("RUST_LOG", "warn")]);
    assert!(!stderr(&output).contains(WARNING), "{}", stderr(&output));
}
