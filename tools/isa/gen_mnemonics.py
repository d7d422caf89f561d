#!/usr/bin/env python3
"""Generates amdgpu-sim/src/isa/mnemonic_table.rs: the gfx11 mnemonic of every opcode of every
encoding the simulator decodes, read off LLVM's own disassembler (llvm-mc), one instruction word
per opcode with plain register operands. Run it again when the LLVM version changes:

    python3 tools/isa/gen_mnemonics.py > amdgpu-sim/src/isa/mnemonic_table.rs
"""
import concurrent.futures
import os
import re
import subprocess
import sys

MC = os.environ.get("LLVM_MC", "/usr/lib/llvm-22/bin/llvm-mc")

V0, V1, V2 = 256, 257, 258


def vop3(op):
    # Unused source fields must be zero for the disassembler: try 1, 2 and 3 sources, and the
    # 64-bit register pairs of f64/b64 operations.
    out = []
    for vdst in (4, 0):
        w0 = 0xD4000000 | op << 16 | vdst
        out += [[w0, V0], [w0, V0 | V2 << 9], [w0, V0 | V2 << 9 | 260 << 18], [w0, 0x80], [w0, 0x80 | 0x80 << 9]]
    # Opcodes that only have a short form: VOPC, VOP2 (fmamk/fmaak carry a literal), VOP1.
    if op < 256:
        out.append([0x7C000000 | op << 17 | 2 << 9 | V0])
    elif op < 384 - 2:
        out.append([(op - 256) << 25 | 4 << 17 | 2 << 9 | V0, 0x3F800000])
    elif op < 384:
        pass  # VOP2 opcodes 62 and 63 would be VOPC and VOP1 words: there are none.
    elif op < 512:
        out += [[0x7E000000 | 4 << 17 | (op - 384) << 9 | V0], [0x7E000000 | (op - 384) << 9]]
    return out


def vop3p(op):
    w0 = 0xCC000000 | op << 16 | 1 << 14 | 4
    return [[w0, V0 | V1 << 9 | V2 << 18 | 3 << 27], [w0, V0 | V1 << 9 | 3 << 27], [w0, V0 | 3 << 27],
            [w0 & ~(1 << 14), V0 | V1 << 9 | 3 << 27]]


def ds(op):
    # The GWS and GDS forms set the GDS bit (17).
    return [[0xD8000000 | op << 18 | gds << 17, a | d0 << 8 | d1 << 16 | vd << 24] for gds in (0, 1)
            for (a, d0, d1, vd) in
            [(0, 2, 4, 6), (0, 2, 0, 6), (0, 2, 0, 0), (0, 0, 0, 6), (0, 0, 0, 0), (0, 2, 4, 0)]]


def flat(seg):
    def make(op):
        w0 = 0xDC000000 | seg << 16 | op << 18
        out = []
        for addr, data, saddr, vdst in [(0, 2, 0x7C, 6), (0, 0, 0x7C, 6), (0, 2, 0x7C, 0), (0, 0, 0x7C, 0),
                                        (0x80, 0, 0x7C, 0)]:
            out.append([w0, addr | data << 8 | saddr << 16 | vdst << 24])
        return out
    return make


def mubuf(op):
    w0 = 0xE0000000 | op << 18
    # The cache invalidates (buffer_gl0_inv, buffer_gl1_inv) take no operands at all.
    return [[w0, 0 | 2 << 8 | 1 << 16 | 0x80 << 24], [w0, 0 | 0 << 8 | 0 << 16 | 0x80 << 24], [w0, 0x80 << 24],
            [w0, 0]]


def one(make):
    return lambda op: [make(op)]


# (table name, opcode count, function opcode -> candidate instruction words)
ENCODINGS = [
    # SOP2 opcodes from 96 on would be SOPK, SOP1, SOPC and SOPP words.
    ("SOP2", 96, one(lambda op: [0x80000000 | op << 23 | 4 << 16 | 2 << 8 | 0])),
    ("SOPK", 32, lambda op: [[0xB0000000 | op << 23 | 4 << 16 | 0x10, 0], [0xB0000000 | op << 23 | 0x10, 0]]),
    ("SOP1", 256, lambda op: [[0xBE800000 | 4 << 16 | op << 8 | 2], [0xBE800000 | op << 8],
                              [0xBE800000 | 4 << 16 | op << 8 | 0x80]]),
    ("SOPC", 128, one(lambda op: [0xBF000000 | op << 16 | 2 << 8 | 0])),
    ("SOPP", 128, one(lambda op: [0xBF800000 | op << 16 | 0])),
    ("SMEM", 256, lambda op: [[0xF4000000 | op << 18 | 4 << 6 | 1, 0xF8000000],
                              [0xF4000000 | op << 18 | 0 << 6 | 1, 0xF8000000],
                              [0xF4000000 | op << 18 | 0 << 6 | 0, 0xF8000000]]),
    ("VALU", 1024, vop3),
    ("VOP3P", 128, vop3p),
    ("DS", 256, ds),
    ("FLAT", 128, flat(0)),
    ("SCRATCH", 128, flat(1)),
    ("GLOBAL", 128, flat(2)),
    ("MUBUF", 256, mubuf),
]


def disassemble_one(words, mcpu="gfx1100"):
    """The mnemonic LLVM decodes for `mcpu` from the first dword(s) of `words`, or None when it
    does not decode them as one instruction starting there."""
    data = b"".join(w.to_bytes(4, "little") for w in words)
    line = ",".join(f"0x{b:02x}" for b in data)
    out = subprocess.run(
        [MC, "--disassemble", "-show-encoding", "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}"],
        input=line + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    for text in out.stdout.splitlines():
        m = re.match(r"\s*(\S+).*; encoding: \[([^\]]*)\]", text)
        if not m:
            continue
        encoding = [int(b, 16) for b in m.group(2).split(",")]
        # Only an instruction that starts at the first byte names this opcode.
        return m.group(1) if encoding == list(data[: len(encoding)]) else None
    return None


def first_decoded(candidates, mcpu="gfx1100"):
    for words in candidates:
        name = disassemble_one(words, mcpu)
        if name is not None:
            return name
    return None


def disassemble(candidates_per_op, mcpu="gfx1100"):
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        names = list(pool.map(lambda c: first_decoded(c, mcpu), candidates_per_op))
    return {op: name for op, name in enumerate(names) if name is not None}


def main():
    print("//! Generated by tools/isa/gen_mnemonics.py from LLVM's disassembler (llvm-mc, gfx1100): the")
    print("//! mnemonic of every opcode of each encoding the simulator decodes. Do not edit by hand.")
    print()
    for name, count, make in ENCODINGS:
        table = disassemble([make(op) for op in range(count)])
        print(f"pub(crate) const {name}: &[(u16, &str)] = &[")
        for op in sorted(table):
            m = table[op]
            # One table per encoding, VALU in the VOP3 numbering: drop the encoding suffixes.
            for suffix in ("_e64", "_e32"):
                if m.endswith(suffix):
                    m = m[: -len(suffix)]
            # A word the disassembler reads as a different encoding is not this opcode.
            print(f'    ({op}, "{m}"),')
        print("];")
        print()


if __name__ == "__main__":
    sys.exit(main())
