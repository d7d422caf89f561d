//! GL programs: the GLSL a kernel compiles to (version line, defines and workgroup size added
//! from its spec), compiling and linking it, fetching the program binary after link, and loading
//! a binary back — the gl side of the shared cache's `ProgramSource`.

use std::time::{Duration, Instant};

use glow::HasContext;

use super::thread::{GlState, GlThread};
use super::GlError;
use crate::cache::{Blob, Built, LoadFailure, ProgramSource};
use crate::kernel::{Binding, KernelSpec, SourceLanguage};

/// A linked program on the GL thread, with the uniform locations of the kernel's scalars.
pub(crate) struct GlProgram {
    pub id: glow::NativeProgram,
    /// One entry per binding of the spec: the uniform location of a scalar, `None` for buffers
    /// and for scalars the driver optimized away.
    pub uniforms: Vec<Option<glow::NativeUniformLocation>>,
    thread: GlThread,
}

impl Drop for GlProgram {
    fn drop(&mut self) {
        let id = self.id;
        self.thread.post(move |state| {
            // SAFETY: the context is current on the GL thread and `id` was created by it.
            unsafe { state.gl().delete_program(id) }
        });
    }
}

/// The GLSL handed to the driver: the user's source with a `#version` line (theirs if they gave
/// one) and the spec's defines in front, its workgroup size behind, and `#line` so that the driver's
/// log points at the user's own line numbers.
pub(crate) fn assemble(spec: &KernelSpec) -> Result<String, GlError> {
    let source = spec
        .source(SourceLanguage::Glsl)
        .map_err(|err| GlError::Compile { kernel: spec.name.clone(), log: err.to_string() })?;
    let (version, body, first_line) = match source.trim_start().strip_prefix("#version") {
        Some(rest) => {
            let skipped_lines = source.len() - source.trim_start().len();
            let leading_newlines = source[..skipped_lines].matches('\n').count();
            let (line, body) = rest.split_once('\n').unwrap_or((rest, ""));
            (format!("#version{line}"), body, leading_newlines + 2)
        }
        None => ("#version 430 core".to_owned(), source, 1),
    };
    let mut out = String::with_capacity(source.len() + 256);
    out.push_str(&version);
    out.push('\n');
    for (name, value) in &spec.defines {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    out.push_str(&format!("#line {first_line}\n"));
    out.push_str(body);
    // Last, so that `#extension` lines in the body still precede every declaration.
    let [x, y, z] = spec.workgroup_size;
    out.push_str(&format!("\nlayout(local_size_x = {x}, local_size_y = {y}, local_size_z = {z}) in;\n"));
    Ok(out)
}

/// How the cache builds one kernel's program on the gl backend.
pub(crate) struct GlSource {
    pub thread: GlThread,
    pub spec: KernelSpec,
    pub glsl: String,
    /// Whether to fetch a program binary for the disk tier.
    pub persist: bool,
    /// Whether the driver compiles in the background (poll instead of blocking the GL thread).
    pub parallel_compile: bool,
}

/// How long the GL thread is left alone between completion polls of a background compile.
const COMPILE_POLL: Duration = Duration::from_micros(200);

impl ProgramSource<GlProgram> for GlSource {
    type Error = GlError;

    fn compile(&self) -> Result<Built<GlProgram>, GlError> {
        let started = Instant::now();
        let glsl = self.glsl.clone();
        let kernel = self.spec.name.clone();
        let (program, shader) = self.thread.call(move |state| start_build(state, &kernel, &glsl))??;
        if self.parallel_compile {
            // The driver links on its own threads; other GL work proceeds meanwhile.
            while !self.thread.call(move |state| {
                // SAFETY: the context is current on the GL thread; `program` was created by it.
                unsafe { state.gl().get_program_completion_status(program) }
            })? {
                std::thread::sleep(COMPILE_POLL);
            }
        }
        let spec = self.spec.clone();
        let persist = self.persist;
        let thread = self.thread.clone();
        let (uniforms, blob) =
            self.thread.call(move |state| finish_build(state, &spec, program, shader, persist))??;
        let compile_time = started.elapsed();
        tracing::debug!(kernel = %self.spec.name, ?compile_time, "compiled");
        Ok(Built { program: GlProgram { id: program, uniforms, thread }, blob, compile_time })
    }

    fn load(&self, blob: &Blob) -> Result<GlProgram, LoadFailure<GlError>> {
        let binary = glow::ProgramBinary { buffer: blob.bytes.clone(), format: blob.format };
        let spec = self.spec.clone();
        let loaded = self
            .thread
            .call(move |state| load_binary(state, &spec, &binary))
            .map_err(LoadFailure::Failed)?
            .map_err(LoadFailure::Refused)?;
        Ok(GlProgram { id: loaded.0, uniforms: loaded.1, thread: self.thread.clone() })
    }
}

type Uniforms = Vec<Option<glow::NativeUniformLocation>>;

fn start_build(
    state: &mut GlState,
    kernel: &str,
    glsl: &str,
) -> Result<(glow::NativeProgram, glow::NativeShader), GlError> {
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread; every name used is created right here.
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

fn finish_build(
    state: &mut GlState,
    spec: &KernelSpec,
    program: glow::NativeProgram,
    shader: glow::NativeShader,
    persist: bool,
) -> Result<(Uniforms, Option<Blob>), GlError> {
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread; `program` and `shader` were created on it
    // by `start_build` and are deleted here on every failure path.
    unsafe {
        let compiled = gl.get_shader_compile_status(shader);
        let shader_log = gl.get_shader_info_log(shader);
        gl.detach_shader(program, shader);
        gl.delete_shader(shader);
        if !compiled {
            gl.delete_program(program);
            return Err(GlError::Compile { kernel: spec.name.clone(), log: shader_log });
        }
        if !gl.get_program_link_status(program) {
            let log = gl.get_program_info_log(program);
            gl.delete_program(program);
            return Err(GlError::Link { kernel: spec.name.clone(), log });
        }
        let uniforms = uniform_locations(gl, spec, program);
        let blob = if persist {
            // glow reports `None` when any GL error is pending, so clear stale ones first.
            state.take_error();
            match gl.get_program_binary(program) {
                Some(binary) if !binary.buffer.is_empty() => {
                    Some(Blob { format: binary.format, bytes: binary.buffer })
                }
                _ => {
                    tracing::warn!(kernel = %spec.name, "the driver returned no program binary; not persisted");
                    None
                }
            }
        } else {
            None
        };
        Ok((uniforms, blob))
    }
}

fn load_binary(
    state: &mut GlState,
    spec: &KernelSpec,
    binary: &glow::ProgramBinary,
) -> Result<(glow::NativeProgram, Uniforms), String> {
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
            return Err(format!("glProgramBinary raised {}", super::error::error_name(code)));
        }
        Ok((program, uniform_locations(gl, spec, program)))
    }
}

fn uniform_locations(gl: &glow::Context, spec: &KernelSpec, program: glow::NativeProgram) -> Uniforms {
    spec.bindings
        .iter()
        .map(|binding| match binding {
            Binding::Storage { .. } => None,
            Binding::Scalar { name, .. } => {
                // SAFETY: the context is current on the GL thread; `program` is linked.
                let location = unsafe { gl.get_uniform_location(program, name) };
                if location.is_none() {
                    tracing::warn!(
                        kernel = %spec.name,
                        "scalar `{name}` is not an active uniform (misspelt, or unused and optimized away); \
                         its value will be ignored"
                    );
                }
                location
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assemble_adds_version_defines_and_workgroup() {
        let spec = KernelSpec::new("k", [8, 4, 1]).with_glsl("void main() {}\n").define("N", 3);
        let glsl = assemble(&spec).unwrap();
        assert_eq!(
            glsl,
            "#version 430 core\n#define N 3\n#line 1\nvoid main() {}\n\n\
             layout(local_size_x = 8, local_size_y = 4, local_size_z = 1) in;\n"
        );
    }

    #[test]
    fn assemble_keeps_the_users_version_line() {
        let spec = KernelSpec::new("k", [1, 1, 1]).with_glsl("#version 450\nvoid main() {}\n");
        let glsl = assemble(&spec).unwrap();
        assert!(glsl.starts_with("#version 450\n"));
        assert!(glsl.contains("#line 2\nvoid main() {}\n"));
    }
}
