//! What a linked GL program declares, read with GL 4.3 program introspection
//! (`glGetProgramInterfaceiv` / `glGetProgramResourceiv` / `glGetProgramResourceName`): its
//! storage blocks (binding, fixed size, member names), its buffer samplers (storage read as
//! texels: texture unit, component type) and its other default-block uniforms (name, type,
//! location). The runtime checks a kernel's spec against this, never the other way round.

use std::ffi::{c_char, c_void, CStr};

use glow::HasContext;

use super::glsl::BlockDecl;
use super::GlError;
use crate::hal::{ProgramInterface, ScalarSlot, StorageSlot};
use crate::kernel::{ScalarType, TexelComponent};

type GetProgramInterfaceiv = unsafe extern "system" fn(u32, u32, u32, *mut i32);
type GetProgramResourceiv =
    unsafe extern "system" fn(u32, u32, u32, i32, *const u32, i32, *mut i32, *mut i32);
type GetProgramResourceName = unsafe extern "system" fn(u32, u32, u32, i32, *mut i32, *mut c_char);

/// The three introspection entry points, loaded from the context's driver.
pub(crate) struct Introspection {
    interface_iv: GetProgramInterfaceiv,
    resource_iv: GetProgramResourceiv,
    resource_name: GetProgramResourceName,
}

/// Longest resource name read; longer names are cut (and then match no spec name).
const MAX_NAME: usize = 1024;

impl Introspection {
    pub fn load(mut get_proc_address: impl FnMut(&CStr) -> *const c_void) -> Result<Self, GlError> {
        let mut load = |name: &CStr| {
            let pointer = get_proc_address(name);
            if pointer.is_null() {
                Err(GlError::NoContext(format!("the driver has no {}", name.to_string_lossy())))
            } else {
                Ok(pointer)
            }
        };
        let interface_iv = load(c"glGetProgramInterfaceiv")?;
        let resource_iv = load(c"glGetProgramResourceiv")?;
        let resource_name = load(c"glGetProgramResourceName")?;
        // SAFETY: EGL returned these entry points for the names asked for; their signatures are
        // the GL 4.3 core ones declared above (GLuint/GLenum = u32, GLint/GLsizei = i32).
        unsafe {
            Ok(Self {
                interface_iv: std::mem::transmute::<*const c_void, GetProgramInterfaceiv>(interface_iv),
                resource_iv: std::mem::transmute::<*const c_void, GetProgramResourceiv>(resource_iv),
                resource_name: std::mem::transmute::<*const c_void, GetProgramResourceName>(resource_name),
            })
        }
    }

    /// # Safety
    /// The context these entry points came from must be current and `program` linked in it.
    unsafe fn count(&self, program: u32, interface: u32) -> u32 {
        let mut count = 0i32;
        // SAFETY: one GLint is written to `count`; the caller guarantees context and program.
        unsafe { (self.interface_iv)(program, interface, glow::ACTIVE_RESOURCES, &mut count) };
        count.max(0) as u32
    }

    /// # Safety
    /// As for [`count`](Self::count); `index` below the interface's resource count.
    unsafe fn properties<const N: usize>(
        &self,
        program: u32,
        interface: u32,
        index: u32,
        props: [u32; N],
    ) -> [i32; N] {
        let mut values = [0i32; N];
        let mut written = 0i32;
        // SAFETY: `values` holds N GLints and bufSize says so; `props` holds N enums.
        unsafe {
            (self.resource_iv)(
                program,
                interface,
                index,
                N as i32,
                props.as_ptr(),
                N as i32,
                &mut written,
                values.as_mut_ptr(),
            )
        };
        values
    }

    /// # Safety
    /// As for [`properties`](Self::properties).
    unsafe fn name(&self, program: u32, interface: u32, index: u32) -> String {
        let mut buffer = vec![0u8; MAX_NAME];
        let mut length = 0i32;
        // SAFETY: the buffer holds MAX_NAME bytes and bufSize says so; GL writes at most that,
        // NUL included, and the written length without it.
        unsafe {
            (self.resource_name)(
                program,
                interface,
                index,
                MAX_NAME as i32,
                &mut length,
                buffer.as_mut_ptr().cast(),
            )
        };
        buffer.truncate(length.clamp(0, MAX_NAME as i32) as usize);
        String::from_utf8_lossy(&buffer).into_owned()
    }
}

/// `Block.member[0]` (a block with an instance name) or `member[0]` → `member`.
fn top_level_name<'a>(variable: &'a str, block: &str) -> &'a str {
    let member = variable.strip_prefix(block).and_then(|rest| rest.strip_prefix('.')).unwrap_or(variable);
    member.split(['.', '[']).next().unwrap_or(member)
}

fn strip_array(name: &str) -> &str {
    name.split('[').next().unwrap_or(name)
}

fn scalar_type(gl_type: u32) -> (Option<ScalarType>, String) {
    match gl_type {
        glow::FLOAT => (Some(ScalarType::F32), "float".into()),
        glow::UNSIGNED_INT => (Some(ScalarType::U32), "uint".into()),
        glow::INT => (Some(ScalarType::I32), "int".into()),
        glow::BOOL => (None, "bool".into()),
        glow::FLOAT_VEC2 | glow::FLOAT_VEC3 | glow::FLOAT_VEC4 => (None, "vec".into()),
        glow::UNSIGNED_INT_VEC2 | glow::UNSIGNED_INT_VEC3 | glow::UNSIGNED_INT_VEC4 => (None, "uvec".into()),
        glow::INT_VEC2 | glow::INT_VEC3 | glow::INT_VEC4 => (None, "ivec".into()),
        other => (None, format!("GL type 0x{other:04x}")),
    }
}

/// The program's interface and, aligned with its scalars, their uniform locations.
pub(crate) fn read(
    gl: &glow::Context,
    introspection: &Introspection,
    program: glow::NativeProgram,
    blocks: &[BlockDecl],
) -> (ProgramInterface, Vec<Option<glow::NativeUniformLocation>>) {
    let id = program.0.get();
    let mut interface = ProgramInterface::default();
    let mut locations = Vec::new();
    // SAFETY: called on the GL thread with the context current and `program` linked; indices
    // stay below the counts the driver reported.
    unsafe {
        for index in 0..introspection.count(id, glow::SHADER_STORAGE_BLOCK) {
            let block = introspection.name(id, glow::SHADER_STORAGE_BLOCK, index);
            let [binding, data_size, variables] = introspection.properties(
                id,
                glow::SHADER_STORAGE_BLOCK,
                index,
                [glow::BUFFER_BINDING, glow::BUFFER_DATA_SIZE, glow::NUM_ACTIVE_VARIABLES],
            );
            let block_name = strip_array(&block).to_owned();
            let mut names = vec![block_name.clone()];
            let mut member_indices = vec![0i32; variables.max(0) as usize];
            if !member_indices.is_empty() {
                let mut written = 0i32;
                (introspection.resource_iv)(
                    id,
                    glow::SHADER_STORAGE_BLOCK,
                    index,
                    1,
                    &glow::ACTIVE_VARIABLES,
                    member_indices.len() as i32,
                    &mut written,
                    member_indices.as_mut_ptr(),
                );
                member_indices.truncate(written.max(0) as usize);
            }
            // GL_BUFFER_DATA_SIZE counts one element of a runtime-sized array (Mesa rounds it up
            // further, and reports such arrays with a top-level size of 1): the fixed part ends
            // where the array the source declares with `[]` starts.
            let declared = blocks.iter().find(|b| b.name == block_name);
            let runtime_array = declared.and_then(|b| b.runtime_array.as_deref());
            let mut runtime_array_start: Option<i32> = None;
            for member in member_indices {
                let member = member.max(0) as u32;
                let variable = introspection.name(id, glow::BUFFER_VARIABLE, member);
                let name = top_level_name(&variable, &block_name).to_owned();
                if Some(name.as_str()) == runtime_array {
                    let [offset] =
                        introspection.properties(id, glow::BUFFER_VARIABLE, member, [glow::OFFSET]);
                    runtime_array_start = Some(runtime_array_start.map_or(offset, |start| start.min(offset)));
                }
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            let min_bytes = runtime_array_start.unwrap_or(data_size).max(0) as u64;
            if let Some(instance) = declared.and_then(|b| b.instance.clone()) {
                names.push(instance);
            }
            interface.storage.push(StorageSlot {
                binding: binding.max(0) as u32,
                names,
                min_bytes,
                read_only: declared.map(|b| b.read_only),
                texels: None,
            });
        }
        for index in 0..introspection.count(id, glow::UNIFORM) {
            let [gl_type, block_index, location] = introspection.properties(
                id,
                glow::UNIFORM,
                index,
                [glow::TYPE, glow::BLOCK_INDEX, glow::LOCATION],
            );
            if block_index != -1 || location < 0 {
                continue;
            }
            let name = introspection.name(id, glow::UNIFORM, index);
            let name = strip_array(&name).to_owned();
            let location = gl.get_uniform_location(program, &name);
            if let (Some(component), Some(location)) = (texel_component(gl_type as u32), &location) {
                // A buffer read as texels: its texture unit is its binding.
                let mut unit = [0i32];
                gl.get_uniform_i32(program, location, &mut unit);
                interface.storage.push(StorageSlot {
                    binding: unit[0].max(0) as u32,
                    names: vec![name],
                    min_bytes: 0,
                    read_only: Some(true),
                    texels: Some(component),
                });
                continue;
            }
            let (ty, type_name) = scalar_type(gl_type as u32);
            locations.push(location);
            interface.scalars.push(ScalarSlot { name, ty, type_name });
        }
    }
    (interface, locations)
}

/// The component type of a buffer sampler's texels; `None` for any other uniform type.
fn texel_component(gl_type: u32) -> Option<TexelComponent> {
    match gl_type {
        glow::SAMPLER_BUFFER => Some(TexelComponent::Float),
        glow::UNSIGNED_INT_SAMPLER_BUFFER => Some(TexelComponent::Uint),
        glow::INT_SAMPLER_BUFFER => Some(TexelComponent::Int),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_variable_names_reduce_to_their_top_level_member() {
        assert_eq!(top_level_name("x[0]", "X"), "x");
        assert_eq!(top_level_name("Data.v[0]", "Data"), "v");
        assert_eq!(top_level_name("Params.inner.count", "Params"), "inner");
        assert_eq!(top_level_name("s.count", "Params"), "s");
        assert_eq!(strip_array("Blocks[2]"), "Blocks");
    }
}
