//! The PM4 type-3 opcodes a compute queue uses, with their names.

/// A type-3 opcode known to this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Skips its payload.
    Nop = 0x10,
    /// Launches a grid whose size is in the packet.
    DispatchDirect = 0x15,
    /// Launches a grid whose size is read from memory.
    DispatchIndirect = 0x16,
    /// Polls a register or memory location until a condition holds.
    WaitRegMem = 0x3C,
    /// Runs another command buffer.
    IndirectBuffer = 0x3F,
    /// Copies a dword (or two) between registers, memory and immediates.
    CopyData = 0x40,
    /// Copies bytes between GPU addresses on the command processor.
    DmaData = 0x50,
    /// Signals a pipeline event such as a partial flush.
    EventWrite = 0x46,
    /// Performs cache actions and writes data / raises an interrupt at an event.
    ReleaseMem = 0x49,
    /// Waits for and performs cache actions before later packets run.
    AcquireMem = 0x58,
    /// Writes consecutive persistent-state (SH) registers.
    SetShReg = 0x76,
    /// Writes consecutive user-config registers.
    SetUconfigReg = 0x79,
}

impl Opcode {
    /// Every known opcode.
    pub const ALL: [Opcode; 12] = [
        Opcode::Nop,
        Opcode::DispatchDirect,
        Opcode::DispatchIndirect,
        Opcode::WaitRegMem,
        Opcode::IndirectBuffer,
        Opcode::CopyData,
        Opcode::EventWrite,
        Opcode::ReleaseMem,
        Opcode::DmaData,
        Opcode::AcquireMem,
        Opcode::SetShReg,
        Opcode::SetUconfigReg,
    ];

    /// The opcode for a raw byte, if known.
    pub const fn from_u8(byte: u8) -> Option<Opcode> {
        Some(match byte {
            0x10 => Opcode::Nop,
            0x15 => Opcode::DispatchDirect,
            0x16 => Opcode::DispatchIndirect,
            0x3C => Opcode::WaitRegMem,
            0x3F => Opcode::IndirectBuffer,
            0x40 => Opcode::CopyData,
            0x46 => Opcode::EventWrite,
            0x49 => Opcode::ReleaseMem,
            0x50 => Opcode::DmaData,
            0x58 => Opcode::AcquireMem,
            0x76 => Opcode::SetShReg,
            0x79 => Opcode::SetUconfigReg,
            _ => return None,
        })
    }

    /// The name hardware documentation and other tools use for the opcode.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::Nop => "NOP",
            Opcode::DispatchDirect => "DISPATCH_DIRECT",
            Opcode::DispatchIndirect => "DISPATCH_INDIRECT",
            Opcode::WaitRegMem => "WAIT_REG_MEM",
            Opcode::IndirectBuffer => "INDIRECT_BUFFER",
            Opcode::CopyData => "COPY_DATA",
            Opcode::EventWrite => "EVENT_WRITE",
            Opcode::ReleaseMem => "RELEASE_MEM",
            Opcode::DmaData => "DMA_DATA",
            Opcode::AcquireMem => "ACQUIRE_MEM",
            Opcode::SetShReg => "SET_SH_REG",
            Opcode::SetUconfigReg => "SET_UCONFIG_REG",
        }
    }
}
