//! Checks that belong to no backend: a spec against the device's limits, a spec against the
//! interface the compiled program declares (giving the [`Plan`] that binds arguments to the
//! program's slots), and a dispatch's arguments and grid against both.

use crate::hal::{Limits, ProgramInterface, ScalarValue};
use crate::kernel::{Access, Binding, KernelError, KernelSpec, ScalarType, TexelComponent, TexelFormat};

const AXES: [&str; 3] = ["x", "y", "z"];

/// Checks a spec on its own and against `limits`.
pub(crate) fn check_spec(spec: &KernelSpec, limits: &Limits) -> Result<(), KernelError> {
    spec.check()?;
    for (axis, (&size, &max)) in spec.workgroup_size.iter().zip(&limits.max_workgroup_size).enumerate() {
        if size > max {
            return Err(KernelError::ExceedsLimit {
                kernel: spec.name.clone(),
                problem: format!("workgroup size {size} on axis {} is too large", AXES[axis]),
                limit: max.to_string(),
            });
        }
    }
    if spec.invocations_per_group() > u64::from(limits.max_workgroup_invocations) {
        return Err(KernelError::ExceedsLimit {
            kernel: spec.name.clone(),
            problem: format!("workgroup size {:?} has too many invocations", spec.workgroup_size),
            limit: limits.max_workgroup_invocations.to_string(),
        });
    }
    if let Some((name, _)) = spec.storage_bindings().find(|(_, a)| matches!(a, Access::Texels(_))) {
        if limits.max_texel_buffer_texels == 0 {
            return Err(KernelError::ExceedsLimit {
                kernel: spec.name.clone(),
                problem: format!(
                    "it reads `{name}` as texels (Access::Texels), and this device has no texel buffers; \
                     read it as a storage buffer (Access::ReadOnly) instead"
                ),
                limit: "0 texels".to_owned(),
            });
        }
    }
    let storage = spec.storage_bindings().count();
    if storage > limits.max_storage_buffer_bindings as usize {
        return Err(KernelError::ExceedsLimit {
            kernel: spec.name.clone(),
            problem: format!("{storage} storage buffers"),
            limit: limits.max_storage_buffer_bindings.to_string(),
        });
    }
    Ok(())
}

/// How one spec binding reaches the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanEntry {
    Storage { slot: usize, min_bytes: u64, writes: bool, texels: Option<TexelFormat> },
    Scalar { slot: usize, ty: ScalarType },
}

/// One entry per spec binding, in the spec's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub entries: Vec<PlanEntry>,
}

/// Matches the spec against what the program declares; any disagreement is an error naming the
/// kernel, the binding and both sides.
pub(crate) fn plan(spec: &KernelSpec, interface: &ProgramInterface) -> Result<Plan, KernelError> {
    let mismatch = |binding: &str, problem: String| KernelError::Interface {
        kernel: spec.name.clone(),
        binding: binding.to_owned(),
        problem,
    };
    let mut used_storage = vec![false; interface.storage.len()];
    let mut used_scalars = vec![false; interface.scalars.len()];
    let mut entries = Vec::with_capacity(spec.bindings.len());
    let mut storage_index = 0u32;
    for binding in &spec.bindings {
        match binding {
            Binding::Storage { name, access } => {
                let Some(slot) = interface.storage.iter().position(|s| s.names.iter().any(|n| n == name))
                else {
                    return Err(mismatch(
                        name,
                        format!(
                            "the program has no storage buffer of that name (it may be unused and removed by \
                             the compiler); its storage buffers are: {}",
                            describe_storage(interface)
                        ),
                    ));
                };
                let declared = &interface.storage[slot];
                let texels =
                    texel_view(*access, declared.texels).map_err(|problem| mismatch(name, problem))?;
                if declared.binding != storage_index {
                    return Err(mismatch(
                        name,
                        format!(
                            "the spec lists it as storage buffer #{storage_index}, so it is bound at binding \
                             {storage_index}, but the program declares it at binding {}; list storage \
                             buffers in the spec in the order of their bindings",
                            declared.binding
                        ),
                    ));
                }
                // Blocks at the same binding are views of one buffer (GLSL allows a program to
                // declare a buffer twice, say as floats and as vectors): the buffer must suit all.
                let views: Vec<usize> = (0..interface.storage.len())
                    .filter(|&s| {
                        let other = &interface.storage[s];
                        other.binding == declared.binding
                            && other.texels.is_some() == declared.texels.is_some()
                    })
                    .collect();
                let min_bytes = views.iter().map(|&s| interface.storage[s].min_bytes).max().unwrap_or(0);
                let read_only =
                    views.iter().try_fold(true, |all, &s| interface.storage[s].read_only.map(|r| all && r));
                if *access == Access::ReadOnly && read_only == Some(false) {
                    return Err(mismatch(
                        name,
                        "the spec says ReadOnly but the program may write it (declare the buffer `readonly` \
                         in the kernel, or the binding Access::ReadWrite in the spec)"
                            .to_owned(),
                    ));
                }
                for &view in &views {
                    used_storage[view] = true;
                }
                // A buffer the program may write is treated as written, whatever the spec says:
                // later reads must wait for it.
                let writes = access.writes() || read_only != Some(true);
                entries.push(PlanEntry::Storage { slot, min_bytes, writes, texels });
                storage_index += 1;
            }
            Binding::Scalar { name, ty } => {
                let Some(slot) = interface.scalars.iter().position(|s| &s.name == name) else {
                    return Err(mismatch(
                        name,
                        format!(
                            "the program has no active scalar of that name: the kernel does not declare it, \
                             or never uses it and the compiler removed it; its scalars are: {}",
                            describe_scalars(interface)
                        ),
                    ));
                };
                let declared = &interface.scalars[slot];
                if declared.ty != Some(*ty) {
                    return Err(mismatch(
                        name,
                        format!(
                            "the spec says {} but the program declares `{}`",
                            ty.name(),
                            declared.type_name
                        ),
                    ));
                }
                used_scalars[slot] = true;
                entries.push(PlanEntry::Scalar { slot, ty: *ty });
            }
        }
    }
    if let Some(slot) = used_storage.iter().position(|used| !used) {
        let declared = &interface.storage[slot];
        return Err(mismatch(
            declared.names.first().map_or("?", String::as_str),
            format!(
                "the program uses a storage buffer at binding {} that the spec does not list; add it with \
                 KernelSpec::storage",
                declared.binding
            ),
        ));
    }
    if let Some(slot) = used_scalars.iter().position(|used| !used) {
        let declared = &interface.scalars[slot];
        return Err(mismatch(
            &declared.name,
            format!(
                "the program declares this `{}` scalar but the spec does not list it, so it would stay zero; \
                 add it with KernelSpec::scalar",
                declared.type_name
            ),
        ));
    }
    Ok(Plan { entries })
}

/// How the spec's access and the program's declaration of one buffer agree: the texel format
/// where both read it as texels (of one component type), `None` where both take a storage
/// buffer, or the disagreement.
fn texel_view(access: Access, declared: Option<TexelComponent>) -> Result<Option<TexelFormat>, String> {
    match (access, declared) {
        (Access::Texels(format), Some(component)) if format.component() == component => Ok(Some(format)),
        (Access::Texels(format), Some(component)) => Err(format!(
            "the spec reads it as {} texels, which a `{}` reads, but the program declares a `{}`",
            format.name(),
            format.component().sampler(),
            component.sampler()
        )),
        (Access::Texels(format), None) => Err(format!(
            "the spec reads it as {} texels, but the program declares a storage buffer; declare it as a \
             `{}` uniform and read it with texelFetch, or list it as a storage buffer",
            format.name(),
            format.component().sampler()
        )),
        (_, Some(component)) => Err(format!(
            "the program reads it as texels (a `{}`), but the spec lists a storage buffer; list it with \
             Access::Texels and the texels' format",
            component.sampler()
        )),
        (_, None) => Ok(None),
    }
}

fn describe_storage(interface: &ProgramInterface) -> String {
    if interface.storage.is_empty() {
        return "none".into();
    }
    let items: Vec<String> = interface
        .storage
        .iter()
        .map(|s| format!("binding {} ({})", s.binding, s.names.join(" / ")))
        .collect();
    items.join(", ")
}

fn describe_scalars(interface: &ProgramInterface) -> String {
    if interface.scalars.is_empty() {
        return "none".into();
    }
    let items: Vec<String> =
        interface.scalars.iter().map(|s| format!("`{}` ({})", s.name, s.type_name)).collect();
    items.join(", ")
}

/// A dispatch argument, matched in order against the kernel's bindings.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// A whole storage buffer.
    Buffer(&'a super::Buffer),
    /// `len` bytes of a storage buffer from `offset` (a multiple of the device's
    /// `storage_buffer_offset_alignment`).
    Range {
        /// The buffer.
        buffer: &'a super::Buffer,
        /// Where the range starts, in bytes.
        offset: u64,
        /// The range's length in bytes.
        len: u64,
    },
    /// A `u32` scalar.
    U32(u32),
    /// An `i32` scalar.
    I32(i32),
    /// An `f32` scalar.
    F32(f32),
}

impl Arg<'_> {
    fn describe(&self) -> &'static str {
        match self {
            Arg::Buffer(_) | Arg::Range { .. } => "a storage buffer",
            Arg::U32(_) => "a u32 scalar",
            Arg::I32(_) => "an i32 scalar",
            Arg::F32(_) => "an f32 scalar",
        }
    }
}

/// A storage argument after the checks: which buffer, which bytes, which program slot.
pub(crate) struct CheckedBuffer<'a> {
    pub buffer: &'a super::Buffer,
    pub slot: usize,
    pub offset: u64,
    pub size: u64,
    pub writes: bool,
    pub texels: Option<TexelFormat>,
}

/// The arguments of one dispatch, checked.
pub(crate) struct CheckedArgs<'a> {
    pub buffers: Vec<CheckedBuffer<'a>>,
    pub scalars: Vec<(usize, ScalarValue)>,
}

/// Checks a dispatch's arguments and grid against the spec, its plan and the device limits.
pub(crate) fn check_dispatch<'a>(
    spec: &KernelSpec,
    plan: &Plan,
    limits: &Limits,
    args: &[Arg<'a>],
    groups: [u32; 3],
) -> Result<CheckedArgs<'a>, KernelError> {
    if args.len() != spec.bindings.len() {
        return Err(KernelError::ArgumentCount {
            kernel: spec.name.clone(),
            expected: spec.bindings.len(),
            got: args.len(),
            bindings: spec.bindings.iter().map(Binding::name).collect::<Vec<_>>().join(", "),
        });
    }
    let mut checked = CheckedArgs { buffers: Vec::new(), scalars: Vec::new() };
    for (index, ((binding, entry), arg)) in spec.bindings.iter().zip(&plan.entries).zip(args).enumerate() {
        let argument = |problem: String| KernelError::Argument {
            kernel: spec.name.clone(),
            index,
            name: binding.name().to_owned(),
            problem,
        };
        match (entry, arg) {
            (&PlanEntry::Storage { slot, min_bytes, writes, texels }, Arg::Buffer(_) | Arg::Range { .. }) => {
                let (buffer, offset, size) = match *arg {
                    Arg::Range { buffer, offset, len } => (buffer, offset, len),
                    Arg::Buffer(buffer) => (buffer, 0, buffer.size()),
                    _ => unreachable!("matched above"),
                };
                if offset.checked_add(size).is_none_or(|end| end > buffer.size()) {
                    return Err(argument(format!(
                        "bytes {offset}..{} are outside the {}-byte buffer",
                        offset.saturating_add(size),
                        buffer.size()
                    )));
                }
                if size == 0 || size < min_bytes {
                    return Err(argument(format!(
                        "{size} bytes are fewer than the {} bytes the program's buffer declares",
                        min_bytes.max(1)
                    )));
                }
                match texels {
                    // Bound as a texel buffer, not as a storage buffer: the texel limits apply.
                    Some(format) => check_texels(limits, format, offset, size).map_err(argument)?,
                    None => check_storage_range(limits, offset, size).map_err(argument)?,
                }
                checked.buffers.push(CheckedBuffer { buffer, slot, offset, size, writes, texels });
            }
            (&PlanEntry::Scalar { slot, ty }, scalar) => {
                let value = match (ty, scalar) {
                    (ScalarType::U32, Arg::U32(v)) => {
                        if let Some((_, pinned)) =
                            spec.pinned.iter().find(|(n, p)| n == binding.name() && p != v)
                        {
                            return Err(argument(format!(
                                "the program is built for {} = {pinned} only, and this dispatch passes {v}",
                                binding.name()
                            )));
                        }
                        ScalarValue::U32(*v)
                    }
                    (ScalarType::I32, Arg::I32(v)) => ScalarValue::I32(*v),
                    (ScalarType::F32, Arg::F32(v)) => ScalarValue::F32(*v),
                    _ => return Err(type_error(spec, index, binding, arg)),
                };
                checked.scalars.push((slot, value));
            }
            (PlanEntry::Storage { .. }, _) => return Err(type_error(spec, index, binding, arg)),
        }
    }
    for (axis, (&count, &max)) in groups.iter().zip(&limits.max_workgroup_count).enumerate() {
        if count == 0 || count > max {
            return Err(KernelError::Grid {
                kernel: spec.name.clone(),
                problem: format!(
                    "workgroup count {count} on axis {} must be between 1 and the device limit {max}",
                    AXES[axis]
                ),
            });
        }
        // Invocation ids are 32-bit on every backend.
        let invocations = u64::from(count) * u64::from(spec.workgroup_size[axis]);
        if invocations > u64::from(u32::MAX) {
            return Err(KernelError::Grid {
                kernel: spec.name.clone(),
                problem: format!(
                    "{count} workgroups of {} on axis {} are {invocations} invocations, more than the \
                     {} a 32-bit invocation id can number",
                    spec.workgroup_size[axis],
                    AXES[axis],
                    u32::MAX
                ),
            });
        }
    }
    Ok(checked)
}

/// A range bound as a storage buffer: a start the device can bind, not more bytes than a kernel
/// may bind.
fn check_storage_range(limits: &Limits, offset: u64, size: u64) -> Result<(), String> {
    let alignment = limits.storage_buffer_offset_alignment.max(1);
    if offset % alignment != 0 {
        return Err(format!(
            "offset {offset} is not a multiple of the device's storage buffer offset alignment ({alignment} bytes)"
        ));
    }
    if size > limits.max_storage_buffer_bytes {
        return Err(format!(
            "{size} bytes are more than a kernel may bind on this device ({} bytes)",
            limits.max_storage_buffer_bytes
        ));
    }
    Ok(())
}

/// A range read as texels: whole texels, a start the device can bind, not more texels than a
/// texel buffer holds.
fn check_texels(limits: &Limits, format: TexelFormat, offset: u64, size: u64) -> Result<(), String> {
    let bytes = format.bytes();
    if size % bytes != 0 {
        return Err(format!(
            "{size} bytes are not a whole number of {} texels ({bytes} bytes each)",
            format.name()
        ));
    }
    let alignment = limits.texel_buffer_offset_alignment.max(1);
    if offset % alignment != 0 {
        return Err(format!(
            "offset {offset} is not a multiple of the device's texel buffer offset alignment ({alignment} bytes)"
        ));
    }
    let texels = size / bytes;
    if texels > limits.max_texel_buffer_texels {
        return Err(format!(
            "{texels} texels are more than a texel buffer holds on this device ({})",
            limits.max_texel_buffer_texels
        ));
    }
    Ok(())
}

fn type_error(spec: &KernelSpec, index: usize, binding: &Binding, arg: &Arg<'_>) -> KernelError {
    KernelError::ArgumentType {
        kernel: spec.name.clone(),
        index,
        name: binding.name().to_owned(),
        expected: binding.describe(),
        got: arg.describe().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::{ScalarSlot, StorageSlot};

    fn interface() -> ProgramInterface {
        ProgramInterface {
            storage: vec![
                StorageSlot {
                    binding: 0,
                    names: vec!["X".into(), "x".into()],
                    min_bytes: 4,
                    read_only: Some(true),
                    texels: None,
                },
                StorageSlot {
                    binding: 1,
                    names: vec!["Y".into(), "y".into()],
                    min_bytes: 4,
                    read_only: Some(false),
                    texels: None,
                },
            ],
            scalars: vec![
                ScalarSlot { name: "a".into(), ty: Some(ScalarType::F32), type_name: "float".into() },
                ScalarSlot { name: "n".into(), ty: Some(ScalarType::U32), type_name: "uint".into() },
            ],
        }
    }

    fn spec() -> KernelSpec {
        KernelSpec::new("saxpy", [64, 1, 1])
            .storage("x", Access::ReadOnly)
            .storage("y", Access::ReadWrite)
            .scalar("a", ScalarType::F32)
            .scalar("n", ScalarType::U32)
    }

    fn problem(spec: &KernelSpec) -> String {
        plan(spec, &interface()).unwrap_err().to_string()
    }

    #[test]
    fn a_matching_spec_gets_a_plan_whatever_the_scalar_order() {
        let plan = plan(&spec(), &interface()).unwrap();
        assert_eq!(plan.entries[3], PlanEntry::Scalar { slot: 1, ty: ScalarType::U32 });
        let swapped = KernelSpec::new("saxpy", [64, 1, 1])
            .storage("x", Access::ReadOnly)
            .storage("y", Access::ReadWrite)
            .scalar("n", ScalarType::U32)
            .scalar("a", ScalarType::F32);
        let swapped = super::plan(&swapped, &interface()).unwrap();
        assert_eq!(swapped.entries[2], PlanEntry::Scalar { slot: 1, ty: ScalarType::U32 });
    }

    #[test]
    fn every_disagreement_names_both_sides() {
        let misspelt = spec().scalar("m", ScalarType::U32);
        assert!(
            problem(&misspelt).contains("`m`: the program has no active scalar"),
            "{}",
            problem(&misspelt)
        );
        let mut wrong_type = spec();
        wrong_type.bindings[3] = Binding::Scalar { name: "n".into(), ty: ScalarType::I32 };
        assert!(problem(&wrong_type).contains("the spec says i32 but the program declares `uint`"));
        let swapped = KernelSpec::new("saxpy", [64, 1, 1])
            .storage("y", Access::ReadWrite)
            .storage("x", Access::ReadOnly)
            .scalar("a", ScalarType::F32)
            .scalar("n", ScalarType::U32);
        assert!(problem(&swapped).contains("binding 0, but the program declares it at binding 1"));
        let mut read_only = spec();
        read_only.bindings[1] = Binding::Storage { name: "y".into(), access: Access::ReadOnly };
        assert!(problem(&read_only).contains("the spec says ReadOnly but the program may write it"));
        let missing = KernelSpec::new("saxpy", [64, 1, 1])
            .storage("x", Access::ReadOnly)
            .storage("y", Access::ReadWrite)
            .scalar("a", ScalarType::F32);
        assert!(problem(&missing).contains("`n`: the program declares this `uint` scalar"));
    }

    #[test]
    fn views_of_one_buffer_bind_together_and_the_buffer_must_suit_all() {
        let mut views = interface();
        views.storage.push(StorageSlot {
            binding: 0,
            names: vec!["XPairs".into(), "x_pairs".into()],
            min_bytes: 16,
            read_only: Some(false),
            texels: None,
        });
        let mut writes_x = spec();
        writes_x.bindings[0] = Binding::Storage { name: "x".into(), access: Access::ReadWrite };
        let plan = plan(&writes_x, &views).unwrap();
        assert_eq!(
            plan.entries[0],
            PlanEntry::Storage { slot: 0, min_bytes: 16, writes: true, texels: None }
        );
        assert_eq!(plan.entries.len(), 4, "the second view is no binding of its own");
        let read_only = super::plan(&spec(), &views).unwrap_err().to_string();
        assert!(read_only.contains("the spec says ReadOnly but the program may write it"), "{read_only}");
    }

    /// `x` read as float texels at unit 0, `y` a storage buffer at binding 1.
    fn texel_interface() -> ProgramInterface {
        let mut texels = interface();
        texels.storage[0] = StorageSlot {
            binding: 0,
            names: vec!["x".into()],
            min_bytes: 0,
            read_only: Some(true),
            texels: Some(TexelComponent::Float),
        };
        texels
    }

    fn limits() -> Limits {
        Limits {
            max_workgroup_size: [1024; 3],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_shared_memory_bytes: 49152,
            max_storage_buffer_bytes: 1 << 30,
            max_storage_buffer_bindings: 16,
            storage_buffer_offset_alignment: 16,
            max_texel_buffer_texels: 1024,
            texel_buffer_offset_alignment: 256,
        }
    }

    #[test]
    fn texels_must_be_read_as_texels_of_the_samplers_component_type() {
        let texels = KernelSpec::new("saxpy", [64, 1, 1])
            .storage("x", Access::Texels(TexelFormat::Rgba32F))
            .storage("y", Access::ReadWrite)
            .scalar("a", ScalarType::F32)
            .scalar("n", ScalarType::U32);
        let planned = plan(&texels, &texel_interface()).unwrap();
        assert_eq!(
            planned.entries[0],
            PlanEntry::Storage { slot: 0, min_bytes: 0, writes: false, texels: Some(TexelFormat::Rgba32F) }
        );
        let problem = |spec: &KernelSpec, interface: &ProgramInterface| {
            super::plan(spec, interface).unwrap_err().to_string()
        };
        let as_storage = problem(&spec(), &texel_interface());
        assert!(
            as_storage.contains("`x`: the program reads it as texels (a `samplerBuffer`)"),
            "{as_storage}"
        );
        let mut uint_texels = texels.clone();
        uint_texels.bindings[0] =
            Binding::Storage { name: "x".into(), access: Access::Texels(TexelFormat::R32Ui) };
        let wrong_type = problem(&uint_texels, &texel_interface());
        assert!(
            wrong_type.contains(
                "r32ui texels, which a `usamplerBuffer` reads, but the program declares a `samplerBuffer`"
            ),
            "{wrong_type}"
        );
        let not_a_sampler = problem(&texels, &interface());
        assert!(not_a_sampler.contains("but the program declares a storage buffer"), "{not_a_sampler}");
    }

    #[test]
    fn a_device_without_texel_buffers_refuses_texel_reads_before_compiling() {
        let texels = KernelSpec::new("k", [64, 1, 1]).storage("x", Access::Texels(TexelFormat::R32F));
        assert!(check_spec(&texels, &limits()).is_ok());
        let none = Limits { max_texel_buffer_texels: 0, ..limits() };
        let refused = check_spec(&texels, &none).unwrap_err().to_string();
        assert!(
            refused.contains("reads `x` as texels (Access::Texels), and this device has no texel buffers")
        );
    }

    #[test]
    fn a_texel_range_is_whole_texels_aligned_and_within_the_devices_texel_count() {
        let limits = limits();
        assert!(check_texels(&limits, TexelFormat::Rgba32F, 256, 16 * 1024).is_ok());
        let ragged = check_texels(&limits, TexelFormat::Rgba32F, 0, 20).unwrap_err();
        assert!(
            ragged.contains("20 bytes are not a whole number of rgba32f texels (16 bytes each)"),
            "{ragged}"
        );
        let misaligned = check_texels(&limits, TexelFormat::R32F, 16, 64).unwrap_err();
        assert!(misaligned.contains("texel buffer offset alignment (256 bytes)"), "{misaligned}");
        let too_many = check_texels(&limits, TexelFormat::R32F, 0, 4 * 1025).unwrap_err();
        assert!(too_many.contains("1025 texels are more than a texel buffer holds on this device (1024)"));
    }
}
