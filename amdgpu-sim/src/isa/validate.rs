//! Load-time validation: decodes every instruction of a kernel before anything runs, so that an
//! instruction the interpreter cannot execute refuses the kernel at load — naming the instruction
//! and the feature it serves — instead of failing a submission and making its context guilty.
//!
//! Whether an instruction is implemented is decided by the interpreter itself, not by a second
//! list that could drift from it: each distinct instruction is executed once on a blank wave
//! against memory that refuses every access. An instruction the executor does not know, or
//! refuses for a reason its encoding alone decides (a modifier, an operand kind, a segment), is
//! refused; memory faults and LDS range errors say nothing about the instruction and pass.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use pm4::Gfx;

use super::decode::{decode, undecoded_size, Decoded, Inst};
use super::error::{Fault, MemoryFault};
use super::exec::execute;
use super::memory::GlobalMemory;
use super::mnemonic::{feature, name, name_of_word};
use super::wave::Wave;

/// SOPP opcodes whose refusal depends on reaching them, not on their encoding: s_sethalt,
/// s_trap and s_trap-like halts stop the wave with an error when executed, and s_code_end is
/// padding that only a wild jump executes.
const SOPP_RUNTIME_ONLY: [u8; 4] = [2, 16, 31, 55];
/// SOPP s_endpgm, which ends the fallback scan of code without function symbols.
const SOPP_ENDPGM: u8 = 48;

/// An instruction of a kernel's code that the interpreter cannot execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedInstruction {
    /// Offset in the code object's load image.
    pub offset: u64,
    /// LLVM's name for it, when the opcode has one (on gfx10.3 code, the gfx10 name).
    pub mnemonic: Option<&'static str>,
    /// The user-level feature it belongs to ("double precision, cl_khr_fp64").
    pub feature: Option<&'static str>,
    /// The encoding and opcode, or what about it is not modelled.
    pub detail: String,
}

impl fmt::Display for UnsupportedInstruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mnemonic {
            Some(m) => write!(f, "it uses {m}")?,
            None => f.write_str("it uses an instruction")?,
        }
        if let Some(feature) = self.feature {
            write!(f, " ({feature})")?;
        }
        write!(
            f,
            " at code offset {:#x}, which the simulator does not implement: {}",
            self.offset, self.detail
        )
    }
}

/// Memory that refuses every access: the trial execution must not touch anything.
struct NoMemory;

impl GlobalMemory for NoMemory {
    fn read(&mut self, addr: u64, _: &mut [u8]) -> Result<(), MemoryFault> {
        Err(MemoryFault { addr, access: super::error::Access::Read })
    }
    fn write(&mut self, addr: u64, _: &[u8]) -> Result<(), MemoryFault> {
        Err(MemoryFault { addr, access: super::error::Access::Write })
    }
    fn fetch(&mut self, addr: u64, _: &mut [u8]) -> Result<(), MemoryFault> {
        Err(MemoryFault { addr, access: super::error::Access::Fetch })
    }
}

fn describe(fault: Fault) -> Option<String> {
    match fault {
        Fault::Unknown { encoding, opcode, word } => {
            Some(format!("{encoding} opcode {opcode} (first dword {word:#010x})"))
        }
        Fault::Unsupported(what) => Some(what),
        Fault::Memory(_) | Fault::LdsRange { .. } | Fault::UnmodelledOperands(_) => None,
    }
}

/// Refuses `d` if the interpreter cannot execute it whatever the wave's state.
fn trial(d: &Decoded, blank: &Wave) -> Result<(), String> {
    if let Inst::Sopp { op, .. } = d.inst {
        if SOPP_RUNTIME_ONLY.contains(&op) {
            return Ok(());
        }
    }
    let mut wave = blank.clone();
    match execute(&mut wave, d, &mut NoMemory, &mut []) {
        Ok(()) => Ok(()),
        Err(fault) => describe(fault).map_or(Ok(()), Err),
    }
}

/// The dword `i` of the instruction at image offset `at`.
fn image_word(image: &[u8], at: u64, i: u32) -> Result<u32, Fault> {
    let start = at as usize + 4 * i as usize;
    image
        .get(start..start + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| Fault::unsupported(format!("the instruction at {at:#x} runs past the code")))
}

/// Decodes the instruction at image offset `at`.
pub(crate) fn decode_at(gfx: Gfx, image: &[u8], at: u64) -> Result<Decoded, Fault> {
    decode(gfx, &mut |i| image_word(image, at, i))
}

/// One instruction of a kernel's code, as the interpreter sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurveyedInstruction {
    /// Offset in the code object's load image.
    pub offset: u64,
    /// Bytes, literal included; 0 when the instruction's size is unknown (then the rest of its
    /// range is not surveyed).
    pub size: u8,
    /// LLVM's name for it, when the decoder knows one.
    pub mnemonic: Option<&'static str>,
    /// Whether the interpreter can execute it (the reason when not).
    pub executable: Result<(), String>,
}

/// Decodes every instruction in `ranges` of `image` (or, when there are none, from `entry` to
/// the first `s_endpgm`), in address order, for a wave32 or wave64 kernel, and says for each
/// whether the interpreter can execute it. `first_failure` stops at the first one it cannot.
fn survey_ranges(
    gfx: Gfx,
    image: &[u8],
    entry: u64,
    ranges: &[Range<u64>],
    wave64: bool,
    first_failure: bool,
) -> Vec<SurveyedInstruction> {
    let mut blank = Wave::with_width(0, if wave64 { 64 } else { 32 });
    blank.set_exec(u64::MAX);
    blank.gfx = gfx;
    let mut verdicts: HashMap<Vec<u8>, Result<(), String>> = HashMap::new();
    let fallback = [Range { start: entry, end: image.len() as u64 }];
    let (ranges, until_endpgm) = if ranges.is_empty() { (&fallback[..], true) } else { (ranges, false) };
    let mut sorted: Vec<&Range<u64>> = ranges.iter().collect();
    sorted.sort_by_key(|r| r.start);
    let mut out = Vec::new();
    for range in sorted {
        let mut at = range.start;
        while at < range.end {
            let d = match decode_at(gfx, image, at) {
                Ok(d) => d,
                Err(f) => {
                    let detail = describe(f).unwrap_or_else(|| "undecodable".to_string());
                    // A refused instruction whose size is known does not end the survey.
                    let size = undecoded_size(gfx, &mut |i| image_word(image, at, i)).unwrap_or(0);
                    let mnemonic = image_word(image, at, 0).ok().and_then(|w| name_of_word(gfx, w));
                    out.push(SurveyedInstruction { offset: at, size, mnemonic, executable: Err(detail) });
                    if first_failure {
                        return out;
                    }
                    if size == 0 {
                        break;
                    }
                    at += size as u64;
                    continue;
                }
            };
            let bytes = image[at as usize..at as usize + d.size as usize].to_vec();
            // Trial-execute each distinct encoding once.
            let executable = verdicts.entry(bytes).or_insert_with(|| trial(&d, &blank)).clone();
            let failed = executable.is_err();
            out.push(SurveyedInstruction { offset: at, size: d.size, mnemonic: name(gfx, &d), executable });
            if failed && first_failure {
                return out;
            }
            at += d.size as u64;
            if until_endpgm && matches!(d.inst, Inst::Sopp { op: SOPP_ENDPGM, .. }) {
                break;
            }
        }
    }
    out
}

/// Every instruction of a kernel's code with the interpreter's verdict, for coverage reports:
/// those in `ranges` of the load image `image` (or, when there are none, from `entry` to the
/// first `s_endpgm`), in address order, decoded for a wave32 or wave64 kernel.
pub fn survey_code(
    gfx: Gfx,
    image: &[u8],
    entry: u64,
    ranges: &[Range<u64>],
    wave64: bool,
) -> Vec<SurveyedInstruction> {
    survey_ranges(gfx, image, entry, ranges, wave64, false)
}

/// Checks every instruction in `ranges` of `image` (or, when there are none, from `entry` to the
/// first `s_endpgm`), in address order, for a wave32 or wave64 kernel; the first one the
/// interpreter cannot execute is the error.
pub fn check_code(
    gfx: Gfx,
    image: &[u8],
    entry: u64,
    ranges: &[Range<u64>],
    wave64: bool,
) -> Result<(), UnsupportedInstruction> {
    match survey_ranges(gfx, image, entry, ranges, wave64, true).pop() {
        Some(SurveyedInstruction { offset, mnemonic, executable: Err(detail), .. }) => {
            Err(UnsupportedInstruction { offset, mnemonic, feature: mnemonic.and_then(feature), detail })
        }
        _ => Ok(()),
    }
}
