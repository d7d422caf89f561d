//! The reference the overhead benchmark (`sparkle-bench bench-overhead`) compares the gl backend
//! against: a plain loop that makes, directly with glow on a context of its own on the same EGL
//! device, the same GL calls the gl backend makes for the same work — no runtime, no validation,
//! no cache, no GL thread in between. It is for benchmarking only; applications use
//! [`sparkle::Runtime`].
//!
//! It runs kernels with saxpy's interface (storage buffers `x` and `y`, uniforms `a` and `n`),
//! compiled from exactly the GLSL text the gl backend hands its driver, so both sides run the
//! same program, and issues what the backend's `submit.rs` and `memory.rs` issue:
//! - [`Baseline::dispatch_loop`]: `glGetError` once, then per dispatch `glUseProgram`, two
//!   `glBindBufferRange`, two uniforms, `glDispatchCompute`, `glGetError`, `glMemoryBarrier`
//!   (the backend's barrier bits); one fence at the end;
//! - [`Baseline::round_trips`]: `glGetError`, one such dispatch and `glGetError`, the barrier,
//!   `glFenceSync`, `glFlush`, `glClientWaitSync` until it signals, then `glBindBuffer`,
//!   `glGetBufferSubData` of `y`, `glBindBuffer`, `glGetError`.
//!
//! Times are taken on the baseline's own thread around the GL calls. Results are returned for
//! the caller to check; nothing here judges them.
//!
//! The context lives on one thread for the rest of the process, as the gl backend's does: a GL
//! context is current on one thread, and NVIDIA's driver crashed when contexts were made and
//! destroyed on several threads of one process. Between calls the thread waits for work and makes
//! no GL call, so process exit never races it.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use glow::HasContext;

use sparkle::gl::{gl_error_name, PlainContext};
use sparkle::KernelSpec;

use super::error::driver_error;
use super::{PlainGlError, ALL_BARRIERS};

/// How long one wait for the GPU may take before the baseline gives up.
const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// Longest single `glClientWaitSync` (its timeout is a GLint of nanoseconds in glow).
const WAIT_SLICE_NS: i32 = 1_000_000_000;

type Job = Box<dyn FnOnce(&mut State) + Send>;

/// The process's baseline thread, started on first use.
static WORKER: Mutex<Option<Worker>> = Mutex::new(None);

#[derive(Clone)]
struct Worker {
    jobs: mpsc::Sender<Job>,
    renderer: String,
    source: String,
}

pub(super) struct State {
    context: PlainContext,
    /// Linked programs by GLSL text, kept for the thread's life.
    programs: HashMap<String, Linked>,
}

#[derive(Clone, Copy)]
pub(super) struct Linked {
    program: glow::NativeProgram,
    x_binding: u32,
    y_binding: u32,
    a: glow::NativeUniformLocation,
    n: glow::NativeUniformLocation,
}

/// A handle to the plain GL loop on its own context.
#[derive(Clone)]
pub struct Baseline {
    worker: Worker,
}

/// A kernel with saxpy's interface and the grid to dispatch it over.
#[derive(Debug, Clone)]
pub struct BaselineKernel {
    pub spec: KernelSpec,
    pub groups: [u32; 3],
}

/// The inputs of `y = a·x + y`.
#[derive(Debug, Clone)]
pub struct SaxpyInputs {
    pub a: f32,
    pub x: Vec<f32>,
    pub y: Vec<f32>,
}

/// One timed run of [`Baseline::dispatch_loop`].
#[derive(Debug, Clone)]
pub struct LoopRun {
    /// Until the last dispatch call returned.
    pub issue: Duration,
    /// Until the fence after the last dispatch signalled.
    pub total: Duration,
    /// `y` after every dispatch ran.
    pub y: Vec<f32>,
}

/// The runs of [`Baseline::round_trips`], in order.
#[derive(Debug, Clone)]
pub struct RoundTrips {
    /// Dispatch → fence wait → read back, per run, with the time of each step.
    pub times: Vec<RoundTripSteps>,
    /// `y` as read back after each run (run `k` has seen `k + 1` dispatches).
    pub results: Vec<Vec<f32>>,
}

impl Baseline {
    /// The plain loop's context, on the EGL device the gl backend would pick
    /// (`SPARKLE_EGL_DEVICE`, else the first hardware device).
    pub fn open() -> Result<Baseline, PlainGlError> {
        let mut worker = WORKER.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(worker) = worker.as_ref() {
            return Ok(Baseline { worker: worker.clone() });
        }
        let started = spawn()?;
        *worker = Some(started.clone());
        Ok(Baseline { worker: started })
    }

    /// `GL_RENDERER` of the baseline's context.
    pub fn renderer(&self) -> &str {
        &self.worker.renderer
    }

    /// Which EGL device (or display) the context is on.
    pub fn source(&self) -> &str {
        &self.worker.source
    }

    /// Runs `dispatches` dispatches of `kernels` in turn (one kernel: the same program every
    /// time) over fresh buffers holding `inputs`, each followed by a shader-storage barrier, then
    /// fences and waits.
    pub fn dispatch_loop(
        &self,
        kernels: &[BaselineKernel],
        inputs: &SaxpyInputs,
        dispatches: usize,
    ) -> Result<LoopRun, PlainGlError> {
        if kernels.is_empty() {
            return Err(PlainGlError::Driver {
                operation: "a baseline loop with no kernel".into(),
                code: 0,
                name: "nothing to dispatch",
            });
        }
        let sources = kernels.iter().map(glsl_of).collect::<Result<Vec<_>, _>>()?;
        let groups: Vec<[u32; 3]> = kernels.iter().map(|k| k.groups).collect();
        let inputs = inputs.clone();
        self.call(move |state| {
            let programs = sources.iter().map(|s| state.program(s)).collect::<Result<Vec<_>, _>>()?;
            let buffers = Buffers::create(state.gl(), &inputs)?;
            let outcome = run_loop(state.gl(), &programs, &groups, &buffers, inputs.a, dispatches);
            buffers.delete(state.gl());
            outcome
        })?
    }

    /// `runs` round trips over fresh buffers holding `inputs`: one dispatch, a fence and a
    /// client wait, then the whole of `y` read back.
    pub fn round_trips(
        &self,
        kernel: &BaselineKernel,
        inputs: &SaxpyInputs,
        runs: usize,
    ) -> Result<RoundTrips, PlainGlError> {
        let source = glsl_of(kernel)?;
        let groups = kernel.groups;
        let inputs = inputs.clone();
        self.call(move |state| {
            let program = state.program(&source)?;
            let buffers = Buffers::create(state.gl(), &inputs)?;
            let outcome = run_round_trips(state.gl(), program, groups, &buffers, inputs.a, runs);
            buffers.delete(state.gl());
            outcome
        })?
    }

    pub(super) fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut State) -> R + Send + 'static,
    ) -> Result<R, PlainGlError> {
        let (reply, result) = mpsc::sync_channel(1);
        self.worker
            .jobs
            .send(Box::new(move |state| {
                let _ = reply.send(job(state));
            }))
            .map_err(|_| PlainGlError::ThreadGone)?;
        result.recv().map_err(|_| PlainGlError::JobPanicked)
    }
}

/// Where one round trip's time went, each since its start.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundTripSteps {
    /// The dispatch was issued (and flushed, for the plain loop).
    pub submitted: Duration,
    /// The wait for the GPU returned.
    pub waited: Duration,
    /// The result was read back: the whole round trip.
    pub total: Duration,
}

/// The text the gl backend would compile for `kernel`.
pub(super) fn glsl_of(kernel: &BaselineKernel) -> Result<String, PlainGlError> {
    sparkle::gl::driver_glsl(&kernel.spec).map_err(|err| PlainGlError::Compile(err.to_string()))
}

fn spawn() -> Result<Worker, PlainGlError> {
    let pinned = sparkle::gl::pinned_device_index()?;
    let (jobs, queue) = mpsc::channel::<Job>();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("sparkle-gl-baseline".into())
        .spawn(move || {
            let context = match PlainContext::open(pinned) {
                Ok(context) => context,
                Err(err) => {
                    let _ = ready_tx.send(Err(PlainGlError::from(err)));
                    return;
                }
            };
            // SAFETY: the context was just made current on this thread.
            let renderer = unsafe { context.gl().get_parameter_string(glow::RENDERER) };
            let _ = ready_tx.send(Ok((renderer, context.source().to_owned())));
            let mut state = State { context, programs: HashMap::new() };
            // The sender lives in a static, so this loop ends only with the process; the context
            // is never torn down.
            while let Ok(job) = queue.recv() {
                // A panicking job loses its reply (its caller gets an error); later jobs still run.
                let _ = catch_unwind(AssertUnwindSafe(|| job(&mut state)));
            }
            std::mem::forget(state);
        })
        .map_err(|err| PlainGlError::NoContext(format!("could not start the baseline GL thread: {err}")))?;
    let (renderer, source) = ready_rx.recv().map_err(|_| PlainGlError::ThreadGone)??;
    Ok(Worker { jobs, renderer, source })
}

impl State {
    pub(super) fn gl(&self) -> &glow::Context {
        self.context.gl()
    }

    pub(super) fn program(&mut self, source: &str) -> Result<Linked, PlainGlError> {
        if let Some(linked) = self.programs.get(source) {
            return Ok(*linked);
        }
        let linked = link(&self.context, source)?;
        self.programs.insert(source.to_owned(), linked);
        Ok(linked)
    }
}

/// Compiles and links `glsl` as the gl backend does (one compute shader, the binary-retrievable
/// hint set), and finds saxpy's interface in it.
fn link(context: &PlainContext, glsl: &str) -> Result<Linked, PlainGlError> {
    let gl = context.gl();
    // SAFETY: the context is current on the baseline thread; every name used is created here and
    // deleted on every failure path.
    let program = unsafe {
        let shader = gl
            .create_shader(glow::COMPUTE_SHADER)
            .map_err(|log| PlainGlError::Compile(format!("glCreateShader failed: {log}")))?;
        gl.shader_source(shader, glsl);
        gl.compile_shader(shader);
        let program = match gl.create_program() {
            Ok(program) => program,
            Err(log) => {
                gl.delete_shader(shader);
                return Err(PlainGlError::Link(format!("glCreateProgram failed: {log}")));
            }
        };
        gl.program_binary_retrievable_hint(program, true);
        gl.attach_shader(program, shader);
        gl.link_program(program);
        let compiled = gl.get_shader_compile_status(shader);
        let shader_log = gl.get_shader_info_log(shader);
        gl.detach_shader(program, shader);
        gl.delete_shader(shader);
        if !compiled {
            gl.delete_program(program);
            return Err(PlainGlError::Compile(shader_log));
        }
        if !gl.get_program_link_status(program) {
            let log = gl.get_program_info_log(program);
            gl.delete_program(program);
            return Err(PlainGlError::Link(log));
        }
        program
    };
    let failed = |log: String| PlainGlError::Link(log);
    // SAFETY: the context is current on the baseline thread; `program` was just linked on it and
    // is deleted if it lacks saxpy's interface.
    unsafe {
        let found = (
            context.storage_binding(program, "x"),
            context.storage_binding(program, "y"),
            gl.get_uniform_location(program, "a"),
            gl.get_uniform_location(program, "n"),
        );
        let (Some(x_binding), Some(y_binding), Some(a), Some(n)) = found else {
            gl.delete_program(program);
            return Err(failed(
                "the baseline runs kernels with saxpy's interface: storage buffers `x` and `y`, \
                 uniforms `a` and `n`"
                    .into(),
            ));
        };
        Ok(Linked { program, x_binding, y_binding, a, n })
    }
}

/// `x` and `y` as shader storage buffers.
pub(super) struct Buffers {
    pub(super) x: glow::NativeBuffer,
    pub(super) y: glow::NativeBuffer,
    x_bytes: i32,
    pub(super) y_bytes: i32,
    elements: u32,
}

impl Buffers {
    pub(super) fn create(gl: &glow::Context, inputs: &SaxpyInputs) -> Result<Buffers, PlainGlError> {
        let too_big = || PlainGlError::BufferCreation {
            size: (inputs.x.len() * 4) as u64,
            reason: "the baseline's buffers are at most 2 GiB".into(),
        };
        if inputs.x.len() != inputs.y.len() || inputs.x.is_empty() {
            return Err(PlainGlError::BufferCreation {
                size: (inputs.x.len() * 4) as u64,
                reason: format!(
                    "x has {} elements and y {}; give both the same, non-zero length",
                    inputs.x.len(),
                    inputs.y.len()
                ),
            });
        }
        let x_bytes = i32::try_from(inputs.x.len() * 4).map_err(|_| too_big())?;
        let elements = u32::try_from(inputs.x.len()).map_err(|_| too_big())?;
        let upload = |data: &[f32]| {
            // SAFETY: the context is current on the baseline thread; the buffer is created here.
            unsafe {
                let buffer = gl.create_buffer().map_err(|reason| PlainGlError::BufferCreation {
                    size: (data.len() * 4) as u64,
                    reason,
                })?;
                gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(buffer));
                gl.buffer_data_u8_slice(
                    glow::SHADER_STORAGE_BUFFER,
                    bytemuck::cast_slice(data),
                    glow::DYNAMIC_COPY,
                );
                gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, None);
                Ok::<_, PlainGlError>(buffer)
            }
        };
        let x = upload(&inputs.x)?;
        let y = match upload(&inputs.y) {
            Ok(y) => y,
            Err(err) => {
                // SAFETY: as above; `x` was created by this context.
                unsafe { gl.delete_buffer(x) };
                return Err(err);
            }
        };
        let buffers = Buffers { x, y, x_bytes, y_bytes: x_bytes, elements };
        if let Err(err) = driver_error(gl, "uploading the baseline's buffers") {
            buffers.delete(gl);
            return Err(err);
        }
        Ok(buffers)
    }

    /// Saxpy's two buffers over buffers made elsewhere, both at least `elements` floats long (at
    /// most 2 GiB each); the view owns nothing and is never deleted itself.
    pub(super) fn over(x: glow::NativeBuffer, y: glow::NativeBuffer, elements: u32) -> Buffers {
        let bytes = (elements as usize * 4).min(i32::MAX as usize) as i32;
        Buffers { x, y, x_bytes: bytes, y_bytes: bytes, elements }
    }

    /// The same `x` with `y` in another buffer of the same size (the study's mapped `y`); the
    /// view owns nothing and is never deleted itself.
    pub(super) fn with_y(&self, y: glow::NativeBuffer) -> Buffers {
        Buffers { y, ..*self }
    }

    pub(super) fn read_y(&self, gl: &glow::Context) -> Vec<f32> {
        let mut y = vec![0f32; self.elements as usize];
        // SAFETY: the context is current on the baseline thread; `y` holds exactly the buffer's
        // bytes.
        unsafe {
            gl.bind_buffer(glow::COPY_READ_BUFFER, Some(self.y));
            gl.get_buffer_sub_data(glow::COPY_READ_BUFFER, 0, bytemuck::cast_slice_mut(&mut y));
            gl.bind_buffer(glow::COPY_READ_BUFFER, None);
        }
        y
    }

    pub(super) fn delete(&self, gl: &glow::Context) {
        // SAFETY: the context is current on the baseline thread; both buffers were made by it
        // and are deleted once, after the work that used them was waited for.
        unsafe {
            gl.delete_buffer(self.x);
            gl.delete_buffer(self.y);
        }
    }
}

/// The calls of one dispatch, as a plain application makes them.
///
/// # Safety
/// The context must be current on this thread, and `program` and `buffers` made by it.
pub(super) unsafe fn dispatch(
    gl: &glow::Context,
    program: &Linked,
    buffers: &Buffers,
    a: f32,
    groups: [u32; 3],
) {
    // SAFETY: per this function's contract.
    unsafe {
        gl.use_program(Some(program.program));
        gl.bind_buffer_range(
            glow::SHADER_STORAGE_BUFFER,
            program.x_binding,
            Some(buffers.x),
            0,
            buffers.x_bytes,
        );
        gl.bind_buffer_range(
            glow::SHADER_STORAGE_BUFFER,
            program.y_binding,
            Some(buffers.y),
            0,
            buffers.y_bytes,
        );
        gl.uniform_1_f32(Some(&program.a), a);
        gl.uniform_1_u32(Some(&program.n), buffers.elements);
        gl.dispatch_compute(groups[0], groups[1], groups[2]);
    }
}

/// Fences everything issued so far and waits for it.
fn fence_and_wait(gl: &glow::Context) -> Result<(), PlainGlError> {
    let fence = fence_and_flush(gl)?;
    wait_and_delete(gl, fence)
}

/// Fences everything issued so far and flushes it to the GPU.
pub(super) fn fence_and_flush(gl: &glow::Context) -> Result<glow::NativeFence, PlainGlError> {
    let fence = fence(gl)?;
    // SAFETY: the context is current on the baseline thread.
    unsafe { gl.flush() };
    Ok(fence)
}

/// A fence behind every command so far, not yet flushed.
pub(super) fn fence(gl: &glow::Context) -> Result<glow::NativeFence, PlainGlError> {
    // SAFETY: the context is current on the baseline thread.
    unsafe {
        gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0).map_err(|reason| PlainGlError::Driver {
            operation: format!("glFenceSync ({reason})"),
            code: 0,
            name: "no fence",
        })
    }
}

/// Waits until `fence` signals, then deletes it.
pub(super) fn wait_and_delete(gl: &glow::Context, fence: glow::NativeFence) -> Result<(), PlainGlError> {
    // SAFETY: the context is current on the baseline thread; the fence was made on it and is
    // deleted once.
    unsafe {
        let started = Instant::now();
        let outcome = loop {
            match gl.client_wait_sync(fence, glow::SYNC_FLUSH_COMMANDS_BIT, WAIT_SLICE_NS) {
                glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED => break Ok(()),
                glow::TIMEOUT_EXPIRED if started.elapsed() < WAIT_LIMIT => {}
                glow::TIMEOUT_EXPIRED => {
                    break Err(PlainGlError::Driver {
                        operation: format!("the baseline's wait for the GPU ({} s)", WAIT_LIMIT.as_secs()),
                        code: glow::TIMEOUT_EXPIRED,
                        name: "timed out",
                    })
                }
                code => {
                    break Err(PlainGlError::Driver {
                        operation: "glClientWaitSync".into(),
                        code,
                        name: gl_error_name(code),
                    })
                }
            }
        };
        gl.delete_sync(fence);
        outcome
    }
}

fn run_loop(
    gl: &glow::Context,
    programs: &[Linked],
    groups: &[[u32; 3]],
    buffers: &Buffers,
    a: f32,
    dispatches: usize,
) -> Result<LoopRun, PlainGlError> {
    let started = Instant::now();
    // SAFETY: the context is current on the baseline thread.
    let _stale = unsafe { gl.get_error() };
    for i in 0..dispatches {
        let which = i % programs.len();
        // SAFETY: the context is current on the baseline thread; programs and buffers are its own.
        unsafe {
            dispatch(gl, &programs[which], buffers, a, groups[which]);
        }
        driver_error(gl, "a baseline dispatch")?;
        // SAFETY: as above.
        unsafe {
            gl.memory_barrier(ALL_BARRIERS);
        }
    }
    let issue = started.elapsed();
    fence_and_wait(gl)?;
    let total = started.elapsed();
    driver_error(gl, "the baseline's dispatch loop")?;
    // SAFETY: the context is current on the baseline thread.
    unsafe { gl.memory_barrier(glow::BUFFER_UPDATE_BARRIER_BIT) };
    let y = buffers.read_y(gl);
    driver_error(gl, "reading the baseline's result")?;
    Ok(LoopRun { issue, total, y })
}

fn run_round_trips(
    gl: &glow::Context,
    program: Linked,
    groups: [u32; 3],
    buffers: &Buffers,
    a: f32,
    runs: usize,
) -> Result<RoundTrips, PlainGlError> {
    let mut times = Vec::with_capacity(runs);
    let mut results = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        // SAFETY: the context is current on the baseline thread; program and buffers are its own.
        unsafe {
            let _stale = gl.get_error();
            dispatch(gl, &program, buffers, a, groups);
        }
        driver_error(gl, "a baseline dispatch")?;
        // SAFETY: as above.
        unsafe { gl.memory_barrier(ALL_BARRIERS) };
        let fence = fence_and_flush(gl)?;
        let submitted = started.elapsed();
        wait_and_delete(gl, fence)?;
        let waited = started.elapsed();
        let y = buffers.read_y(gl);
        driver_error(gl, "reading the baseline's result")?;
        times.push(RoundTripSteps { submitted, waited, total: started.elapsed() });
        results.push(y);
    }
    driver_error(gl, "the baseline's round trips")?;
    Ok(RoundTrips { times, results })
}
