//! Part of the driver study: whether copies made by compute kernels run beside another kernel on
//! one context. The driver's own copy (`glCopyBufferSubData`) and a kernel take their sum on one
//! context, barrier or not (`overlap.rs`), so a pipeline's GPU stage is its copy in, its kernel
//! and its copy out in turn. Dispatches with no barrier between them are not ordered, though, so
//! a copy kernel into or out of a persistently mapped buffer might share the GPU with the kernel
//! of another batch, the way a pipeline step needs: one batch's copy in, another's kernel and a
//! third's copy out, then one barrier. This times such steps against their parts in turn, and
//! checks what every copy wrote and what the kernels computed.

use std::fmt::Write as _;
use std::time::Instant;

use glow::HasContext;

use super::baseline::{self, Buffers, Linked, SaxpyInputs};
use super::error::driver_error;
use super::overlap::OverlapPlan;
use super::study::{copy, device_buffer, mapped, poll_and_delete, quantile, us, STAGING};
use super::{PlainGlError, ALL_BARRIERS};

/// A copy of `n` floats from `x` to `y`, four at a time, over a grid that strides (saxpy's
/// interface, so the baseline links it; `a` is 1). The blocks name their bindings: left to the
/// default, both would be binding 0, and `x` would read `y`.
const COPY_GLSL: &str = "#version 430\n\
    layout(local_size_x = 256) in;\n\
    layout(std430, binding = 0) readonly buffer X { vec4 x[]; };\n\
    layout(std430, binding = 1) buffer Y { vec4 y[]; };\n\
    uniform float a;\n\
    uniform uint n;\n\
    void main() {\n\
        uint stride = gl_NumWorkGroups.x * 256u;\n\
        for (uint i = gl_GlobalInvocationID.x; i < n / 4u; i += stride) {\n\
            y[i] = a == 1.0 ? x[i] : x[i] * a;\n\
        }\n\
    }\n";

/// Workgroups of a copy kernel: two per SM of an H100, few enough to leave room for another
/// kernel's workgroups beside them.
const COPY_GROUPS: u32 = 264;

/// Steps per timed run; the fence and its poll are shared by them.
const STEPS: usize = 8;

/// What one step of a way dispatches or copies, in order; `Barrier` orders what follows.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    Kernel,
    CopyKernelIn,
    CopyKernelOut,
    DriverCopyIn,
    Barrier,
}

const WAYS: [(&str, &[Part]); 9] = [
    ("kernel alone", &[Part::Kernel]),
    ("copy kernel in alone (mapped -> device)", &[Part::CopyKernelIn]),
    ("copy kernel out alone (device -> mapped)", &[Part::CopyKernelOut]),
    ("glCopyBufferSubData in alone", &[Part::DriverCopyIn]),
    ("copy kernel in, barrier, kernel", &[Part::CopyKernelIn, Part::Barrier, Part::Kernel]),
    ("copy kernel in beside kernel (no barrier)", &[Part::CopyKernelIn, Part::Kernel]),
    ("glCopyBufferSubData in beside kernel (no barrier)", &[Part::DriverCopyIn, Part::Kernel]),
    (
        "in, barrier, kernel, barrier, out (copy kernels)",
        &[Part::CopyKernelIn, Part::Barrier, Part::Kernel, Part::Barrier, Part::CopyKernelOut],
    ),
    ("in, out and kernel, no barrier between", &[Part::CopyKernelIn, Part::CopyKernelOut, Part::Kernel]),
];

/// The buffers the ways use: a kernel's, and a copy's in each direction.
struct Setup {
    kernel: Buffers,
    kernel_groups: [u32; 3],
    /// Mapped source -> device target.
    copy_in: Buffers,
    /// Device source -> mapped target.
    copy_out: Buffers,
    /// Bytes of each copy; the driver's copy uses `copy_in`'s buffers.
    copy_bytes: usize,
    out_ptr: *mut u8,
}

/// Times each way of [`WAYS`] and writes them to `out`, after checking the copies' and the
/// kernel's results.
pub(super) fn run(
    state: &mut baseline::State,
    program: &Linked,
    plan: &OverlapPlan,
    out: &mut String,
) -> Result<(), PlainGlError> {
    let copier = state.program(COPY_GLSL)?;
    let gl = state.gl();
    let inputs = SaxpyInputs { a: 1.0, x: vec![1.0; plan.step_floats], y: vec![0.0; plan.step_floats] };
    let kernel = Buffers::create(gl, &inputs)?;
    let mut made = Vec::new();
    let outcome = (|| {
        let copy_bytes = plan.copy_bytes;
        let floats = (copy_bytes / 4) as u32;
        let (in_source, in_ptr) = mapped(gl, copy_bytes, STAGING[0].bits)?;
        made.push(in_source);
        let in_target = device_buffer(gl, copy_bytes)?;
        made.push(in_target);
        let out_source = device_buffer(gl, copy_bytes)?;
        made.push(out_source);
        let (out_target, out_ptr) = mapped(gl, copy_bytes, STAGING[0].bits)?;
        made.push(out_target);
        // Whole numbers, exact as floats, so no copy could change a word by treating it as one.
        let words: Vec<u32> = (1..=floats).map(|i| (i as f32).to_bits()).collect();
        // SAFETY: the context is current on the study's thread; the mapping is coherent,
        // persistent and `copy_bytes` long, and nothing on the GPU uses it yet; `out_source`
        // holds `copy_bytes` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr() as *const u8, in_ptr, copy_bytes);
            std::ptr::write_bytes(out_ptr, 0, copy_bytes);
            gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(out_source));
            gl.buffer_sub_data_u8_slice(glow::COPY_WRITE_BUFFER, 0, bytemuck::cast_slice(&words));
            gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        }
        let setup = Setup {
            kernel: Buffers::over(kernel.x, kernel.y, plan.step_floats as u32),
            kernel_groups: plan.step_groups,
            copy_in: Buffers::over(in_source, in_target, floats),
            copy_out: Buffers::over(out_source, out_target, floats),
            copy_bytes,
            out_ptr,
        };
        let mut launched = 0usize;
        let mut rows = Vec::new();
        for (name, parts) in WAYS {
            let mut times = Vec::with_capacity(plan.reps);
            for _ in 0..plan.reps {
                let started = Instant::now();
                for _ in 0..STEPS {
                    // SAFETY: the context is current; programs and buffers are its own.
                    unsafe { step(gl, program, &copier, &setup, parts) };
                }
                poll_and_delete(gl, baseline::fence_and_flush(gl)?);
                times.push(started.elapsed() / STEPS as u32);
                launched += STEPS * parts.iter().filter(|part| **part == Part::Kernel).count();
            }
            rows.push((name, quantile(times.clone(), 0.1), quantile(times, 0.5)));
        }
        check(gl, &setup, &words, launched)?;
        Ok::<_, PlainGlError>(rows)
    })();
    // SAFETY: the context is current; every buffer is its own, deleted once, after the last
    // fence was polled (or after a failure, when nothing more is dispatched).
    unsafe {
        for buffer in made {
            gl.delete_buffer(buffer);
        }
    }
    kernel.delete(gl);
    let rows = outcome?;
    driver_error(gl, "the one-context copy study")?;
    let _ = writeln!(
        out,
        "\ncopy kernels beside a kernel on one context (a saxpy over {} floats; copies of {} B between a mapped \
         and a device buffer; {COPY_GROUPS} copy workgroups; µs per step of {STEPS}, p10 / median of {}):",
        plan.step_floats, plan.copy_bytes, plan.reps
    );
    for (name, p10, median) in rows {
        let _ = writeln!(out, "  {name:52} {:9.1} / {:9.1}", us(p10), us(median));
    }
    Ok(())
}

/// Dispatches or copies one step's parts, then a barrier.
///
/// # Safety
/// The context of `gl` is current; the programs and buffers are its own.
unsafe fn step(gl: &glow::Context, program: &Linked, copier: &Linked, setup: &Setup, parts: &[Part]) {
    // SAFETY: per this function's contract.
    unsafe {
        for part in parts {
            match part {
                Part::Kernel => baseline::dispatch(gl, program, &setup.kernel, 1.0, setup.kernel_groups),
                Part::CopyKernelIn => {
                    baseline::dispatch(gl, copier, &setup.copy_in, 1.0, [COPY_GROUPS, 1, 1])
                }
                Part::CopyKernelOut => {
                    baseline::dispatch(gl, copier, &setup.copy_out, 1.0, [COPY_GROUPS, 1, 1])
                }
                Part::DriverCopyIn => copy(gl, setup.copy_in.x, setup.copy_in.y, setup.copy_bytes),
                Part::Barrier => gl.memory_barrier(ALL_BARRIERS),
            }
        }
        gl.memory_barrier(ALL_BARRIERS);
    }
}

/// Checks every word both copies wrote and the kernel's count of launches.
fn check(gl: &glow::Context, setup: &Setup, words: &[u32], launched: usize) -> Result<(), PlainGlError> {
    let wrong = |what: String| PlainGlError::Driver { operation: what, code: 0, name: "wrong result" };
    let copied_in: Vec<f32> = setup.copy_in.read_y(gl);
    if let Some(at) = (0..words.len()).find(|&i| copied_in[i].to_bits() != words[i]) {
        return Err(wrong(format!("the one-context copy study's copy in: word {at} differs")));
    }
    // SAFETY: the last step's fence was polled, so the copies out are visible through the
    // coherent mapping, which holds `copy_bytes` bytes.
    let copied_out = unsafe { std::slice::from_raw_parts(setup.out_ptr as *const u32, setup.copy_bytes / 4) };
    if let Some(at) = (0..words.len()).find(|&i| copied_out[i] != words[i]) {
        return Err(wrong(format!(
            "the one-context copy study's copy out: word {at} differs ({} against {})",
            copied_out[at], words[at]
        )));
    }
    let y = setup.kernel.read_y(gl);
    let want = launched as f32;
    if y.first() != Some(&want) || y.last() != Some(&want) {
        return Err(wrong(format!(
            "the one-context copy study's kernels: y[0] is {:?}, {want} launches ran",
            y.first()
        )));
    }
    Ok(())
}
