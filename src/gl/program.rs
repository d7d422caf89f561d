//! GL programs: compiling and linking a kernel's assembled GLSL, fetching the program binary
//! after link, loading a binary back, and reading the linked program's interface. A program
//! holds nothing from the spec that asked for it: two specs sharing a cache entry get the same
//! program and each binds it through its own plan.

use std::time::Duration;

use glow::HasContext;

use super::glsl::{Assembled, BlockDecl};
use super::thread::{GlState, GlThread, LiveGuard};
use super::GlError;
use crate::cache::{Blob, LoadFailure};
use crate::hal::{Compiled, ProgramInterface};

/// What the gl backend compiles: the kernel's name (for messages) and its assembled GLSL.
pub struct GlSource {
    pub(crate) kernel: String,
    pub(crate) glsl: Assembled,
}

/// A linked program on the GL thread, with its interface and, aligned with its scalars, their
/// uniform locations.
pub struct GlProgram {
    pub(crate) id: glow::NativeProgram,
    pub(crate) interface: ProgramInterface,
    pub(crate) locations: Vec<Option<glow::NativeUniformLocation>>,
    live: LiveGuard,
}

impl Drop for GlProgram {
    fn drop(&mut self) {
        let id = self.id;
        self.live.thread().post(move |state| {
            // SAFETY: the context is current on the GL thread and `id` was created by it.
            unsafe { state.gl().delete_program(id) };
            super::live::program_deleted();
        });
    }
}

/// How long the GL thread is left alone between completion polls of a background compile.
const COMPILE_POLL: Duration = Duration::from_micros(200);

pub(crate) type Linked = (glow::NativeProgram, ProgramInterface, Vec<Option<glow::NativeUniformLocation>>);

/// Compiles and links `source`. With the driver's parallel compile, `give_up` is asked between
/// completion polls whether the program is still wanted: `Ok(None)` when it was not (the
/// program is deleted; the driver drops its work). Without it the link blocks, and the
/// program is always finished.
pub(crate) fn compile(
    thread: &GlThread,
    source: &GlSource,
    persist: bool,
    parallel_compile: bool,
    give_up: &mut dyn FnMut() -> bool,
) -> Result<Option<Compiled<GlProgram>>, GlError> {
    let glsl = source.glsl.text.clone();
    let kernel = source.kernel.clone();
    let (program, shader) = thread.call(move |state| start_build(state.gl(), &kernel, &glsl))??;
    if parallel_compile {
        // The driver links on its own threads; other GL work proceeds meanwhile.
        while !thread.call(move |state| {
            // SAFETY: the context is current on the GL thread; `program` was created by it.
            unsafe { state.gl().get_program_completion_status(program) }
        })? {
            if give_up() {
                thread.post(move |state| {
                    // SAFETY: the context is current on the GL thread, which created both names;
                    // deleting a program whose link is under way is allowed (GL defers it).
                    unsafe {
                        state.gl().delete_shader(shader);
                        state.gl().delete_program(program);
                    }
                });
                return Ok(None);
            }
            std::thread::sleep(COMPILE_POLL);
        }
    }
    let kernel = source.kernel.clone();
    let blocks = source.glsl.blocks.clone();
    let ((id, interface, locations), blob) = thread.call(move |state| {
        let context = &state.context;
        finish_build(&context.gl, &context.introspection, &kernel, program, shader, &blocks, persist)
    })??;
    super::live::program_made();
    let program = GlProgram { id, interface, locations, live: thread.acquire() };
    Ok(Some(Compiled { program, blob }))
}

pub(crate) fn load(
    thread: &GlThread,
    source: &GlSource,
    blob: &Blob,
) -> Result<GlProgram, LoadFailure<GlError>> {
    let binary = glow::ProgramBinary { buffer: blob.bytes.clone(), format: blob.format };
    let blocks = source.glsl.blocks.clone();
    let (id, interface, locations) = thread
        .call(move |state| load_binary(state, &binary, &blocks))
        .map_err(LoadFailure::Failed)?
        .map_err(LoadFailure::Refused)?;
    super::live::program_made();
    Ok(GlProgram { id, interface, locations, live: thread.acquire() })
}

/// Starts compiling and linking `glsl` on `gl`, whose context is current on this thread (the
/// GL thread).
pub(crate) fn start_build(
    gl: &glow::Context,
    kernel: &str,
    glsl: &str,
) -> Result<(glow::NativeProgram, glow::NativeShader), GlError> {
    let _span = crate::trace::span("gl", "start a program build (compile, link)");
    // SAFETY: the context is current on this thread; every name used is created right here.
    unsafe {
        let shader = gl.create_shader(glow::COMPUTE_SHADER).map_err(|log| GlError::Compile {
            kernel: kernel.to_owned(),
            log: format!("glCreateShader failed: {log}"),
        })?;
        gl.shader_source(shader, glsl);
        gl.compile_shader(shader);
        let program = match gl.create_program() {
            Ok(program) => program,
            Err(log) => {
                gl.delete_shader(shader);
                return Err(GlError::Link {
                    kernel: kernel.to_owned(),
                    log: format!("glCreateProgram failed: {log}"),
                });
            }
        };
        gl.program_binary_retrievable_hint(program, true);
        gl.attach_shader(program, shader);
        gl.link_program(program);
        Ok((program, shader))
    }
}

/// Ends what [`start_build`] started (on the same context): the compile and link status, the
/// program's interface and, with `persist`, its binary.
pub(crate) fn finish_build(
    gl: &glow::Context,
    introspection: &super::interface::Introspection,
    kernel: &str,
    program: glow::NativeProgram,
    shader: glow::NativeShader,
    blocks: &[BlockDecl],
    persist: bool,
) -> Result<(Linked, Option<Blob>), GlError> {
    let _span = crate::trace::span("gl", "finish a program build (status, interface)");
    // SAFETY: the context is current on this thread; `program` and `shader` were created on it
    // by `start_build` and are deleted here on every failure path.
    unsafe {
        let statuses = crate::trace::span("gl", "ask the compile and link status");
        let compiled = gl.get_shader_compile_status(shader);
        let shader_log = gl.get_shader_info_log(shader);
        gl.detach_shader(program, shader);
        gl.delete_shader(shader);
        if !compiled {
            gl.delete_program(program);
            return Err(GlError::Compile { kernel: kernel.to_owned(), log: shader_log });
        }
        if !gl.get_program_link_status(program) {
            let mut log = gl.get_program_info_log(program);
            if log.trim().is_empty() {
                // NVIDIA refuses a shader over its shared-memory limit with an empty log.
                log = "(the driver gave no reason; check the shader's shared memory and other \
                       resources against the device limits `sparkle info` shows)"
                    .to_owned();
            }
            gl.delete_program(program);
            return Err(GlError::Link { kernel: kernel.to_owned(), log });
        }
        drop(statuses);
        let reading = crate::trace::span("gl", "read the program's interface");
        let (interface, locations) = super::interface::read(gl, introspection, program, blocks);
        drop(reading);
        let blob = if persist {
            // glow reports `None` when any GL error is pending, so clear stale ones first.
            super::error::take_gl_error(gl);
            let _span = crate::trace::span("gl", "get the program binary");
            match gl.get_program_binary(program) {
                Some(binary) if !binary.buffer.is_empty() => {
                    Some(Blob { format: binary.format, bytes: binary.buffer })
                }
                _ => {
                    tracing::warn!(kernel, "the driver returned no program binary; not persisted");
                    None
                }
            }
        } else {
            None
        };
        Ok(((program, interface, locations), blob))
    }
}

fn load_binary(
    state: &mut GlState,
    binary: &glow::ProgramBinary,
    blocks: &[BlockDecl],
) -> Result<Linked, String> {
    state.take_error();
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread. The blob passed the cache's header and
    // checksum verification, so it is byte for byte what this driver produced for this GpuId;
    // the driver still validates it and reports through GL_LINK_STATUS.
    unsafe {
        let program = gl.create_program().map_err(|err| format!("glCreateProgram failed: {err}"))?;
        gl.program_binary(program, binary);
        if !gl.get_program_link_status(program) {
            let log = gl.get_program_info_log(program);
            gl.delete_program(program);
            let reason = if log.trim().is_empty() { "GL_LINK_STATUS is false".to_owned() } else { log };
            return Err(format!("the driver refused the program binary: {reason}"));
        }
        if let Some(code) = state.take_error() {
            gl.delete_program(program);
            return Err(format!("glProgramBinary raised {}", super::error::gl_error_name(code)));
        }
        let (interface, locations) =
            super::interface::read(gl, &state.context.introspection, program, blocks);
        Ok((program, interface, locations))
    }
}

#[cfg(test)]
mod tests {
    use crate::hal::Device;

    /// A compile told to give up at once either is dropped (the driver still linked it on its
    /// own threads) or, where the link finished before the first question, comes back whole;
    /// either way no program is left behind, and one never told to give up finishes.
    #[test]
    fn a_compile_given_up_leaves_no_program_behind() {
        let device = match super::super::GlDevice::open(None) {
            Ok(device) => device,
            Err(err) => panic!("these tests need a GL 4.3 context (llvmpipe will do): {err}"),
        };
        let spec = crate::suite::sgemm::spec();
        let prepared = device.prepare(&spec).unwrap();
        let before = super::super::live::live_objects();
        let mut asked = 0;
        let raced = device
            .compile_racing(&prepared.input, &mut || {
                asked += 1;
                true
            })
            .unwrap();
        let dropped = raced.is_none();
        drop(raced);
        let finished = device.compile_racing(&prepared.input, &mut || false).unwrap();
        let program = finished.expect("a compile never told to give up finishes");
        assert!(!device.interface(&program.program).storage.is_empty());
        drop(program);
        // The GL thread runs deletions in order: one more call and they are done.
        device.thread().call(|_| ()).unwrap();
        let after = super::super::live::live_objects();
        assert_eq!(
            after.programs_made - after.programs_deleted,
            before.programs_made - before.programs_deleted
        );
        if dropped {
            assert_eq!(asked, 1);
        }
        eprintln!("given up: {dropped} after {asked} questions");
    }
}
