//! Kernel arguments and the dispatch packet: a [`KernargLayout`] is computed once per kernel from
//! its metadata (refusing argument kinds the backend cannot provide) and then fills a kernarg
//! segment per dispatch from the user's arguments and the dispatch geometry (block counts, group
//! sizes, remainders, global offsets, grid dimensions). [`dispatch_packet`] builds the
//! `hsa_kernel_dispatch_packet_t` that kernels enabling the dispatch pointer read.

use crate::metadata::{ArgKind, KernelMetadata};
use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

/// A user argument's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgValue {
    /// A buffer's GPU virtual address.
    Pointer(u64),
    /// A 32-bit unsigned integer (`uint`).
    U32(u32),
    /// A 32-bit signed integer (`int`).
    I32(i32),
    /// A 32-bit float (`float`).
    F32(f32),
    /// A 64-bit unsigned integer (`ulong`).
    U64(u64),
    /// A 64-bit signed integer (`long`).
    I64(i64),
    /// A 64-bit float (`double`).
    F64(f64),
}

impl ArgValue {
    fn describe(&self) -> &'static str {
        match self {
            Self::Pointer(_) => "a buffer",
            Self::U32(_) => "a u32",
            Self::I32(_) => "an i32",
            Self::F32(_) => "an f32",
            Self::U64(_) => "a u64",
            Self::I64(_) => "an i64",
            Self::F64(_) => "an f64",
        }
    }
}

/// What a user argument is, as the kernel declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserArg {
    /// The argument's name in the source, if the metadata keeps it.
    pub name: Option<String>,
    /// Its OpenCL C type name (e.g. `float*`), if the metadata keeps it.
    pub type_name: Option<String>,
    /// Byte offset in the kernarg segment.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// A `__global` buffer (else a by-value scalar).
    pub is_buffer: bool,
    /// The kernel only reads the buffer (`.access`/`.actual_access` read_only, or `const`).
    pub read_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    User(usize),
    Hidden(ArgKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    offset: u32,
    size: u32,
    source: Source,
}

/// Geometry of one dispatch in OpenCL terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchGrid {
    /// Work-items per work-group.
    pub workgroup_size: [u32; 3],
    /// Work-items in the whole grid (need not be a multiple of the work-group size).
    pub grid_size: [u32; 3],
    /// Added to every global id (`get_global_offset`).
    pub global_offset: [u64; 3],
    /// 1, 2 or 3 (`get_work_dim`).
    pub dims: u32,
}

impl DispatchGrid {
    /// A grid of whole work-groups: `groups` of `workgroup_size` each, no offset, dimensions
    /// counted up to the last axis larger than 1.
    pub fn from_groups(groups: [u32; 3], workgroup_size: [u32; 3]) -> Result<Self> {
        let mut grid_size = [0u32; 3];
        for axis in 0..3 {
            grid_size[axis] = groups[axis].checked_mul(workgroup_size[axis]).ok_or_else(|| {
                AmdgpuError::invalid_kernel(
                    "<dispatch>",
                    format!(
                        "{} groups of {} work-items overflow the grid on axis {axis}",
                        groups[axis], workgroup_size[axis]
                    ),
                )
            })?;
        }
        let dims = if grid_size[2] > 1 || workgroup_size[2] > 1 {
            3
        } else if grid_size[1] > 1 || workgroup_size[1] > 1 {
            2
        } else {
            1
        };
        let grid = Self { workgroup_size, grid_size, global_offset: [0; 3], dims };
        grid.validate()?;
        Ok(grid)
    }

    /// Work-groups per axis, counting a last partial one.
    pub fn groups(&self) -> [u32; 3] {
        [0, 1, 2].map(|a| self.grid_size[a].div_ceil(self.workgroup_size[a].max(1)))
    }

    /// Size of the last, partial work-group per axis (0 when the grid divides evenly).
    pub fn remainders(&self) -> [u32; 3] {
        [0, 1, 2].map(|a| self.grid_size[a] % self.workgroup_size[a].max(1))
    }

    /// Refuses empty axes, work-groups beyond the packet's 16-bit fields and bad dimension counts.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(AmdgpuError::invalid_kernel("<dispatch>", reason));
        for axis in 0..3 {
            if self.workgroup_size[axis] == 0 || self.workgroup_size[axis] > u16::MAX as u32 {
                return bad(format!(
                    "work-group size {:?} is not within 1..=65535 on every axis",
                    self.workgroup_size
                ));
            }
            if self.grid_size[axis] == 0 {
                return bad(format!("grid {:?} is empty on axis {axis}", self.grid_size));
            }
        }
        if !(1..=3).contains(&self.dims) {
            return bad(format!("{} grid dimensions; expected 1, 2 or 3", self.dims));
        }
        Ok(())
    }
}

/// Addresses of the per-dispatch buffers hidden arguments point to (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HiddenBuffers {
    /// The printf buffer (`hidden_printf_buffer`).
    pub printf_buffer: u64,
}

/// How to fill one kernel's kernarg segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernargLayout {
    kernel: String,
    size: u32,
    alignment: u32,
    slots: Vec<Slot>,
    user_args: Vec<UserArg>,
}

fn is_float_type(name: &str) -> Option<bool> {
    match name {
        "float" | "double" | "half" => Some(true),
        "char" | "uchar" | "short" | "ushort" | "int" | "uint" | "long" | "ulong" | "unsigned int"
        | "unsigned char" | "unsigned short" | "unsigned long" | "size_t" | "bool" => Some(false),
        _ => None,
    }
}

impl KernargLayout {
    /// Builds the layout; refuses arguments the backend cannot provide or that do not fit.
    pub fn new(kernel: &KernelMetadata) -> Result<Self> {
        let refuse = |reason: String| Err(AmdgpuError::invalid_kernel(&kernel.name, reason));
        let mut slots = Vec::with_capacity(kernel.args.len());
        let mut user_args = Vec::new();
        if !kernel.kernarg_segment_align.is_power_of_two() {
            return refuse(format!(
                "kernarg alignment {} is not a power of two",
                kernel.kernarg_segment_align
            ));
        }
        for (index, arg) in kernel.args.iter().enumerate() {
            let label = arg.name.clone().unwrap_or_else(|| format!("#{index}"));
            let kind = match ArgKind::classify(&arg.value_kind) {
                Ok(kind) => kind,
                Err(reason) => return refuse(format!("argument {label}: {reason}")),
            };
            let end = arg.offset.checked_add(arg.size);
            if end.is_none_or(|end| end > kernel.kernarg_segment_size) {
                return refuse(format!(
                    "argument {label} at {}+{} is outside the {}-byte kernarg segment",
                    arg.offset, arg.size, kernel.kernarg_segment_size
                ));
            }
            if let Some(expected) = kind.hidden_size() {
                if arg.size != expected {
                    return refuse(format!(
                        "hidden argument {} is {} bytes, expected {expected}",
                        arg.value_kind, arg.size
                    ));
                }
            }
            let source = match kind {
                ArgKind::ByValue | ArgKind::GlobalBuffer => {
                    let is_buffer = kind == ArgKind::GlobalBuffer;
                    if is_buffer {
                        match arg.address_space.as_deref() {
                            Some("global") | Some("constant") | None => {}
                            Some(other) => {
                                return refuse(format!("argument {label} points to the {other} address space; only global buffers are bound"))
                            }
                        }
                        if arg.size != 8 {
                            return refuse(format!(
                                "buffer argument {label} is {} bytes, expected 8",
                                arg.size
                            ));
                        }
                    } else if !matches!(arg.size, 1 | 2 | 4 | 8) {
                        return refuse(format!(
                            "by-value argument {label} is {} bytes; only scalars of 1-8 bytes are passed",
                            arg.size
                        ));
                    }
                    let access = arg.actual_access.as_deref().or(arg.access.as_deref());
                    user_args.push(UserArg {
                        name: arg.name.clone(),
                        type_name: arg.type_name.clone(),
                        offset: arg.offset,
                        size: arg.size,
                        is_buffer,
                        read_only: access == Some("read_only") || (is_buffer && arg.is_const),
                    });
                    Source::User(user_args.len() - 1)
                }
                ArgKind::HiddenNone => continue,
                hidden => Source::Hidden(hidden),
            };
            slots.push(Slot { offset: arg.offset, size: arg.size, source });
        }
        Ok(Self {
            kernel: kernel.name.clone(),
            size: kernel.kernarg_segment_size,
            alignment: kernel.kernarg_segment_align,
            slots,
            user_args,
        })
    }

    /// Bytes of the kernarg segment.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Alignment of the kernarg segment's GPU address.
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// The arguments the user passes, in order.
    pub fn user_args(&self) -> &[UserArg] {
        &self.user_args
    }

    /// Checks `args` against the declared arguments without writing anything.
    pub fn check_args(&self, args: &[ArgValue]) -> Result<()> {
        if args.len() != self.user_args.len() {
            return Err(AmdgpuError::invalid_kernel(
                &self.kernel,
                format!("{} arguments given, the kernel takes {}", args.len(), self.user_args.len()),
            ));
        }
        for (index, (value, arg)) in args.iter().zip(&self.user_args).enumerate() {
            let label = arg.name.clone().unwrap_or_else(|| format!("#{index}"));
            let mismatch = |what: &str| {
                Err(AmdgpuError::invalid_kernel(
                    &self.kernel,
                    format!(
                        "argument {index} ({label}: {}) {what}, got {}",
                        arg.type_name.as_deref().unwrap_or(if arg.is_buffer { "buffer" } else { "scalar" }),
                        value.describe()
                    ),
                ))
            };
            let (size, float) = match value {
                ArgValue::Pointer(_) => {
                    if !arg.is_buffer {
                        return mismatch("is passed by value");
                    }
                    continue;
                }
                ArgValue::U32(_) | ArgValue::I32(_) => (4, false),
                ArgValue::F32(_) => (4, true),
                ArgValue::U64(_) | ArgValue::I64(_) => (8, false),
                ArgValue::F64(_) => (8, true),
            };
            if arg.is_buffer {
                return mismatch("needs a buffer");
            }
            if size != arg.size {
                return mismatch(&format!("is {} bytes", arg.size));
            }
            if let Some(declared_float) = arg.type_name.as_deref().and_then(is_float_type) {
                if declared_float != float {
                    return mismatch(if declared_float { "is floating point" } else { "is an integer" });
                }
            }
        }
        Ok(())
    }

    /// Whether the kernel takes a printf buffer.
    pub fn uses_printf(&self) -> bool {
        self.slots.iter().any(|s| s.source == Source::Hidden(ArgKind::PrintfBuffer))
    }

    /// Writes the kernarg segment for one dispatch into `out` (at least [`size`](Self::size)
    /// bytes); bytes no argument covers are zeroed.
    pub fn fill(
        &self,
        args: &[ArgValue],
        grid: &DispatchGrid,
        hidden: &HiddenBuffers,
        out: &mut [u8],
    ) -> Result<()> {
        self.check_args(args)?;
        grid.validate()?;
        let size = self.size as usize;
        if out.len() < size {
            return Err(AmdgpuError::invalid_kernel(
                &self.kernel,
                format!("kernarg buffer of {} bytes is smaller than the {size}-byte segment", out.len()),
            ));
        }
        let out = &mut out[..size];
        out.fill(0);
        let groups = grid.groups();
        let remainders = grid.remainders();
        for slot in &self.slots {
            let at = slot.offset as usize;
            let mut word = [0u8; 8];
            match slot.source {
                Source::User(index) => match args[index] {
                    ArgValue::Pointer(v) | ArgValue::U64(v) => word = v.to_le_bytes(),
                    ArgValue::I64(v) => word = v.to_le_bytes(),
                    ArgValue::F64(v) => word = v.to_le_bytes(),
                    ArgValue::U32(v) => word[..4].copy_from_slice(&v.to_le_bytes()),
                    ArgValue::I32(v) => word[..4].copy_from_slice(&v.to_le_bytes()),
                    ArgValue::F32(v) => word[..4].copy_from_slice(&v.to_le_bytes()),
                },
                Source::Hidden(kind) => {
                    let value: u64 = match kind {
                        ArgKind::BlockCount(a) => groups[a] as u64,
                        ArgKind::GroupSize(a) => grid.workgroup_size[a] as u64,
                        ArgKind::Remainder(a) => remainders[a] as u64,
                        ArgKind::GlobalOffset(a) => grid.global_offset[a],
                        ArgKind::GridDims => grid.dims as u64,
                        ArgKind::PrintfBuffer => hidden.printf_buffer,
                        ArgKind::DynamicLdsSize
                        | ArgKind::Unused64
                        | ArgKind::HostcallBuffer
                        | ArgKind::HiddenNone
                        | ArgKind::ByValue
                        | ArgKind::GlobalBuffer => 0,
                    };
                    word = value.to_le_bytes();
                }
            }
            let n = slot.size as usize;
            out[at..at + n].copy_from_slice(&word[..n]);
        }
        Ok(())
    }
}

/// Size of an `hsa_kernel_dispatch_packet_t`.
pub const DISPATCH_PACKET_SIZE: usize = 64;
/// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
const PACKET_TYPE_KERNEL_DISPATCH: u16 = 2;
/// Header: barrier bit, system-scope acquire and release fences (the values a runtime writes).
const PACKET_HEADER: u16 = PACKET_TYPE_KERNEL_DISPATCH | (1 << 8) | (2 << 9) | (2 << 11);

/// Segment sizes and addresses a dispatch packet carries besides the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketAddresses {
    /// Bytes of private segment per work-item.
    pub private_segment_size: u32,
    /// Bytes of LDS per work-group.
    pub group_segment_size: u32,
    /// GPU address of the kernel descriptor.
    pub kernel_object: u64,
    /// GPU address of the kernarg segment.
    pub kernarg_address: u64,
}

/// The 64-byte `hsa_kernel_dispatch_packet_t` for a dispatch: header @0, setup (dimensions) @2,
/// work-group size x/y/z @4/6/8 (u16), grid size x/y/z @12/16/20 (u32), private and group segment
/// sizes @24/28, kernel object @32, kernarg address @40, completion signal @56 (0: none).
pub fn dispatch_packet(
    grid: &DispatchGrid,
    addresses: &PacketAddresses,
) -> Result<[u8; DISPATCH_PACKET_SIZE]> {
    grid.validate()?;
    let mut p = [0u8; DISPATCH_PACKET_SIZE];
    p[0..2].copy_from_slice(&PACKET_HEADER.to_le_bytes());
    p[2..4].copy_from_slice(&(grid.dims as u16).to_le_bytes());
    for axis in 0..3 {
        let wg = grid.workgroup_size[axis] as u16;
        p[4 + 2 * axis..6 + 2 * axis].copy_from_slice(&wg.to_le_bytes());
        p[12 + 4 * axis..16 + 4 * axis].copy_from_slice(&grid.grid_size[axis].to_le_bytes());
    }
    p[24..28].copy_from_slice(&addresses.private_segment_size.to_le_bytes());
    p[28..32].copy_from_slice(&addresses.group_segment_size.to_le_bytes());
    p[32..40].copy_from_slice(&addresses.kernel_object.to_le_bytes());
    p[40..48].copy_from_slice(&addresses.kernarg_address.to_le_bytes());
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::ArgMetadata;

    fn arg(offset: u32, size: u32, kind: &str, type_name: Option<&str>) -> ArgMetadata {
        ArgMetadata {
            name: None,
            type_name: type_name.map(str::to_string),
            offset,
            size,
            value_kind: kind.to_string(),
            address_space: (kind == "global_buffer").then(|| "global".to_string()),
            access: None,
            actual_access: None,
            is_const: false,
        }
    }

    /// saxpy as clang-22 lays it out with libclc (x, y, a, n, then the v5 hidden arguments).
    fn saxpy() -> KernelMetadata {
        let mut args = vec![
            arg(0, 8, "global_buffer", Some("float*")),
            arg(8, 8, "global_buffer", Some("float*")),
            arg(16, 4, "by_value", Some("float")),
            arg(20, 4, "by_value", Some("uint")),
        ];
        let hidden = [
            (24, 4, "hidden_block_count_x"),
            (28, 4, "hidden_block_count_y"),
            (32, 4, "hidden_block_count_z"),
            (36, 2, "hidden_group_size_x"),
            (38, 2, "hidden_group_size_y"),
            (40, 2, "hidden_group_size_z"),
            (42, 2, "hidden_remainder_x"),
            (44, 2, "hidden_remainder_y"),
            (46, 2, "hidden_remainder_z"),
            (64, 8, "hidden_global_offset_x"),
            (72, 8, "hidden_global_offset_y"),
            (80, 8, "hidden_global_offset_z"),
            (88, 2, "hidden_grid_dims"),
        ];
        args.extend(hidden.iter().map(|(o, s, k)| arg(*o, *s, k, None)));
        KernelMetadata {
            name: "saxpy".into(),
            symbol: "saxpy.kd".into(),
            args,
            kernarg_segment_size: 280,
            kernarg_segment_align: 8,
            wavefront_size: 32,
            group_segment_fixed_size: 0,
            private_segment_fixed_size: 0,
            sgpr_count: 18,
            vgpr_count: 4,
            max_flat_workgroup_size: 256,
            uses_dynamic_stack: false,
            reqd_workgroup_size: Some(vec![256, 1, 1]),
            workgroup_size_hint: None,
            sgpr_spill_count: 0,
            vgpr_spill_count: 0,
            language: Some("OpenCL C".into()),
        }
    }

    fn u16_at(b: &[u8], o: usize) -> u16 {
        u16::from_le_bytes([b[o], b[o + 1]])
    }
    fn u32_at(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], o: usize) -> u64 {
        u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
    }

    #[test]
    fn fills_user_and_hidden_arguments() {
        let layout = KernargLayout::new(&saxpy()).unwrap();
        assert_eq!(layout.size(), 280);
        assert_eq!(layout.user_args().len(), 4);
        let grid = DispatchGrid {
            workgroup_size: [256, 1, 1],
            grid_size: [1000, 1, 1],
            global_offset: [5, 0, 0],
            dims: 1,
        };
        let mut out = vec![0xAAu8; 300];
        let args = [
            ArgValue::Pointer(0x1_0000_0000),
            ArgValue::Pointer(0x2_0000_0100),
            ArgValue::F32(2.5),
            ArgValue::U32(1000),
        ];
        layout.fill(&args, &grid, &HiddenBuffers::default(), &mut out).unwrap();
        assert_eq!(u64_at(&out, 0), 0x1_0000_0000);
        assert_eq!(u64_at(&out, 8), 0x2_0000_0100);
        assert_eq!(f32::from_le_bytes(out[16..20].try_into().unwrap()), 2.5);
        assert_eq!(u32_at(&out, 20), 1000);
        assert_eq!([u32_at(&out, 24), u32_at(&out, 28), u32_at(&out, 32)], [4, 1, 1]);
        assert_eq!([u16_at(&out, 36), u16_at(&out, 38), u16_at(&out, 40)], [256, 1, 1]);
        assert_eq!([u16_at(&out, 42), u16_at(&out, 44), u16_at(&out, 46)], [1000 % 256, 0, 0]);
        assert_eq!([u64_at(&out, 64), u64_at(&out, 72), u64_at(&out, 80)], [5, 0, 0]);
        assert_eq!(u16_at(&out, 88), 1);
        // Gaps are zeroed, bytes past the segment untouched.
        assert!(out[48..64].iter().all(|&b| b == 0));
        assert!(out[90..280].iter().all(|&b| b == 0));
        assert!(out[280..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn wrong_arguments_are_refused_naming_the_kernel() {
        let layout = KernargLayout::new(&saxpy()).unwrap();
        let grid = DispatchGrid::from_groups([4, 1, 1], [256, 1, 1]).unwrap();
        let mut out = vec![0u8; 280];
        let cases: [&[ArgValue]; 4] = [
            &[ArgValue::Pointer(0), ArgValue::Pointer(0), ArgValue::F32(1.0)],
            &[ArgValue::Pointer(0), ArgValue::Pointer(0), ArgValue::U32(1), ArgValue::U32(1)],
            &[ArgValue::Pointer(0), ArgValue::U32(0), ArgValue::F32(1.0), ArgValue::U32(1)],
            &[ArgValue::Pointer(0), ArgValue::Pointer(0), ArgValue::F64(1.0), ArgValue::U32(1)],
        ];
        for args in cases {
            let err = layout.fill(args, &grid, &HiddenBuffers::default(), &mut out).unwrap_err().to_string();
            assert!(err.contains("saxpy"), "{err}");
        }
        let good = [ArgValue::Pointer(0), ArgValue::Pointer(0), ArgValue::F32(1.0), ArgValue::U32(1)];
        layout.fill(&good, &grid, &HiddenBuffers::default(), &mut out).unwrap();
        let err = layout.fill(&good, &grid, &HiddenBuffers::default(), &mut out[..100]).unwrap_err();
        assert!(err.to_string().contains("smaller"), "{err}");
    }

    #[test]
    fn unknown_hidden_arguments_refuse_the_kernel() {
        let mut md = saxpy();
        md.args.push(arg(96, 8, "hidden_heap_v1", None));
        let err = KernargLayout::new(&md).unwrap_err().to_string();
        assert!(err.contains("saxpy") && err.contains("hidden_heap_v1"), "{err}");
        let mut md = saxpy();
        md.args.push(arg(276, 8, "hidden_none", None));
        assert!(KernargLayout::new(&md).unwrap_err().to_string().contains("outside"));
    }

    #[test]
    fn grid_from_groups_counts_dimensions() {
        let g = DispatchGrid::from_groups([4, 3, 1], [16, 16, 1]).unwrap();
        assert_eq!(g.grid_size, [64, 48, 1]);
        assert_eq!(g.dims, 2);
        assert_eq!(g.groups(), [4, 3, 1]);
        assert_eq!(g.remainders(), [0, 0, 0]);
        assert!(DispatchGrid::from_groups([0, 1, 1], [16, 1, 1]).is_err());
        assert!(DispatchGrid::from_groups([u32::MAX, 1, 1], [16, 1, 1]).is_err());
    }

    #[test]
    fn dispatch_packet_layout() {
        let grid = DispatchGrid {
            workgroup_size: [16, 16, 1],
            grid_size: [100, 50, 3],
            global_offset: [0; 3],
            dims: 3,
        };
        let p = dispatch_packet(
            &grid,
            &PacketAddresses {
                private_segment_size: 0,
                group_segment_size: 2048,
                kernel_object: 0xdead_0000,
                kernarg_address: 0xbeef_0000,
            },
        )
        .unwrap();
        assert_eq!(u16_at(&p, 0) & 0xff, 2);
        assert_eq!(u16_at(&p, 2), 3);
        assert_eq!([u16_at(&p, 4), u16_at(&p, 6), u16_at(&p, 8)], [16, 16, 1]);
        assert_eq!([u32_at(&p, 12), u32_at(&p, 16), u32_at(&p, 20)], [100, 50, 3]);
        assert_eq!(u32_at(&p, 28), 2048);
        assert_eq!(u64_at(&p, 32), 0xdead_0000);
        assert_eq!(u64_at(&p, 40), 0xbeef_0000);
        assert_eq!(u64_at(&p, 56), 0);
    }
}
