//! Every modifier of the VALU encodings, executed or refused: clamp (integer saturation, float
//! [0, 1] with DX10_CLAMP's NaN rule), abs and neg, op_sel on 16-bit sources and destinations,
//! VOP3P's op_sel_hi and neg_hi and its inline constants, and the modifiers the interpreter
//! does not model (omod; clamp on operations without a saturating form; modifiers on integer
//! operands), which refuse the kernel at load naming the instruction and the modifier.
// Lanes index several result rows at once.
#![allow(clippy::needless_range_loop)]

use crate::support::*;
use sparkle_amdgpu_sim::isa::{run_dispatch, survey_code, Gfx};

/// Runs one wave32 of `body` (v0 = lane id) with the dispatch `adjust` changes, storing
/// v10..v(10+n) per lane; returns results[k][lane].
fn run_rows(
    body: &str,
    n: usize,
    adjust: impl FnOnce(&mut sparkle_amdgpu_sim::isa::Dispatch),
) -> Vec<Vec<u32>> {
    let mut s = String::from(body);
    s.push_str("\nv_lshlrev_b32 v50, 2, v0\n");
    for k in 0..n {
        s.push_str(&format!("global_store_b32 v50, v{}, s[0:1] offset:{}\n", 10 + k, 128 * k));
    }
    s.push_str("s_endpgm\n");
    let mut mem = TestMemory::default();
    mem.map(ASM_CODE, assemble(&s), false, true);
    mem.map(ASM_DATA, vec![0; 128 * n], true, false);
    let mut d = asm_dispatch(ASM_CODE, ASM_DATA, 32, 1, 0);
    adjust(&mut d);
    run_dispatch(&d, &mut mem).unwrap();
    mem.u32s(ASM_DATA, 32 * n).chunks(32).map(|c| c.to_vec()).collect()
}

fn rows(body: &str, n: usize) -> Vec<Vec<u32>> {
    run_rows(body, n, |_| {})
}

fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

#[test]
fn clamp_saturates_sixteen_bit_integer_adds_and_subtracts() {
    // The uchar sub_sat clang emits: v_sub_nc_u16 ... clamp. 107 - 202 is 0, not 0xffa1.
    let body = "
        v_mov_b32 v1, 107
        v_mov_b32 v2, 202
        v_mov_b32 v10, 0xdead0000
        v_sub_nc_u16 v10, v1, v2 clamp
        v_mov_b32 v11, 0xdead0000
        v_sub_nc_u16 v11, v1, v2
        v_mov_b32 v3, 0xfffe
        v_add_nc_u16 v12, v3, 5 clamp
        v_mov_b32 v4, 0x7ffe
        v_add_nc_i16 v13, v4, 5 clamp
        v_mov_b32 v5, 0x8001
        v_sub_nc_i16 v14, v5, 5 clamp
        v_sub_nc_i16 v15, v5, 5
        v_mov_b32 v6, 0x00c80000
        v_mov_b32 v16, 0x1234
        v_sub_nc_u16 v16.h, v1.l, v6.h clamp
        v_mov_b32 v7, -3
        v_add_nc_u32_e64 v17, v7, 10 clamp
        v_mov_b32 v8, 0x80000005
        v_sub_nc_i32 v18, v8, 10 clamp
        v_mov_b32 v9, 0x7fff0002
        v_pk_add_u16 v19, v9, 0xfff0fff0 clamp
        v_pk_sub_i16 v20, v9, 0x80010003 clamp
        v_pk_add_u16 v21, v9, 0xfff0fff0
    ";
    let r = rows(body, 12);
    for l in 0..32 {
        assert_eq!(r[0][l], 0xdead_0000, "107 - 202 saturates to 0; the high half is kept");
        assert_eq!(r[1][l], 0xdead_ffa1, "without clamp the difference wraps");
        assert_eq!(r[2][l] & 0xffff, 0xffff, "0xfffe + 5 saturates");
        assert_eq!(r[3][l] & 0xffff, 0x7fff, "i16 32766 + 5 saturates");
        assert_eq!(r[4][l] & 0xffff, 0x8000, "i16 -32767 - 5 saturates");
        assert_eq!(r[5][l] & 0xffff, 0x7ffc, "without clamp it wraps");
        assert_eq!(r[6][l], 0x0000_1234, "107 - 200 into the high half, saturated to 0");
        assert_eq!(r[7][l], u32::MAX, "u32 -3 + 10 saturates");
        assert_eq!(r[8][l], 0x8000_0000, "i32 min - 10 saturates");
        assert_eq!(r[9][l], 0xffff_fff2, "packed u16: 0x7fff + 0xfff0 saturates, 2 + 0xfff0 does not");
        // 0x7fff - (-32767) saturates to 0x7fff; 2 - 3 = -1.
        assert_eq!(r[10][l], 0x7fff_ffff, "packed i16 subtract saturates");
        assert_eq!(r[11][l], 0x7fef_fff2, "packed u16 without clamp wraps");
    }
}

#[test]
fn clamp_limits_float_results_and_nan_follows_dx10_clamp() {
    let body = "
        v_mov_b32 v1, 0x7fc00000
        v_mov_b32 v2, 2.0
        v_add_f32_e64 v10, v2, 1.0 clamp
        v_sub_f32_e64 v11, 1.0, v2 clamp
        v_add_f32_e64 v12, v1, 1.0 clamp
        v_mul_f32_e64 v13, 0.5, 0.5 clamp
        v_mov_b32 v3, 0x3c00
        v_add_f16_e64 v14, v3, v3 clamp
        v_mov_b32 v4, 0
        v_mov_b32 v5, 0x40000000
        v_add_f64 v[15:16], v[4:5], v[4:5] clamp
        v_mov_b32 v6, 0x3c003c00
        v_mov_b32 v7, 0xbc004000
        v_pk_add_f16 v17, v6, v7 clamp
        v_fma_mix_f32 v18, v2, v2, v2 clamp
    ";
    let dx10 = rows(body, 9);
    let no_dx10 = run_rows(body, 9, |d| d.rsrc1 &= !(1 << 21));
    for l in 0..32 {
        assert_eq!(f(dx10[0][l]), 1.0, "3 clamped to 1");
        assert_eq!(f(dx10[1][l]), 0.0, "-1 clamped to 0");
        assert_eq!(dx10[2][l], 0, "with DX10_CLAMP a NaN result clamps to 0");
        assert!(f(no_dx10[2][l]).is_nan(), "without DX10_CLAMP the NaN passes");
        assert_eq!(f(dx10[3][l]), 0.25, "in range");
        assert_eq!(dx10[4][l] & 0xffff, 0x3c00, "f16 2.0 clamped to 1.0");
        assert_eq!((dx10[5][l], dx10[6][l]), (0, 0x3ff0_0000), "f64 4.0 clamped to 1.0");
        assert_eq!(dx10[7][l], 0x0000_3c00, "packed halves: 1 + 2 -> 1, 1 - 1 -> 0");
        assert_eq!(f(dx10[8][l]), 1.0, "fma_mix 2 * 2 + 2 clamped");
    }
}

#[test]
fn abs_neg_and_op_sel_apply_to_the_operands_they_name() {
    let body = "
        v_cvt_f32_i32 v1, v0
        v_sub_f32 v1, 3.0, v1
        v_add_f32_e64 v10, -|v1|, 1.0
        v_mov_b32 v2, 0xc000bc00
        v_add_f16_e64 v11.l, -v2.h, |v2.l|
        v_mov_b32 v12, 0x11110000
        v_mul_f16_e64 v12.h, v2.h, v2.l
        v_mov_b32 v3, 0
        v_mov_b32 v4, 0xc0000000
        v_add_f64 v[13:14], -|v[3:4]|, 1.0
        v_pk_fma_f16 v15, v2, v2, 0 neg_lo:[1,0,0] neg_hi:[0,1,0]
        v_pk_add_f16 v16, v2, v2 op_sel:[1,0] op_sel_hi:[0,1]
        v_fma_mix_f32 v17, -v2, 1, 0 op_sel:[1,0,0] op_sel_hi:[1,0,0]
        v_fma_mix_f32 v18, |v2|, v2, 0 op_sel_hi:[1,1,0]
        s_mov_b32 s4, 0
        v_cndmask_b32_e64 v19, -v1, |v1|, s4
    ";
    let r = rows(body, 10);
    for l in 0..32 {
        let x = 3.0 - l as f32;
        assert_eq!(f(r[0][l]), 1.0 - x.abs(), "-|x| + 1, lane {l}");
        // -(-2.0) + |-1.0| = 3.0
        assert_eq!(r[1][l] & 0xffff, 0x4200);
        // -2 * -1 = 2 into the high half, the low half kept.
        assert_eq!(r[2][l], 0x4000_0000);
        // -|-2.0| + 1.0 = -1.0
        assert_eq!((r[3][l], r[4][l]), (0, 0xbff0_0000));
        // low: -(-1) * -1 + 0 = -1; high: -2 * -(-2) = -4... : (-2) * (2) = -4 -> 0xc400.
        assert_eq!(r[5][l], 0xc400_bc00);
        // low: S0.hi + S1.lo = -2 + -1 = -3 (0xc200); high: S0.lo + S1.hi = -1 + -2 = -3.
        assert_eq!(r[6][l], 0xc200_c200);
        // -(f16 high half of v2 = -2.0) * (1 as f32 bits: a denormal) + 0 -> tiny positive f32.
        assert_eq!(f(r[7][l]), 2.0 * f32::from_bits(1));
        // |low half -1.0| * (low half -1.0) = -1.0
        assert_eq!(f(r[8][l]), -1.0);
        // The mask 0 selects src0: -x.
        assert_eq!(f(r[9][l]), -x);
    }
}

#[test]
fn packed_inline_constants_are_read_as_the_hardware_reads_them() {
    // Integer constants are their sign-extended 32-bit value; float constants are f16 in the low
    // half and 0 in the high half for f16 operations, and their f32 value for integer ones.
    let body = "
        v_mov_b32 v1, 0x00050007
        v_pk_add_u16 v10, v1, 1
        v_pk_add_u16 v11, v1, 1 op_sel_hi:[1,0]
        v_pk_add_u16 v12, v1, -1
        v_pk_add_f16 v13, 0, 1.0
        v_pk_add_f16 v14, 0, 1.0 op_sel_hi:[1,0]
        v_pk_add_u16 v15, 0, 1.0
        v_add_nc_u16 v16, 0, 0.5 op_sel:[0,1,0]
    ";
    let r = rows(body, 7);
    for l in 0..32 {
        assert_eq!(r[0][l], 0x0005_0008, "1 adds to the low half only");
        assert_eq!(r[1][l], 0x0006_0008, "op_sel_hi reads the constant's low half for the high");
        assert_eq!(r[2][l], 0x0004_0006, "-1 is 0xffffffff: both halves");
        assert_eq!(r[3][l], 0x0000_3c00, "f16 1.0 in the low half");
        assert_eq!(r[4][l], 0x3c00_3c00);
        assert_eq!(r[5][l], 0x3f80_0000, "an integer operation reads 1.0 as f32 bits");
        assert_eq!(r[6][l] & 0xffff, 0x3f00, "the high half of f32 0.5");
    }
}

/// The first instruction of `asm` as the load-time check sees it: its mnemonic and why the
/// interpreter refuses it.
fn refusal(asm: &str) -> (Option<&'static str>, String) {
    let code = assemble(&format!("{asm}\ns_endpgm\n"));
    let survey = survey_code(Gfx::Gfx11, &code, 0, &[], false);
    let first = survey.first().expect("one instruction");
    match &first.executable {
        Err(why) => (first.mnemonic, why.clone()),
        Ok(()) => panic!("`{asm}` should be refused at load"),
    }
}

#[test]
fn modifiers_the_interpreter_does_not_apply_refuse_the_kernel_at_load() {
    // omod, on a float operation.
    let (m, why) = refusal("v_add_f32_e64 v1, v2, v3 mul:2");
    assert_eq!(m, Some("v_add_f32"));
    assert!(why.contains("omod"), "{why}");
    // clamp on a multiply-add, which has no documented saturating form.
    let (m, why) = refusal("v_mad_u16 v1, v2, v3, v4 clamp");
    assert_eq!(m, Some("v_mad_u16"));
    assert!(why.contains("clamp"), "{why}");
    // clamp on v_mul_lo_u16 (not even LLVM's assembler writes it): the raw word.
    let (m, why) = refusal(".long 0xd7058001, 0x00020702");
    assert_eq!(m, Some("v_mul_lo_u16"));
    assert!(why.contains("clamp"), "{why}");
    // clamp on a float-to-integer conversion.
    let (_, why) = refusal("v_cvt_i32_f32_e64 v1, v2 clamp");
    assert!(why.contains("clamp"), "{why}");
    // abs on an integer operand (bit 8 of the VOP3 word of v_add_nc_u32_e64 v1, v2, v3).
    let (m, why) = refusal(".long 0xd5250101, 0x00020702");
    assert_eq!(m, Some("v_add_nc_u32"));
    assert!(why.contains("abs"), "{why}");
    // neg on v_cndmask's lane mask (bit 31 of the second word: neg of source 2).
    let (m, why) = refusal(".long 0xd5010001, 0x80120702");
    assert_eq!(m, Some("v_cndmask_b32"));
    assert!(why.contains("neg of source 2"), "{why}");
    // op_sel on an f32 operand of v_fma_mix (op_sel_hi clear: the operand is an f32).
    let (_, why) = refusal("v_fma_mix_f32 v1, v2, v3, v4 op_sel:[1,0,0]");
    assert!(why.contains("op_sel of source 0"), "{why}");
    // clamp on an integer compare (bit 15 of v_cmp_eq_u32_e64 s4, v1, v2).
    let (_, why) = refusal(".long 0xd44a8004, 0x00020501");
    assert!(why.contains("clamp"), "{why}");
    // An inline float constant as an f16 operand of v_fma_mix: undocumented, refused.
    let (_, why) = refusal("v_fma_mixlo_f16 v1, v2, 1.0, v4 op_sel_hi:[0,1,0]");
    assert!(why.contains("inline float constant"), "{why}");
}

#[test]
fn supported_modifiers_pass_the_load_check() {
    for asm in [
        "v_sub_nc_u16 v1, v2, v3 clamp",
        "v_add_f32_e64 v1, -|v2|, v3 clamp",
        "v_pk_sub_i16 v1, v2, v3 op_sel:[1,0] op_sel_hi:[0,1] clamp",
        "v_pk_fma_f16 v1, v2, v3, v4 neg_lo:[1,0,0] neg_hi:[0,1,0]",
        "v_fma_mixlo_f16 v1, v2, v3, |v4| op_sel:[1,0,0] op_sel_hi:[1,0,1]",
        "v_dot4_i32_iu8 v1, v2, v3, v4 neg_lo:[1,0,0] clamp",
        "v_max_f16_e64 v1.h, -|v2.l|, v3.h clamp",
    ] {
        let code = assemble(&format!("{asm}\ns_endpgm\n"));
        let survey = survey_code(Gfx::Gfx11, &code, 0, &[], false);
        assert_eq!(survey[0].executable, Ok(()), "{asm}");
    }
}

#[test]
fn sdwa_modifiers_on_gfx10_3_are_applied_or_refused_and_dpp_is_refused() {
    // clamp and abs/neg through SDWA; the selected word is read before the modifiers apply.
    let body = "
        v_mov_b32 v1, 2.0
        v_mov_b32 v2, 0xbf800000
        v_add_f32_sdwa v10, v1, v2 clamp dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD
        v_add_f32_sdwa v11, -v1, |v2| dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD
        v_mov_b32 v20, 0
        v_lshlrev_b32 v21, 3, v0
        v_add_co_u32 v22, vcc_lo, s0, v21
        v_add_co_ci_u32_e32 v23, vcc_lo, s1, v20, vcc_lo
        global_store_dwordx2 v[22:23], v[10:11], off
        s_endpgm
    ";
    let mut mem = run_asm_gfx10(body, vec![0; 32 * 8], 32, 0).unwrap();
    let out = mem.u32s(ASM_DATA, 64);
    for l in 0..32 {
        assert_eq!(f(out[2 * l]), 1.0, "2 + -1 = 1, clamped stays 1");
        assert_eq!(f(out[2 * l + 1]), -1.0, "-2 + |-1|");
    }
    let refused = |asm: &str, gfx: Gfx, mcpu: &str| {
        let code = assemble_for(mcpu, &format!("{asm}\ns_endpgm\n"));
        let survey = survey_code(gfx, &code, 0, &[], false);
        survey[0].executable.clone().expect_err(asm)
    };
    let why = refused(
        "v_add_f32_sdwa v1, v2, v3 mul:2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
        Gfx::Gfx10_3,
        "gfx1030",
    );
    assert!(why.contains("omod"), "{why}");
    let why = refused(
        "v_add_f32_dpp v1, v2, v3 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf",
        Gfx::Gfx11,
        "gfx1100",
    );
    assert!(why.contains("DPP"), "{why}");
}

#[test]
fn selects_move_halves_bit_for_bit() {
    // 0xfd82 is a signalling f16 NaN: a select must not quiet it (clang's convert_short_sat of
    // a half selects integer bit patterns with v_cndmask_b16). neg flips only the sign bit.
    let body = "
        v_mov_b32 v1, 0x7c01fd82
        s_mov_b32 s4, 0
        v_cndmask_b16 v10.l, v1.l, 0x7fff, s4
        v_cndmask_b16 v11.l, -v1.h, 0x7fff, s4
        v_pack_b32_f16 v12, v1.l, v1.h
    ";
    let r = rows(body, 3);
    for l in 0..32 {
        assert_eq!(r[0][l] & 0xffff, 0xfd82);
        assert_eq!(r[1][l] & 0xffff, 0xfc01);
        assert_eq!(r[2][l], 0x7c01_fd82);
    }
}
