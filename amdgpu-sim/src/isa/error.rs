//! Errors of the ISA interpreter: what a wave did wrong, where (kernel and PC), and how to read it.

use std::fmt;

/// The kind of memory access that faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store or an atomic.
    Write,
    /// Instruction fetch (needs an executable mapping).
    Fetch,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Fetch => "fetch",
        })
    }
}

/// A memory implementation refused an access (unmapped, or without the needed permission).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryFault {
    /// The first byte's address.
    pub addr: u64,
    /// What was attempted.
    pub access: Access,
}

/// Why a dispatch stopped. Every variant names the kernel; those raised by an instruction name its PC.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// An access to memory that is not mapped, or without the permission it needs.
    #[error("GPU page fault at {addr:#x} ({access}) in kernel {kernel} at PC {pc:#x}")]
    PageFault {
        /// The faulting address.
        addr: u64,
        /// What was attempted.
        access: Access,
        /// The kernel's name.
        kernel: String,
        /// The instruction's address.
        pc: u64,
    },
    /// An instruction the decoder does not know or the interpreter does not implement.
    #[error(
        "unknown instruction in kernel {kernel} at PC {pc:#x}: {encoding} opcode {opcode} \
         (first dword {word:#010x}); the simulator does not implement it"
    )]
    UnknownInstruction {
        /// The encoding's name (`VOP3`, `SOP1`...).
        encoding: &'static str,
        /// The opcode within that encoding.
        opcode: u32,
        /// The instruction's first dword.
        word: u32,
        /// The kernel's name.
        kernel: String,
        /// The instruction's address.
        pc: u64,
    },
    /// A known instruction or setting the simulator does not model.
    #[error("unsupported in kernel {kernel} at PC {pc:#x}: {what}")]
    Unsupported {
        /// What is not modelled.
        what: String,
        /// The kernel's name.
        kernel: String,
        /// The instruction's address.
        pc: u64,
    },
    /// An LDS access past the workgroup's allocation.
    #[error(
        "LDS access out of range in kernel {kernel} at PC {pc:#x}: {size} bytes at {addr:#x}, \
         the workgroup has {lds_bytes} bytes of LDS"
    )]
    LdsOutOfRange {
        /// The LDS address accessed.
        addr: u64,
        /// Bytes accessed.
        size: u32,
        /// The workgroup's LDS allocation.
        lds_bytes: u32,
        /// The kernel's name.
        kernel: String,
        /// The instruction's address.
        pc: u64,
    },
    /// The dispatch ran out of its instruction budget (what a hung GPU is here).
    #[error(
        "kernel {kernel} did not finish within its budget of {budget} wave instructions \
         (a hung GPU); a wave was at PC {pc:#x}"
    )]
    Timeout {
        /// The budget in wave instructions.
        budget: u64,
        /// The kernel's name.
        kernel: String,
        /// Where a wave was.
        pc: u64,
    },
    /// The dispatch's registers ask for something invalid or not modelled; no wave ran.
    #[error("cannot dispatch kernel {kernel}: {reason}")]
    InvalidDispatch {
        /// What is wrong.
        reason: String,
        /// The kernel's name.
        kernel: String,
    },
}

/// What an instruction can raise, before the interpreter adds the kernel name and the PC.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fault {
    Memory(MemoryFault),
    Unknown {
        encoding: &'static str,
        opcode: u32,
        word: u32,
    },
    Unsupported(String),
    /// The instruction is modelled, but not with the operands this wave gave it (a buffer
    /// resource of another kind): only execution can tell, so loading a kernel never refuses it.
    UnmodelledOperands(String),
    LdsRange {
        addr: u64,
        size: u32,
        lds_bytes: u32,
    },
}

impl From<MemoryFault> for Fault {
    fn from(f: MemoryFault) -> Self {
        Fault::Memory(f)
    }
}

impl Fault {
    pub(crate) fn unsupported(what: impl Into<String>) -> Self {
        Fault::Unsupported(what.into())
    }

    pub(crate) fn at(self, kernel: &str, pc: u64) -> SimError {
        let kernel = kernel.to_string();
        match self {
            Fault::Memory(MemoryFault { addr, access }) => SimError::PageFault { addr, access, kernel, pc },
            Fault::Unknown { encoding, opcode, word } => {
                SimError::UnknownInstruction { encoding, opcode, word, kernel, pc }
            }
            Fault::Unsupported(what) | Fault::UnmodelledOperands(what) => {
                SimError::Unsupported { what, kernel, pc }
            }
            Fault::LdsRange { addr, size, lds_bytes } => {
                SimError::LdsOutOfRange { addr, size, lds_bytes, kernel, pc }
            }
        }
    }
}

pub(crate) type ExecResult<T = ()> = std::result::Result<T, Fault>;
