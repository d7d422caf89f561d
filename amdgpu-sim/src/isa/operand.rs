//! Source operand fields (the 9-bit SRC / 8-bit SSRC encodings): registers, inline and literal
//! constants, and the special scalar sources.

/// Scalar register file indices as the operand encoding numbers them (gfx11).
pub const VCC_LO: u8 = 106;
pub const NULL: u8 = 124;
pub const M0: u8 = 125;
pub const EXEC_LO: u8 = 126;
pub const EXEC_HI: u8 = 127;
/// Literal constant marker in a source field.
pub const LITERAL: u16 = 255;

/// Flat addresses whose high 32 bits are this reach LDS (the low 32 bits are the LDS offset):
/// the shared aperture at 0x2000_0000_0000_0000, 4 GiB, where Linux's amdgpu driver puts it
/// for every gfx9+ GPU (SH_MEM_BASES of the VMIDs its render-node contexts use), so that
/// kernels see here the apertures they see on a card.
pub const SHARED_APERTURE_HI: u32 = 0x2000_0000;
/// Flat addresses whose high 32 bits are this reach the lane's private segment (scratch): the
/// private aperture at 0x1000_0000_0000_0000, 4 GiB, as amdgpu programs it.
pub const PRIVATE_APERTURE_HI: u32 = 0x1000_0000;

/// What a faulting address in an aperture means, for messages (None for global addresses).
pub fn aperture_fault(addr: u64) -> Option<&'static str> {
    match (addr >> 32) as u32 {
        PRIVATE_APERTURE_HI => {
            Some("the address is past the work-item's private segment (its slice of the scratch ring)")
        }
        SHARED_APERTURE_HI => Some("the address is past the workgroup's LDS"),
        _ => None,
    }
}

/// The aperture registers a kernel reads to build generic pointers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aperture {
    SharedBase,
    SharedLimit,
    PrivateBase,
    PrivateLimit,
}

impl Aperture {
    /// The 64-bit value the register reads as.
    pub fn value(self) -> u64 {
        let base = |hi: u32| (hi as u64) << 32;
        match self {
            Aperture::SharedBase => base(SHARED_APERTURE_HI),
            Aperture::SharedLimit => base(SHARED_APERTURE_HI) | 0xffff_ffff,
            Aperture::PrivateBase => base(PRIVATE_APERTURE_HI),
            Aperture::PrivateLimit => base(PRIVATE_APERTURE_HI) | 0xffff_ffff,
        }
    }
}

/// A decoded source operand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Src {
    /// s0..s105, VCC, TTMP, NULL, M0, EXEC: an index into the 128-entry scalar file.
    Sgpr(u8),
    Vgpr(u8),
    /// Inline integer constant -16..=64.
    Int(i8),
    /// Inline float constant: index 0..=8 for 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0, 1/(2*pi).
    Float(u8),
    /// 32-bit literal dword that followed the instruction.
    Literal(u32),
    Scc,
    Vccz,
    Execz,
    /// SRC_SHARED_BASE/LIMIT, SRC_PRIVATE_BASE/LIMIT: where generic (flat) addresses reach LDS
    /// and the private segment.
    Aperture(Aperture),
    /// An encoding the interpreter does not model (DPP, SDWA markers, apertures, LDS_DIRECT...).
    Unsupported(u16),
    /// Source `n` of an SDWA instruction after its byte/word selection, per lane, as the wave
    /// latched it (never decoded from a field; see `sdwa.rs`).
    SdwaLatch(u8),
}

const F32_CONSTS: [u32; 9] = [
    0x3f00_0000,
    0xbf00_0000,
    0x3f80_0000,
    0xbf80_0000,
    0x4000_0000,
    0xc000_0000,
    0x4080_0000,
    0xc080_0000,
    0x3e22_f983,
];
const F64_CONSTS: [u64; 9] = [
    0x3fe0_0000_0000_0000,
    0xbfe0_0000_0000_0000,
    0x3ff0_0000_0000_0000,
    0xbff0_0000_0000_0000,
    0x4000_0000_0000_0000,
    0xc000_0000_0000_0000,
    0x4010_0000_0000_0000,
    0xc010_0000_0000_0000,
    0x3fc4_5f30_6dc9_c882,
];
const F16_CONSTS: [u16; 9] = [0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118];

impl Src {
    /// Decodes a 9-bit source field (values 256..=511 are VGPRs); `literal` is the dword after
    /// the instruction, used only when the field says 255.
    pub fn decode(field: u16, literal: u32) -> Src {
        match field {
            0..=127 => Src::Sgpr(field as u8),
            128..=192 => Src::Int((field - 128) as i8),
            193..=208 => Src::Int(-((field - 192) as i8)),
            235 => Src::Aperture(Aperture::SharedBase),
            236 => Src::Aperture(Aperture::SharedLimit),
            237 => Src::Aperture(Aperture::PrivateBase),
            238 => Src::Aperture(Aperture::PrivateLimit),
            240..=248 => Src::Float((field - 240) as u8),
            251 => Src::Vccz,
            252 => Src::Execz,
            253 => Src::Scc,
            LITERAL => Src::Literal(literal),
            256..=511 => Src::Vgpr((field - 256) as u8),
            _ => Src::Unsupported(field),
        }
    }

    /// The value of a constant operand as a 32-bit source, None for registers.
    pub fn const32(&self) -> Option<u32> {
        match *self {
            Src::Int(i) => Some(i as i32 as u32),
            Src::Float(k) => Some(F32_CONSTS[k as usize]),
            Src::Literal(l) => Some(l),
            _ => None,
        }
    }

    /// The value of a constant operand as a 64-bit source. Float inline constants are doubles;
    /// a literal is the high dword of a double for f64 operands and zero-extended otherwise.
    pub fn const64(&self, float: bool) -> Option<u64> {
        match *self {
            Src::Int(i) => Some(i as i64 as u64),
            Src::Float(k) => Some(F64_CONSTS[k as usize]),
            Src::Literal(l) if float => Some((l as u64) << 32),
            Src::Literal(l) => Some(l as u64),
            _ => None,
        }
    }

    /// The value of a constant operand as a 16-bit source (float constants are halves).
    pub fn const16(&self) -> Option<u32> {
        match *self {
            Src::Int(i) => Some(i as i32 as u32),
            Src::Float(k) => Some(F16_CONSTS[k as usize] as u32),
            Src::Literal(l) => Some(l),
            _ => None,
        }
    }
}
