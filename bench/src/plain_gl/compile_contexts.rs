//! A study of where cold program builds can run at once in one process: N distinct generated
//! kernels (the startup benchmark's op chains, as the backend would compile them) built
//!
//! - one by one on one context (compile, link, link status, binary);
//! - all started at once on one context with the driver's parallel compile
//!   (`GL_KHR_parallel_shader_compile`, completion polled), then each one's status and binary;
//! - on K independent contexts (not sharing objects), one thread each, every thread building
//!   its share and handing the binary back; the first context then loads every binary, which is
//!   how a program built elsewhere reaches the context that runs it.
//!
//! Each configuration builds kernels no other one built (the indices move on), so the driver's
//! in-process caches never serve one; its disk cache must be off for the figures to be cold
//! (`__GL_SHADER_DISK_CACHE=0`, `MESA_SHADER_CACHE_DISABLE=true`). `sparkle-bench
//! bench-compile-contexts` prints it. For benchmarking only.

use std::fmt::Write as _;
use std::time::Instant;

use glow::HasContext;
use sparkle::gl::PlainContext;

use super::PlainGlError;

/// A built program's binary, as the driver handed it over.
struct Built {
    format: u32,
    bytes: Vec<u8>,
}

/// One thread's context open (ms), its builds (ms) and their binaries.
type ThreadBuilds = (f64, f64, Vec<Built>);

/// What the study measures: `kernels` programs per configuration, contexts in `contexts`.
pub fn run(
    kernels: usize,
    contexts: &[usize],
    glsl: &dyn Fn(usize) -> String,
) -> Result<String, PlainGlError> {
    let opened = Instant::now();
    let main = PlainContext::open_from_env()?;
    let mut report = String::new();
    let _ = writeln!(
        report,
        "{} cold programs per configuration on {} (first context opened in {:.1} ms)",
        kernels,
        main.source(),
        ms(opened)
    );
    let mut next = 0usize;
    let mut take = |count: usize| {
        let first = next;
        next += count;
        (first..first + count).map(glsl).collect::<Vec<String>>()
    };

    // The driver's first builds pay for loading its compiler: not counted.
    for source in &take(4) {
        build(main.gl(), source)?;
    }
    let sources = take(kernels);
    let started = Instant::now();
    for source in &sources {
        build(main.gl(), source)?;
    }
    let one_by_one = ms(started);
    let _ = writeln!(
        report,
        "one by one, one context: {one_by_one:.1} ms ({:.2} ms a program)",
        one_by_one / kernels as f64
    );

    let sources = take(kernels);
    let started = Instant::now();
    let parallel = driver_parallel(main.gl(), &sources)?;
    let total = ms(started);
    let _ = writeln!(
        report,
        "driver's parallel compile, one context: {total:.1} ms ({:.2}x one by one; all started in {:.1}, \
         all complete at {:.1}, statuses and binaries {:.1} ms)",
        one_by_one / total,
        parallel.0,
        parallel.1,
        total - parallel.1
    );

    for &count in contexts {
        let count = count.max(1);
        let sources = take(kernels);
        let started = Instant::now();
        let shares: Vec<Vec<String>> =
            (0..count).map(|k| sources.iter().skip(k).step_by(count).cloned().collect()).collect();
        let results: Vec<Result<ThreadBuilds, PlainGlError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .iter()
                .map(|share| {
                    scope.spawn(move || {
                        let opening = Instant::now();
                        let context = PlainContext::open_from_env()?;
                        let open_ms = ms(opening);
                        let building = Instant::now();
                        let built = share.iter().map(|source| build(context.gl(), source)).collect::<Result<
                            Vec<_>,
                            _,
                        >>(
                        )?;
                        Ok((open_ms, ms(building), built))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or(Err(PlainGlError::JobPanicked)))
                .collect()
        });
        let built_at = ms(started);
        let mut opens = Vec::new();
        let mut builds = Vec::new();
        let mut binaries = Vec::new();
        for result in results {
            let (open_ms, build_ms, built) = result?;
            opens.push(open_ms);
            builds.push(build_ms);
            binaries.extend(built);
        }
        let loading = Instant::now();
        for binary in &binaries {
            load(main.gl(), binary)?;
        }
        let load_ms = ms(loading);
        let total = ms(started);
        let _ = writeln!(
            report,
            "{count} independent contexts: {total:.1} ms ({:.2}x one by one): opens {} ms, builds {} ms, \
             all built at {built_at:.1}, {} binaries loaded on the first context in {load_ms:.1} ms",
            one_by_one / total,
            list(&opens),
            list(&builds),
            binaries.len()
        );
    }
    Ok(report)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn list(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.0}")).collect::<Vec<_>>().join("/")
}

/// Compiles and links `glsl`, checks both, and returns the binary.
fn build(gl: &glow::Context, glsl: &str) -> Result<Built, PlainGlError> {
    let (program, shader) = start(gl, glsl)?;
    finish(gl, program, shader)
}

fn start(gl: &glow::Context, glsl: &str) -> Result<(glow::NativeProgram, glow::NativeShader), PlainGlError> {
    // SAFETY: the context is current on this thread (PlainContext opened it here); every name
    // used is created right here.
    unsafe {
        let shader = gl.create_shader(glow::COMPUTE_SHADER).map_err(PlainGlError::Compile)?;
        gl.shader_source(shader, glsl);
        gl.compile_shader(shader);
        let program = gl.create_program().map_err(PlainGlError::Link)?;
        gl.program_binary_retrievable_hint(program, true);
        gl.attach_shader(program, shader);
        gl.link_program(program);
        Ok((program, shader))
    }
}

fn finish(
    gl: &glow::Context,
    program: glow::NativeProgram,
    shader: glow::NativeShader,
) -> Result<Built, PlainGlError> {
    // SAFETY: the context is current on this thread and created both names (`start`).
    unsafe {
        let linked = gl.get_shader_compile_status(shader) && gl.get_program_link_status(program);
        let log = if linked {
            String::new()
        } else {
            gl.get_shader_info_log(shader) + &gl.get_program_info_log(program)
        };
        gl.detach_shader(program, shader);
        gl.delete_shader(shader);
        let binary = if linked { gl.get_program_binary(program) } else { None };
        gl.delete_program(program);
        match binary {
            Some(binary) if !binary.buffer.is_empty() => {
                Ok(Built { format: binary.format, bytes: binary.buffer })
            }
            _ if !linked => Err(PlainGlError::Link(format!("a generated kernel did not build: {log}"))),
            _ => Err(PlainGlError::Link("the driver gave no program binary".into())),
        }
    }
}

/// Every build started at once, then completion polled: (ms to start them all, ms until all
/// were complete).
fn driver_parallel(gl: &glow::Context, sources: &[String]) -> Result<(f64, f64), PlainGlError> {
    let started = Instant::now();
    // SAFETY: the context is current on this thread; 0xFFFFFFFF asks for the driver's maximum.
    unsafe { gl.max_shader_compiler_threads(u32::MAX) };
    let names = sources.iter().map(|source| start(gl, source)).collect::<Result<Vec<_>, _>>()?;
    let all_started = ms(started);
    // SAFETY: as above; the programs were created on this context.
    while !names.iter().all(|&(program, _)| unsafe { gl.get_program_completion_status(program) }) {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let complete = ms(started);
    for (program, shader) in names {
        finish(gl, program, shader)?;
    }
    Ok((all_started, complete))
}

/// Loads `binary` into a new program on `gl` and checks that it linked.
fn load(gl: &glow::Context, binary: &Built) -> Result<(), PlainGlError> {
    // SAFETY: the context is current on this thread; the program is created and deleted here.
    unsafe {
        let program = gl.create_program().map_err(PlainGlError::Link)?;
        gl.program_binary(
            program,
            &glow::ProgramBinary { buffer: binary.bytes.clone(), format: binary.format },
        );
        let linked = gl.get_program_link_status(program);
        gl.delete_program(program);
        if linked {
            Ok(())
        } else {
            Err(PlainGlError::Link("a binary built on another context did not load".into()))
        }
    }
}
