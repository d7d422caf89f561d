//! Renders a decoded instruction in the syntax of LLVM's AMDGPU disassembler (`llvm-objdump -d`):
//! the mnemonic with the suffix of its encoding (`_e32`, `_e64`, `_sdwa`), then every operand and
//! modifier, each printed from the fields the decoder kept. It exists so that the decoder can be
//! checked against LLVM's listings operand by operand (see `objdump_check`); nothing executes
//! from it.
//!
//! How LLVM prints an operand depends on its type, which the instruction's name says: registers
//! span one, two or more dwords (`v[4:5]`), 16-bit operands of gfx11's true16 instructions name
//! a half (`v1.h`), and an inline constant is printed as an integer or as one of the float
//! constants (`0.5`, `-4.0`, `0.15915494`, 1/(2*pi)) in the operand's width.

use pm4::Gfx;

use super::decode::{
    Decoded, Ds, Flat, Inst, Mubuf, Sdwa, Valu, ValuEnc, Vopd, VopdHalf, VOP1_BASE, VOP2_BASE,
};
use super::mnemonic::{mnemonic, name};
use super::operand::{Aperture, Src, EXEC_LO, M0, NULL, VCC_LO};

/// The type of an operand as far as printing goes: its width in bits, and for 16-bit operands
/// whether it is a float (an inline float constant is printed as a float only then, as the hex
/// of its half-precision bits for an integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ty {
    bits: u8,
    float: bool,
}

const B32: Ty = Ty { bits: 32, float: false };
const B64: Ty = Ty { bits: 64, float: false };

impl Ty {
    /// The type an LLVM type suffix (`f32`, `u64`, `b16`, `i24`) names.
    fn from_suffix(token: &str) -> Option<Ty> {
        let (kind, width) = token.split_at(1);
        if !matches!(kind, "f" | "i" | "u" | "b")
            || width.is_empty()
            || !width.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let bits = match width.parse::<u32>().ok()? {
            16 => 16,
            64 => 64,
            128 => 128,
            _ => 32,
        };
        Some(Ty { bits, float: kind == "f" })
    }

    fn dwords(self) -> u32 {
        u32::from(self.bits).div_ceil(32)
    }
}

/// An instruction rendered: its text and, for branches, the address it jumps to.
pub(super) struct Rendered {
    pub text: String,
    pub branch_target: Option<u64>,
}

/// The instruction `d` of generation `gfx`, found at image address `at`, as LLVM prints it; None
/// when the decoder has no name for it.
pub(super) fn render(gfx: Gfx, d: &Decoded, at: u64) -> Option<Rendered> {
    let printed = name(gfx, d)?;
    // Operand types follow the gfx11 instruction the word was decoded into (the same operation).
    let own = mnemonic(&d.inst).unwrap_or(printed);
    let mut branch_target = None;
    let operands = match &d.inst {
        Inst::Sop2 { sdst, s0, s1, .. } => {
            let (dst, [t0, t1, _]) = types(own);
            format!("{}, {}, {}", sreg(*sdst, dst.dwords()), scalar_src(s0, t0), scalar_src(s1, t1))
        }
        Inst::Sop1 { sdst, s0, .. } => sop1(own, *sdst, s0),
        Inst::Sopc { s0, s1, .. } => {
            let (_, [t0, t1, _]) = types(own);
            format!("{}, {}", scalar_src(s0, t0), scalar_src(s1, t1))
        }
        Inst::Sopk { sdst, simm, literal, .. } => sopk(gfx, own, *sdst, *simm, *literal),
        Inst::Sopp { simm, .. } => {
            if own.starts_with("s_branch") || own.starts_with("s_cbranch") {
                branch_target = Some(at.wrapping_add(4).wrapping_add((*simm as i16 as i64 * 4) as u64));
            }
            sopp(gfx, own, *simm)
        }
        Inst::Smem { sdata, sbase, offset, soffset, glc, dlc, .. } => {
            smem(own, *sdata, *sbase, *offset, *soffset) + &cache_policy(*glc, false, *dlc)
        }
        Inst::Valu(v) => valu(gfx, v, own),
        Inst::Vopd(v) => return Some(Rendered { text: vopd(v), branch_target: None }),
        Inst::Ds(x) => ds(gfx, printed, x),
        Inst::Flat(f) => flat(own, f),
        Inst::Mubuf(m) => mubuf(own, m),
    };
    let suffix = match &d.inst {
        Inst::Valu(v) => encoding_suffix(v, own),
        _ => "",
    };
    let text = if operands.is_empty() {
        format!("{printed}{suffix}")
    } else {
        format!("{printed}{suffix} {operands}")
    };
    Some(Rendered { text, branch_target })
}

/// VOP1 and VOP2 operations (gfx11 names) that have no VOP3 form, whose short form LLVM
/// therefore names without `_e32`.
const SHORT_ONLY: [&str; 11] = [
    "v_nop",
    "v_pipeflush",
    "v_readfirstlane_b32",
    "v_swap_b32",
    "v_swaprel_b32",
    "v_pk_fmac_f16",
    "v_dot2acc_f32_f16",
    "v_fmamk_f32",
    "v_fmaak_f32",
    "v_fmamk_f16",
    "v_fmaak_f16",
];

/// The suffix LLVM gives a VALU mnemonic whose operation has more than one encoding: `_e32`
/// for the short forms, `_e64` for their VOP3 twins, `_sdwa`; VOP3-only and packed operations,
/// and those in `SHORT_ONLY`, have none.
fn encoding_suffix(v: &Valu, name: &str) -> &'static str {
    match v.enc {
        _ if v.sdwa.is_some() => "_sdwa",
        ValuEnc::Vop1 | ValuEnc::Vop2 | ValuEnc::Vopc if !SHORT_ONLY.contains(&name) => "_e32",
        ValuEnc::Vop3 if v.op < VOP3_BASE => "_e64",
        _ => "",
    }
}

/// The destination and source types of an instruction, from the type suffixes of its name:
/// `v_cvt_f64_i32` writes f64 from i32, `v_add_f32` is f32 throughout; then the operations
/// whose operands differ from that pattern.
fn types(name: &str) -> (Ty, [Ty; 3]) {
    let suffixes: Vec<Ty> = name.split('_').filter_map(Ty::from_suffix).collect();
    let dst = suffixes.first().copied().unwrap_or(B32);
    let src = suffixes.last().copied().unwrap_or(B32);
    let mut srcs = [src; 3];
    let mut dst = dst;
    let base = name.trim_end_matches(|c: char| c != '_').trim_end_matches('_');
    match base {
        // 64-bit shifts: the shift amount is 32-bit.
        "v_lshlrev" | "v_lshrrev" | "v_ashrrev" if src.bits == 64 => srcs[0] = B32,
        "s_lshl" | "s_lshr" | "s_ashr" | "s_bfe" if src.bits == 64 => srcs[1] = B32,
        "s_bfm" | "s_bitset0" | "s_bitset1" if dst.bits == 64 => srcs = [B32; 3],
        // The exponent of ldexp and the class mask of cmp_class are integers.
        "v_ldexp" | "v_cmp_class" | "v_cmpx_class" | "v_trig_preop" => {
            srcs[1] = Ty { bits: if src.bits == 16 { 16 } else { 32 }, float: false }
        }
        // D = S0 * S1 + S2 with 32-bit factors and a 64-bit addend.
        "v_mad_u64" | "v_mad_i64" => srcs = [B32, B32, B64],
        // Sums of absolute differences of bytes: a 64-bit source of bytes, a 32-bit reference
        // and accumulators as wide as the result.
        "v_qsad_pk_u16" | "v_mqsad_pk_u16" => (dst, srcs) = (B64, [B64, B32, B64]),
        "v_mqsad_u32" => {
            let b128 = Ty { bits: 128, float: false };
            (dst, srcs) = (b128, [B64, B32, b128]);
        }
        // Dot products of packed halves: the factors are dwords, the addend a half.
        "v_dot2_f16" if name == "v_dot2_f16_f16" => srcs = [B32, B32, src],
        // Saturates the two halves of a dword into two bytes of a half.
        "v_sat_pk_u8" => (dst, srcs) = (Ty { bits: 16, float: false }, [B32; 3]),
        // v_sad_u16 adds the difference of the low halves to a 32-bit accumulator; all its
        // operands are dwords.
        "v_sad" if name == "v_sad_u16" => (dst, srcs) = (B32, [B32; 3]),
        _ => {}
    }
    // Packed conversions write one dword holding two halves.
    if name.contains("_pk_") || name.starts_with("v_pack_") {
        dst = B32;
    }
    (dst, srcs)
}

/// A scalar register range as LLVM names it: `s4`, `s[2:3]`, `vcc_lo`, `vcc`, `exec`, `m0`,
/// `null`, `ttmp[4:7]`.
fn sreg(index: u8, dwords: u32) -> String {
    let i = u32::from(index);
    let range = |prefix: &str, first: u32| {
        if dwords == 1 {
            format!("{prefix}{first}")
        } else {
            format!("{prefix}[{first}:{}]", first + dwords - 1)
        }
    };
    match (index, dwords) {
        (0..=105, _) => range("s", i),
        (VCC_LO, 1) => "vcc_lo".into(),
        (107, 1) => "vcc_hi".into(),
        (VCC_LO, 2) => "vcc".into(),
        (108..=123, _) => range("ttmp", i - 108),
        (NULL, _) => "null".into(),
        (M0, 1) => "m0".into(),
        (EXEC_LO, 1) => "exec_lo".into(),
        (127, 1) => "exec_hi".into(),
        (EXEC_LO, 2) => "exec".into(),
        _ => format!("<scalar register {i} x{dwords}>"),
    }
}

/// A VGPR range: `v5`, `v[4:5]`.
fn vreg(index: u8, dwords: u32) -> String {
    if dwords <= 1 {
        format!("v{index}")
    } else {
        format!("v[{index}:{}]", u32::from(index) + dwords - 1)
    }
}

/// The inline float constants in the order of their encodings (240..=248), as LLVM prints them
/// for 16 and 32-bit operands; 1/(2*pi) has more digits as a double.
const FLOAT_CONSTANTS: [&str; 9] = ["0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0", "0.15915494"];
const INV_2PI_F64: &str = "0.15915494309189532";

/// Whether `value`, printed for an operand of type `ty`, could have been an inline constant: LLVM
/// then marks the literal `lit(...)`, so that reassembling keeps the longer encoding (not for
/// 16-bit integers, whose literal it prints as its low half in hex).
fn literal_is_inlinable(value: u32, ty: Ty) -> bool {
    if ty.bits == 16 && !ty.float {
        return false;
    }
    let as_int = value as i32;
    if (-16..=64).contains(&as_int) {
        return true;
    }
    match ty.bits {
        16 if ty.float => {
            [0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118].contains(&value)
        }
        32 => (240..=248).any(|f| Src::decode(f, 0).const32() == Some(value)),
        _ => false,
    }
}

/// A source operand of type `ty` without modifiers; `half` says which half of a VGPR a gfx11
/// true16 operand reads (None: the operand is not a true16 half).
fn operand(s: &Src, ty: Ty, half: Option<bool>) -> String {
    match *s {
        Src::Sgpr(r) => sreg(r, ty.dwords().max(1)),
        Src::Vgpr(r) => match half {
            Some(high) => format!("v{r}.{}", if high { 'h' } else { 'l' }),
            None => vreg(r, ty.dwords()),
        },
        Src::Int(i) => i.to_string(),
        Src::Float(k) if ty.bits == 64 && k == 8 => INV_2PI_F64.into(),
        Src::Float(_) if ty.bits == 16 && !ty.float => format!("{:#x}", s.const16().unwrap_or(0)),
        Src::Float(k) => FLOAT_CONSTANTS[k as usize].into(),
        Src::Literal(l) => {
            let value = if ty.bits == 16 { l & 0xffff } else { l };
            if literal_is_inlinable(value, ty) {
                format!("lit({value:#x})")
            } else {
                format!("{value:#x}")
            }
        }
        Src::Scc => "src_scc".into(),
        Src::Vccz => "src_vccz".into(),
        Src::Execz => "src_execz".into(),
        Src::Aperture(a) => match a {
            Aperture::SharedBase => "src_shared_base",
            Aperture::SharedLimit => "src_shared_limit",
            Aperture::PrivateBase => "src_private_base",
            Aperture::PrivateLimit => "src_private_limit",
        }
        .into(),
        Src::Unsupported(254) => "src_lds_direct".into(),
        Src::Unsupported(239) => "src_pops_exiting_wave_id".into(),
        Src::Unsupported(f) => format!("<source field {f}>"),
        Src::SdwaLatch(i) => format!("<SDWA source {i}>"),
    }
}

fn scalar_src(s: &Src, ty: Ty) -> String {
    operand(s, ty, None)
}

fn sop1(name: &str, sdst: u8, s0: &Src) -> String {
    let (dst, [t0, ..]) = types(name);
    match name {
        "s_getpc_b64" => sreg(sdst, 2),
        "s_setpc_b64" | "s_rfe_b64" => scalar_src(s0, B64),
        // The message is the source field itself, not an operand read.
        "s_sendmsg_rtn_b32" | "s_sendmsg_rtn_b64" => {
            format!("{}, {}", sreg(sdst, dst.dwords()), sendmsg(Gfx::Gfx11, u16::from(source_field(s0))))
        }
        _ => format!("{}, {}", sreg(sdst, dst.dwords()), scalar_src(s0, t0)),
    }
}

/// The 8-bit scalar source field a decoded source came from (inverting `Src::decode`).
fn source_field(s: &Src) -> u8 {
    match *s {
        Src::Sgpr(r) => r,
        Src::Int(i) if i >= 0 => 128 + i as u8,
        Src::Int(i) => (192 - i32::from(i)) as u8,
        Src::Float(k) => 240 + k,
        _ => 0xff,
    }
}

/// The hardware registers LLVM names, by `hwreg` id (some ids mean different registers on the
/// two generations).
fn hwreg_name(gfx: Gfx, id: u16) -> Option<&'static str> {
    Some(match (gfx, id) {
        (_, 1) => "HW_REG_MODE",
        (_, 2) => "HW_REG_STATUS",
        (_, 3) => "HW_REG_TRAPSTS",
        (_, 5) => "HW_REG_GPR_ALLOC",
        (_, 6) => "HW_REG_LDS_ALLOC",
        (_, 7) => "HW_REG_IB_STS",
        (_, 15) => "HW_REG_SH_MEM_BASES",
        (Gfx::Gfx10_3, 16) => "HW_REG_TBA_LO",
        (Gfx::Gfx10_3, 17) => "HW_REG_TBA_HI",
        (Gfx::Gfx10_3, 18) => "HW_REG_TMA_LO",
        (Gfx::Gfx10_3, 19) => "HW_REG_TMA_HI",
        (Gfx::Gfx11, 18) => "HW_REG_PERF_SNAPSHOT_PC_LO",
        (Gfx::Gfx11, 19) => "HW_REG_PERF_SNAPSHOT_PC_HI",
        (_, 20) => "HW_REG_FLAT_SCR_LO",
        (_, 21) => "HW_REG_FLAT_SCR_HI",
        (_, 23) => "HW_REG_HW_ID1",
        (_, 24) => "HW_REG_HW_ID2",
        (Gfx::Gfx10_3, 25) => "HW_REG_POPS_PACKER",
        (Gfx::Gfx11, 27) => "HW_REG_PERF_SNAPSHOT_DATA",
        (_, 29) => "HW_REG_SHADER_CYCLES",
        _ => return None,
    })
}

/// `hwreg(NAME, offset, size)`, the offset and size left out when the whole register is meant.
fn hwreg(gfx: Gfx, simm: u16) -> String {
    let (id, offset, size) = (simm & 63, (simm >> 6) & 31, ((simm >> 11) & 31) + 1);
    let name = hwreg_name(gfx, id).map_or_else(|| id.to_string(), str::to_string);
    if offset == 0 && size == 32 {
        format!("hwreg({name})")
    } else {
        format!("hwreg({name}, {offset}, {size})")
    }
}

fn sopk(gfx: Gfx, name: &str, sdst: u8, simm: u16, literal: u32) -> String {
    let hwreg = |simm| hwreg(gfx, simm);
    match name {
        "s_getreg_b32" => format!("{}, {}", sreg(sdst, 1), hwreg(simm)),
        "s_setreg_b32" => format!("{}, {}", hwreg(simm), sreg(sdst, 1)),
        // The value is printed as an integer where it is a small one, else in hex.
        "s_setreg_imm32_b32" if (-16..=64).contains(&(literal as i32)) => {
            format!("{}, {}", hwreg(simm), literal as i32)
        }
        "s_setreg_imm32_b32" => format!("{}, {literal:#x}", hwreg(simm)),
        // Branch offsets are decimal.
        "s_subvector_loop_begin" | "s_subvector_loop_end" => format!("{}, {simm}", sreg(sdst, 1)),
        // LLVM names the version and its flags (`3|UC_VERSION_W32_BIT`); not reproduced here.
        "s_version" => format!("{simm:#x}"),
        _ => format!("{}, {simm:#x}", sreg(sdst, 1)),
    }
}

/// The message of `s_sendmsg` or `s_sendmsg_rtn`: its name where LLVM has one (the ids differ
/// between generations).
fn sendmsg(gfx: Gfx, simm: u16) -> String {
    let name = match (gfx, simm) {
        (_, 1) => "MSG_INTERRUPT",
        (Gfx::Gfx11, 3) => "MSG_DEALLOC_VGPRS",
        (Gfx::Gfx11, 128) => "MSG_RTN_GET_DOORBELL",
        (Gfx::Gfx11, 129) => "MSG_RTN_GET_DDID",
        (Gfx::Gfx11, 130) => "MSG_RTN_GET_TMA",
        (Gfx::Gfx11, 131) => "MSG_RTN_GET_REALTIME",
        (Gfx::Gfx11, 132) => "MSG_RTN_SAVE_WAVE",
        (Gfx::Gfx11, 133) => "MSG_RTN_GET_TBA",
        // An unnamed message id without operation or stream bits; else the raw immediate.
        _ if simm < 256 => return format!("sendmsg({simm}, 0, 0)"),
        _ => return simm.to_string(),
    };
    format!("sendmsg({name})")
}

/// `s_waitcnt`'s counters, each printed unless it is at its maximum (no wait), all of them when
/// none waits. The fields sit differently on gfx10 and gfx11.
fn waitcnt(gfx: Gfx, simm: u16) -> String {
    let s = u32::from(simm);
    let (vm, exp, lgkm, vm_max, lgkm_max) = match gfx {
        Gfx::Gfx11 => (s >> 10 & 63, s & 7, s >> 4 & 63, 63, 63),
        Gfx::Gfx10_3 => ((s & 15) | (s >> 14 & 3) << 4, s >> 4 & 7, s >> 8 & 63, 63, 63),
    };
    let counters = [("vmcnt", vm, vm_max), ("expcnt", exp, 7), ("lgkmcnt", lgkm, lgkm_max)];
    let waiting: Vec<String> =
        counters.iter().filter(|(_, v, max)| v != max).map(|(n, v, _)| format!("{n}({v})")).collect();
    if waiting.is_empty() {
        counters.iter().map(|(n, v, _)| format!("{n}({v})")).collect::<Vec<_>>().join(" ")
    } else {
        waiting.join(" ")
    }
}

/// `s_delay_alu`: the dependency of the next instruction, the instructions skipped, and the
/// dependency of the one after them; fields at zero are left out.
fn delay_alu(simm: u16) -> String {
    let dep = |id: u16| match id {
        1..=4 => format!("VALU_DEP_{id}"),
        5..=7 => format!("TRANS32_DEP_{}", id - 4),
        8 => "FMA_ACCUM_CYCLE_1".into(),
        9..=11 => format!("SALU_CYCLE_{}", id - 8),
        _ => format!("{id}"),
    };
    let skip = |n: u16| match n {
        1 => "NEXT".to_string(),
        n => format!("SKIP_{}", n - 1),
    };
    let (id0, skipped, id1) = (simm & 15, simm >> 4 & 7, simm >> 7 & 15);
    let mut parts = Vec::new();
    if id0 != 0 {
        parts.push(format!("instid0({})", dep(id0)));
    }
    if skipped != 0 {
        parts.push(format!("instskip({})", skip(skipped)));
    }
    if id1 != 0 {
        parts.push(format!("instid1({})", dep(id1)));
    }
    parts.join(" | ")
}

/// `s_waitcnt_depctr`'s fields (gfx11) in LLVM's order, each printed unless it is at its
/// maximum (no wait); the bare immediate when all are, when bits outside the fields are set, and
/// always on gfx10.
fn depctr(gfx: Gfx, simm: u16) -> String {
    // (name, shift, width)
    const FIELDS: [(&str, u16, u16); 7] = [
        ("depctr_hold_cnt", 7, 1),
        ("depctr_sa_sdst", 0, 1),
        ("depctr_va_vdst", 12, 4),
        ("depctr_va_sdst", 9, 3),
        ("depctr_va_ssrc", 8, 1),
        ("depctr_va_vcc", 1, 1),
        ("depctr_vm_vsrc", 2, 3),
    ];
    let fields: Vec<String> = FIELDS
        .iter()
        .filter_map(|&(n, shift, width)| {
            let value = simm >> shift & ((1 << width) - 1);
            (value != (1 << width) - 1).then(|| format!("{n}({value})"))
        })
        .collect();
    const NO_FIELD: u16 = 0x60;
    if gfx == Gfx::Gfx10_3 || fields.is_empty() || simm & NO_FIELD != 0 {
        format!("{simm:#x}")
    } else {
        fields.join(" ")
    }
}

fn sopp(gfx: Gfx, name: &str, simm: u16) -> String {
    match name {
        "s_waitcnt" => waitcnt(gfx, simm),
        "s_delay_alu" => delay_alu(simm),
        "s_waitcnt_depctr" => depctr(gfx, simm),
        "s_sendmsg" | "s_sendmsghalt" => sendmsg(gfx, simm),
        "s_clause" | "s_set_inst_prefetch_distance" => format!("{simm:#x}"),
        // Instructions without operands print none while their immediate is zero.
        "s_endpgm"
        | "s_barrier"
        | "s_code_end"
        | "s_icache_inv"
        | "s_wakeup"
        | "s_ttracedata"
        | "s_endpgm_saved"
        | "s_endpgm_ordered_ps_done"
            if simm == 0 =>
        {
            String::new()
        }
        // Branch offsets and s_endpgm's immediate are decimal; other immediates too while they
        // are small, else hex.
        _ if name.starts_with("s_branch")
            || name.starts_with("s_cbranch")
            || name == "s_endpgm"
            || simm <= 64 =>
        {
            simm.to_string()
        }
        _ => format!("{simm:#x}"),
    }
}

/// The dwords a memory instruction moves, from its name (`_b64`, `dwordx3`, `_b128`...).
fn data_dwords(name: &str) -> u32 {
    let last = name.rsplit('_').next().unwrap_or("");
    match last {
        "b64" | "x2" | "u64" | "i64" | "f64" | "dwordx2" => 2,
        "b96" | "x3" | "dwordx3" => 3,
        "b128" | "x4" | "dwordx4" => 4,
        "b256" | "x8" | "dwordx8" => 8,
        "b512" | "x16" | "dwordx16" => 16,
        _ => 1,
    }
}

/// A signed number in hex as LLVM prints offsets: `0x1c`, `-0x4`.
fn signed_hex(x: i32) -> String {
    if x < 0 {
        format!("-{:#x}", x.unsigned_abs())
    } else {
        format!("{x:#x}")
    }
}

fn smem(name: &str, sdata: u8, sbase: u8, offset: i32, soffset: u8) -> String {
    // Cache invalidations have no operands.
    if name.ends_with("_inv") {
        return String::new();
    }
    let base_dwords = if name.starts_with("s_buffer") { 4 } else { 2 };
    let mut out = format!("{}, {}", sreg(sdata, data_dwords(name)), sreg(sbase, base_dwords));
    if soffset != NULL {
        out += &format!(", {}", sreg(soffset, 1));
        if offset != 0 {
            out += &format!(" offset:{}", signed_hex(offset));
        }
    } else if offset != 0 {
        out += &format!(", {}", signed_hex(offset));
    } else {
        out += ", null";
    }
    out
}

/// Whether a DS instruction writes a VGPR result (gfx10 spells loads `read`).
fn ds_returns(name: &str) -> bool {
    ["load", "read", "_rtn", "permute", "swizzle"].iter().any(|k| name.contains(k))
}

fn ds(gfx: Gfx, name: &str, x: &Ds) -> String {
    let two_data = ["cmpst", "mskor", "write2", "store_2addr", "wrxchg2", "storexchg_2addr", "wrap"]
        .iter()
        .any(|k| name.contains(k));
    let no_data = name.contains("load") || name.contains("read") || name.contains("swizzle");
    let dwords = data_dwords(name);
    let mut ops = Vec::new();
    if ds_returns(name) {
        let pair = ["2addr", "read2", "xchg2"].iter().any(|k| name.contains(k));
        let dst_dwords = if pair { 2 * dwords } else { dwords };
        ops.push(vreg(x.vdst, dst_dwords));
    }
    ops.push(vreg(x.addr, 1));
    // gfx10's ds_cmpst_* print DATA0 (the compare value) first; the decoder swapped the fields
    // into the order of their gfx11 twins, ds_cmpstore_*.
    let (data0, data1) = if gfx == Gfx::Gfx10_3 && name.starts_with("ds_cmpst_") {
        (x.data1, x.data0)
    } else {
        (x.data0, x.data1)
    };
    if !no_data {
        ops.push(vreg(data0, dwords));
        if two_data {
            ops.push(vreg(data1, dwords));
        }
    }
    let mut out = ops.join(", ");
    if name.contains("2addr") || name.contains("read2") || name.contains("write2") {
        if x.offset0 != 0 {
            out += &format!(" offset0:{}", x.offset0);
        }
        if x.offset1 != 0 {
            out += &format!(" offset1:{}", x.offset1);
        }
    } else {
        let offset = u16::from(x.offset0) | u16::from(x.offset1) << 8;
        if offset != 0 && name.starts_with("ds_swizzle") {
            out += &format!(" offset:{}", swizzle(offset));
        } else if offset != 0 {
            out += &format!(" offset:{offset}");
        }
    }
    if x.gds {
        out += " gds";
    }
    out
}

/// `ds_swizzle`'s pattern: four lane selects of a quad (`QUAD_PERM`, offset bit 15 set, bits
/// 14:8 clear) or the and/or/xor masks of a lane id within 32 lanes, printed as the named
/// pattern it amounts to (`SWAP`, `REVERSE`, `BROADCAST`) or as a bit-by-bit `BITMASK_PERM`
/// (`0`/`1` force the bit, `p` keeps it, `i` inverts it).
fn swizzle(offset: u16) -> String {
    if offset & 0xff00 == 0x8000 {
        let lanes: Vec<String> = (0..4).map(|i| (offset >> (2 * i) & 3).to_string()).collect();
        return format!("swizzle(QUAD_PERM,{})", lanes.join(","));
    }
    if offset & 0x8000 != 0 {
        return offset.to_string();
    }
    let (and, or, xor) = (offset & 31, offset >> 5 & 31, offset >> 10 & 31);
    if and == 31 && or == 0 && xor.count_ones() == 1 {
        return format!("swizzle(SWAP,{xor})");
    }
    if and == 31 && or == 0 && xor > 0 && (xor + 1).is_power_of_two() {
        return format!("swizzle(REVERSE,{})", xor + 1);
    }
    let group = 32 - and;
    if group > 1 && group.is_power_of_two() && or < group && xor == 0 {
        return format!("swizzle(BROADCAST,{group},{or})");
    }
    // What a lane id bit becomes for a lane whose bit is 0 and one whose bit is 1.
    let bits: String = (0..5)
        .rev()
        .map(|bit| {
            let of = |lane: u16| ((lane & and) | or) ^ xor;
            match (of(0) >> bit & 1, of(31) >> bit & 1) {
                (1, 1) => '1',
                (0, 0) => '0',
                (0, _) => 'p',
                _ => 'i',
            }
        })
        .collect();
    format!("swizzle(BITMASK_PERM,\"{bits}\")")
}

fn flat(name: &str, f: &Flat) -> String {
    let atomic = name.contains("atomic");
    let dwords = data_dwords(name);
    // cmpswap moves the value and the compare value: twice the width of the result.
    let data_dwords = if name.contains("cmpswap") { 2 * dwords } else { dwords };
    let mut ops = Vec::new();
    let loads = name.contains("load");
    if loads || (atomic && f.glc) {
        ops.push(vreg(f.vdst, dwords));
    }
    let has_saddr = f.seg != 0 && f.saddr != NULL;
    match f.seg {
        // The lane's id is the address of `addtid` loads and stores: no VGPR address.
        _ if name.contains("addtid") => {}
        // scratch: a VGPR address when SVE says so, else `off`.
        1 if !f.sve => ops.push("off".into()),
        1 => ops.push(vreg(f.addr, 1)),
        _ => ops.push(vreg(f.addr, if has_saddr { 1 } else { 2 })),
    }
    if !loads {
        ops.push(vreg(f.data, data_dwords));
    }
    if f.seg != 0 {
        ops.push(if has_saddr { sreg(f.saddr, if f.seg == 2 { 2 } else { 1 }) } else { "off".into() });
    }
    let mut out = ops.join(", ");
    if f.offset != 0 {
        out += &format!(" offset:{}", f.offset);
    }
    out + &cache_policy(f.glc, f.slc, f.dlc)
}

/// The cache policy bits of a memory instruction, in LLVM's order.
fn cache_policy(glc: bool, slc: bool, dlc: bool) -> String {
    [(glc, " glc"), (slc, " slc"), (dlc, " dlc")]
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, name)| *name)
        .collect()
}

fn mubuf(name: &str, m: &Mubuf) -> String {
    if name.ends_with("_inv") || name.ends_with("_wb") || name.ends_with("wbinvl1") {
        return String::new();
    }
    let dwords = data_dwords(name);
    let data = if name.contains("cmpswap") { 2 * dwords } else { dwords };
    let vaddr = match (m.idxen, m.offen) {
        (true, true) => vreg(m.vaddr, 2),
        (true, false) | (false, true) => vreg(m.vaddr, 1),
        (false, false) => "off".into(),
    };
    let mut out =
        format!("{}, {vaddr}, {}, {}", vreg(m.vdata, data), sreg(m.srsrc, 4), scalar_src(&m.soffset, B32));
    if m.idxen {
        out += " idxen";
    }
    if m.offen {
        out += " offen";
    }
    if m.offset != 0 {
        out += &format!(" offset:{}", m.offset);
    }
    out + &cache_policy(m.glc, m.slc, m.dlc)
}

/// The first opcode (in the VOP3 numbering) of the operations that only VOP3 encodes.
const VOP3_BASE: u16 = 512;

/// The VOP3-only operations (gfx11 names) that read two sources, not three.
const VOP3_TWO_SOURCES: [&str; 48] = [
    "v_cvt_pk_i16_i32",
    "v_cvt_pk_u16_u32",
    "v_cvt_pk_i16_f32",
    "v_cvt_pk_u16_f32",
    "v_cvt_pk_norm_i16_f32",
    "v_cvt_pk_norm_u16_f32",
    "v_cvt_pk_norm_i16_f16",
    "v_cvt_pk_norm_u16_f16",
    "v_mul_lo_u32",
    "v_mul_hi_u32",
    "v_mul_hi_i32",
    "v_ldexp_f32",
    "v_ldexp_f64",
    "v_lshlrev_b64",
    "v_lshrrev_b64",
    "v_ashrrev_i64",
    "v_readlane_b32",
    "v_writelane_b32",
    "v_mbcnt_lo_u32_b32",
    "v_mbcnt_hi_u32_b32",
    "v_bcnt_u32_b32",
    "v_bfm_b32",
    "v_add_nc_i32",
    "v_sub_nc_i32",
    "v_add_nc_i16",
    "v_sub_nc_i16",
    "v_add_nc_u16",
    "v_sub_nc_u16",
    "v_mul_lo_u16",
    "v_lshlrev_b16",
    "v_lshrrev_b16",
    "v_ashrrev_i16",
    "v_max_i16",
    "v_max_u16",
    "v_min_i16",
    "v_min_u16",
    "v_and_b16",
    "v_or_b16",
    "v_xor_b16",
    "v_pack_b32_f16",
    "v_add_f64",
    "v_mul_f64",
    "v_max_f64",
    "v_min_f64",
    "v_trig_preop_f64",
    "v_add_co_u32",
    "v_sub_co_u32",
    "v_subrev_co_u32",
];

/// VOP2 operations whose destination is also their accumulator (not printed as a source).
fn accumulates(op: u16) -> bool {
    matches!(op, 258 | 262 | 299 | 310 | 316)
}

/// VOP2 operations reading a lane mask as a third source: v_cndmask_b32 and the carry-in adds.
fn reads_mask(op: u16) -> bool {
    matches!(op, 257 | 288..=290)
}

/// fmamk and fmaak, f32 and f16: a constant K after the instruction.
fn has_k(op: u16) -> bool {
    matches!(op, 300 | 301 | 311 | 312)
}

/// Whether a gfx11 VALU operand of type `ty` is a true16 half-register (`v1.l`).
fn true16(gfx: Gfx, ty: Ty) -> bool {
    gfx == Gfx::Gfx11 && ty.bits == 16
}

fn valu(gfx: Gfx, v: &Valu, name: &str) -> String {
    if v.enc == ValuEnc::Vop3p {
        return vop3p(v, name);
    }
    let (dst_ty, mut src_ty) = types(name);
    // LLVM 22 reads v_alignbit_b32/v_alignbyte_b32's shift from a 16-bit operand on gfx11.
    if gfx == Gfx::Gfx11 && matches!(name, "v_alignbit_b32" | "v_alignbyte_b32") {
        src_ty[2] = Ty { bits: 16, float: false };
    }
    let compare = v.op < VOP2_BASE;
    let short = matches!(v.enc, ValuEnc::Vop1 | ValuEnc::Vop2 | ValuEnc::Vopc);
    let mut ops: Vec<String> = Vec::new();
    // Destinations.
    if compare {
        // cmpx writes EXEC only and prints no destination.
        if v.op < 128 {
            ops.push(sreg(v.sdst, 1));
        }
    } else if matches!(name, "v_nop" | "v_pipeflush") {
        return String::new();
    } else if name.starts_with("v_readlane") || name.starts_with("v_readfirstlane") {
        ops.push(sreg(v.vdst, 1));
    } else {
        let half = true16(gfx, dst_ty).then_some(v.opsel & 8 != 0);
        ops.push(match half {
            Some(high) => format!("v{}.{}", v.vdst, if high { 'h' } else { 'l' }),
            None => vreg(v.vdst, dst_ty.dwords()),
        });
        if (short && matches!(v.op, 288..=290)) || (!short && super::decode::has_sdst(v.op)) {
            ops.push(sreg(v.sdst, 1));
        }
    }
    // Sources.
    let sources = if (VOP1_BASE..VOP3_BASE).contains(&v.op) {
        1
    } else if v.op >= VOP3_BASE && !VOP3_TWO_SOURCES.contains(&name) {
        3
    } else {
        2
    };
    for (i, &ty) in src_ty.iter().enumerate().take(sources) {
        let half = true16(gfx, ty).then_some(v.opsel >> i & 1 != 0);
        let mut text = operand(&v.src[i], ty, half);
        if let Some(sdwa) = &v.sdwa {
            if sdwa.src_sext[i] {
                text = format!("sext({text})");
            }
        }
        if has_float_modifiers(name, ty) {
            text = float_modifiers(text, &v.src[i], v.neg >> i & 1 != 0, v.abs >> i & 1 != 0);
        }
        ops.push(text);
    }
    if has_k(v.op) {
        let k = operand(&v.src[2], src_ty[2], None);
        // fmamk: D = S0 * K + S1, printed in that order; fmaak: D = S0 * S1 + K.
        if matches!(v.op, 300 | 311) {
            ops.insert(ops.len() - 1, k);
        } else {
            ops.push(k);
        }
    } else if reads_mask(v.op) && !accumulates(v.op) {
        ops.push(operand(&v.src[2], B32, None));
    }
    let mut out = ops.join(", ");
    // A VOP3 op_sel names the halves of the 16-bit sources and destination of an operation that
    // has them; the short forms say it in the register names. On gfx10 only VOP3-only operations
    // have one. v_cndmask_b16's profile prints none.
    let halves = (gfx == Gfx::Gfx11 || v.op >= VOP3_BASE)
        && ((!compare && dst_ty.bits == 16)
            || src_ty[..sources].iter().any(|t| t.bits == 16)
            || matches!(name, "v_alignbit_b32" | "v_alignbyte_b32"));
    if !short && halves && v.opsel != 0 && name != "v_cndmask_b16" {
        let mut bits: Vec<u8> = (0..sources).map(|i| v.opsel >> i & 1).collect();
        bits.push(v.opsel >> 3 & 1);
        out += &format!(" op_sel:[{}]", join_bits(&bits));
    }
    if v.clamp {
        out += " clamp";
    }
    out += omod(v.omod);
    if let Some(sdwa) = &v.sdwa {
        out += &sdwa_selections(v, sdwa);
    }
    out
}

/// Whether a source of type `ty` takes the float input modifiers (negation, absolute value):
/// float operands do, and v_cndmask's, which selects floats as often as integers, and both
/// of v_cmp_class's.
fn has_float_modifiers(name: &str, ty: Ty) -> bool {
    ty.float
        || name.starts_with("v_cndmask")
        || name.starts_with("v_cmp_class")
        || name.starts_with("v_cmpx_class")
}

/// A source with its float input modifiers: `-x`, `|x|`, `-|x|`; a negated constant is written
/// `neg(c)`, so that `neg(-1.0)` does not read as `--1.0`.
fn float_modifiers(text: String, src: &Src, neg: bool, abs: bool) -> String {
    let constant = matches!(src, Src::Int(_) | Src::Float(_) | Src::Literal(_));
    match (neg, abs) {
        (false, false) => text,
        (false, true) => format!("|{text}|"),
        (true, true) => format!("-|{text}|"),
        (true, false) if constant => format!("neg({text})"),
        (true, false) => format!("-{text}"),
    }
}

fn omod(omod: u8) -> &'static str {
    match omod {
        1 => " mul:2",
        2 => " mul:4",
        3 => " div:2",
        _ => "",
    }
}

fn join_bits(bits: &[u8]) -> String {
    bits.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

/// SDWA's selections: the destination's (not for compares), then each source's.
fn sdwa_selections(v: &Valu, s: &Sdwa) -> String {
    let sel = |x: u8| match x {
        0..=3 => format!("BYTE_{x}"),
        4 => "WORD_0".into(),
        5 => "WORD_1".into(),
        6 => "DWORD".into(),
        _ => format!("{x}"),
    };
    let mut out = String::new();
    if v.op >= VOP2_BASE {
        let unused = match s.dst_unused {
            0 => "UNUSED_PAD",
            1 => "UNUSED_SEXT",
            2 => "UNUSED_PRESERVE",
            _ => "3",
        };
        out += &format!(" dst_sel:{} dst_unused:{unused}", sel(s.dst_sel));
    }
    out += &format!(" src0_sel:{}", sel(s.src_sel[0]));
    if !(VOP1_BASE..VOP3_BASE).contains(&v.op) {
        out += &format!(" src1_sel:{}", sel(s.src_sel[1]));
    }
    out
}

/// VOP3P: packed math prints op_sel, op_sel_hi, neg_lo and neg_hi lists where they differ from
/// their defaults; the mixed-precision FMAs print neg_lo as a negation and neg_hi as an absolute
/// value of each source instead.
fn vop3p(v: &Valu, name: &str) -> String {
    let mix = name.starts_with("v_fma_mix");
    let sources =
        if name.starts_with("v_pk_") && !name.contains("fma") && !name.contains("mad") { 2 } else { 3 };
    let src_ty = if mix { Ty { bits: 16, float: true } } else { types(name).1[0] };
    let mut ops = vec![vreg(v.vdst, 1)];
    for i in 0..sources {
        let mut text = operand(&v.src[i], src_ty, None);
        if mix && v.neg_hi >> i & 1 != 0 {
            text = format!("|{text}|");
        }
        if mix && v.neg >> i & 1 != 0 {
            text = format!("-{text}");
        }
        ops.push(text);
    }
    let mut out = ops.join(", ");
    // op_sel_hi defaults to all ones, except for the mixed-precision FMAs, whose sources are
    // f32 unless it says otherwise.
    let opsel_hi_default = u8::from(!mix);
    let list = |bits: u8, default: u8| {
        let values: Vec<u8> = (0..sources).map(|i| bits >> i & 1).collect();
        values.iter().any(|&b| b != default).then(|| join_bits(&values))
    };
    for (label, bits, default, shown) in [
        ("op_sel", v.opsel, 0, true),
        ("op_sel_hi", v.opsel_hi, opsel_hi_default, true),
        ("neg_lo", v.neg, 0, !mix),
        ("neg_hi", v.neg_hi, 0, !mix),
    ] {
        if let (true, Some(values)) = (shown, list(bits, default)) {
            out += &format!(" {label}:[{values}]");
        }
    }
    if v.clamp {
        out += " clamp";
    }
    out
}

/// The VOPD operations by opcode (the X half has 0..=13, the Y half those and 16..=18).
fn vopd_name(op: u8) -> String {
    let name = match op {
        0 => "fmac_f32",
        1 => "fmaak_f32",
        2 => "fmamk_f32",
        3 => "mul_f32",
        4 => "add_f32",
        5 => "sub_f32",
        6 => "subrev_f32",
        7 => "mul_dx9_zero_f32",
        8 => "mov_b32",
        9 => "cndmask_b32",
        10 => "max_f32",
        11 => "min_f32",
        12 => "dot2acc_f32_f16",
        13 => "dot2acc_f32_bf16",
        16 => "add_nc_u32",
        17 => "lshlrev_b32",
        18 => "and_b32",
        _ => return format!("v_dual_<{op}>"),
    };
    format!("v_dual_{name}")
}

fn vopd_half(h: &VopdHalf, literal: u32) -> String {
    let src0 = operand(&h.src0, B32, None);
    let vsrc1 = vreg(h.vsrc1, 1);
    let k = format!("{literal:#x}");
    let operands = match h.op {
        8 => src0,
        1 => format!("{src0}, {vsrc1}, {k}"),
        2 => format!("{src0}, {k}, {vsrc1}"),
        _ => format!("{src0}, {vsrc1}"),
    };
    format!("{} {}, {operands}", vopd_name(h.op), vreg(h.vdst, 1))
}

fn vopd(v: &Vopd) -> String {
    format!("{} :: {}", vopd_half(&v.x, v.literal), vopd_half(&v.y, v.literal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pm4::Gfx::{Gfx10_3, Gfx11};

    /// Encodings and LLVM's disassembly of them (assembled and disassembled by LLVM 22) for the
    /// syntax the ISA corpus does not reach: cache policy, scratch and flat addressing, buffer
    /// addressing, modifiers, packed math, true16 halves, hardware registers, messages, swizzles,
    /// SDWA variants, dual issue.
    const CASES: &[(pm4::Gfx, &[u32], &str)] = &[
        (Gfx11, &[0xdc52e000, 0x017c0002], "global_load_b32 v1, v[2:3], off glc slc dlc"),
        (Gfx11, &[0xdc6a9fc0, 0x00040201], "global_store_b32 v1, v2, s[4:5] offset:-64 slc"),
        (Gfx11, &[0xdcd64008, 0x00040201], "global_atomic_add_u32 v0, v1, v2, s[4:5] offset:8 glc"),
        (Gfx11, &[0xdc510010, 0x01020000], "scratch_load_b32 v1, off, s2 offset:16"),
        (Gfx11, &[0xdc510000, 0x01fc0002], "scratch_load_b32 v1, v2, off"),
        (Gfx11, &[0xdc6d0008, 0x00000200], "scratch_store_b64 off, v[2:3], s0 offset:8"),
        (Gfx11, &[0xdc500004, 0x017c0002], "flat_load_b32 v1, v[2:3] offset:4"),
        (Gfx11, &[0xe0504004, 0x01410102], "buffer_load_b32 v1, v2, s[4:7], s1 offen offset:4 glc"),
        (Gfx11, &[0xe0680000, 0x80c20102], "buffer_store_b32 v1, v[2:3], s[8:11], 0 idxen offen"),
        (Gfx11, &[0xf4046101, 0xf800001c], "s_load_b64 s[4:5], s[2:3], 0x1c glc dlc"),
        (Gfx11, &[0xf4000141, 0x0800001c], "s_load_b32 s5, s[2:3], s4 offset:0x1c"),
        (Gfx11, &[0xf4200142, 0xf8000010], "s_buffer_load_b32 s5, s[4:7], 0x10"),
        (Gfx11, &[0xd5038301, 0x28020702], "v_add_f32_e64 v1, -|v2|, |v3| clamp mul:2"),
        (Gfx11, &[0xd7280001, 0x3801f102], "v_mul_f64 v[1:2], -v[2:3], 0.15915494309189532 div:2"),
        (Gfx11, &[0xd6130001, 0x13ddf102], "v_fma_f32 v1, v2, 0.15915494, -4.0 mul:4"),
        (Gfx11, &[0xcc0f4a01, 0x38020702], "v_pk_add_f16 v1, v2, v3 op_sel:[1,0] neg_lo:[1,0] neg_hi:[0,1]"),
        (Gfx11, &[0xcc0ec001, 0x14120702], "v_pk_fma_f16 v1, v2, v3, v4 op_sel_hi:[0,1,1] clamp"),
        (Gfx11, &[0xcc200900, 0x240e0501], "v_fma_mix_f32 v0, -|v1|, v2, v3 op_sel:[1,0,0]"),
        (Gfx11, &[0xd4ca007e, 0x00020401], "v_cmpx_eq_u32_e64 s1, v2"),
        (Gfx11, &[0x7c020581], "v_cmp_lt_f16_e32 vcc_lo, v1.h, v2.l"),
        (Gfx11, &[0xd47d0002, 0x00010701], "v_cmp_class_f16_e64 s2, v1.l, 3"),
        (Gfx11, &[0x650304f0], "v_add_f16_e32 v1.h, 0.5, v2.h"),
        (Gfx11, &[0xd5324001, 0x000204ff, 0x00001234], "v_add_f16_e64 v1.h, 0x1234, v2.l op_sel:[0,0,1]"),
        (Gfx11, &[0x7e02026f], "v_mov_b32_e32 v1, ttmp3"),
        (Gfx11, &[0x7e02027d], "v_mov_b32_e32 v1, m0"),
        (Gfx11, &[0x7e0202fd], "v_mov_b32_e32 v1, src_scc"),
        (Gfx11, &[0xbe80017e], "s_mov_b64 s[0:1], exec"),
        (Gfx11, &[0xbef0016a], "s_mov_b64 ttmp[4:5], vcc"),
        (Gfx11, &[0xbe8000f8], "s_mov_b32 s0, 0.15915494"),
        (Gfx11, &[0xbe8001f8], "s_mov_b64 s[0:1], 0.15915494309189532"),
        (Gfx11, &[0xb8811801], "s_getreg_b32 s1, hwreg(HW_REG_MODE, 0, 4)"),
        (Gfx11, &[0xb902f801], "s_setreg_b32 hwreg(HW_REG_MODE), s2"),
        (Gfx11, &[0xb9801901, 0x00000003], "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 3"),
        (Gfx11, &[0xb9801901, 0x00012345], "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0x12345"),
        (Gfx11, &[0xb980f801, 0xffffffff], "s_setreg_imm32_b32 hwreg(HW_REG_MODE), -1"),
        (Gfx11, &[0xbc7c003f], "s_waitcnt_vscnt null, 0x3f"),
        (Gfx11, &[0xf4000141, 0xf81ffffc], "s_load_b32 s5, s[2:3], -0x4"),
        (Gfx11, &[0xf4000141, 0xf80fffff], "s_load_b32 s5, s[2:3], 0xfffff"),
        (Gfx10_3, &[0xf4000141, 0xfa1ffffc], "s_load_dword s5, s[2:3], -0x4"),
        // The FLAT segment's offset is unsigned, the top bit of the field included.
        (Gfx11, &[0xdc501fff, 0x017c0002], "flat_load_b32 v1, v[2:3] offset:8191"),
        (Gfx10_3, &[0xdc300fff, 0x017d0002], "flat_load_dword v1, v[2:3] offset:4095"),
        (Gfx11, &[0xb881f812], "s_getreg_b32 s1, hwreg(HW_REG_PERF_SNAPSHOT_PC_LO)"),
        (Gfx10_3, &[0xb901f812], "s_getreg_b32 s1, hwreg(HW_REG_TMA_LO)"),
        (Gfx11, &[0xb881f81d], "s_getreg_b32 s1, hwreg(HW_REG_SHADER_CYCLES)"),
        (Gfx11, &[0xb881f81e], "s_getreg_b32 s1, hwreg(30)"),
        // Inline float constants read by 16-bit integer operands are printed as half bits.
        (Gfx10_3, &[0xd7050001, 0x000204f0], "v_mul_lo_u16 v1, 0x3800, v2"),
        (Gfx10_3, &[0xd7140001, 0x000204f2], "v_lshlrev_b16 v1, 0x3c00, v2"),
        (Gfx10_3, &[0xd7030001, 0x000204ff, 0x0000ffff], "v_add_nc_u16 v1, 0xffff, v2"),
        (Gfx11, &[0xd7050001, 0x000204f0], "v_mul_lo_u16 v1.l, 0x3800, v2.l"),
        (Gfx11, &[0xd7380001, 0x000204f2], "v_lshlrev_b16 v1.l, 0x3c00, v2.l"),
        (Gfx11, &[0xd7030001, 0x000204ff, 0x00003800], "v_add_nc_u16 v1.l, 0x3800, v2.l"),
        (Gfx11, &[0xbf890021], "s_waitcnt vmcnt(0) expcnt(1) lgkmcnt(2)"),
        (Gfx11, &[0xbf89fff0], "s_waitcnt expcnt(0)"),
        (Gfx11, &[0xbf870457], "s_delay_alu instid0(TRANS32_DEP_3) | instskip(SKIP_4) | instid1(FMA_ACCUM_CYCLE_1)"),
        (Gfx11, &[0xbfb60001], "s_sendmsg sendmsg(MSG_INTERRUPT)"),
        (Gfx11, &[0xd8dc0804, 0x01000003], "ds_load_2addr_b32 v[1:2], v3 offset0:4 offset1:8"),
        (Gfx11, &[0xd938ff00, 0x00040201], "ds_store_2addr_b64 v1, v[2:3], v[4:5] offset1:255"),
        (Gfx11, &[0xd8d41234, 0x01000002], "ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,\"10i01\")"),
        (Gfx11, &[0xd802ffff, 0x00000201], "ds_add_u32 v1, v2 offset:65535 gds"),
        (Gfx11, &[0xdacc0004, 0x01000302], "ds_bpermute_b32 v1, v2, v3 offset:4"),
        (Gfx11, &[0xd7600001, 0x00000702], "v_readlane_b32 s1, v2, s3"),
        (Gfx11, &[0xd7610001, 0x0000fa02], "v_writelane_b32 v1, s2, m0"),
        (Gfx11, &[0xd6fe0301, 0x041a0b04], "v_mad_u64_u32 v[1:2], s3, v4, v5, v[6:7]"),
        (Gfx11, &[0xd6fc6a01, 0x04120702], "v_div_scale_f32 v1, vcc_lo, v2, v3, v4"),
        (Gfx11, &[0xd73c0001, 0x00020400], "v_lshlrev_b64 v[1:2], s0, v[2:3]"),
        (Gfx11, &[0xd72b0001, 0x00012103], "v_ldexp_f64 v[1:2], v[3:4], 16"),
        (Gfx11, &[0xd58a0001, 0x20000102], "v_cvt_f16_f32_e64 v1.l, -v2"),
        (Gfx11, &[0xd5258001, 0x00020702], "v_add_nc_u32_e64 v1, v2, v3 clamp"),
        (Gfx11, &[0x420204c0], "v_sub_co_ci_u32_e32 v1, vcc_lo, 64, v2, vcc_lo"),
        (Gfx11, &[0xd52b0201, 0x00020702], "v_fmac_f32_e64 v1, v2, |v3|"),
        (Gfx11, &[0x100204ff, 0x3f800000], "v_mul_f32_e32 v1, lit(0x3f800000), v2"),
        (Gfx11, &[0xd7270001, 0x000204f2], "v_add_f64 v[1:2], 1.0, v[2:3]"),
        (Gfx11, &[0x8b80ff00, 0xffff0000], "s_and_b64 s[0:1], s[0:1], 0xffff0000"),
        (Gfx11, &[0xb4811234], "s_cmpk_eq_u32 s1, 0x1234"),
        (Gfx11, &[0xb781fff0], "s_addk_i32 s1, 0xfff0"),
        (Gfx11, &[0xbfb50003], "s_setprio 3"),
        (Gfx11, &[0xbf830002], "s_sleep 2"),
        (Gfx11, &[0xc8020702, 0x01040af0, 0x41200000], "v_dual_fmac_f32 v1, v2, v3 :: v_dual_fmaak_f32 v4, 0.5, v5, 0x41200000"),
        (Gfx11, &[0xca620803, 0x02040c84], "v_dual_cndmask_b32 v2, s3, v4 :: v_dual_lshlrev_b32 v5, 4, v6"),
        (Gfx11, &[0xd8d40000, 0x01000002], "ds_swizzle_b32 v1, v2"),
        (Gfx11, &[0xd8d480e4, 0x01000002], "ds_swizzle_b32 v1, v2 offset:swizzle(QUAD_PERM,0,1,2,3)"),
        (Gfx11, &[0xd8d4401f, 0x01000002], "ds_swizzle_b32 v1, v2 offset:swizzle(SWAP,16)"),
        (Gfx11, &[0xd8d41c1f, 0x01000002], "ds_swizzle_b32 v1, v2 offset:swizzle(REVERSE,8)"),
        (Gfx11, &[0xd8d4003c, 0x01000002], "ds_swizzle_b32 v1, v2 offset:swizzle(BROADCAST,4,1)"),
        (Gfx11, &[0xd8d48100, 0x01000002], "ds_swizzle_b32 v1, v2 offset:33024"),
        (Gfx11, &[0xd8d47fff, 0x01000002], "ds_swizzle_b32 v1, v2 offset:swizzle(BITMASK_PERM,\"00000\")"),
        (Gfx11, &[0xbf88ff9c], "s_waitcnt_depctr depctr_sa_sdst(0) depctr_va_vcc(0)"),
        (Gfx11, &[0xbf88ffff], "s_waitcnt_depctr 0xffff"),
        (Gfx11, &[0xbf88f58f], "s_waitcnt_depctr depctr_va_sdst(2) depctr_vm_vsrc(3)"),
        (Gfx11, &[0xbe804c83], "s_sendmsg_rtn_b32 s0, sendmsg(MSG_RTN_GET_REALTIME)"),
        (Gfx11, &[0xbfb60003], "s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)"),
        (Gfx11, &[0xbfb60045], "s_sendmsg sendmsg(69, 0, 0)"),
        (Gfx11, &[0xbfb00003], "s_endpgm 3"),
        (Gfx11, &[0xbf89fff7], "s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(63)"),
        (Gfx11, &[0xbf85003f], "s_clause 0x3f"),
        (Gfx11, &[0xbf800007], "s_nop 7"),
        (Gfx11, &[0xbfa30003], "s_cbranch_vccz 3"),
        (Gfx11, &[0xbf883f9d], "s_waitcnt_depctr depctr_va_vdst(3) depctr_va_vcc(0)"),
        (Gfx11, &[0xbf88ff1e], "s_waitcnt_depctr depctr_hold_cnt(0) depctr_sa_sdst(0)"),
        (Gfx10_3, &[0xdc339000, 0x017d0002], "global_load_dword v1, v[2:3], off glc slc dlc"),
        (Gfx10_3, &[0xdc728fc0, 0x00040201], "global_store_dword v1, v2, s[4:5] offset:-64 slc"),
        (Gfx10_3, &[0xdcc98008, 0x00040201], "global_atomic_add v0, v1, v2, s[4:5] offset:8 glc"),
        (Gfx10_3, &[0xdc304010, 0x01020000], "scratch_load_dword v1, off, s2 offset:16"),
        (Gfx10_3, &[0xdc304000, 0x017d0002], "scratch_load_dword v1, v2, off"),
        (Gfx10_3, &[0xdc300004, 0x017d0002], "flat_load_dword v1, v[2:3] offset:4"),
        (Gfx10_3, &[0xe030d004, 0x01410102], "buffer_load_dword v1, v2, s[4:7], s1 offen offset:4 glc slc dlc"),
        (Gfx10_3, &[0xf4054101, 0xfa00001c], "s_load_dwordx2 s[4:5], s[2:3], 0x1c glc dlc"),
        (Gfx10_3, &[0xf4000141, 0x0800001c], "s_load_dword s5, s[2:3], s4 offset:0x1c"),
        (Gfx10_3, &[0xd5038301, 0x28020702], "v_add_f32_e64 v1, -|v2|, |v3| clamp mul:2"),
        (Gfx10_3, &[0xd5650001, 0x3801f102], "v_mul_f64 v[1:2], -v[2:3], 0.15915494309189532 div:2"),
        (Gfx10_3, &[0x060206f9, 0x03343102], "v_add_f32_sdwa v1, -|v2|, v3 clamp dst_sel:BYTE_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_0 src1_sel:BYTE_3"),
        (Gfx10_3, &[0x4a0206f9, 0x04080502], "v_add_nc_u32_sdwa v1, sext(v2), v3 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:BYTE_0 src1_sel:WORD_0"),
        (Gfx10_3, &[0x7e0016f9, 0x00250d01], "v_cvt_f32_f16_sdwa v0, |v1| dst_sel:WORD_1 dst_unused:UNUSED_SEXT src0_sel:WORD_1"),
        (Gfx10_3, &[0x7d8404f9, 0x86028201], "v_cmp_eq_u32_sdwa s2, v1, s2 src0_sel:BYTE_2 src1_sel:DWORD"),
        (Gfx10_3, &[0x7d8404f9, 0x06020001], "v_cmp_eq_u32_sdwa vcc_lo, v1, v2 src0_sel:BYTE_2 src1_sel:DWORD"),
        (Gfx10_3, &[0xd7034801, 0x00020702], "v_add_nc_u16 v1, v2, v3 op_sel:[1,0,1]"),
        (Gfx10_3, &[0xcc0f4a01, 0x38020702], "v_pk_add_f16 v1, v2, v3 op_sel:[1,0] neg_lo:[1,0] neg_hi:[0,1]"),
        (Gfx10_3, &[0xcc200900, 0x240e0501], "v_fma_mix_f32 v0, -|v1|, v2, v3 op_sel:[1,0,0]"),
        (Gfx10_3, &[0xbf8c0210], "s_waitcnt vmcnt(0) expcnt(1) lgkmcnt(2)"),
        (Gfx10_3, &[0xbf8cff7e], "s_waitcnt vmcnt(62)"),
        (Gfx10_3, &[0xbefc0301], "s_mov_b32 m0, s1"),
        (Gfx10_3, &[0xbe80037d], "s_mov_b32 s0, null"),
        (Gfx10_3, &[0x7e020502], "v_readfirstlane_b32 s1, v2"),
        (Gfx10_3, &[0xd5010001, 0x0009e480], "v_cndmask_b32_e64 v1, 0, 1.0, s2"),
        (Gfx10_3, &[0xd8dc0804, 0x01000003], "ds_read2_b32 v[1:2], v3 offset0:4 offset1:8"),
        (Gfx10_3, &[0xd8400004, 0x00030201], "ds_cmpst_b32 v1, v2, v3 offset:4"),
        (Gfx10_3, &[0xd8c00000, 0x01040302], "ds_cmpst_rtn_b32 v1, v2, v3, v4"),
        (Gfx10_3, &[0xb901f817], "s_getreg_b32 s1, hwreg(HW_REG_HW_ID1)"),
        (Gfx10_3, &[0xd5420001, 0x0301e0c5], "v_mad_i32_i24 v1, -5, 0.5, 64"),
        (Gfx10_3, &[0x640204f8], "v_add_f16_e32 v1, 0.15915494, v2"),
        (Gfx10_3, &[0xd52f0001, 0x40020702], "v_cvt_pkrtz_f16_f32_e64 v1, v2, -v3"),
        (Gfx10_3, &[0xbf900001], "s_sendmsg sendmsg(MSG_INTERRUPT)"),
        (Gfx10_3, &[0xb9011801], "s_getreg_b32 s1, hwreg(HW_REG_MODE, 0, 4)"),
        (Gfx10_3, &[0xbfa3fffe], "s_waitcnt_depctr 0xfffe"),
    ];

    #[test]
    fn instructions_render_as_llvm_prints_them() {
        let mut wrong = Vec::new();
        for &(gfx, words, want) in CASES {
            let d = super::super::decode::decode(gfx, &mut |i| {
                words.get(i as usize).copied().ok_or_else(|| super::super::error::Fault::unsupported("short"))
            })
            .unwrap_or_else(|e| panic!("{want}: {e:?}"));
            assert_eq!(usize::from(d.size), 4 * words.len(), "{want}");
            let got = render(gfx, &d, 0).map(|r| r.text).unwrap_or_default();
            if got != want {
                wrong.push(format!(
                    "{gfx:?} {words:08x?}\n    llvm-objdump `{want}`\n    rendered     `{got}`"
                ));
            }
        }
        assert!(wrong.is_empty(), "{} of {} differ:\n{}", wrong.len(), CASES.len(), wrong.join("\n"));
    }
}
