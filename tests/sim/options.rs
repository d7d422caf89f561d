//! The OpenCL C compiler options a kernel spec passes, on the simulated gfx1100: the vetted list
//! compiles and takes effect (language versions, optimization levels, math options, `-D`, `-I`
//! with the include directory's headers), anything else is refused before anything is compiled,
//! listing what is accepted; options and headers are part of the program's identity, so a
//! different option or an edited header never reuses an older program; what the simulator
//! cannot run (`-cl-denorms-are-zero`) is refused naming the option.

use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::Arg;
use sparkle::{ErrorKind, Runtime};

const TIMEOUT: Duration = Duration::from_secs(120);

fn sim() -> Runtime {
    Runtime::open_backend("amdgpu-sim", &CacheConfig::memory_only()).expect("the simulator opens anywhere")
}

const SOURCE: &str = "
#include \"params.h\"
__kernel void opts(__global int *out) {
    uint i = get_global_id(0);
    float x = (float)i;
    out[i] = SCALE * (int)i + OFFSET + FROM_HEADER + (int)(x * 0.5f + x * 0.25f);
}
";

/// Runs `opts` with `options` over 64 work-items.
fn run(rt: &Runtime, options: &[&str]) -> sparkle::Result<Vec<i32>> {
    let mut spec =
        KernelSpec::new("opts", [64, 1, 1]).opencl("opts", SOURCE).storage("out", Access::ReadWrite);
    for option in options {
        spec = spec.opencl_option(*option);
    }
    let program = rt.program(&spec)?;
    let out = rt.create_buffer(64 * 4, BufferUsage::Output)?;
    rt.dispatch(&program, &[Arg::Buffer(&out)], [1, 1, 1])?.wait(TIMEOUT)?;
    rt.download(&out)
}

fn want(scale: i32, offset: i32, from_header: i32) -> Vec<i32> {
    (0..64).map(|i| scale * i + offset + from_header + (i as f32 * 0.75) as i32).collect()
}

fn headers(value: i32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("params.h"), format!("#define FROM_HEADER {value}\n")).unwrap();
    dir
}

#[test]
fn the_vetted_options_compile_and_take_effect() {
    let rt = sim();
    let dir = headers(100);
    let include = format!("-I{}", dir.path().display());
    // Several options in one entry, as a clBuildProgram string; -D with and without a value.
    let got = run(
        &rt,
        &["-cl-std=CL3.0 -cl-mad-enable -cl-no-signed-zeros -O2", "-D SCALE=3", "-DOFFSET", &include],
    )
    .unwrap();
    assert_eq!(got, want(3, 1, 100));
    let got = run(
        &rt,
        &[
            "-cl-std=CL1.2 -cl-fast-relaxed-math -cl-finite-math-only -cl-unsafe-math-optimizations",
            "-cl-single-precision-constant -O0 -w",
            "-DSCALE=2 -DOFFSET=7",
            "-I",
            &dir.path().display().to_string(),
        ],
    )
    .unwrap();
    assert_eq!(got, want(2, 7, 100));
    let got =
        run(&rt, &["-cl-std=CL2.0 -cl-opt-disable -O1 -DSCALE=-1 -DOFFSET=0", &include, "-mwavefrontsize64"])
            .unwrap();
    assert_eq!(got, want(-1, 0, 100));
}

#[test]
fn other_options_are_refused_before_compiling_listing_the_accepted_ones() {
    let rt = sim();
    for (options, names) in [
        (vec!["-DSCALE=1", "-Xclang -load"], "-Xclang"),
        (vec!["-o /tmp/elsewhere.o"], "-o"),
        (vec!["-mcpu=gfx90a"], "-mcpu=gfx90a"),
        (vec!["-cl-std=CL1.1"], "-cl-std=CL1.1"),
        (vec!["-I include"], "include"),
        (vec!["-D 2BAD"], "2BAD"),
    ] {
        let err = run(&rt, &options).expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidKernel, "{err}");
        let message = err.to_string();
        assert!(message.contains("kernel `opts`") && message.contains(names), "{message}");
        if names.starts_with('-') && !names.starts_with("-cl-std") {
            assert!(message.contains("-cl-std=CL3.0") && message.contains("-mwavefrontsize64"), "{message}");
        }
    }
    assert_eq!(rt.cache_stats().compiles, 0, "nothing was compiled");
}

#[test]
fn options_and_included_headers_are_part_of_the_programs_identity() {
    let rt = sim();
    let dir = headers(10);
    let include = format!("-I{}", dir.path().display());
    assert_eq!(run(&rt, &["-DSCALE=1 -DOFFSET=0", &include]).unwrap(), want(1, 0, 10));
    // Another value of a -D option: another program.
    assert_eq!(run(&rt, &["-DSCALE=2 -DOFFSET=0", &include]).unwrap(), want(2, 0, 10));
    // The same options again: the same program, from the cache.
    let compiles = rt.cache_stats().compiles;
    assert_eq!(run(&rt, &["-DSCALE=1 -DOFFSET=0", &include]).unwrap(), want(1, 0, 10));
    assert_eq!(rt.cache_stats().compiles, compiles, "a program with the same options is not compiled again");
    // An edited header: compiled again, with the new value.
    std::fs::write(dir.path().join("params.h"), "#define FROM_HEADER 20\n").unwrap();
    assert_eq!(run(&rt, &["-DSCALE=1 -DOFFSET=0", &include]).unwrap(), want(1, 0, 20));
    assert_eq!(rt.cache_stats().compiles, compiles + 1);
}

#[test]
fn flushing_denormals_is_refused_by_the_simulator_naming_the_option() {
    let rt = sim();
    let dir = headers(0);
    let err =
        run(&rt, &["-cl-denorms-are-zero -DSCALE=1 -DOFFSET=0", &format!("-I{}", dir.path().display())])
            .expect_err("the simulator keeps denormals");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("-cl-denorms-are-zero"), "{err}");
}
