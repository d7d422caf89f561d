//! Error types of every layer of the crate, and the crate-wide `Result` alias.

use thiserror::Error;

/// The crate-wide result type; the error defaults to [`enum@Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Any error this crate reports.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// Building a packet failed.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A register field value did not fit its bit range.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A dword stream could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A GPU generation name was not recognised.
    #[error(transparent)]
    ParseGfx(#[from] ParseGfxError),
    /// A hex text dump could not be read.
    #[error(transparent)]
    ParseHex(#[from] ParseHexError),
}

/// Errors raised while writing packets.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The caller's slice cannot hold the packet.
    #[error("buffer full: packet needs {needed} dwords at offset {offset}, capacity is {capacity}")]
    BufferFull {
        /// Dwords the packet needs.
        needed: usize,
        /// Dword offset at which the packet would start.
        offset: usize,
        /// Total capacity of the slice in dwords.
        capacity: usize,
    },
    /// A register run must hold at least one value.
    #[error("a register write needs at least one value")]
    EmptyRegisterRun,
    /// The payload exceeds what the 14-bit count field can describe.
    #[error("payload of {len} dwords exceeds the packet limit of {max}")]
    PayloadTooLong {
        /// Requested payload length in dwords.
        len: usize,
        /// Largest payload a packet may carry.
        max: usize,
    },
    /// The register (or the end of the run) lies outside the packet's register space.
    #[error("register run 0x{offset:05x} (+{len} regs) is outside the {space} space")]
    RegisterOutOfSpace {
        /// Byte offset of the first register.
        offset: u32,
        /// Number of registers in the run.
        len: usize,
        /// Name of the space the packet addresses.
        space: &'static str,
    },
    /// An address does not meet the packet's alignment rule.
    #[error("address 0x{addr:x} must be aligned to {align} bytes")]
    Misaligned {
        /// The offending address.
        addr: u64,
        /// Required alignment in bytes.
        align: u64,
    },
    /// A packet field value does not fit its bit range.
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// A value that does not fit a register or packet field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("value {value:#x} does not fit field {field} ({bits} bits)")]
pub struct FieldError {
    /// Field name.
    pub field: &'static str,
    /// The rejected value.
    pub value: u64,
    /// Width of the field in bits.
    pub bits: u32,
}

/// A decoding failure, located by the dword offset of the packet that caused it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("dword {offset}: {kind}")]
pub struct DecodeError {
    /// Dword offset of the offending packet's header in the stream.
    pub offset: usize,
    /// What went wrong.
    pub kind: DecodeErrorKind,
}

/// The reasons a dword stream cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeErrorKind {
    /// The header's type field is 0 or 1, which compute command streams never use.
    #[error("bad header 0x{header:08x}: packet type {ty} is not supported")]
    BadHeader {
        /// The header dword.
        header: u32,
        /// Its type field (bits 31:30).
        ty: u32,
    },
    /// The opcode is not one this decoder knows.
    #[error("unknown opcode 0x{opcode:02x} in header 0x{header:08x}")]
    UnknownOpcode {
        /// The header dword.
        header: u32,
        /// The opcode byte.
        opcode: u8,
    },
    /// The header announces more payload than the stream holds.
    #[error("truncated {name}: header announces {expected} payload dwords, {available} remain")]
    Truncated {
        /// Packet name.
        name: &'static str,
        /// Payload dwords the header announces.
        expected: usize,
        /// Payload dwords left in the stream.
        available: usize,
    },
    /// The payload length is not one the packet allows.
    #[error("{name} must carry {expected} payload dwords, header says {got}")]
    BadLength {
        /// Packet name.
        name: &'static str,
        /// Description of the allowed lengths.
        expected: &'static str,
        /// Payload dwords the header announces.
        got: usize,
    },
    /// A register write names a register missing from the generation's map.
    #[error("unknown register 0x{offset:05x} in {name} for {gfx}")]
    UnknownRegister {
        /// Packet name.
        name: &'static str,
        /// Byte offset of the register.
        offset: u32,
        /// The generation whose map was searched.
        gfx: &'static str,
    },
}

/// A GPU generation name that is not gfx1030..gfx1036 or gfx1100..gfx1103.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unsupported GPU target {0:?}: expected gfx1030..gfx1036 or gfx1100..gfx1103")]
pub struct ParseGfxError(pub String);

/// A line of a hex dword dump that is not a 32-bit hexadecimal number.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {text:?} is not a 32-bit hex dword")]
pub struct ParseHexError {
    /// 1-based line number.
    pub line: usize,
    /// The offending text.
    pub text: String,
}
