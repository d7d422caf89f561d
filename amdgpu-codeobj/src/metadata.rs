//! The AMDHSA code object metadata: the msgpack document in the `NT_AMDGPU_METADATA` note (owner
//! "AMDGPU", type 32) of code object v3+ as serde structs, and the classification of each
//! argument's `.value_kind` into what the dispatch code must put in the kernarg segment.

use serde::Deserialize;

use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

/// ELF note type of the msgpack metadata.
pub const NT_AMDGPU_METADATA: u32 = 32;
/// ELF note owner of the metadata.
pub const NOTE_OWNER: &str = "AMDGPU";

/// The whole metadata document.
#[derive(Debug, Clone, Deserialize)]
pub struct CodeObjectMetadata {
    /// `amdhsa.version`: the metadata format's major and minor version.
    #[serde(rename = "amdhsa.version", default)]
    pub version: Vec<u32>,
    /// `amdhsa.target`: the target triple and processor with its features.
    #[serde(rename = "amdhsa.target", default)]
    pub target: Option<String>,
    /// `amdhsa.kernels`: one entry per kernel.
    #[serde(rename = "amdhsa.kernels", default)]
    pub kernels: Vec<KernelMetadata>,
    /// printf format strings of the whole code object: `id:count:size...:format` each.
    #[serde(rename = "amdhsa.printf", default)]
    pub printf: Vec<String>,
}

/// One kernel's entry.
#[derive(Debug, Clone, Deserialize)]
pub struct KernelMetadata {
    /// The kernel's name.
    #[serde(rename = ".name")]
    pub name: String,
    /// The kernel descriptor's symbol, `<name>.kd`.
    #[serde(rename = ".symbol")]
    pub symbol: String,
    /// Its arguments, explicit then hidden, in kernarg order.
    #[serde(rename = ".args", default)]
    pub args: Vec<ArgMetadata>,
    /// Bytes of the kernarg segment.
    #[serde(rename = ".kernarg_segment_size")]
    pub kernarg_segment_size: u32,
    /// Alignment of the kernarg segment.
    #[serde(rename = ".kernarg_segment_align")]
    pub kernarg_segment_align: u32,
    /// 32 or 64.
    #[serde(rename = ".wavefront_size")]
    pub wavefront_size: u32,
    /// LDS bytes allocated statically.
    #[serde(rename = ".group_segment_fixed_size")]
    pub group_segment_fixed_size: u32,
    /// Scratch bytes per work-item allocated statically.
    #[serde(rename = ".private_segment_fixed_size")]
    pub private_segment_fixed_size: u32,
    /// SGPRs used.
    #[serde(rename = ".sgpr_count")]
    pub sgpr_count: u32,
    /// VGPRs used.
    #[serde(rename = ".vgpr_count")]
    pub vgpr_count: u32,
    /// Largest workgroup (in work-items) the kernel supports.
    #[serde(rename = ".max_flat_workgroup_size")]
    pub max_flat_workgroup_size: u32,
    /// Whether the stack size is only known at run time.
    #[serde(rename = ".uses_dynamic_stack", default)]
    pub uses_dynamic_stack: bool,
    /// `reqd_work_group_size`, if the source declares it.
    #[serde(rename = ".reqd_workgroup_size", default)]
    pub reqd_workgroup_size: Option<Vec<u32>>,
    /// `work_group_size_hint`, if the source declares it.
    #[serde(rename = ".workgroup_size_hint", default)]
    pub workgroup_size_hint: Option<Vec<u32>>,
    /// SGPRs spilled to memory.
    #[serde(rename = ".sgpr_spill_count", default)]
    pub sgpr_spill_count: u32,
    /// VGPRs spilled to scratch.
    #[serde(rename = ".vgpr_spill_count", default)]
    pub vgpr_spill_count: u32,
    /// Source language (e.g. `OpenCL C`).
    #[serde(rename = ".language", default)]
    pub language: Option<String>,
}

/// One argument of a kernel, explicit or hidden.
#[derive(Debug, Clone, Deserialize)]
pub struct ArgMetadata {
    /// The argument's name in the source.
    #[serde(rename = ".name", default)]
    pub name: Option<String>,
    /// Its type name in the source.
    #[serde(rename = ".type_name", default)]
    pub type_name: Option<String>,
    /// Byte offset in the kernarg segment.
    #[serde(rename = ".offset")]
    pub offset: u32,
    /// Size in bytes.
    #[serde(rename = ".size")]
    pub size: u32,
    /// What it is (`global_buffer`, `by_value`, `hidden_global_offset_x`, ...).
    #[serde(rename = ".value_kind")]
    pub value_kind: String,
    /// Address space of a pointer (`global`, `constant`, ...).
    #[serde(rename = ".address_space", default)]
    pub address_space: Option<String>,
    /// Declared access of a pointer (`read_only`, ...).
    #[serde(rename = ".access", default)]
    pub access: Option<String>,
    /// Access the compiler found the kernel makes.
    #[serde(rename = ".actual_access", default)]
    pub actual_access: Option<String>,
    /// Whether a pointer is declared `const`.
    #[serde(rename = ".is_const", default)]
    pub is_const: bool,
}

/// What the dispatch code puts into an argument's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A user argument passed by value (scalars).
    ByValue,
    /// A user argument that is the address of a global buffer.
    GlobalBuffer,
    /// `hidden_block_count_{x,y,z}`: number of work-groups (u32).
    BlockCount(usize),
    /// `hidden_group_size_{x,y,z}`: work-group size (u16).
    GroupSize(usize),
    /// `hidden_remainder_{x,y,z}`: size of the last, partial work-group, 0 when none (u16).
    Remainder(usize),
    /// `hidden_global_offset_{x,y,z}`: the global id offset (u64).
    GlobalOffset(usize),
    /// `hidden_grid_dims`: number of dimensions (u16).
    GridDims,
    /// `hidden_none`: padding that the kernel never reads; zeroed.
    HiddenNone,
    /// `hidden_dynamic_lds_size`: bytes of dynamically sized LDS, always 0 here (no
    /// `dynamic_shared_pointer` argument is accepted).
    DynamicLdsSize,
    /// `hidden_printf_buffer`: the address of the dispatch's printf buffer (u64).
    PrintfBuffer,
    /// `hidden_default_queue`, `hidden_completion_action`, `hidden_multigrid_sync_arg`: code
    /// object v4 lists them whenever a kernel has any hidden argument after the global offsets
    /// (printf); they serve device-side enqueue and multi-grid sync, which OpenCL C cannot reach
    /// here (libclc has no enqueue built-ins), so they are null (u64).
    Unused64,
    /// `hidden_hostcall_buffer`: where host calls would go. The backend services none (no
    /// device library here makes one), so it passes null; it is accepted only where the code
    /// keeps it without reading it (built at -O0, see `RunLimits::unoptimized_inputs`).
    HostcallBuffer,
}

impl ArgKind {
    /// Classifies a `.value_kind`; the error names what the backend does not provide.
    pub fn classify(value_kind: &str) -> std::result::Result<Self, String> {
        let axis = |suffix: &str| match suffix {
            "x" => Some(0),
            "y" => Some(1),
            "z" => Some(2),
            _ => None,
        };
        let kind = match value_kind {
            "by_value" => Self::ByValue,
            "global_buffer" => Self::GlobalBuffer,
            "hidden_grid_dims" => Self::GridDims,
            "hidden_none" => Self::HiddenNone,
            "hidden_dynamic_lds_size" => Self::DynamicLdsSize,
            "hidden_printf_buffer" => Self::PrintfBuffer,
            "hidden_hostcall_buffer" => Self::HostcallBuffer,
            "hidden_default_queue" | "hidden_completion_action" | "hidden_multigrid_sync_arg" => {
                Self::Unused64
            }
            other => {
                let per_axis = [
                    ("hidden_block_count_", Self::BlockCount as fn(usize) -> Self),
                    ("hidden_group_size_", Self::GroupSize),
                    ("hidden_remainder_", Self::Remainder),
                    ("hidden_global_offset_", Self::GlobalOffset),
                ];
                let found = per_axis
                    .iter()
                    .find_map(|(prefix, make)| other.strip_prefix(prefix).and_then(axis).map(make));
                match found {
                    Some(kind) => kind,
                    None => return Err(unsupported_reason(other)),
                }
            }
        };
        Ok(kind)
    }

    /// Bytes the kernel reads for a hidden argument (user arguments: `None`, any size).
    pub fn hidden_size(self) -> Option<u32> {
        match self {
            Self::ByValue | Self::GlobalBuffer | Self::HiddenNone => None,
            Self::BlockCount(_) => Some(4),
            Self::GroupSize(_) | Self::Remainder(_) | Self::GridDims => Some(2),
            Self::GlobalOffset(_) | Self::PrintfBuffer | Self::Unused64 | Self::HostcallBuffer => Some(8),
            Self::DynamicLdsSize => Some(4),
        }
    }
}

fn unsupported_reason(kind: &str) -> String {
    let why = match kind {
        "hidden_queue_ptr" | "queue" => {
            "it uses a device queue (queue pointer), which a PM4 submission does not have"
        }
        "hidden_heap_v1" => "it allocates device heap memory (malloc)",
        "hidden_private_base" | "hidden_shared_base" => {
            "it needs aperture bases that only pre-gfx9 targets pass as arguments"
        }
        "dynamic_shared_pointer" => {
            "it takes a __local pointer argument (dynamic LDS), which the backend does not size"
        }
        "image" | "sampler" | "pipe" => "it takes images, samplers or pipes, which the backend does not bind",
        _ => "the backend does not know this argument kind",
    };
    format!("argument kind `{kind}` is not supported: {why}")
}

/// Decodes the msgpack metadata note's payload.
pub fn parse(bytes: &[u8]) -> Result<CodeObjectMetadata> {
    rmp_serde::from_slice(bytes).map_err(|e| {
        AmdgpuError::invalid_kernel("<code object>", format!("unreadable AMDGPU metadata note: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hidden_kind_the_backend_fills_is_classified() {
        assert_eq!(ArgKind::classify("hidden_block_count_y"), Ok(ArgKind::BlockCount(1)));
        assert_eq!(ArgKind::classify("hidden_group_size_z"), Ok(ArgKind::GroupSize(2)));
        assert_eq!(ArgKind::classify("hidden_remainder_x"), Ok(ArgKind::Remainder(0)));
        assert_eq!(ArgKind::classify("hidden_global_offset_z"), Ok(ArgKind::GlobalOffset(2)));
        assert_eq!(ArgKind::classify("hidden_grid_dims"), Ok(ArgKind::GridDims));
        assert_eq!(ArgKind::classify("global_buffer"), Ok(ArgKind::GlobalBuffer));
        assert_eq!(ArgKind::classify("by_value"), Ok(ArgKind::ByValue));
    }

    #[test]
    fn kinds_the_backend_cannot_provide_are_refused_with_a_reason() {
        for kind in ["hidden_queue_ptr", "image", "hidden_block_count_w", "hidden_new_thing"] {
            let reason = ArgKind::classify(kind).unwrap_err();
            assert!(reason.contains(kind), "{reason}");
        }
        assert!(ArgKind::classify("hidden_queue_ptr").unwrap_err().contains("queue pointer"));
        // The host-call buffer is a kind of its own: refused by `check_runnable` unless the code
        // was built at -O0.
        assert_eq!(ArgKind::classify("hidden_hostcall_buffer"), Ok(ArgKind::HostcallBuffer));
    }

    #[test]
    fn garbage_metadata_is_an_error_not_a_panic() {
        let err = parse(&[0xc1, 0x00, 0x13]).unwrap_err();
        assert!(err.to_string().contains("metadata"), "{err}");
    }
}
