#!/usr/bin/env python3
"""Generates amdgpu-sim/src/isa/gfx10_table.rs: for every opcode of each gfx10.3 (gfx1030)
encoding the simulator decodes, LLVM's gfx10 mnemonic (read off llvm-mc's disassembler, one
instruction word per opcode, as tools/isa/gen_mnemonics.py does for gfx11) and the gfx11 opcode
of the same operation, matched by mnemonic through the gfx11 table
(amdgpu-sim/src/isa/mnemonic_table.rs) and the renames below. Run it again when the LLVM
version changes, after gen_mnemonics.py:

    python3 tools/isa/gen_gfx10_table.py > amdgpu-sim/src/isa/gfx10_table.rs

The opcodes without a gfx11 twin are listed on stderr, to be checked by eye against the renames.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_mnemonics as g11  # noqa: E402

GFX11_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "../../amdgpu-sim/src/isa/mnemonic_table.rs")

V0, V2 = 256, 258
# gfx10 numbers the scalar NULL register 125 (gfx11: 124).
NULL10 = 0x7D


def vop3(op):
    # The gfx10 VALU layouts (VOP3, VOP1, VOP2, VOPC) are gfx11's; only the opcodes differ. The
    # short VOP2 words of opcodes 62 and 63 are VOPC and VOP1 words: no VOP2 opcode is there.
    words = g11.vop3(op)
    return words[:-1] if op in (318, 319) else words


def flat(seg):
    def make(op):
        w0 = 0xDC000000 | seg << 14 | op << 18
        out = []
        for addr, data, saddr, vdst in [(0, 2, NULL10, 6), (0, 0, NULL10, 6), (0, 2, NULL10, 0),
                                        (0, 0, NULL10, 0), (0x80, 0, NULL10, 0), (0, 0, 0x7F, 6)]:
            out.append([w0, addr | data << 8 | saddr << 16 | vdst << 24])
        return out
    return make


def mubuf(op):
    w0 = 0xE0000000 | op << 18
    return [[w0, 0 | 2 << 8 | 1 << 16 | 0x80 << 24], [w0, 0x80 << 24], [w0, 0]]


def smem(op):
    return [[0xF4000000 | op << 18 | sdata << 6 | sbase, NULL10 << 25]
            for sdata, sbase in [(4, 0), (4, 1), (0, 0)]]


# (table name, gfx11 table it maps to, opcode count, opcode -> candidate words)
ENCODINGS = [
    # SOP2 opcodes from 96 up spell SOPK, SOP1, SOPC and SOPP words; SOPK 29..31 the last three.
    ("SOP2", "SOP2", 96, g11.one(lambda op: [0x80000000 | op << 23 | 4 << 16 | 2 << 8 | 0])),
    ("SOPK", "SOPK", 29, lambda op: [[0xB0000000 | op << 23 | 4 << 16 | 0x10, 0],
                                     [0xB0000000 | op << 23 | 0x10, 0]]),
    ("SOP1", "SOP1", 256, lambda op: [[0xBE800000 | 4 << 16 | op << 8 | 2], [0xBE800000 | op << 8],
                                      [0xBE800000 | 4 << 16 | op << 8 | 0x80]]),
    ("SOPC", "SOPC", 128, g11.one(lambda op: [0xBF000000 | op << 16 | 2 << 8 | 0])),
    ("SOPP", "SOPP", 128, g11.one(lambda op: [0xBF800000 | op << 16 | 0])),
    ("SMEM", "SMEM", 256, smem),
    ("VALU", "VALU", 1024, vop3),
    ("VOP3P", "VOP3P", 128, g11.vop3p),
    ("DS", "DS", 256, g11.ds),
    ("FLAT", "FLAT", 128, flat(0)),
    ("SCRATCH", "SCRATCH", 128, flat(1)),
    ("GLOBAL", "GLOBAL", 128, flat(2)),
    ("MUBUF", "MUBUF", 128, mubuf),
]

# Whole-name renames from gfx10 to gfx11 (the systematic ones are in `rename`).
RENAMES = {
    "s_andn2_b32": "s_and_not1_b32", "s_andn2_b64": "s_and_not1_b64",
    "s_orn2_b32": "s_or_not1_b32", "s_orn2_b64": "s_or_not1_b64",
    "s_andn2_saveexec_b32": "s_and_not1_saveexec_b32", "s_andn2_saveexec_b64": "s_and_not1_saveexec_b64",
    "s_orn2_saveexec_b32": "s_or_not1_saveexec_b32", "s_orn2_saveexec_b64": "s_or_not1_saveexec_b64",
    "s_andn1_saveexec_b32": "s_and_not0_saveexec_b32", "s_andn1_saveexec_b64": "s_and_not0_saveexec_b64",
    "s_orn1_saveexec_b32": "s_or_not0_saveexec_b32", "s_orn1_saveexec_b64": "s_or_not0_saveexec_b64",
    "s_andn1_wrexec_b32": "s_and_not0_wrexec_b32", "s_andn1_wrexec_b64": "s_and_not0_wrexec_b64",
    "s_andn2_wrexec_b32": "s_and_not1_wrexec_b32", "s_andn2_wrexec_b64": "s_and_not1_wrexec_b64",
    "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64",
    "s_flbit_i32_b32": "s_clz_i32_u32", "s_flbit_i32_b64": "s_clz_i32_u64",
    "s_flbit_i32": "s_cls_i32", "s_flbit_i32_i64": "s_cls_i32_i64",
    "s_inst_prefetch": "s_set_inst_prefetch_distance",
    "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32", "v_ffbh_i32": "v_cls_i32",
    "v_fmac_legacy_f32": "v_fmac_dx9_zero_f32", "v_mul_legacy_f32": "v_mul_dx9_zero_f32",
    "v_fma_legacy_f32": "v_fma_dx9_zero_f32",
    "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32",
    "v_dot2c_f32_f16": "v_dot2acc_f32_f16",
    "buffer_load_format_d16_hi_x": "buffer_load_d16_hi_format_x",
    "buffer_store_format_d16_hi_x": "buffer_store_d16_hi_format_x",
    "v_cvt_rpi_i32_f32": "v_cvt_nearest_i32_f32", "v_cvt_flr_i32_f32": "v_cvt_floor_i32_f32",
    "ds_wrxchg_rtn_b32": "ds_storexchg_rtn_b32", "ds_wrxchg_rtn_b64": "ds_storexchg_rtn_b64",
    "ds_wrxchg2_rtn_b32": "ds_storexchg_2addr_rtn_b32", "ds_wrxchg2_rtn_b64": "ds_storexchg_2addr_rtn_b64",
    "ds_wrxchg2st64_rtn_b32": "ds_storexchg_2addr_stride64_rtn_b32",
    "ds_wrxchg2st64_rtn_b64": "ds_storexchg_2addr_stride64_rtn_b64",
    "ds_cmpst_b32": "ds_cmpstore_b32", "ds_cmpst_b64": "ds_cmpstore_b64",
    "ds_cmpst_f32": "ds_cmpstore_f32", "ds_cmpst_f64": "ds_cmpstore_f64",
    "ds_cmpst_rtn_b32": "ds_cmpstore_rtn_b32", "ds_cmpst_rtn_b64": "ds_cmpstore_rtn_b64",
    "ds_cmpst_rtn_f32": "ds_cmpstore_rtn_f32", "ds_cmpst_rtn_f64": "ds_cmpstore_rtn_f64",
    "ds_read_addtid_b32": "ds_load_addtid_b32", "ds_write_addtid_b32": "ds_store_addtid_b32",
    "global_load_dword_addtid": "global_load_addtid_b32", "global_store_dword_addtid": "global_store_addtid_b32",
}

# Memory data types: gfx10 suffix -> gfx11 suffix.
MEM_TYPES = {
    "dword": "b32", "dwordx2": "b64", "dwordx3": "b96", "dwordx4": "b128", "dwordx8": "b256",
    "dwordx16": "b512", "ubyte": "u8", "sbyte": "i8", "ushort": "u16", "sshort": "i16",
    "byte": "b8", "short": "b16",
}
D16 = {
    "load_ubyte_d16": "load_d16_u8", "load_ubyte_d16_hi": "load_d16_hi_u8",
    "load_sbyte_d16": "load_d16_i8", "load_sbyte_d16_hi": "load_d16_hi_i8",
    "load_short_d16": "load_d16_b16", "load_short_d16_hi": "load_d16_hi_b16",
    "store_byte_d16_hi": "store_d16_hi_b8", "store_short_d16_hi": "store_d16_hi_b16",
}
ATOMICS = {
    "swap": "swap_b32", "cmpswap": "cmpswap_b32", "add": "add_u32", "sub": "sub_u32",
    "smin": "min_i32", "umin": "min_u32", "smax": "max_i32", "umax": "max_u32",
    "and": "and_b32", "or": "or_b32", "xor": "xor_b32", "inc": "inc_u32", "dec": "dec_u32",
    "fcmpswap": "cmpswap_f32", "fmin": "min_f32", "fmax": "max_f32", "csub": "csub_u32",
    "swap_x2": "swap_b64", "cmpswap_x2": "cmpswap_b64", "add_x2": "add_u64", "sub_x2": "sub_u64",
    "smin_x2": "min_i64", "umin_x2": "min_u64", "smax_x2": "max_i64", "umax_x2": "max_u64",
    "and_x2": "and_b64", "or_x2": "or_b64", "xor_x2": "xor_b64", "inc_x2": "inc_u64",
    "dec_x2": "dec_u64", "fcmpswap_x2": "cmpswap_f64", "fmin_x2": "min_f64", "fmax_x2": "max_f64",
}


def rename(name):
    """The gfx11 spelling of gfx10's `name` (itself where the name did not change)."""
    if name in RENAMES:
        return RENAMES[name]
    m = re.fullmatch(r"(v_cmpx?)_tru_(f16|f32|f64)", name)
    if m:
        return f"{m.group(1)}_t_{m.group(2)}"
    m = re.fullmatch(r"v_cvt_pknorm_(\w+)", name)
    if m:
        return f"v_cvt_pk_norm_{m.group(1)}"
    m = re.fullmatch(r"(s_load|s_buffer_load)_(dword\w*)", name)
    if m and m.group(2) in MEM_TYPES:
        return f"{m.group(1)}_{MEM_TYPES[m.group(2)]}"
    m = re.fullmatch(r"(flat|global|scratch|buffer)_(\w+)", name)
    if m:
        seg, rest = m.groups()
        if rest in D16:
            return f"{seg}_{D16[rest]}"
        a = re.fullmatch(r"atomic_(\w+)", rest)
        if a and a.group(1) in ATOMICS:
            return f"{seg}_atomic_{ATOMICS[a.group(1)]}"
        a = re.fullmatch(r"(load|store)_(\w+)", rest)
        if a and a.group(2) in MEM_TYPES:
            return f"{seg}_{a.group(1)}_{MEM_TYPES[a.group(2)]}"
    m = re.fullmatch(r"ds_(read|write)(2st64|2)?_(\w+)", name)
    if m:
        kind, two, ty = m.groups()
        base = "ds_load" if kind == "read" else "ds_store"
        two = {"2": "_2addr", "2st64": "_2addr_stride64", None: ""}[two]
        return f"{base}{two}_{ty}"
    return name


def gfx11_tables():
    """table name -> {mnemonic: [opcodes]} from the generated gfx11 table."""
    tables, current = {}, None
    with open(GFX11_TABLE) as f:
        for line in f:
            m = re.match(r"pub\(crate\) const (\w+):", line)
            if m:
                current = tables.setdefault(m.group(1), {})
                continue
            m = re.match(r'\s*\((\d+), "([^"]+)"\),', line)
            if m and current is not None:
                current.setdefault(m.group(2), []).append(int(m.group(1)))
    return tables


def valu_class(op):
    # VOPC, VOP2, VOP1, VOP3-only ranges of the VOP3 numbering (the same on both generations).
    return 0 if op < 256 else 1 if op < 384 else 2 if op < 512 else 3


def pick(candidates, op, table):
    """The gfx11 opcode for gfx10 opcode `op`: where LLVM names one operation at several gfx11
    opcodes (a VOP3 alias of a VOP1 operation), the one of the same VALU form."""
    if not candidates:
        return None
    if table == "VALU":
        same = [c for c in candidates if valu_class(c) == valu_class(op)]
        if same:
            return same[0]
    return candidates[0]


def strip(m):
    for suffix in ("_e64", "_e32"):
        if m.endswith(suffix):
            return m[: -len(suffix)]
    return m


def main():
    g11tables = gfx11_tables()
    print("//! Generated by tools/isa/gen_gfx10_table.py from LLVM's disassembler (llvm-mc, gfx1030)")
    print("//! and the gfx11 table: for every opcode of each gfx10.3 encoding the simulator decodes,")
    print("//! LLVM's gfx10 mnemonic and the gfx11 opcode of the same operation (None: no gfx11 twin,")
    print("//! the decoder refuses it). Do not edit by hand.")
    print()
    for name, g11name, count, make in ENCODINGS:
        table = g11.disassemble([make(op) for op in range(count)], "gfx1030")
        target = g11tables[g11name]
        print(f"pub(crate) const {name}: &[(u16, &str, Option<u16>)] = &[")
        for op in sorted(table):
            m = strip(table[op])
            twin = pick(target.get(rename(m), []), op, g11name)
            if twin is None:
                print(f"{name} {op}: {m} has no gfx11 twin", file=sys.stderr)
            print(f'    ({op}, "{m}", {"None" if twin is None else f"Some({twin})"}),')
        print("];")
        print()


if __name__ == "__main__":
    sys.exit(main())
