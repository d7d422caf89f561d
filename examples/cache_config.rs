//! Configuring the program cache: a private cache folder with its own bounds, then the same
//! folder shipped read-only to a fleet machine, which loads every program from it without
//! compiling and without writing a byte; the statistics show each step.
//!
//! ```sh
//! cargo run --example cache_config
//! ```
//!
//! The two steps run as two processes (this program starts itself twice): a program cache
//! lives as long as its runtime, and a later process, like another machine, has only what is
//! on disk. The same settings come from the environment with `CacheConfig::from_env()`:
//! `SPARKLE_CACHE_DIR`, `SPARKLE_CACHE_MAX_SIZE`, `SPARKLE_CACHE_MAX_AGE_DAYS`,
//! `SPARKLE_CACHE_READ_ONLY=1`, and `SPARKLE_CACHE_REMOTE` for a fleet cache shared over S3 or
//! Redis (the guide's cache page, docs/guide/cache.md). The kernels are GLSL (the `gl` backend).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, SystemTime};

use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};

type Failure = Box<dyn std::error::Error>;

/// Three kernels: `v[i] = v[i] * k + i` for k = 1, 2, 3 (a define, so three programs).
fn kernels() -> Vec<KernelSpec> {
    (1..=3)
        .map(|k| {
            KernelSpec::new(format!("affine_{k}"), [64, 1, 1])
                .glsl(
                    "layout(std430, binding = 0) buffer V { float v[]; };
                     uniform uint n;
                     void main() {
                         uint i = gl_GlobalInvocationID.x;
                         if (i < n) v[i] = v[i] * float(K) + float(i);
                     }",
                )
                .define("K", k)
                .storage("v", Access::ReadWrite)
                .scalar("n", ScalarType::U32)
        })
        .collect()
}

fn main() -> ExitCode {
    // Errors are printed with their message (a compile error carries the compiler's log).
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode, Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [step, dir] if step == "seed" => seed(Path::new(dir)),
        [step, dir] if step == "fleet" => fleet(Path::new(dir)),
        [] => both_steps(),
        _ => Err("usage: cache_config [seed DIR | fleet DIR]".into()),
    }
}

/// Runs both steps, each in a process of its own, over a fresh folder, and checks that the
/// read-only step left the folder exactly as it found it.
fn both_steps() -> Result<ExitCode, Failure> {
    let folder = tempfile::tempdir()?;
    let this_program = std::env::current_exe()?;
    let step = |name: &str| -> Result<bool, Failure> {
        println!("--- {name} ---");
        Ok(Command::new(&this_program).arg(name).arg(folder.path()).status()?.success())
    };
    if !step("seed")? {
        return Ok(ExitCode::FAILURE);
    }
    let before = snapshot(folder.path())?;
    if !step("fleet")? {
        return Ok(ExitCode::FAILURE);
    }
    if snapshot(folder.path())? != before {
        eprintln!("MISMATCH: the read-only folder changed");
        return Ok(ExitCode::FAILURE);
    }
    println!("the read-only folder is unchanged ({} files)", before.len());
    println!("cache configuration: seeded once, then every program loaded without a compile");
    Ok(ExitCode::SUCCESS)
}

/// Step 1, a build machine: a private cache folder with its own bounds. Every kernel is a miss
/// and is compiled once, then written to disk; asking again is a memory hit.
fn seed(dir: &Path) -> Result<ExitCode, Failure> {
    let config = CacheConfig {
        max_disk_bytes: 256 << 20,                         // SPARKLE_CACHE_MAX_SIZE=256M
        max_age: Some(Duration::from_secs(7 * 24 * 3600)), // SPARKLE_CACHE_MAX_AGE_DAYS=7
        ..CacheConfig::in_dir(dir)                         // SPARKLE_CACHE_DIR=…
    };
    let runtime = Runtime::open_backend("gl", &config)?;
    println!("cache folder of {}: {}", runtime.info().name, show(runtime.cache_dir()));
    for kernel in kernels() {
        runtime.program(&kernel)?;
    }
    runtime.program(&kernels()[0])?; // again: served from memory
    check_results(&runtime)?;
    let stats = runtime.cache_stats();
    print!("{stats}");
    let count = kernels().len() as u64;
    if (stats.compiles, stats.disk_writes, stats.disk_hits) != (count, count, 0) || stats.memory_hits == 0 {
        eprintln!("MISMATCH: want {count} compiles and disk writes, no disk hit, memory hits; got {stats:?}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Step 2, a fleet machine with the folder shipped read-only (a folder this process cannot
/// write is used read-only by itself too): every kernel is a disk hit, nothing is compiled,
/// and nothing in the folder is written, removed or touched.
fn fleet(dir: &Path) -> Result<ExitCode, Failure> {
    let config = CacheConfig { read_only: true, ..CacheConfig::in_dir(dir) }; // SPARKLE_CACHE_READ_ONLY=1
    let runtime = Runtime::open_backend("gl", &config)?;
    for kernel in kernels() {
        runtime.program(&kernel)?;
    }
    check_results(&runtime)?;
    let stats = runtime.cache_stats();
    print!("{stats}");
    let count = kernels().len() as u64;
    if (stats.disk_hits, stats.compiles, stats.disk_writes) != (count, 0, 0) {
        eprintln!("MISMATCH: want {count} disk hits, no compile and no write; got {stats:?}");
        return Ok(ExitCode::FAILURE);
    }
    println!(
        "{count} disk hits, no compile: {:.3} s of compiling saved",
        stats.compile_time_saved.as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs every kernel, so that a program that came from the cache is seen to compute right.
fn check_results(runtime: &Runtime) -> Result<(), Failure> {
    let n = 500u32;
    for (k, kernel) in (1..=3).zip(kernels()) {
        let data = runtime.upload(&vec![1.0f32; n as usize], BufferUsage::InOut)?;
        let program = runtime.program(&kernel)?;
        runtime.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(n)], [n.div_ceil(64), 1, 1])?;
        let got: Vec<f32> = runtime.download(&data)?;
        let want: Vec<f32> = (0..n).map(|i| k as f32 + i as f32).collect();
        if got != want {
            return Err(format!("MISMATCH: {} computed {:?}…", kernel.name, &got[..4.min(got.len())]).into());
        }
    }
    Ok(())
}

/// Every file under `root` with its size and modification time (a cache entry's last use).
fn snapshot(root: &Path) -> Result<BTreeMap<PathBuf, (u64, SystemTime)>, Failure> {
    let mut files = BTreeMap::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let entry = entry?;
            let metadata = entry.metadata()?;
            if metadata.is_dir() {
                folders.push(entry.path());
            } else {
                files.insert(entry.path(), (metadata.len(), metadata.modified()?));
            }
        }
    }
    Ok(files)
}

fn show(dir: Option<PathBuf>) -> String {
    dir.map_or_else(|| "none (memory only)".into(), |dir| dir.display().to_string())
}
