#!/usr/bin/env python3
"""Generates tests/fixtures/isa_coverage/<target>.tsv: every instruction LLVM's own disassembler
(llvm-mc, LLVM 22) decodes for gfx1100 and gfx1030, one line per opcode and operand form, with an
instruction word of that form. Every opcode of every encoding is tried (SOP*, SMEM, VOP1, VOP2,
VOPC, VOP3, VOP3P, VOPD, DS, FLAT, GLOBAL, SCRATCH, MUBUF, MTBUF, MIMG, EXP, VINTERP, LDSDIR,
VINTRP) and, for the VALU, each form it has: the short encoding (e32), VOP3 (e64), DPP16, DPP8,
SDWA (gfx10.3) and VOP3 with DPP (gfx11). What LLVM decodes is listed; the words come from the
same candidates tools/isa/gen_mnemonics.py uses.

The simulator's verdict on each line (implemented, refused with its feature, not reachable from
compute) is not decided here: amdgpu-sim/tests/isa/coverage.rs runs every word through the
interpreter's own load-time check and writes the table in docs/guide/backends.md. Run this again
when the LLVM version changes, from the repository root:

    python3 tools/isa/gen_coverage.py
    SPARKLE_WRITE_COVERAGE=1 cargo test -p sparkle-amdgpu-sim --test isa coverage
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_mnemonics as g11  # noqa: E402

MC = os.environ.get("LLVM_MC", "/usr/lib/llvm-22/bin/llvm-mc")
OUT = "tests/fixtures/isa_coverage"

V0, V1, V2 = 256, 257, 258
DPP16_CTRL = 0xFF00E400  # quad_perm identity, row and bank masks full, src0 v0
DPP8_CTRL = 0xFAC68800   # lanes 0..7 identity, src0 v0
SDWA_CTRL = 0x06060600   # DWORD selections, src0 v0


def marker(i):
    """Two s_nop with an immediate no candidate uses: they separate the candidates in one llvm-mc
    run, which reads its input as one stream (a candidate that needs a literal it lacks takes
    the first as one; the second still marks the boundary)."""
    return [0xBF800000 | 0x4000 | (i & 0x3FFF)] * 2


def decode_batch(candidates, mcpu):
    """For each candidate (a list of dwords), LLVM's text of the instruction that starts at its
    first byte, or None. One llvm-mc run; candidates are separated by marker instructions."""
    lines = []
    for i, words in enumerate(candidates):
        for ws in (words, marker(i)):
            data = b"".join(w.to_bytes(4, "little") for w in ws)
            lines.append(",".join(f"0x{b:02x}" for b in data))
    out = subprocess.run(
        [MC, "--disassemble", "-show-encoding", "-triple=amdgcn-amd-amdhsa", f"-mcpu={mcpu}"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
    ).stdout
    decoded = []
    for text in out.splitlines():
        m = re.match(r"\s*(.*?)\s*; encoding: \[([^\]]*)\]", text)
        if m:
            decoded.append((m.group(1), [int(b, 16) for b in m.group(2).split(",")]))
    results, at = [], 0
    for i, words in enumerate(candidates):
        data = list(b"".join(w.to_bytes(4, "little") for w in words))
        mark = list(marker(i)[0].to_bytes(4, "little"))
        first = None
        while at < len(decoded) and decoded[at][1] != mark:
            text, enc = decoded[at]
            if first is None and enc == data[: len(enc)]:
                first = text
            at += 1
        # Past the marker (once or twice).
        while at < len(decoded) and decoded[at][1] == mark:
            at += 1
        results.append(first)
    return results


def first_decoding(per_op, mcpu):
    """{op: (text, words)} for the first candidate of each op that LLVM decodes."""
    flat, owner = [], []
    for op, cands in per_op.items():
        for c in cands:
            flat.append(c)
            owner.append(op)
    texts = decode_batch(flat, mcpu)
    found = {}
    for op, words, text in zip(owner, flat, texts):
        if text is not None and op not in found:
            found[op] = (text, words)
    return found


def mnemonic(text):
    return text.split()[0]


def valu_forms(gfx11):
    """{form: {op: candidates}} for every VALU opcode (VOP3 numbering)."""
    forms = {"e64": {}, "e32": {}, "dpp16": {}, "dpp8": {}, "sdwa": {}, "e64_dpp": {}}
    for op in range(1024):
        forms["e64"][op] = [w for w in g11.vop3(op) if (w[0] >> 26) == 0x35]
        if gfx11:
            forms["e64_dpp"][op] = [[w[0], (w[1] & ~0x1FF) | 0xFA, DPP16_CTRL] for w in forms["e64"][op] if len(w) == 2]
        short = None
        if op < 256:
            short = 0x7C000000 | op << 17 | 2 << 9
        elif op < 256 + 62:
            short = (op - 256) << 25 | 4 << 17 | 2 << 9
        elif 384 <= op < 512:
            short = 0x7E000000 | 4 << 17 | (op - 384) << 9
        if short is None:
            continue
        k = 0x3F800000
        forms["e32"][op] = [[short | V0], [short | V0, k]]
        if 384 <= op < 512:
            forms["e32"][op].append([(short & ~(0xFF << 17)) | V0])
        forms["dpp16"][op] = [[short | 0xFA, DPP16_CTRL], [short | 0xFA, DPP16_CTRL, k]]
        forms["dpp8"][op] = [[short | 0xE9, DPP8_CTRL], [short | 0xE9, DPP8_CTRL, k]]
        if not gfx11:
            forms["sdwa"][op] = [[short | 0xF9, SDWA_CTRL]]
    return forms


def simple_encodings(gfx11):
    """(encoding, opcode count, op -> candidates) for the encodings with one form."""
    encs = [(name, count, make) for name, count, make in g11.ENCODINGS if name != "VALU"]
    if not gfx11:
        import gen_gfx10_table as g10
        encs = [(name, count, make) for name, _, count, make in g10.ENCODINGS if name != "VALU"]
    if gfx11:
        encs += [
            ("MTBUF", 16, lambda op: [[0xE8000000 | op << 15, 0x80000000]]),
            ("MIMG", 256, lambda op: [[0xF0000000 | op << 18 | 1 << 8, 0], [0xF0000000 | op << 18 | 1 << 8 | 1 << 7, 0],
                                      [0xF0000000 | op << 18 | 0xF << 8, 0x00000000, 0x01010101]]),
            ("EXP", 1, lambda op: [[0xF800000F, 0]]),
            ("VINTERP", 128, lambda op: [[0xCD000000 | op << 16, 0x040E0501]]),
            ("LDSDIR", 4, lambda op: [[0xCE000000 | op << 20]]),
        ]
    else:
        encs += [
            ("MTBUF", 16, lambda op: [[0xE8000000 | (op & 7) << 16, (op >> 3) << 21 | 0x00000000]]),
            ("MIMG", 256, lambda op: [[0xF0000000 | (op & 0x7F) << 18 | (op >> 7) << 0 | 1 << 8, 0],
                                      [0xF0000000 | op << 18 | 1 << 8, 0]]),
            ("EXP", 1, lambda op: [[0xF800000F, 0]]),
            ("VINTRP", 4, lambda op: [[0xC8000000 | op << 16 | 1]]),
        ]
    return encs


def vopd_halves():
    """{('VOPD X'|'VOPD Y', op): candidates}: each half's opcodes, the other half a v_dual_mov."""
    out = {}
    k = 0x3F800000
    for opx in range(16):
        # X = opx (vsrc1 v0 or v1), Y = mov (8); a literal for the fmaak/fmamk forms.
        cands = []
        for vsrc in (1, 0):
            w0 = 0xC8000000 | opx << 22 | 8 << 17 | vsrc << 9 | 0x101
            cands += [[w0, 0x00020102], [w0, 0x00020102, k]]
        out[("VOPD X", opx)] = cands
    for opy in range(32):
        cands = []
        for vsrc in (1, 0):
            w0 = 0xC8000000 | 8 << 22 | opy << 17 | 0x101
            w1 = 0x00020102 | vsrc << 9
            cands += [[w0, w1], [w0, w1, k]]
        out[("VOPD Y", opy)] = cands
    return out


def vopd_name(text, y):
    """The X or Y half's mnemonic of `v_dual_a ... :: v_dual_b ...`."""
    halves = text.split("::")
    return mnemonic(halves[1 if y else 0].strip())


# Opcodes whose generic candidate word has operands the instruction cannot take (LLVM decodes a
# VGPR where only an SGPR is allowed, a hardware register nothing reads): the operands a compute
# kernel gives them instead, assembled with llvm-mc.
OVERRIDES = {
    "v_writelane_b32": "v_writelane_b32 v4, s2, s4",
    "v_mqsad_u32_u8": "v_mqsad_u32_u8 v[4:7], v[0:1], v2, v[8:11]",
    "s_getreg_b32": "s_getreg_b32 s4, hwreg(HW_REG_MODE)",
}
# gfx11 kernels end with this message (LLVM releases the VGPRs before s_endpgm).
OVERRIDES_GFX11 = {"s_sendmsg": "s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)"}


def assemble(text, mcpu):
    out = subprocess.run([MC, "-arch=amdgcn", f"-mcpu={mcpu}", "-show-encoding"], input=text + "\n",
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"; encoding: \[([^\]]*)\]", out)
    data = bytes(int(b, 16) for b in m.group(1).split(","))
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]


def generate(mcpu):
    gfx11 = mcpu == "gfx1100"
    rows = []
    for name, count, make in simple_encodings(gfx11):
        found = first_decoding({op: make(op) for op in range(count)}, mcpu)
        for op in sorted(found):
            text, words = found[op]
            rows.append((name, op, "-", mnemonic(text), words))
    for form, per_op in valu_forms(gfx11).items():
        per_op = {op: c for op, c in per_op.items() if c}
        if not per_op:
            continue
        found = first_decoding(per_op, mcpu)
        for op in sorted(found):
            text, words = found[op]
            m = mnemonic(text)
            # A short word of another encoding (the VOP2 space's end) is not this opcode's form.
            enc = "VOPC" if op < 256 else "VOP2" if op < 384 else "VOP1" if op < 512 else "VOP3"
            if form in ("e64", "e64_dpp") and op >= 256:
                enc = "VOP3"
            if form == "e32" and (m.startswith("s_") or "_e64" in m):
                continue
            while re.search(r"_(e32|e64|dpp|sdwa)$", m):
                m = re.sub(r"_(e32|e64|dpp|sdwa)$", "", m)
            rows.append((enc, op, form, m, words))
    overrides = dict(OVERRIDES, **(OVERRIDES_GFX11 if gfx11 else {}))
    for i, (enc, op, form, m, words) in enumerate(rows):
        if m in overrides and form in ("-", "e64"):
            rows[i] = (enc, op, form, m, assemble(overrides[m], mcpu))
    if gfx11:
        per = vopd_halves()
        found = first_decoding(per, mcpu)
        for (enc, op), (text, words) in sorted(found.items()):
            rows.append((enc, op, "-", vopd_name(text, enc.endswith("Y")), words))
    return rows


def main():
    os.makedirs(OUT, exist_ok=True)
    for mcpu in ("gfx1100", "gfx1030"):
        rows = generate(mcpu)
        path = os.path.join(OUT, f"{mcpu}.tsv")
        with open(path, "w") as f:
            f.write(f"# Generated by tools/isa/gen_coverage.py from llvm-mc ({mcpu}): encoding, opcode, form,\n")
            f.write("# LLVM's mnemonic, and an instruction word of that form (hex dwords). Do not edit by hand.\n")
            for enc, op, form, m, words in rows:
                f.write(f"{enc}\t{op}\t{form}\t{m}\t{' '.join(f'{w:08x}' for w in words)}\n")
        print(f"{path}: {len(rows)} instruction forms", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
