//! A developer probe for kernel tuning: times GLSL compute programs read from files at run
//! time, so that shader experiments need no rebuild. Each line of the plan file (argument 1) is
//! one experiment:
//!
//! ```text
//! micro  LABEL FILE THREADS GROUPS FLOPS_PER_INVOCATION [DEFINE=VALUE ...]
//! sgemm  LABEL FILE M N K               DEFINE=VALUE ...
//! conv2d LABEL FILE N C H W K           DEFINE=VALUE ...
//! saxpy  LABEL FILE N WORKGROUP GROUPS   [DEFINE=VALUE ...]
//! ```
//!
//! `micro` runs a program with one read-write storage buffer `outp` (THREADS·GROUPS floats) and
//! reports its rate from FLOPS_PER_INVOCATION. `sgemm`/`conv2d` build a variant of the GEMM core
//! from the defines (BM BN BK TM TN VA VB WARP UNROLL SPLIT FRAG STORE_ALWAYS KSLICE FIX_M FIX_N
//! FIX_K TEXELS; others are passed through), swap in FILE as its source, check the result against the
//! CPU reference and time it as `sparkle tune` times its leaders (back to back, after warming up
//! until the GPU time settles; a single dispatch where the device cannot time batches). `saxpy`
//! builds FILE with bindings `x` (read) and `y` (read-write) and scalars `a` and `n`, dispatches
//! GROUPS workgroups of WORKGROUP invocations over N floats, checks every output against the CPU
//! and times it the same way, each launch ordered after the one before (it reads the `y` that
//! one wrote); the probe's own defines PAD_BEFORE=BYTES and PAD_BETWEEN=BYTES hold buffers
//! allocated before `x` and between `x` and `y`, and FREED=COUNT:BYTES writes and frees that
//! many buffers first, to move the operands in memory. `mimic LABEL N WG PT VEC PRE SEED` times
//! the suite's saxpy variant step by step as `sparkle bench` does (PRE=1: the bench's 4M-float
//! problem first). Lines starting with `#` are skipped.

use std::time::Duration;

use sparkle::suite::gemm::GemmVariant;
use sparkle::suite::{self, conv2d, sgemm, timing, DISPATCH_TIMEOUT};
use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let plan_path = std::env::args().nth(1).ok_or("usage: glsl_probe PLAN_FILE")?;
    let plan = std::fs::read_to_string(&plan_path)?;
    let runtime = Runtime::from_env()?;
    println!("device: {}", runtime.info().name);
    let mut warmed = false;
    for line in plan.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let outcome = match words.first().copied() {
            Some("micro") => micro(&runtime, &words[1..], &mut warmed),
            Some(kind @ ("sgemm" | "conv2d")) => gemm(&runtime, kind, &words[1..], &mut warmed),
            Some("saxpy") => saxpy(&runtime, &words[1..]),
            Some("mimic") => mimic(&runtime, &words[1..]),
            _ => Err(format!("unknown experiment: {line}").into()),
        };
        if let Err(err) = outcome {
            println!("{:<40} FAILED: {err}", words.get(1).copied().unwrap_or("?"));
        }
    }
    Ok(())
}

fn defines(words: &[&str]) -> Result<Vec<(String, String)>, Failure> {
    words
        .iter()
        .map(|w| {
            w.split_once('=')
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("not NAME=VALUE: {w}").into())
        })
        .collect()
}

fn micro(runtime: &Runtime, words: &[&str], warmed: &mut bool) -> Result<(), Failure> {
    let [label, file, threads, groups, flops, rest @ ..] = words else {
        return Err("micro LABEL FILE THREADS GROUPS FLOPS [DEFINES]".into());
    };
    let (threads, groups, flops): (u32, u32, f64) = (threads.parse()?, groups.parse()?, flops.parse()?);
    let mut spec = KernelSpec::new(*label, [threads, 1, 1])
        .glsl(std::fs::read_to_string(file)?)
        .storage("outp", Access::ReadWrite);
    for (name, value) in defines(rest)? {
        spec = spec.define(name, value);
    }
    let program = runtime.program(&spec)?;
    let out = runtime.create_buffer(u64::from(threads) * u64::from(groups) * 4, BufferUsage::Output)?;
    let run = |timed: bool| -> Result<Option<Duration>, Failure> {
        let mut commands = runtime.commands();
        commands.dispatch(&program, &[Arg::Buffer(&out)], [groups, 1, 1])?;
        let submission = if timed { runtime.submit_timed(commands)? } else { runtime.submit(commands)? };
        submission.wait(DISPATCH_TIMEOUT)?;
        Ok(submission.gpu_time())
    };
    let started = std::time::Instant::now();
    let warm = if *warmed { Duration::from_millis(50) } else { Duration::from_millis(700) };
    while started.elapsed() < warm {
        run(false)?;
    }
    *warmed = true;
    let mut times: Vec<Duration> = (0..15).filter_map(|_| run(true).transpose()).collect::<Result<_, _>>()?;
    times.sort();
    let median = times.get(times.len() / 2).copied().ok_or("no GPU time")?;
    let total = flops * f64::from(threads) * f64::from(groups);
    println!(
        "{label:<40} {:9.4} ms {:8.2} TFLOP/s",
        median.as_secs_f64() * 1e3,
        total / median.as_secs_f64() / 1e12
    );
    Ok(())
}

fn gemm(runtime: &Runtime, kind: &str, words: &[&str], warmed: &mut bool) -> Result<(), Failure> {
    let sizes_len = if kind == "sgemm" { 3 } else { 5 };
    if words.len() < 2 + sizes_len {
        return Err(format!("{kind} LABEL FILE SIZES... DEFINES").into());
    }
    let (label, file) = (words[0], words[1]);
    let sizes: Vec<usize> = words[2..2 + sizes_len].iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
    let defs = defines(&words[2 + sizes_len..])?;
    let get = |name: &str, default: u32| -> Result<u32, Failure> {
        defs.iter().rev().find(|(n, _)| n == name).map_or(Ok(default), |(_, v)| Ok(v.parse()?))
    };
    let variant = GemmVariant {
        bm: get("BM", 128)?,
        bn: get("BN", 128)?,
        bk: get("BK", 8)?,
        tm: get("TM", 8)?,
        tn: get("TN", 8)?,
        va: get("VA", 4)?,
        vb: get("VB", 4)?,
        warp: get("WARP", 0)?,
        unroll: get("UNROLL", 1)?,
        frag: get("FRAG", 0)?,
        split: get("SPLIT", 1)?,
        store_always: get("STORE_ALWAYS", 0)?,
        kslice: get("KSLICE", 1)?,
        fixed: [get("FIX_M", 0)?, get("FIX_N", 0)?, get("FIX_K", 0)?],
        texels: get("TEXELS", 0)?,
    };
    if !variant.well_formed() {
        return Err(format!("{variant} is not a well-formed variant").into());
    }
    let mut spec =
        if kind == "sgemm" { sgemm::variant_spec(&variant) } else { conv2d::variant_spec(&variant) };
    spec.sources.clear();
    spec = spec.glsl(std::fs::read_to_string(file)?);
    // The defines the variant's spec already has came from the plan; the rest pass through.
    let core: Vec<String> = spec.defines.iter().map(|(name, _)| name.clone()).collect();
    for (name, value) in defs.iter().filter(|(n, _)| !core.contains(n)) {
        spec = spec.define(name, value);
    }
    let case = suite::case(kind, &sizes, 1, &runtime.info().limits)?;
    let program = runtime.program(&spec)?;
    let fresh = case.upload_for(runtime, &program)?;
    case.dispatch(runtime, &program, &fresh)?.wait(DISPATCH_TIMEOUT)?;
    let verdict =
        suite::verify_sampled(case.as_ref(), program.spec(), &case.download(runtime, &fresh)?, 4096);
    drop(fresh);
    if !verdict.passed() {
        return Err(verdict.to_string().into());
    }
    let sets =
        timing::upload_copies(runtime, case.as_ref(), Some(&program), timing::copies_for(case.as_ref()))?;
    // As the tuner times its leaders and the bench its kernels: warmed until the GPU time has
    // settled, then back to back (about 20 ms per batch).
    timing::warm_until_steady(runtime, &program, case.as_ref(), &sets, Duration::from_millis(600))?;
    *warmed = true;
    let single = timing::time(runtime, &program, case.as_ref(), &sets, 5, Duration::from_millis(60))?;
    let launches = timing::launches_for(single.best());
    let seconds =
        timing::back_to_back(runtime, &program, case.as_ref(), &sets, launches, Duration::from_millis(500))?
            .unwrap_or_else(|| single.best())
            .as_secs_f64();
    println!(
        "{label:<40} {:9.4} ms {:8.2} TFLOP/s  {variant}",
        seconds * 1e3,
        case.work().flops / seconds / 1e12
    );
    Ok(())
}

fn saxpy(runtime: &Runtime, words: &[&str]) -> Result<(), Failure> {
    let [label, file, n, workgroup, groups, rest @ ..] = words else {
        return Err("saxpy LABEL FILE N WORKGROUP GROUPS [DEFINES]".into());
    };
    let (n, workgroup, groups): (usize, u32, u32) = (n.parse()?, workgroup.parse()?, groups.parse()?);
    let mut spec = KernelSpec::new(*label, [workgroup, 1, 1])
        .glsl(std::fs::read_to_string(file)?)
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadWrite)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);
    let mut pads = (0u64, 0u64);
    for (name, value) in defines(rest)? {
        match name.as_str() {
            "PAD_BEFORE" => pads.0 = value.parse()?,
            "PAD_BETWEEN" => pads.1 = value.parse()?,
            "FREED" => {
                // COUNT:BYTES buffers written and freed before the operands are allocated.
                let (count, bytes) = value.split_once(':').ok_or("FREED=COUNT:BYTES")?;
                let floats = vec![1.0f32; bytes.parse::<usize>()? / 4];
                let freed: Vec<_> = (0..count.parse::<usize>()?)
                    .map(|_| runtime.upload(&floats, BufferUsage::InOut))
                    .collect::<Result<_, _>>()?;
                drop(freed);
            }
            _ => spec = spec.define(name, value),
        }
    }
    let program = runtime.program(&spec)?;
    let problem = suite::saxpy::Saxpy::random(n, 7);
    let pad = |bytes: u64| (bytes > 0).then(|| runtime.create_buffer(bytes, BufferUsage::InOut)).transpose();
    let _before = pad(pads.0)?;
    let x = runtime.upload(&problem.x, BufferUsage::Input)?;
    let _between = pad(pads.1)?;
    let y = runtime.upload(&problem.y, BufferUsage::InOut)?;
    let record = |commands: &mut sparkle::Commands| {
        let n = u32::try_from(n).map_err(|_| "n does not fit u32")?;
        commands.dispatch(
            &program,
            &[Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(problem.a), Arg::U32(n)],
            [groups, 1, 1],
        )?;
        Ok::<(), Failure>(())
    };
    let mut commands = runtime.commands();
    record(&mut commands)?;
    runtime.submit(commands)?.wait(DISPATCH_TIMEOUT)?;
    let out: Vec<f32> = runtime.download(&y)?;
    // Every output, against the suite's own reference and rounding bound.
    let verdict = suite::verify_sampled(&problem, &spec, &out, n);
    if !verdict.passed() {
        return Err(verdict.to_string().into());
    }
    // As the tuner and the bench time saxpy: warmed, then batches of about 20 ms back to back.
    // GPU time per launch where the device's timer queries are plausible, else wall time.
    let batch = |launches: usize| -> Result<(Duration, &'static str), Failure> {
        let started = std::time::Instant::now();
        let gpu = timing::timed_launches(runtime, launches, |commands, _| {
            record(commands)
                .map_err(|err| sparkle::Error::new(sparkle::ErrorKind::InvalidArgument, err.to_string()))
        })?;
        Ok(match gpu {
            Some(per) => (per, "GPU"),
            None => (started.elapsed() / launches.max(1) as u32, "wall"),
        })
    };
    let started = std::time::Instant::now();
    let mut launches = 10;
    while started.elapsed() < Duration::from_millis(600) {
        launches = timing::launches_for(batch(launches)?.0);
    }
    let mut times = Vec::new();
    let mut clock = "GPU";
    for _ in 0..7 {
        let (time, kind) = batch(launches)?;
        times.push(time);
        clock = kind;
    }
    times.sort();
    let (median, fastest, slowest) = (times[times.len() / 2], times[0], times[times.len() - 1]);
    println!(
        "{label:<40} {:9.4} ms (min {:.4}, max {:.4}) {:6.3} TB/s  {launches} launches, {clock} time",
        median.as_secs_f64() * 1e3,
        fastest.as_secs_f64() * 1e3,
        slowest.as_secs_f64() * 1e3,
        12.0 * n as f64 / median.as_secs_f64() / 1e12
    );
    Ok(())
}

/// `mimic LABEL N WG PT VEC PRE SEED`: saxpy timed step by step as `sparkle bench` times it.
fn mimic(runtime: &Runtime, words: &[&str]) -> Result<(), Failure> {
    let [label, n, wg, pt, vec, pre, seed] = words else {
        return Err("mimic LABEL N WG PT VEC PRE SEED".into());
    };
    let (n, seed): (usize, u64) = (n.parse()?, seed.parse()?);
    let limits = runtime.info().limits.clone();
    let step = |case: &dyn suite::Case, spec: &KernelSpec, what: &str| -> Result<(), Failure> {
        let program = runtime.program(spec)?;
        let fresh = case.upload_for(runtime, &program)?;
        case.dispatch(runtime, &program, &fresh)?.wait(DISPATCH_TIMEOUT)?;
        let verdict = suite::verify_sampled(case, program.spec(), &case.download(runtime, &fresh)?, 20_000);
        drop(fresh);
        let sets = timing::upload_copies(runtime, case, Some(&program), timing::copies_for(case))?;
        timing::warm(runtime, &program, case, &sets, Duration::from_millis(600))?;
        let b0 = timing::back_to_back(runtime, &program, case, &sets, 74, Duration::from_secs(1))?;
        let timed = timing::time(runtime, &program, case, &sets, 30, Duration::from_secs(2))?;
        let launches = timing::launches_for(timed.best());
        let b1 = timing::back_to_back(runtime, &program, case, &sets, launches, Duration::from_secs(2))?;
        let b2 = timing::back_to_back(runtime, &program, case, &sets, 74, Duration::from_secs(1))?;
        let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
        println!(
            "{label:<24} {what:<10} {} after warm {:.4}  single {:.4}  b2b({launches}) {:.4}  b2b(74) {:.4}",
            verdict.passed(),
            ms(b0),
            ms(timed.gpu),
            ms(b1),
            ms(b2)
        );
        Ok(())
    };
    if *pre == "1" {
        let small = suite::case("saxpy", &[1 << 22], seed, &limits)?;
        step(small.as_ref(), &small.default_spec(runtime.info()), "4M first")?;
    }
    let case = suite::case("saxpy", &[n], seed, &limits)?;
    let variant =
        suite::saxpy::SaxpyVariant { workgroup: wg.parse()?, per_thread: pt.parse()?, vec: vec.parse()? };
    step(case.as_ref(), &variant.spec(), "target")
}
