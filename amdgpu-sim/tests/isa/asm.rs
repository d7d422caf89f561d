//! Per instruction class: small kernels written in gfx1100 assembly, assembled with llvm-mc at
//! test time, run on the interpreter, with results known in advance (or computed independently
//! per lane in Rust).
//!
//! Convention (see `asm_dispatch`): s[0:1] points at a writable data buffer, s2 is the workgroup
//! id, v0 the work-item id.
// Lanes index several result rows at once.
#![allow(clippy::needless_range_loop)]

use crate::support::*;

/// Appends stores of s`first`..=s`last` to data[0..] (one dword each) and s_endpgm.
fn store_sgprs(body: &str, first: u32, last: u32) -> String {
    let mut s = String::from(body);
    s.push_str("\nv_mov_b32 v0, 0\n");
    for (k, i) in (first..=last).enumerate() {
        s.push_str(&format!("v_mov_b32 v1, s{i}\nglobal_store_b32 v0, v1, s[0:1] offset:{}\n", 4 * k));
    }
    s.push_str("s_endpgm\n");
    s
}

#[test]
fn salu_arithmetic_logic_and_branches() {
    let body = "
        s_getpc_b64 s[40:41]
        s_mov_b32 s10, 7
        s_add_u32 s11, s10, 0xfffffffe
        s_cselect_b32 s12, 1, 2
        s_sub_i32 s13, 3, 10
        s_lshl_b32 s14, s10, 4
        s_ashr_i32 s15, s13, 1
        s_mov_b32 s50, 0x80004
        s_bfe_u32 s16, 0xabcd1234, s50
        s_mul_i32 s17, s13, s10
        s_min_i32 s18, s13, s10
        s_max_u32 s19, s13, s10
        s_movk_i32 s20, 0x8000
        s_cmp_lt_i32 s13, 0
        s_cselect_b32 s21, 64, 32
        s_mov_b64 s[22:23], -1
        s_lshr_b64 s[22:23], s[22:23], 36
        s_not_b32 s24, s10
        s_bcnt1_i32_b32 s25, 0xff00ff
        s_ctz_i32_b32 s26, 0x100
        s_brev_b32 s27, 1
        s_addk_i32 s10, 0x10
        s_mov_b32 s28, s10
        s_lshl2_add_u32 s29, s10, 1
        s_mul_hi_u32 s30, 0x80000000, 6
        s_sext_i32_i8 s31, 0x80
        s_mov_b32 s32, 0
        s_mov_b32 s33, 1
    loop:
        s_add_u32 s32, s32, s33
        s_add_u32 s33, s33, 1
        s_cmp_le_u32 s33, 10
        s_cbranch_scc1 loop
        s_mov_b64 s[34:35], 1.0
        s_and_not1_b32 s36, 0xff, 0x0f
        s_mov_b32 s51, 0x40004
        s_bfe_i32 s37, 0xf0, s51
        s_mov_b32 s38, s40
        s_mov_b32 s39, s41
    ";
    let mem = run_asm(&store_sgprs(body, 10, 39), vec![0; 4 * 30], 1, 1, 0);
    let got = mem.unwrap().u32s(ASM_DATA, 30);
    let want: Vec<u32> = vec![
        23,               // s10 after s_addk
        5,                // 7 + 0xfffffffe wraps (carry)
        1,                // carry set SCC
        (-7i32) as u32,   // 3 - 10
        112,              // 7 << 4
        (-4i32) as u32,   // -7 >> 1 arithmetic
        0x23,             // bits 4..12 of 0xabcd1234
        (-49i32) as u32,  // -7 * 7
        (-7i32) as u32,   // min
        (-7i32) as u32,   // unsigned max of 0xfffffff9 and 7
        0xffff_8000,      // movk sign-extends
        64,               // -7 < 0
        0x0fff_ffff,      // low dword of u64::MAX >> 36
        0,                // high dword
        !7u32,            // s_not
        16,               // popcount
        8,                // trailing zeros
        0x8000_0000,      // bit reverse of 1
        23,               // copy of s10
        93,               // (23 << 2) + 1
        3,                // high half of 0x80000000 * 6
        (-128i32) as u32, // sign-extended byte
        55,               // sum 1..=10 from the loop
        11,               // loop counter
        0,                // 1.0 as f64: low dword
        0x3ff0_0000,      // high dword
        0xf0,             // 0xff & !0x0f
        (-1i32) as u32,   // 4 bits at 4 of 0xf0, sign-extended
        4,                // s_getpc: address after the first instruction (low)
        (ASM_CODE >> 32) as u32,
    ];
    assert_eq!(got[0], 23);
    assert_eq!(&got[1..], &want[1..]);
}

/// Runs a one-wave kernel whose `body` leaves results in v10..v(10+n); returns results[k][lane].
fn valu_results(body: &str, n: usize) -> Vec<Vec<u32>> {
    let mut s = String::from(body);
    s.push_str("\nv_lshlrev_b32 v50, 2, v0\n");
    for k in 0..n {
        s.push_str(&format!("global_store_b32 v50, v{}, s[0:1] offset:{}\n", 10 + k, 128 * k));
    }
    s.push_str("s_endpgm\n");
    let mut mem = run_asm(&s, vec![0; 128 * n], 32, 1, 0).unwrap();
    let all = mem.u32s(ASM_DATA, 32 * n);
    all.chunks(32).map(|c| c.to_vec()).collect()
}

#[test]
fn valu_float_ops_inline_constants_and_literals() {
    let body = "
        v_cvt_f32_u32 v1, v0
        v_add_f32 v10, 0.5, v1
        v_mul_f32 v11, -4.0, v1
        v_fma_f32 v12, v1, 0.15915494, 1.0
        v_fmac_f32 v13, v1, v1
        v_sub_f32 v14, v1, 0x41200000
        v_max_f32 v15, v1, 0x7fc00000
        v_min_f32 v16, v1, 0x41000000
        v_sqrt_f32 v17, v1
        v_rcp_f32 v18, v1
        v_cvt_i32_f32 v19, v14
        v_fmaak_f32 v20, v1, v1, 0x3f800000
        v_floor_f32 v21, v12
        v_cvt_f16_f32 v22, v1
        v_mul_f32_e64 v23, v1, 2.0 clamp
        v_add_f32_e64 v24, -v1, |v14|
        v_ldexp_f32 v25, v1, 3
    ";
    let r = valu_results(body, 16);
    for l in 0..32usize {
        let x = l as f32;
        let f = |k: usize| f32::from_bits(r[k][l]);
        assert_eq!(f(0), x + 0.5, "lane {l}");
        assert_eq!(f(1), x * -4.0);
        assert_eq!(f(2), x.mul_add(f32::from_bits(0x3e22f983), 1.0));
        // v13 starts at 0 (fresh VGPR): fmac gives x*x + 0.
        assert_eq!(f(3), x * x);
        assert_eq!(f(4), x - 10.0);
        assert_eq!(f(5), x, "max with a quiet NaN returns the number");
        assert_eq!(f(6), x.min(8.0));
        assert_eq!(f(7), x.sqrt());
        assert_eq!(f(8), 1.0 / x);
        assert_eq!(r[9][l] as i32, (x - 10.0) as i32);
        assert_eq!(f(10), x.mul_add(x, 1.0));
        assert_eq!(f(11), x.mul_add(f32::from_bits(0x3e22f983), 1.0).floor());
        // f16 of small integers is exact: 1.0 = 0x3c00, etc.
        assert_eq!(r[12][l] & 0xffff, half_of(x), "lane {l}");
        assert_eq!(f(13), (2.0 * x).clamp(0.0, 1.0));
        assert_eq!(f(14), -x + (x - 10.0).abs());
        assert_eq!(f(15), x * 8.0);
    }
}

fn half_of(x: f32) -> u32 {
    if x == 0.0 {
        return 0;
    }
    let e = x.log2().floor() as i32;
    let man = ((x / 2f32.powi(e) - 1.0) * 1024.0) as u32;
    (((e + 15) as u32) << 10) | man
}

#[test]
fn valu_integer_ops() {
    let body = "
        v_mul_lo_u32 v10, v0, 0x9e3779b9
        v_mul_hi_u32 v11, v0, 0x9e3779b9
        v_bfe_u32 v12, v10, 5, 7
        v_lshl_add_u32 v13, v0, 4, 0x100
        v_add3_u32 v14, v0, -16, 64
        v_sub_nc_u32 v15, 3, v0
        v_ashrrev_i32 v16, 1, v15
        v_xor_b32 v17, 0x5555, v0
        v_mad_u64_u32 v[18:19], null, v10, 7, v[10:11]
        v_mov_b32 v21, v0
        v_mov_b32 v22, 0
        v_lshlrev_b64 v[20:21], 30, v[21:22]
        v_cmp_gt_u32 vcc_lo, 16, v0
        v_cndmask_b32 v22, 5, 9, vcc_lo
        v_add_co_u32 v23, vcc_lo, v10, v10
        v_add_co_ci_u32 v24, vcc_lo, 0, 0, vcc_lo
        v_readfirstlane_b32 s20, v13
        v_mov_b32 v25, s20
    ";
    let r = valu_results(body, 16);
    for l in 0..32u32 {
        let lo = l.wrapping_mul(0x9e3779b9);
        assert_eq!(r[0][l as usize], lo);
        assert_eq!(r[1][l as usize], ((l as u64 * 0x9e3779b9u64) >> 32) as u32);
        assert_eq!(r[2][l as usize], (lo >> 5) & 0x7f);
        assert_eq!(r[3][l as usize], (l << 4) + 0x100);
        assert_eq!(r[4][l as usize], l + 48);
        assert_eq!(r[5][l as usize], 3u32.wrapping_sub(l));
        assert_eq!(r[6][l as usize], ((3i32 - l as i32) >> 1) as u32);
        assert_eq!(r[7][l as usize], 0x5555 ^ l);
        let hi = ((l as u64 * 0x9e3779b9u64) >> 32) as u32;
        let mad = lo as u64 * 7 + (lo as u64 | (hi as u64) << 32);
        assert_eq!(r[8][l as usize], mad as u32);
        assert_eq!(r[9][l as usize], (mad >> 32) as u32);
        let shifted = (l as u64) << 30;
        assert_eq!(r[10][l as usize], shifted as u32);
        assert_eq!(r[11][l as usize], (shifted >> 32) as u32);
        assert_eq!(r[12][l as usize], if l < 16 { 9 } else { 5 });
        assert_eq!(r[13][l as usize], lo.wrapping_add(lo));
        assert_eq!(r[14][l as usize], lo.checked_add(lo).is_none() as u32, "carry of lane {l}");
        assert_eq!(r[15][l as usize], 0x100, "readfirstlane reads lane 0");
    }
}

#[test]
fn compares_branches_and_exec_masking() {
    let body = "
        v_mov_b32 v10, 0
        v_cmp_gt_u32 vcc_lo, 10, v0
        s_and_saveexec_b32 s4, vcc_lo
        s_cbranch_execz skip
        v_mov_b32 v10, 111
    skip:
        s_or_b32 exec_lo, exec_lo, s4
        v_cmpx_lt_u32 20, v0
        v_mov_b32 v10, 222
        s_mov_b32 exec_lo, -1

        v_mov_b32 v11, 0
        s_mov_b32 s6, exec_lo
    loop:
        v_cmp_lt_u32 vcc_lo, v11, v0
        s_and_b32 exec_lo, exec_lo, vcc_lo
        s_cbranch_execz done
        v_add_nc_u32 v11, 1, v11
        s_branch loop
    done:
        s_mov_b32 exec_lo, s6

        v_cvt_f32_u32 v1, v0
        v_cmp_u_f32 s8, v1, 0x7fc00000
        v_cmp_lg_f32 s9, v1, 4.0
        v_cmp_class_f32 s10, v1, 0x40
        v_cmp_ge_i32 s11, v0, 31
        v_mov_b32 v12, s8
        v_mov_b32 v13, s9
        v_mov_b32 v14, s10
        v_mov_b32 v15, s11
        s_mov_b32 exec_lo, 0
        s_cbranch_execnz bad
        s_mov_b32 exec_lo, -1
        v_mov_b32 v16, 1
        s_branch end
    bad:
        s_mov_b32 exec_lo, -1
        v_mov_b32 v16, 2
    end:
    ";
    let r = valu_results(body, 7);
    for l in 0..32usize {
        let want = if l < 10 {
            111
        } else if l > 20 {
            222
        } else {
            0
        };
        assert_eq!(r[0][l], want, "lane {l}");
        assert_eq!(r[1][l], l as u32, "divergent loop ran lane {l} {l} times");
        assert_eq!(r[2][l], u32::MAX, "every lane is unordered against NaN");
        assert_eq!(r[3][l], !(1u32 << 4));
        assert_eq!(r[4][l], 1, "only lane 0 is +0");
        assert_eq!(r[5][l], 1 << 31);
        assert_eq!(r[6][l], 1);
    }
}

/// V_CMP_CLASS classifies a value in its own format: the smallest subnormal of each width is a
/// denormal, though it would widen to a normal.
#[test]
fn compare_class_sees_the_subnormals_of_every_width() {
    let body = "
        v_mov_b32 v1, 1
        v_cmp_class_f32 s8, v1, 0x80
        v_cmp_class_f32 s9, v1, 0x100
        v_mov_b32 v2, 0x8001
        v_cmp_class_f16_e64 s10, v2, 0x10
        v_cmp_class_f16_e64 s11, v2, 0x8
        v_mov_b32 v3, 1
        v_mov_b32 v4, 0
        v_cmp_class_f64 s12, v[3:4], 0x80
        v_cmp_class_f64 s13, v[3:4], 0x100
        v_mov_b32 v10, s8
        v_mov_b32 v11, s9
        v_mov_b32 v12, s10
        v_mov_b32 v13, s11
        v_mov_b32 v14, s12
        v_mov_b32 v15, s13
    ";
    let r = valu_results(body, 6);
    let names =
        ["f32 +denormal", "f32 +normal", "f16 -denormal", "f16 -normal", "f64 +denormal", "f64 +normal"];
    for (k, name) in names.iter().enumerate() {
        let want = if name.ends_with("denormal") { u32::MAX } else { 0 };
        assert_eq!(r[k][0], want, "{name}");
    }
}

#[test]
fn vopd_reads_all_sources_before_writing() {
    let body = "
        v_mov_b32 v1, 0x40400000
        v_mov_b32 v2, 2.0
        v_mov_b32 v3, 0x40e00000
        v_dual_mul_f32 v3, v1, v2 :: v_dual_mov_b32 v4, v3
        v_dual_fmaak_f32 v5, v1, v2, 0x3f800000 :: v_dual_add_nc_u32 v6, v0, v0
        v_cmp_gt_u32 vcc_lo, 4, v0
        v_mov_b32 v9, v0
        v_dual_cndmask_b32 v7, 1, v0 :: v_dual_lshlrev_b32 v8, 3, v9
        v_mov_b32 v10, v3
        v_mov_b32 v11, v4
        v_mov_b32 v12, v5
        v_mov_b32 v13, v6
        v_mov_b32 v14, v7
        v_mov_b32 v15, v8
    ";
    let r = valu_results(body, 6);
    for l in 0..32u32 {
        let i = l as usize;
        assert_eq!(f32::from_bits(r[0][i]), 6.0);
        assert_eq!(f32::from_bits(r[1][i]), 7.0, "the Y half read v3 before X wrote it");
        assert_eq!(f32::from_bits(r[2][i]), 7.0);
        assert_eq!(r[3][i], 2 * l);
        assert_eq!(r[4][i], if l < 4 { l } else { 1 });
        assert_eq!(r[5][i], l << 3);
    }
}

#[test]
fn ds_lds_and_barriers_across_waves() {
    // 64 threads = 2 waves. Each writes 3*tid to LDS[tid], barrier, reads its mirror (written
    // by the other wave), then a barrier inside a loop rotates values 5 times around the group.
    let body = "
        v_lshlrev_b32 v1, 2, v0
        v_mul_u32_u24 v2, 3, v0
        ds_store_b32 v1, v2
        s_waitcnt lgkmcnt(0)
        s_barrier
        v_sub_nc_u32 v3, 63, v0
        v_lshlrev_b32 v3, 2, v3
        ds_load_b32 v10, v3
        v_mov_b32 v4, v0
        s_mov_b32 s5, 5
        v_add_nc_u32 v5, 1, v0
        v_and_b32 v5, 63, v5
        v_lshlrev_b32 v5, 2, v5
    rot:
        s_barrier
        ds_store_b32 v1, v4 offset:512
        s_barrier
        ds_load_b32 v4, v5 offset:512
        s_waitcnt lgkmcnt(0)
        v_add_nc_u32 v4, 1, v4
        s_sub_u32 s5, s5, 1
        s_cmp_lg_u32 s5, 0
        s_cbranch_scc1 rot
        v_mov_b32 v11, v4
        v_mov_b32 v6, 1
        v_mov_b32 v7, 1024
        ds_add_rtn_u32 v12, v7, v6
        ds_max_u32 v7, v0 offset:4
        s_barrier
        v_mov_b32 v8, 0
        ds_load_2addr_b32 v[13:14], v7 offset1:1
        ds_store_2addr_b32 v1, v0, v2 offset0:0 offset1:128
        s_barrier
        ds_load_b64 v[20:21], v8 offset:512
        v_add_nc_u32 v9, 100, v0
        ds_cmpstore_rtn_b32 v22, v8, v9, v8 offset:2048
        s_barrier
        ds_load_b32 v23, v8 offset:2048
        v_mov_b32 v15, v20
        v_mov_b32 v16, v21
        v_mov_b32 v17, v22
        v_mov_b32 v18, v23
        v_lshlrev_b32 v50, 2, v0
        global_store_b32 v50, v10, s[0:1]
        global_store_b32 v50, v11, s[0:1] offset:256
        global_store_b32 v50, v12, s[0:1] offset:512
        global_store_b32 v50, v13, s[0:1] offset:768
        global_store_b32 v50, v14, s[0:1] offset:1024
        global_store_b32 v50, v15, s[0:1] offset:1280
        global_store_b32 v50, v16, s[0:1] offset:1536
        global_store_b32 v50, v17, s[0:1] offset:1792
        global_store_b32 v50, v18, s[0:1] offset:2048
        s_endpgm
    ";
    let mut mem = run_asm(body, vec![0; 9 * 256], 64, 1, 4096).unwrap();
    let r: Vec<Vec<u32>> = mem.u32s(ASM_DATA, 9 * 64).chunks(64).map(|c| c.to_vec()).collect();
    let mut old_counts: Vec<u32> = r[2].clone();
    old_counts.sort();
    for t in 0..64u32 {
        let i = t as usize;
        assert_eq!(r[0][i], 3 * (63 - t), "thread {t} read the other wave's store");
        assert_eq!(r[1][i], (t + 5) % 64 + 5, "barrier in a loop, thread {t}");
        assert_eq!(old_counts[i], t, "ds_add_rtn returned each old value once");
        assert_eq!(r[3][i], 64, "counter after 64 adds");
        assert_eq!(r[4][i], 63, "ds_max_u32");
        // LDS[512/4 + 0..1] was overwritten by the 2addr store of thread 0 (offset1:128 = 512 B).
        assert_eq!(r[5][i], 0, "ds_store_2addr second address (thread 0's v2 = 0)");
        assert_eq!(r[6][i], 3, "ds_store_2addr second address of thread 1 (3 * 1)");
    }
    // Every thread compare-stores (its id + 100) against 0: exactly one finds the 0 and wins,
    // every other one gets the winner's value back, and that value is what LDS holds at the end.
    let winners: Vec<usize> = (0..64).filter(|&t| r[7][t] == 0).collect();
    assert_eq!(winners.len(), 1, "one compare-store succeeds: {:?}", r[7]);
    let stored = winners[0] as u32 + 100;
    assert!((0..64).filter(|&t| t != winners[0]).all(|t| r[7][t] == stored));
    assert!(r[8].iter().all(|&v| v == stored));
}

#[test]
fn global_loads_stores_and_atomics() {
    // Two workgroups of 64: each thread adds 1 to a counter (returning the old value), takes the
    // max of its global id, swaps and compare-swaps, and copies a 128-bit vector.
    let body = "
        s_lshl_b32 s3, s2, 6
        v_add_nc_u32 v1, s3, v0
        v_mov_b32 v2, 0
        v_mov_b32 v3, 1
        global_atomic_add_u32 v4, v2, v3, s[0:1] glc
        global_atomic_max_u32 v2, v1, s[0:1] offset:4
        v_mov_b32 v5, 7
        v_mov_b32 v6, 0
        global_atomic_cmpswap_b32 v7, v2, v[5:6], s[0:1] offset:8 glc
        v_lshlrev_b32 v8, 2, v1
        global_store_b32 v8, v4, s[0:1] offset:64
        global_store_b32 v8, v7, s[0:1] offset:1024
        v_mov_b32 v9, 0
        v_mov_b32 v10, 32
        global_load_b128 v[11:14], v10, s[0:1] offset:-16
        v_lshlrev_b32 v15, 4, v1
        global_store_b128 v15, v[11:14], s[0:1] offset:2048
        s_add_u32 s6, s0, 16
        s_addc_u32 s7, s1, 0
        s_load_b64 s[8:9], s[6:7], 0x0
        s_waitcnt lgkmcnt(0)
        v_mov_b32 v16, s8
        v_mov_b32 v17, s9
        v_lshlrev_b32 v18, 3, v1
        s_add_u32 s10, s0, 0x1000
        s_addc_u32 s11, s1, 0
        v_add_co_u32 v19, vcc_lo, s10, v18
        v_add_co_ci_u32_e64 v20, null, s11, 0, vcc_lo
        global_store_b64 v[19:20], v[16:17], off
        s_endpgm
    ";
    let mut data = vec![0u8; 8192];
    data[16..32].copy_from_slice(&u32_bytes(&[0xa, 0xb, 0xc, 0xd]));
    let mut mem = run_asm(body, data, 64, 2, 0).unwrap();
    let head = mem.u32s(ASM_DATA, 3);
    assert_eq!(head[0], 128, "128 atomic increments");
    assert_eq!(head[1], 127, "atomic max of the global ids");
    assert_eq!(head[2], 7, "the first compare-swap (against 0) stored 7");
    let mut olds = mem.u32s(ASM_DATA + 64, 128);
    olds.sort();
    assert_eq!(olds, (0..128).collect::<Vec<u32>>(), "each old value returned once");
    let cmp = mem.u32s(ASM_DATA + 1024, 128);
    assert_eq!(cmp.iter().filter(|&&v| v == 0).count(), 1, "exactly one compare-swap saw 0");
    assert_eq!(cmp.iter().filter(|&&v| v == 7).count(), 127);
    for t in 0..128u64 {
        assert_eq!(mem.u32s(ASM_DATA + 2048 + 16 * t, 4), vec![0xa, 0xb, 0xc, 0xd]);
        assert_eq!(
            mem.u32s(ASM_DATA + 4096 + 8 * t, 2),
            vec![0xa, 0xb],
            "s_load_b64 then vaddr store, thread {t}"
        );
    }
}

#[test]
fn wide_memory_accesses_atomics_and_no_op_instructions() {
    // One wave: 128-bit and 96-bit global accesses, 128-bit and 2addr-64 LDS accesses, the
    // remaining 32/64-bit atomics, and the wait/cache/hint instructions, which change nothing.
    let body = "
        s_clause 0x1
        s_waitcnt_vscnt null, 0x0
        s_waitcnt_depctr 0xfff
        buffer_gl0_inv
        buffer_gl1_inv
        s_dcache_inv
        s_nop 3
        s_sleep 1
        s_setprio 2
        v_mov_b32 v20, 0
        global_load_b96 v[1:3], v20, s[0:1]
        v_lshlrev_b32 v4, 4, v0
        v_add_nc_u32 v5, v1, v0
        v_add_nc_u32 v6, v2, v0
        v_add_nc_u32 v7, v3, v0
        v_mov_b32 v8, v0
        ds_store_b128 v4, v[5:8]
        ds_load_b128 v[10:13], v4
        v_lshlrev_b32 v14, 3, v0
        ds_load_2addr_b64 v[15:18], v14 offset1:1
        v_lshlrev_b32 v21, 4, v0
        global_store_b128 v21, v[10:13], s[0:1] offset:256
        global_store_b96 v21, v[15:17], s[0:1] offset:1024
        v_mov_b32 v22, 5
        global_atomic_swap_b32 v23, v20, v22, s[0:1] offset:16 glc
        global_atomic_min_i32 v20, v0, s[0:1] offset:20
        v_mov_b32 v24, 1
        v_mov_b32 v25, 0
        global_atomic_add_u64 v20, v[24:25], s[0:1] offset:24
        v_cmp_eq_u32 vcc_lo, 0, v0
        s_or_saveexec_b32 s4, 0
        s_and_b32 exec_lo, exec_lo, vcc_lo
        v_mov_b32 v26, 99
        global_store_b32 v20, v26, s[0:1] offset:32
        s_or_saveexec_b32 s5, s4
        v_mov_b32 v27, s5
        global_store_b32 v20, v27, s[0:1] offset:36
        v_pk_add_f16 v28, 0x3c00, 0x4000
        v_mov_b32 v30, 0x30003
        v_mov_b32 v31, 0x50007
        v_pk_mul_lo_u16 v29, v30, v31
        global_store_b64 v20, v[28:29], s[0:1] offset:40
        s_endpgm
    ";
    let mut data = vec![0u8; 2048];
    data[0..12].copy_from_slice(&u32_bytes(&[100, 200, 300]));
    data[16..24].copy_from_slice(&u32_bytes(&[7, 1000]));
    data[24..32].copy_from_slice(&u64::MAX.to_le_bytes()[..8]);
    let mut mem = run_asm(body, data, 32, 1, 1024).unwrap();
    for t in 0..32u32 {
        let row = mem.u32s(ASM_DATA + 256 + 16 * t as u64, 4);
        assert_eq!(row, vec![100 + t, 200 + t, 300 + t, t], "ds b128 round trip, thread {t}");
        // 2addr b64 at 8*t and 8*t+8 reads two halves of the 16-byte records.
        let lds: Vec<u32> = (0..32u32).flat_map(|s| [100 + s, 200 + s, 300 + s, s]).collect();
        let w = (2 * t) as usize;
        let row96 = mem.u32s(ASM_DATA + 1024 + 16 * t as u64, 3);
        assert_eq!(row96, vec![lds[w], lds[w + 1], lds[w + 2]], "ds_load_2addr_b64 + global b96, thread {t}");
    }
    let head = mem.u32s(ASM_DATA + 16, 8);
    assert_eq!(head[0], 5, "swap stored 5");
    assert_eq!(head[1], 0, "atomic min of the ids and 1000");
    assert_eq!((head[2], head[3]), (31, 0), "u64::MAX + 32 wraps to 31");
    assert_eq!(head[4], 99, "only lane 0 ran the masked store");
    assert_eq!(head[5], 1, "s_or_saveexec returned the exec it replaced (lane 0 only)");
    // A float inline constant of a packed f16 operation is the f16 value in the low half and 0
    // in the high half (the hardware as LLVM documents it): 1.0 + 2.0 low, 0 + 0 high.
    assert_eq!(head[6], 0x0000_4200, "v_pk_add_f16 of the constants 1.0 and 2.0");
    assert_eq!(head[7], 0x000f_0015, "v_pk_mul_lo_u16: 3*7, 3*5");
}

#[test]
fn valu_bit_counts_permutes_and_modified_selects() {
    let body = "
        v_cls_i32 v10, 0x40000000
        v_cls_i32 v11, -1
        v_cls_i32 v12, 0xf0000000
        v_clz_i32_u32 v13, 0x10000
        v_ctz_i32_b32 v14, 0
        v_mov_b32 v1, 2.0
        v_cmp_gt_u32 vcc_lo, 8, v0
        v_cndmask_b32_e64 v15, -1.0, -v1, vcc_lo
        v_bfrev_b32 v16, 1
        v_mov_b32 v2, 0x11223344
        v_mov_b32 v3, 0x55667788
        v_perm_b32 v17, v2, v3, 0x0c070400
        v_alignbit_b32 v18, v2, v3, 8
        v_med3_i32 v19, v0, 5, 20
        v_max3_f32 v20, v1, -4.0, 0.5
    ";
    let r = valu_results(body, 11);
    for l in 0..32usize {
        assert_eq!(r[0][l], 1, "cls counts leading sign-equal bits");
        assert_eq!(r[1][l], u32::MAX, "cls of -1 is -1");
        assert_eq!(r[2][l], 4);
        assert_eq!(r[3][l], 15);
        assert_eq!(r[4][l], u32::MAX);
        assert_eq!(f32::from_bits(r[5][l]), if l < 8 { -2.0 } else { -1.0 }, "lane {l}");
        assert_eq!(r[6][l], 0x8000_0000);
        assert_eq!(r[7][l], 0x0011_4488);
        assert_eq!(r[8][l], 0x4455_6677);
        assert_eq!(r[9][l], (l as u32).clamp(5, 20));
        assert_eq!(f32::from_bits(r[10][l]), 2.0);
    }
}

#[test]
fn relative_register_addressing_through_m0() {
    let body = "
        s_mov_b32 s20, 11
        s_mov_b32 s21, 22
        s_mov_b32 s22, 33
        s_mov_b32 m0, 2
        s_movrels_b32 s10, s20
        s_mov_b32 m0, 1
        s_movreld_b32 s23, 44
        s_mov_b32 s11, s24
        v_mov_b32 v30, v0
        v_add_nc_u32 v31, 100, v0
        v_add_nc_u32 v32, 200, v0
        s_mov_b32 m0, 2
        v_movrels_b32 v10, v30
        s_mov_b32 m0, 3
        v_movreld_b32 v30, 7
        v_mov_b32 v11, v33
        v_mov_b32 v12, s10
        v_mov_b32 v13, s11
    ";
    let r = valu_results(body, 4);
    for l in 0..32u32 {
        assert_eq!(r[0][l as usize], 200 + l, "v_movrels read v32");
        assert_eq!(r[1][l as usize], 7, "v_movreld wrote v33");
        assert_eq!(r[2][l as usize], 33, "s_movrels read s22");
        assert_eq!(r[3][l as usize], 44, "s_movreld wrote s24");
    }
}

#[test]
fn f64_arithmetic() {
    // v[2:3] = lane as f64; results: fma, add, mul, min, ldexp (to the edge of the exponent
    // range), conversion back to i32.
    let body = "
        v_cvt_f64_u32 v[2:3], v0
        v_fma_f64 v[10:11], v[2:3], 0.5, 1.0
        v_add_f64 v[12:13], v[2:3], -4.0
        v_mul_f64 v[14:15], v[2:3], v[2:3]
        v_min_f64 v[16:17], v[2:3], 4.0
        v_ldexp_f64 v[18:19], v[2:3], 1000
        v_cvt_i32_f64 v20, v[12:13]
        v_ldexp_f64 v[22:23], 1.0, -1074
    ";
    let r = valu_results(body, 14);
    for l in 0..32usize {
        let x = l as f64;
        let d = |k: usize| f64::from_bits(r[k][l] as u64 | (r[k + 1][l] as u64) << 32);
        assert_eq!(d(0), x.mul_add(0.5, 1.0));
        assert_eq!(d(2), x - 4.0);
        assert_eq!(d(4), x * x);
        assert_eq!(d(6), x.min(4.0));
        assert_eq!(d(8), x * 2f64.powi(1000));
        assert_eq!(r[10][l] as i32, (x - 4.0) as i32);
        assert_eq!(d(12), f64::from_bits(1), "2^-1074 is the smallest denormal");
    }
}

#[test]
fn lane_permutes_through_the_lds_crossbar() {
    // bpermute: every lane fetches from lane + 1; lane 5 is inactive, so lane 4 reads 0.
    // permute: every active lane sends to lane (31 - lane).
    let body = "
        v_mul_u32_u24 v1, 10, v0
        v_add_nc_u32 v2, 1, v0
        v_and_b32 v2, 31, v2
        v_lshlrev_b32 v2, 2, v2
        v_sub_nc_u32 v3, 31, v0
        v_lshlrev_b32 v3, 2, v3
        v_mov_b32 v10, 99
        v_mov_b32 v11, 99
        s_mov_b32 exec_lo, 0xffffffdf
        ds_bpermute_b32 v10, v2, v1
        ds_permute_b32 v11, v3, v1
        s_mov_b32 exec_lo, -1
    ";
    let r = valu_results(body, 2);
    for l in 0..32u32 {
        let i = l as usize;
        let want_b = if l == 5 {
            99
        } else if l == 4 {
            0
        } else {
            ((l + 1) % 32) * 10
        };
        assert_eq!(r[0][i], want_b, "bpermute lane {l}");
        // Lane 26 = 31 - 5 receives nothing (lane 5 is inactive), and lane 5 keeps its value.
        let want_p = if l == 5 {
            99
        } else if l == 26 {
            0
        } else {
            (31 - l) * 10
        };
        assert_eq!(r[1][i], want_p, "permute lane {l}");
    }
}

#[test]
fn gfx10_3_sixteen_bit_results_sdwa_and_the_private_segment_buffer() {
    // 16-bit results: the VOP1/VOP2 operations zero the high half on gfx10.3 (as on gfx9), the
    // VOP3-only ones keep it, and op_sel[3] writes the high half.
    // SDWA: byte and word selections with sign extension, dst_sel with each dst_unused.
    // MUBUF: a private segment buffer (swizzled, ADD_TID_ENABLE, 32 lanes) over the ring in
    // s[2:3] plus the wave's offset (s5), written by each lane and read back through FLAT_SCRATCH
    // in the private aperture.
    let body = "
        v_mov_b32 v10, 0xffff0000
        v_mov_b32 v2, 0x3c00
        v_add_f16 v10, v2, v2
        v_mov_b32 v11, 0xffff0000
        v_add_nc_u16 v11, v0, 5
        v_mov_b32 v12, 0x1234abcd
        v_fma_f16 v12, v2, v2, v2 op_sel:[0,0,0,1]
        v_mov_b32 v3, 0x80ff7f01
        v_mov_b32 v13, 0xaaaaaaaa
        v_mov_b32_sdwa v13, v3 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_3
        v_mov_b32 v14, 0xaaaaaaaa
        v_mov_b32_sdwa v14, sext(v3) dst_sel:BYTE_1 dst_unused:UNUSED_SEXT src0_sel:BYTE_2
        v_mov_b32 v15, 0xaaaaaaaa
        v_add_nc_u32_sdwa v15, v3, v3 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:BYTE_0
        s_mov_b32 s8, s2
        s_and_b32 s9, s3, 0xffff
        s_or_b32 s9, s9, 0x80000000
        s_mov_b32 s10, -1
        s_mov_b32 s11, 0x21c14fac
        s_add_u32 s8, s8, s5
        s_addc_u32 s9, s9, 0
        v_and_b32 v4, 7, v0
        v_lshlrev_b32 v4, 2, v4
        v_add_nc_u32 v5, 1000, v0
        buffer_store_dword v5, v4, s[8:11], 0 offen offset:8
        s_add_u32 s12, s2, s5
        s_addc_u32 s13, s3, 0
        s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s12
        s_setreg_b32 hwreg(HW_REG_FLAT_SCR_HI), s13
        s_mov_b64 s[14:15], src_private_base
        v_add_nc_u32 v6, 8, v4
        v_mov_b32 v7, s15
        flat_load_dword v16, v[6:7]
        s_waitcnt vmcnt(0) lgkmcnt(0)
        v_mov_b32 v20, 0
        v_lshlrev_b32 v21, 5, v0
        v_add_co_u32 v22, vcc_lo, s0, v21
        v_add_co_ci_u32_e32 v23, vcc_lo, s1, v20, vcc_lo
        global_store_dwordx4 v[22:23], v[10:13], off
        global_store_dwordx3 v[22:23], v[14:16], off offset:16
        s_endpgm
    ";
    let threads = 64;
    let mut mem = run_asm_gfx10(body, vec![0; threads * 32], threads as u32, 64).unwrap();
    let out = mem.u32s(ASM_DATA, threads * 8);
    for lane in 0..threads {
        let row = &out[lane * 8..lane * 8 + 7];
        let want = [
            0x0000_4000,                     // 1 + 1 in the low half, high half zeroed
            0xffff_0000 | (lane as u32 + 5), // v_add_nc_u16 keeps the high half
            0x4000_abcd,                     // fma 1*1+1 = 2 (0x4000) into the high half
            0x0080_aaaa,                     // byte 3 (0x80), zero-extended, into word 1
            0xffff_ff00,        // byte 2 (0xff) sign-extended = -1, its byte 1 and the sign above
            0x80ff + 0x01,      // word 1 + byte 0
            1000 + lane as u32, // through the private segment buffer and back by FLAT
        ];
        assert_eq!(row, &want, "lane {lane}");
    }
}

#[test]
fn lds_addresses_wrap_at_32_bits() {
    // What clang emits for tile[127 - l]: a negative VGPR (-4 * l) plus a positive offset. The
    // sum wraps at 32 bits into the workgroup's LDS; it is not an address past 4 GiB.
    let body = "
        v_lshlrev_b32 v1, 2, v0
        v_add_nc_u32 v2, 100, v0
        ds_store_b32 v1, v2
        s_waitcnt lgkmcnt(0)
        s_barrier
        v_sub_nc_u32 v3, 0, v1
        ds_load_b32 v4, v3 offset:124
        ds_load_2addr_b32 v[5:6], v3 offset0:31 offset1:31
        s_waitcnt lgkmcnt(0)
        v_lshlrev_b32 v7, 3, v0
        global_store_b64 v7, v[4:5], s[0:1]
        s_endpgm
    ";
    let mut mem = run_asm(body, vec![0; 8 * 32], 32, 1, 128).unwrap();
    let out = mem.u32s(ASM_DATA, 64);
    for l in 0..32u32 {
        assert_eq!(out[2 * l as usize], 100 + 31 - l, "ds_load at 124 - 4 * {l}");
        assert_eq!(out[2 * l as usize + 1], 100 + 31 - l, "ds_load_2addr at (31 - {l}) * 4");
    }
}
