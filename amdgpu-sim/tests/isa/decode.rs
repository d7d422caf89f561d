//! The decoder agrees with LLVM on where every instruction ends (literals included): checked on
//! a list of assembled instructions of every format and on the compiled test kernels.

use crate::support::*;
use object::{Object, ObjectSection, ObjectSymbol};
use sparkle_amdgpu_sim::isa::instruction_size;

/// Walks `text` with the interpreter's decoder and returns each instruction's size.
fn sizes(text: &[u8]) -> Vec<usize> {
    let words: Vec<u32> = text.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut at = 0;
    let mut out = Vec::new();
    while at < words.len() {
        let size = instruction_size(sparkle_amdgpu_sim::isa::Gfx::Gfx11, &words[at..])
            .unwrap_or_else(|| panic!("no size for dword {at} ({:#010x})", words[at]));
        out.push(size);
        at += size / 4;
    }
    out
}

const LINES: &str = "
s_mov_b32 s0, 0x12345678
s_add_u32 s0, s1, 0x1234
s_cmp_eq_u32 s0, 0x4567
s_movk_i32 s0, 0x1234
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x3
s_load_b128 s[4:7], s[0:1], 0x10
s_waitcnt vmcnt(0)
v_mov_b32 v0, 0x3e22f983
v_mov_b32 v0, 1.0
v_add_f32 v0, 0x40490fdb, v1
v_cmp_lt_f32 vcc_lo, 0x3f000001, v1
v_fmamk_f32 v0, v1, 0x3e800000, v2
v_fmaak_f32 v0, v1, v2, 0x3e800000
v_fmamk_f16 v1.l, v2.l, 0x3e00, v3.l
v_fmaak_f16 v1.h, v2.l, v3.l, 0x3e00
v_mul_f16 v2.h, 0x4200, v2.l
v_fma_f32 v0, v1, 0x40000001, v3
v_add_co_u32 v0, s4, v1, 0x100000
v_cmp_gt_u32_e64 s4, 0x1000, v1
v_lshlrev_b64 v[0:1], 2, v[2:3]
v_pk_add_f16 v0, v1, 0x12345678
v_dual_mov_b32 v1, 0x12345678 :: v_dual_add_f32 v2, v3, v4
v_dual_fmaak_f32 v1, v2, v3, 0x3f800000 :: v_dual_mov_b32 v4, v5
v_dual_mul_f32 v1, v2, v3 :: v_dual_mov_b32 v4, v5
ds_load_2addr_b32 v[0:1], v2 offset0:1 offset1:2
ds_store_b128 v0, v[4:7] offset:16
global_load_b32 v0, v1, s[2:3] offset:-16
global_atomic_cmpswap_b32 v0, v[0:1], v[2:3], off glc
buffer_gl0_inv
s_endpgm
";

#[test]
fn sizes_match_the_assembler_for_every_format() {
    let text = assemble(LINES);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.s");
    std::fs::write(&src, LINES).unwrap();
    let out =
        tool("llvm-mc-22", &["-arch=amdgcn", "-mcpu=gfx1100", "--show-encoding", src.to_str().unwrap()]);
    let want: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once("encoding: [").map(|(_, b)| b.split(',').count()))
        .collect();
    assert_eq!(want.len(), LINES.lines().filter(|l| !l.trim().is_empty()).count());
    assert_eq!(sizes(&text), want);
}

#[test]
fn sizes_match_the_disassembler_on_compiled_kernels() {
    for (file, build) in [
        ("sgemm.cl", Build::Builtins),
        ("conv2d.cl", Build::Libclc),
        ("math.cl", Build::Libclc),
        ("half.cl", Build::Builtins),
        ("libm.cl", Build::Libclc),
    ] {
        let (co, _) = compile_cl(file, build);
        let elf = object::File::parse(&*co).unwrap();
        let text = elf.section_by_name(".text").unwrap();
        let data = text.data().unwrap();
        // Kernel bodies only: each kernel symbol's range (the padding after them is s_code_end).
        for sym in elf.symbols().filter(|s| s.section_index() == Some(text.index()) && s.size() > 0) {
            let start = (sym.address() - text.address()) as usize;
            let body = &data[start..start + sym.size() as usize];
            let ours = sizes(body);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("k.co");
            std::fs::write(&path, &co).unwrap();
            let name = sym.name().unwrap();
            let dis = tool(
                "llvm-objdump-22",
                &["-d", "--mcpu=gfx1100", &format!("--disassemble-symbols={name}"), path.to_str().unwrap()],
            );
            let theirs: Vec<usize> = String::from_utf8(dis.stdout)
                .unwrap()
                .lines()
                .filter_map(|l| l.split_once("// ").map(|(_, rest)| rest))
                .filter_map(|rest| {
                    rest.split_once(": ")
                        .map(|(_, hex)| hex.split_whitespace().take_while(|w| w.len() == 8).count() * 4)
                })
                .filter(|&n| n > 0)
                .scan(0usize, |total, n| {
                    // objdump runs on into the s_code_end padding after the symbol: stop at its end.
                    *total += n;
                    (*total <= body.len()).then_some(n)
                })
                .collect();
            assert_eq!(ours, theirs, "{file} ({build:?}) symbol {name}");
        }
    }
}

/// gfx10.3 instructions of every format the decoder takes, the SDWA, DPP and VOP3b forms, and
/// opcodes with no gfx11 twin (refused by the decoder, yet sized).
const LINES_GFX10: &str = "
s_mov_b32 s0, 0x12345678
s_andn2_b32 s0, s1, 0x1234
s_cmp_eq_u32 s0, 0x4567
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x3
s_ff0_i32_b32 s0, s1
s_load_dwordx4 s[4:7], s[0:1], -0x10
s_waitcnt_vscnt null, 0x0
v_mov_b32 v0, 0x3e22f983
v_add_f32 v0, 0x40490fdb, v1
v_fmamk_f32 v0, v1, 0x3e800000, v2
v_fmaak_f32 v0, v1, v2, 0x3e800000
v_add_co_u32 v0, s4, v1, 0x100000
v_mad_u64_u32 v[0:1], s4, v1, v2, v[4:5]
v_cmp_gt_u32_e64 s4, 0x1000, v1
v_or_b32_sdwa v18, sext(v23), s2 dst_sel:BYTE_1 dst_unused:UNUSED_SEXT src0_sel:WORD_1 src1_sel:BYTE_2
v_cmp_eq_f32_sdwa s4, v1, v2 src0_sel:WORD_1 src1_sel:BYTE_0
v_mov_b32_dpp v1, v2 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_pk_add_f16 v0, v1, 0x12345678
v_dot2_i32_i16 v0, v1, v2, v3
ds_read2_b32 v[0:1], v2 offset0:1 offset1:2
ds_cmpst_b32 v1, v2, v3 offset:4
global_load_dword v0, v[2:3], off offset:-16
scratch_store_dword off, v1, s3 offset:16
global_atomic_cmpswap v0, v[2:3], v[4:5], off glc
buffer_load_dword v1, v2, s[4:7], s8 offen offset:4095
buffer_gl0_inv
s_endpgm
";

#[test]
fn gfx10_sizes_match_the_assembler_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("k.s");
    std::fs::write(&src, LINES_GFX10).unwrap();
    let out =
        tool("llvm-mc-22", &["-arch=amdgcn", "-mcpu=gfx1030", "--show-encoding", src.to_str().unwrap()]);
    let encodings: Vec<Vec<u8>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once("encoding: [").map(|(_, b)| b.trim_end_matches(']').to_string()))
        .map(|b| {
            b.split(',').map(|x| u8::from_str_radix(x.trim().trim_start_matches("0x"), 16).unwrap()).collect()
        })
        .collect();
    assert_eq!(encodings.len(), LINES_GFX10.lines().filter(|l| !l.trim().is_empty()).count());
    let words: Vec<u32> =
        encodings.concat().chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut at = 0;
    let mut ours = Vec::new();
    while at < words.len() {
        let size = instruction_size(sparkle_amdgpu_sim::isa::Gfx::Gfx10_3, &words[at..])
            .unwrap_or_else(|| panic!("no size for dword {at} ({:#010x})", words[at]));
        ours.push(size);
        at += size / 4;
    }
    assert_eq!(ours, encodings.iter().map(Vec::len).collect::<Vec<_>>());
}
