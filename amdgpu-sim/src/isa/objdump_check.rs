//! Checks the decoder's operand fields against LLVM's disassembly of the ISA coverage corpus
//! (the workspace's `tests/fixtures/isa_corpus`, gfx1100 and gfx1030 — the gfx1030 words decoded
//! into gfx11 instructions, SDWA and VOP3b forms included): for every instruction whose first printed operand is a
//! register — the destination of ALU, load and returning-atomic instructions, the address of
//! stores — the decoder must have read the same register from the same field, and so for every
//! register source of a VALU instruction (constants, literals and modifiers are not compared). The corpus test
//! (the workspace's `tests/sim_isa_corpus.rs`) checks offsets, sizes and mnemonics; this checks
//! the operand fields those do not.

use super::decode::{Decoded, Inst, ValuEnc};
use super::mnemonic::name;
use super::operand::Src;
use super::validate::decode_at;

/// A register: kind ('v' or 's') and index in the operand encoding.
type Register = (char, u32);

/// A register as LLVM prints it: `v5`, `v[4:5]`, `v11.h`, `s4`, `s[2:3]`, `vcc_lo`, `exec_lo`,
/// `m0`, `null`, `ttmp3` — kind ('v' or 's') and the index of its first 32-bit register in the
/// operand encoding.
fn parse_register(token: &str) -> Option<Register> {
    let named = match token {
        "vcc_lo" | "vcc" => Some(106),
        "vcc_hi" => Some(107),
        "null" => Some(124),
        "m0" => Some(125),
        "exec_lo" | "exec" => Some(126),
        "exec_hi" => Some(127),
        _ => None,
    };
    if let Some(i) = named {
        return Some(('s', i));
    }
    if let Some(n) = token.strip_prefix("ttmp") {
        return n.parse::<u32>().ok().map(|n| ('s', 108 + n));
    }
    let kind = token.chars().next()?;
    if kind != 'v' && kind != 's' {
        return None;
    }
    let rest = &token[1..];
    let rest = rest.strip_prefix('[').map(|r| r.split(':').next().unwrap_or("")).unwrap_or(rest);
    let rest = rest.split('.').next().unwrap_or(rest);
    rest.parse().ok().map(|n| (kind, n))
}

/// The register the decoder holds for the operand LLVM prints first, None for instructions
/// whose first operand is not a register field this check covers.
fn first_register(d: &Decoded, name: &str) -> Option<Register> {
    let v = |r: u8| Some(('v', r as u32));
    let s = |r: u8| Some(('s', r as u32));
    match &d.inst {
        Inst::Sop2 { sdst, .. } => s(*sdst),
        // s_setpc_b64 prints its source; the others their destination.
        Inst::Sop1 { op: 72, .. } => None,
        Inst::Sop1 { sdst, .. } => s(*sdst),
        // s_version, s_setreg*: an immediate or a hardware register first.
        Inst::Sopk { op: 1 | 18 | 19, .. } => None,
        Inst::Sopk { sdst, .. } => s(*sdst),
        Inst::Smem { sdata, .. } if name.starts_with("s_load") => s(*sdata),
        Inst::Valu(x) if x.enc == ValuEnc::Vop3p => v(x.vdst),
        // Compares print their mask destination, except the cmpx forms.
        Inst::Valu(x) if x.op < 256 => (x.op < 128).then_some(('s', x.sdst as u32)),
        Inst::Valu(_) if name == "v_nop" => None,
        // readfirstlane/readlane write an SGPR through the VGPR field.
        Inst::Valu(x) if name.starts_with("v_readfirstlane") || name.starts_with("v_readlane") => s(x.vdst),
        Inst::Valu(x) => v(x.vdst),
        Inst::Vopd(x) => v(x.x.vdst),
        Inst::Ds(x) => {
            let returns =
                // gfx10 spells loads `ds_read*`.
                ["load", "read", "_rtn", "permute", "swizzle", "storexchg"].iter().any(|k| name.contains(k));
            if returns {
                v(x.vdst)
            } else {
                v(x.addr)
            }
        }
        Inst::Flat(f) => {
            let returns = name.contains("load") || (name.contains("atomic") && f.glc);
            if returns {
                v(f.vdst)
            } else if f.seg == 1 && !f.sve {
                None // scratch with no VGPR address prints `off`
            } else {
                v(f.addr)
            }
        }
        _ => None,
    }
}

/// The VALU source registers the decoder holds, with the position of the first source among
/// the printed operands (after the destinations); None for encodings this check does not cover.
fn valu_sources(d: &Decoded, name: &str) -> Option<(usize, Vec<Option<Register>>)> {
    let Inst::Valu(x) = &d.inst else { return None };
    let reg = |s: &Src| match *s {
        Src::Vgpr(r) => Some(('v', r as u32)),
        Src::Sgpr(r) => Some(('s', r as u32)),
        _ => None,
    };
    // fmamk prints its constant between the sources; packed and dual forms are left out.
    if x.enc == ValuEnc::Vop3p || name.starts_with("v_fmamk") || name == "v_nop" {
        return None;
    }
    let first = if x.op < 256 {
        usize::from(x.op < 128)
    } else if matches!(x.op, 288..=290) || (matches!(x.op, 764..=770) && x.enc == ValuEnc::Vop3) {
        2 // vdst and the carry or scale mask
    } else {
        1
    };
    Some((first, x.src.iter().map(reg).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSegment};

    /// A code object's load image: its segments laid out by virtual address, the addresses
    /// `llvm-objdump` prints.
    fn load_image(elf: &[u8]) -> Vec<u8> {
        let file = object::File::parse(elf).unwrap();
        let mut image = Vec::new();
        for segment in file.segments() {
            let (start, size) = (segment.address() as usize, segment.size() as usize);
            if image.len() < start + size {
                image.resize(start + size, 0);
            }
            let data = segment.data().unwrap();
            image[start..start + data.len()].copy_from_slice(data);
        }
        image
    }

    /// A printed operand reduced to its register: without the modifiers around it (`-|v1|`,
    /// SDWA's `sext(v1)`) or after it (`v2 dst_sel:DWORD`).
    fn operand_register(token: &str) -> Option<Register> {
        let t = token.split_whitespace().next().unwrap_or("");
        let t = t.strip_prefix("sext(").map(|r| r.trim_end_matches(')')).unwrap_or(t);
        parse_register(t.trim_start_matches(['-', '|']).trim_end_matches('|'))
    }

    /// Compares the registers of every instruction of the corpus compiled for `target`; returns
    /// (first operands compared, VALU sources compared).
    fn check(target: &str, gfx: pm4::Gfx) -> (usize, usize) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/isa_corpus")
            .join(target);
        let mut compared = 0usize;
        let mut sources_compared = 0usize;
        let mut wrong = Vec::new();
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "dis"))
            .collect();
        paths.sort();
        assert!(paths.len() >= 10, "the corpus listings are missing: {}", dir.display());
        for listing in paths {
            let image = &load_image(&std::fs::read(listing.with_extension("co")).unwrap())[..];
            for line in std::fs::read_to_string(&listing).unwrap().lines() {
                let Some((text, comment)) = line.split_once("//") else { continue };
                let Some((address, _)) = comment.trim().split_once(':') else { continue };
                let Ok(at) = u64::from_str_radix(address.trim(), 16) else { continue };
                let mut tokens = text.trim().splitn(2, ' ');
                let (Some(printed_name), Some(operands)) = (tokens.next(), tokens.next()) else { continue };
                let Some(printed) = operands.split(',').next().and_then(|t| parse_register(t.trim())) else {
                    continue;
                };
                let Ok(d) = decode_at(gfx, image, at) else { continue };
                let Some(name) = name(gfx, &d) else { continue };
                let printed_all: Vec<Option<Register>> = operands.split(',').map(operand_register).collect();
                if let Some((first, sources)) = valu_sources(&d, name) {
                    for (i, ours) in sources.iter().enumerate() {
                        if let (Some(ours), Some(Some(printed))) = (ours, printed_all.get(first + i)) {
                            sources_compared += 1;
                            if ours != printed {
                                wrong.push(format!(
                                    "{}: {at:#x} {printed_name} source {i}: decoder {ours:?}, llvm-objdump {printed:?}",
                                    listing.display()
                                ));
                            }
                        }
                    }
                }
                if let Some(ours) = first_register(&d, name) {
                    compared += 1;
                    if ours != printed {
                        wrong.push(format!(
                            "{}: {at:#x} {printed_name}: decoder {ours:?}, llvm-objdump {printed:?}",
                            listing.display()
                        ));
                    }
                }
            }
        }
        eprintln!(
            "{target}: first register operand compared on {compared} instructions, {sources_compared} VALU source registers"
        );
        assert!(wrong.is_empty(), "{target}: {} of {compared} disagree:\n{}", wrong.len(), wrong.join("\n"));
        (compared, sources_compared)
    }

    #[test]
    fn the_decoder_reads_the_registers_llvm_objdump_prints() {
        let (compared, sources_compared) = check("gfx1100", pm4::Gfx::Gfx11);
        assert!(compared > 5000 && sources_compared > 5000, "only {compared} + {sources_compared} compared");
    }

    #[test]
    fn the_gfx10_decoder_reads_the_registers_llvm_objdump_prints() {
        let (compared, sources_compared) = check("gfx1030", pm4::Gfx::Gfx10_3);
        assert!(compared > 5000 && sources_compared > 5000, "only {compared} + {sources_compared} compared");
    }
}
