//! A complete saxpy launch on gfx1100, checked word by word against a hand-derived IB.

use pm4::dispatch::{write_preamble, ComputeDispatch};
use pm4::fields::{PgmRsrc1, PgmRsrc2, PgmRsrc3, ResourceLimits, TmpringSize};
use pm4::{decode, words_from_hex_text, Body, Gfx, PacketWriter};

const CODE: u64 = 0x8000_0010_0000;
const KERNARGS: u64 = 0x8000_0020_0000;
const FENCE: u64 = 0x8000_0030_0000;

/// Derived by hand from the header layout (3<<30 | (count-1)<<16 | opcode<<8), the SH index rule
/// ((byte offset - 0xB000) >> 2) and the field layouts; not produced by the encoder.
#[rustfmt::skip]
const GOLDEN: [u32; 66] = [
    // SET_SH_REG, 3 payload dwords: index 0x216 = STATIC_THREAD_MGMT_SE0 (0xB858), SE0, SE1
    0xC002_7600, 0x0000_0216, 0xFFFF_FFFF, 0xFFFF_FFFF,
    // SET_SH_REG: index 0x219 = STATIC_THREAD_MGMT_SE2 (0xB864), SE2, SE3
    0xC002_7600, 0x0000_0219, 0xFFFF_FFFF, 0xFFFF_FFFF,
    // SET_SH_REG, 5 payload dwords: index 0x22B = STATIC_THREAD_MGMT_SE4 (0xB8AC), SE4..SE7
    0xC004_7600, 0x0000_022B, 0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF,
    // ACQUIRE_MEM (0x58), 7 payload dwords: COHER_CNTL 0, size lo/hi, base lo/hi, poll 10,
    // GCR_CNTL = GLI_INV(1) | GLM_WB | GLM_INV | GLK_WB | GLK_INV | GLV_INV | GL1_INV | GL2_INV | GL2_WB
    0xC006_5800, 0x0000_0000, 0xFFFF_FFFF, 0x00FF_FFFF, 0x0000_0000, 0x0000_0000, 0x0000_000A, 0x0000_C3F1,
    // SET_SH_REG: index 0x20C = PGM_LO (0xB830); 0x8000_0010_0000 >> 8 = 0x80_0000_1000
    0xC002_7600, 0x0000_020C, 0x0000_1000, 0x0000_0080,
    // SET_SH_REG: index 0x212 = PGM_RSRC1 (0xB848): 0xe0af0000 | PRIV (bit 20); RSRC2 0x9e
    0xC002_7600, 0x0000_0212, 0xE0BF_0000, 0x0000_009E,
    // SET_SH_REG, 2 payload dwords: index 0x228 = PGM_RSRC3 (0xB8A0) = 0x20
    0xC001_7600, 0x0000_0228, 0x0000_0020,
    // SET_SH_REG: index 0x218 = TMPRING_SIZE (0xB860) = 0
    0xC001_7600, 0x0000_0218, 0x0000_0000,
    // SET_SH_REG: index 0x240 = USER_DATA_0 (0xB900): kernarg pointer lo, hi
    0xC002_7600, 0x0000_0240, 0x0020_0000, 0x0000_8000,
    // SET_SH_REG: index 0x215 = RESOURCE_LIMITS (0xB854) = 0
    0xC001_7600, 0x0000_0215, 0x0000_0000,
    // SET_SH_REG, 7 payload dwords: index 0x204 = START_X (0xB810): START_X/Y/Z, NUM_THREAD_X/Y/Z
    0xC006_7600, 0x0000_0204, 0, 0, 0, 256, 1, 1,
    // DISPATCH_DIRECT (0x15), 4 payload dwords: 4096 x 1 x 1 groups, initiator bits 0, 2, 15
    0xC003_1500, 0x0000_1000, 0x0000_0001, 0x0000_0001, 0x0000_8005,
    // EVENT_WRITE (0x46), 1 payload dword: CS_PARTIAL_FLUSH (7) | EVENT_INDEX 4 << 8
    0xC000_4600, 0x0000_0407,
    // RELEASE_MEM (0x49), 7 payload dwords:
    //   dw1 = CACHE_FLUSH_AND_INV_TS_EVENT (0x14) | EVENT_INDEX 5 << 8 | GLM_WB 12 | GLM_INV 13 | GLV_INV 14
    //         | GL1_INV 15 | GL2_INV 20 | GL2_WB 21 | SEQ 22
    //   dw2 = DATA_SEL 1 (32-bit) << 29, DST_SEL 0, INT_SEL 0; address lo, hi; data lo, hi; ctxid
    0xC006_4900, 0x0070_F514, 0x2000_0000, 0x0030_0000, 0x0000_8000, 0x0000_0001, 0x0000_0000, 0x0000_0000,
];

fn saxpy() -> ComputeDispatch<'static> {
    const USER_DATA: [u32; 2] = [KERNARGS as u32, (KERNARGS >> 32) as u32];
    ComputeDispatch {
        gfx: Gfx::Gfx11,
        code_address: CODE,
        rsrc1: PgmRsrc1::from_bits(0xe0af_0000).with_priv(true),
        rsrc2: PgmRsrc2::from_bits(0x9e),
        rsrc3: PgmRsrc3::from_bits(0x20),
        tmpring: TmpringSize::new(Gfx::Gfx11),
        user_data: &USER_DATA,
        resource_limits: ResourceLimits::default(),
        workgroup: [256, 1, 1],
        grid: [4096, 1, 1],
        wave32: true,
        fence: Some((FENCE, 1)),
    }
}

#[test]
fn saxpy_gfx1100_matches_golden_word_by_word() {
    let mut ib = Vec::new();
    let mut w = PacketWriter::new(&mut ib);
    write_preamble(&mut w, Gfx::Gfx11).unwrap();
    saxpy().write(&mut w).unwrap();
    assert_eq!(ib.len(), GOLDEN.len());
    for (i, (got, want)) in ib.iter().zip(GOLDEN.iter()).enumerate() {
        assert_eq!(got, want, "dword {i}: got {got:#010x}, want {want:#010x}");
    }
}

#[test]
fn golden_into_exact_slice() {
    let mut buf = [0u32; 66];
    let mut w = PacketWriter::on_slice(&mut buf);
    write_preamble(&mut w, Gfx::Gfx11).unwrap();
    saxpy().write(&mut w).unwrap();
    assert_eq!(buf, GOLDEN);
    let mut short = [0u32; 65];
    let mut w = PacketWriter::on_slice(&mut short);
    write_preamble(&mut w, Gfx::Gfx11).unwrap();
    assert!(saxpy().write(&mut w).is_err());
}

#[test]
fn hex_file_holds_the_golden_ib() {
    let text = include_str!("../data/saxpy_gfx1100.hex");
    assert_eq!(words_from_hex_text(text).unwrap(), GOLDEN);
}

#[test]
fn golden_decodes_to_named_packets() {
    let packets = decode(&GOLDEN, Gfx::Gfx11).unwrap();
    let names: Vec<_> = packets.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "SET_SH_REG",
            "SET_SH_REG",
            "SET_SH_REG",
            "ACQUIRE_MEM",
            "SET_SH_REG",
            "SET_SH_REG",
            "SET_SH_REG",
            "SET_SH_REG",
            "SET_SH_REG",
            "SET_SH_REG",
            "SET_SH_REG",
            "DISPATCH_DIRECT",
            "EVENT_WRITE",
            "RELEASE_MEM"
        ]
    );
    let Body::SetShReg(regs) = &packets[5].body else { panic!("not SET_SH_REG") };
    assert_eq!(regs[0].reg.name, "COMPUTE_PGM_RSRC1");
    assert_eq!(regs[1].reg.name, "COMPUTE_PGM_RSRC2");
    let text: String = packets.iter().map(|p| format!("{p}\n")).collect();
    for needle in [
        "COMPUTE_STATIC_THREAD_MGMT_SE7",
        "PRIV=1",
        "USER_SGPR=0xf",
        "INST_PREF_SIZE=2",
        "NUM_THREAD_FULL=0x100",
        "CS_W32_EN=1",
        "CS_PARTIAL_FLUSH",
        "CACHE_FLUSH_AND_INV_TS_EVENT",
        "data = VALUE_32",
        "address = 0x800000300000",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // On gfx10.3 the offsets of STATIC_THREAD_MGMT_SE4..7 hold the relaunch/restore registers.
    let on_gfx10_3 = decode(&GOLDEN, Gfx::Gfx10_3).unwrap();
    let Body::SetShReg(regs) = &on_gfx10_3[2].body else { panic!("not SET_SH_REG") };
    assert_eq!(regs[0].reg.name, "COMPUTE_RELAUNCH");
}
