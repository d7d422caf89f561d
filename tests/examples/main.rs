//! Every program in `examples/` runs and is right, as a user would run it: each is built once
//! (`cargo build --examples`, with this test's profile, target folder and features) and run as
//! its own process on the gl backend (Mesa's llvmpipe in CI) — the OpenCL one on amdgpu-sim —
//! with a fresh cache folder. An example checks its own results and exits non-zero on a wrong
//! one; the test asserts its exit status and the line saying what it checked. A new example
//! without a test here fails `every_example_has_a_test`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[path = "../support/shared_driver_cache.rs"]
mod shared_driver_cache;

/// How long building the examples may take (a cold debug build on a loaded two-core machine).
const BUILD_LIMIT: Duration = Duration::from_secs(30 * 60);
/// How long one example may run.
const RUN_LIMIT: Duration = Duration::from_secs(10 * 60);

/// The examples this file runs; `every_example_has_a_test` keeps it equal to `examples/`.
const TESTED: [&str; 8] = [
    "cache_config",
    "commands",
    "first_kernel",
    "glsl_probe",
    "opencl_on_amdgpu_sim",
    "pipeline",
    "tuned_variants",
    "winograd_stages",
];

/// Where cargo put this test, read from its own path: `<target>/[<triple>/]<profile>/deps/`.
struct Build {
    target_dir: PathBuf,
    triple: Option<String>,
    /// The profile's folder: `debug` for the `dev` profile, else the profile's name.
    profile_dir: PathBuf,
}

impl Build {
    fn of_this_test() -> Build {
        let exe = std::env::current_exe().expect("the test's own path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary lies in <target>/<profile>/deps")
            .to_path_buf();
        let above = profile_dir.parent().expect("a target folder").to_path_buf();
        // Cargo marks the root of a target folder with CACHEDIR.TAG; a folder between it and
        // the profile's is a target triple (`--target`).
        if !above.join("CACHEDIR.TAG").exists() {
            if let Some(root) = above.parent().filter(|root| root.join("CACHEDIR.TAG").exists()) {
                let triple = above.file_name().map(|name| name.to_string_lossy().into_owned());
                return Build { target_dir: root.to_path_buf(), triple, profile_dir };
            }
        }
        Build { target_dir: above, triple: None, profile_dir }
    }

    /// `cargo build --examples` with this test's profile, target and features. Built by
    /// `cargo test --workspace` (the README's command), the test has every feature the
    /// workspace's packages give the library, and `cargo test` has built the examples already:
    /// the same selection (`--workspace`, no feature flags) resolves every crate's features as
    /// that run did, so this build finds them fresh instead of building the library, its
    /// dependencies whose features differ and every example a second time.
    fn command(&self) -> Command {
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args(["build", "--examples", "--quiet", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&self.target_dir);
        if built_by_the_workspace() {
            cargo.arg("--workspace");
        } else {
            cargo.args(["--no-default-features", "--features", &features().join(",")]);
        }
        match self.profile_dir.file_name().and_then(|name| name.to_str()) {
            Some("debug") => cargo.args(["--profile", "dev"]),
            Some(profile) => cargo.args(["--profile", profile]),
            None => panic!("no profile folder in {}", self.profile_dir.display()),
        };
        if let Some(triple) = &self.triple {
            cargo.args(["--target", triple]);
        }
        // Cargo gives this test the variables it gives every crate's processes (the package's
        // name, version and folder, ...). Some build scripts (ring's) ask to be rerun when those
        // change, and cargo compares them in its own environment: inherited here, they made this
        // build redo ring and everything above it, the library included.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(set_by_cargo_for_crates) {
                cargo.env_remove(&name);
            }
        }
        cargo
    }
}

/// Whether `name` is one of the variables cargo sets for a crate's build scripts, tests and
/// binaries (not one that configures cargo itself, such as `CARGO_HOME` or `CARGO_PROFILE_*`).
fn set_by_cargo_for_crates(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// The package's features this test was built with (the examples get the same). `default`
/// counts: it is part of what cargo keys a build by, so naming it lets `cargo test -p
/// sparkle-gpu` find the examples it built already.
fn features() -> Vec<&'static str> {
    let mut features = Vec::new();
    if cfg!(feature = "default") {
        features.push("default");
    }
    if cfg!(feature = "gl") {
        features.push("gl");
    }
    if cfg!(feature = "amdgpu") {
        features.push("amdgpu");
    }
    if cfg!(feature = "amdgpu-sim") {
        features.push("amdgpu-sim");
    }
    if cfg!(feature = "remote") {
        features.push("remote");
    }
    features
}

/// Whether this test has what a build of the whole workspace gives the library: its default
/// features and those the command turns on (`remote`, `amdgpu-sim`). A build of the workspace
/// then gives the examples exactly this test's features.
fn built_by_the_workspace() -> bool {
    cfg!(all(
        feature = "default",
        feature = "gl",
        feature = "amdgpu",
        feature = "amdgpu-sim",
        feature = "remote"
    ))
}

/// Builds the examples once for every test of this file; the folder holding them.
fn examples_dir() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let build = Build::of_this_test();
        let mut command = build.command();
        let (status, output) = run_bounded(&mut command, BUILD_LIMIT)?;
        if !status.success() {
            return Err(format!("cargo build --examples failed ({status}):\n{}", text(&output)));
        }
        Ok(build.profile_dir.join("examples"))
    });
    match built {
        Ok(dir) => dir,
        Err(problem) => panic!("{problem}"),
    }
}

/// Runs `command` with its output captured, killing it past `limit`.
fn run_bounded(command: &mut Command, limit: Duration) -> Result<(ExitStatus, Output), String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot start {command:?}: {err}"))?;
    // Each pipe is drained on its own thread: a child that fills one would otherwise block.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{command:?} ran past {limit:?} and was killed"));
            }
            Err(err) => return Err(format!("waiting for {command:?}: {err}")),
        }
    };
    let joined = |reader: std::thread::JoinHandle<Vec<u8>>| reader.join().unwrap_or_default();
    Ok((status, Output { status, stdout: joined(stdout), stderr: joined(stderr) }))
}

fn text(output: &Output) -> String {
    format!(
        "--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs example `name` with `args` on the gl backend with a fresh cache folder, as a user would.
fn run_example(name: &str, args: &[&Path]) -> Output {
    run_example_with(name, args, &[])
}

/// [`run_example`] with the environment variables `env` set besides.
fn run_example_with(name: &str, args: &[&Path], env: &[(&str, &Path)]) -> Output {
    let program = examples_dir().join(name);
    let home = tempfile::tempdir().expect("a temporary folder");
    let mut command = Command::new(&program);
    command.args(args);
    // None of the caller's cache settings (a remote tier, a read-only cache…) leaks in; the
    // machine's (SPARKLE_CLANG, SPARKLE_EGL_DEVICE…) do.
    for (variable, _) in std::env::vars_os() {
        if variable.to_string_lossy().starts_with("SPARKLE_CACHE_") {
            command.env_remove(variable);
        }
    }
    command
        .env("SPARKLE_BACKEND", "gl")
        .env("SPARKLE_CACHE_DIR", home.path().join("sparkle"))
        // Where Mesa keeps its own shader cache when Sparkle does not point it into its folder
        // (a read-only cache): inside this test's folder, not the user's home.
        .env("XDG_CACHE_HOME", home.path().join("xdg"));
    for (variable, value) in env {
        command.env(variable, value);
    }
    let (_, output) = run_bounded(&mut command, RUN_LIMIT).unwrap_or_else(|problem| panic!("{problem}"));
    output
}

/// Asserts that `output` is a success whose stdout holds every one of `lines`.
fn assert_ran(name: &str, output: &Output, lines: &[&str]) {
    assert!(output.status.success(), "example {name} failed ({}):\n{}", output.status, text(output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in lines {
        assert!(stdout.contains(line), "example {name} did not print `{line}`:\n{}", text(output));
    }
}

#[test]
fn every_example_has_a_test() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut found: Vec<String> = std::fs::read_dir(&folder)
        .expect("the examples folder")
        .map(|entry| entry.expect("an entry of examples/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .filter_map(|path| path.file_stem().map(|stem| stem.to_string_lossy().into_owned()))
        .collect();
    found.sort();
    assert_eq!(found, TESTED, "examples/ and the examples this file runs differ");
}

#[test]
fn first_kernel() {
    let output = run_example("first_kernel", &[]);
    assert_ran("first_kernel", &output, &["y = 2·x + y: all 1000 elements correct", "1 compiled"]);
}

#[cfg(feature = "amdgpu-sim")]
#[test]
fn opencl_on_amdgpu_sim() {
    // The exit status the example reports when the simulator or clang-22 is missing.
    const UNAVAILABLE: i32 = 3;
    let output = run_example("opencl_on_amdgpu_sim", &[]);
    if output.status.code() == Some(UNAVAILABLE) {
        let message = format!("amdgpu-sim cannot run here:\n{}", text(&output));
        if std::env::var_os("CI").is_some() {
            panic!("{message}\n(CI is set: an example never skips there)");
        }
        // Straight to the process's stderr: the test harness would swallow eprintln! output.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "skipped: {message}");
        return;
    }
    assert_ran(
        "opencl_on_amdgpu_sim",
        &output,
        &["(amdgpu-sim backend)", "reverse_add: all 256 elements correct on the simulated GPU"],
    );
}

#[test]
fn commands() {
    let output = run_example("commands", &[]);
    assert_ran("commands", &output, &["recorded 7 commands", "one submission: all 4 buffers correct"]);
}

#[test]
fn pipeline() {
    let output = run_example("pipeline", &[]);
    assert_ran(
        "pipeline",
        &output,
        &[
            "run: 40 batches back in order",
            "start: 40 batches streamed back in order",
            "pipeline: all 80 batches correct",
        ],
    );
}

#[test]
fn cache_config() {
    let output = run_example("cache_config", &[]);
    assert_ran(
        "cache_config",
        &output,
        &[
            "3 disk hits, no compile",
            "the read-only folder is unchanged",
            "cache configuration: seeded once, then every program loaded without a compile",
        ],
    );
}

#[test]
fn tuned_variants() {
    let output = run_example("tuned_variants", &[]);
    assert_ran(
        "tuned_variants",
        &output,
        &["winner: wg", "tuned variants: 2 problems tuned, stored and checked"],
    );
}

/// The kernel-experiment probe, with one experiment of each kind: a micro-benchmark of a
/// kernel file, the GEMM core with chosen defines, saxpy with its operands moved in memory, and
/// saxpy replayed as the bench times it (each checked against the CPU first).
#[test]
fn glsl_probe() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let kernel = folder.path().join("fill.comp");
    std::fs::write(
        &kernel,
        "layout(std430, binding = 0) buffer Out { float outp[]; };\n\
         void main() { outp[gl_GlobalInvocationID.x] = 2.0 * float(gl_GlobalInvocationID.x); }\n",
    )
    .expect("writing the kernel");
    let gemm = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/gemm.comp");
    let saxpy = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/saxpy.comp");
    let plan = folder.path().join("plan");
    std::fs::write(
        &plan,
        format!(
            "# one of each\nmicro fill {} 64 16 1\nsgemm ragged {} 65 47 100 BM=64 BN=64 BK=16 TM=4 TN=4 VA=1 VB=1\n\
             saxpy moved {} 4100 64 17 VEC=4 PER_THREAD=1 PAD_BETWEEN=65536 FREED=2:4096\n\
             mimic replayed 4100 64 1 4 0 1\n",
            kernel.display(),
            gemm.display(),
            saxpy.display()
        ),
    )
    .expect("writing the plan");
    let output = run_example("glsl_probe", &[&plan]);
    assert_ran(
        "glsl_probe",
        &output,
        &["device: ", "fill ", "ragged ", "64x64x16 t4x4 v1/1", "moved ", "replayed ", "target     true"],
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("FAILED"), "{}", text(&output));
}

/// The Winograd stage probe at a small shape: both forms checked against the CPU, each stage
/// timed where the device's timer queries are plausible (llvmpipe's are not, and it says so).
#[test]
fn winograd_stages() {
    let sizes = ["2", "4", "8", "8", "4"].map(Path::new);
    let f2 = Path::new("winograd f2x2 32x32x16 t4x4 v4/4");
    let f4 = Path::new("winograd f4x4 32x32x16 t4x4 v4/4");
    let unknown = Path::new("winograd f3x3 nonsense");
    let args: Vec<&Path> = sizes.iter().copied().chain([f2, f4, unknown]).collect();
    let output = run_example("winograd_stages", &args);
    assert_ran(
        "winograd_stages",
        &output,
        &[
            "device: ",
            "winograd f2x2 32x32x16 t4x4 v4/4",
            "winograd f4x4 32x32x16 t4x4 v4/4",
            "not a candidate",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.matches(" correct").count(), 2, "{}", text(&output));
    assert!(!stdout.contains("WRONG"), "{}", text(&output));

    // WINOGRAD_SOURCE swaps in another transform source: one that drops F(2×2)'s centre tap is
    // run and reported wrong.
    let folder = tempfile::tempdir().expect("a temporary folder");
    let shader = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders/winograd.comp");
    let source = std::fs::read_to_string(shader).expect("shaders/winograd.comp");
    let centre = "float g1 = w[base + 3u + uint(j)];";
    assert!(source.contains(centre));
    let broken = folder.path().join("broken.comp");
    std::fs::write(&broken, source.replace(centre, "float g1 = 0.0;")).expect("writing the source");
    let output = run_example_with("winograd_stages", &args[..6], &[("WINOGRAD_SOURCE", &broken)]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("WRONG"), "{}", text(&output));
}

/// `code` with a `fn main() -> Result<…> { … Ok(()) }` around its statements taken away (the
/// README spells out what a doc test leaves hidden), its body dedented; other code unchanged.
fn without_main(code: &str) -> String {
    let Some((head, rest)) = code.split_once("fn main() -> Result<(), sparkle::Error> {\n") else {
        return code.to_owned();
    };
    let Some(body) = rest.strip_suffix("    Ok(())\n}\n") else { return code.to_owned() };
    let body = body.lines().map(|line| line.strip_prefix("    ").unwrap_or(line));
    body.fold(head.to_owned(), |code, line| code + line + "\n")
}

/// The README's "Using it" example is the crate front page's doc test (but for the `main` the
/// README writes out), so that what users read first is what `cargo test --doc` runs.
#[test]
fn the_readme_example_is_the_front_page_doc_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let front_page = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let in_readme = readme
        .split_once("## Using it\n")
        // The block's fence may carry rustdoc attributes (`rust,no_run`).
        .and_then(|(_, rest)| rest.split_once("```rust"))
        .and_then(|(_, rest)| rest.split_once('\n'))
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(code, _)| without_main(code))
        .expect("a rust block in the README's Using it section");
    // The doc test's lines as rustdoc shows them: without `//! ` and without hidden `# ` lines.
    let doc_test = front_page
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .skip_while(|line| *line != "```")
        .skip(1)
        .take_while(|line| *line != "```")
        .filter(|line| *line != "#" && !line.starts_with("# "))
        .fold(String::new(), |code, line| code + line + "\n");
    assert!(!doc_test.is_empty(), "no doc test on the front page");
    assert_eq!(in_readme, doc_test, "the README's example and the front page's doc test differ");
}
