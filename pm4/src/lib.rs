//! Typed PM4 packets for AMD RDNA compute queues: an encoder, per-generation compute register
//! maps (gfx10.3 and gfx11), and a decoder that turns dword streams back into readable packets.
//!
//! The encoder writes into a caller's buffer and computes each header from the payload it emits,
//! so a packet's count can never disagree with its contents. The decoder never panics on any input
//! and reports unknown opcodes, unknown registers, truncated packets and bad headers with the dword
//! offset where they occur.
//!
//! # Building a full dispatch
//!
//! A saxpy launch on gfx1100: 4096 workgroups of 256 wave32 threads, the kernel argument pointer
//! in USER_DATA_0/1, and a fence written when the kernel has finished.
//!
//! ```
//! use pm4::fields::{DispatchInitiator, PgmRsrc1, PgmRsrc2, PgmRsrc3, ResourceLimits, TmpringSize};
//! use pm4::packets::{AcquireMem, DispatchDirect, EventWrite, GcrCntl, ReleaseMem};
//! use pm4::registers as r;
//! use pm4::{decode, Gfx, PacketWriter};
//!
//! # fn main() -> Result<(), pm4::Error> {
//! let gfx: Gfx = "gfx1100".parse()?;
//! let code_va: u64 = 0x8000_0010_0000; // 256-byte aligned
//! let kernargs: u64 = 0x8000_0020_0000;
//! let fence: u64 = 0x8000_0030_0000;
//!
//! // Resource words from the kernel descriptor; gfx11 also sets PRIV.
//! let rsrc1 = PgmRsrc1::from_bits(0xe0af_0000).with_priv(true);
//! let rsrc2 = PgmRsrc2::from_bits(0x9e).with_lds_bytes(0)?;
//! let rsrc3 = PgmRsrc3::from_bits(0x20);
//!
//! let mut ib = Vec::with_capacity(64);
//! let mut w = PacketWriter::new(&mut ib);
//! w.acquire_mem(&AcquireMem::full_range(GcrCntl::INVALIDATE_ALL))?;
//! w.set_sh_reg(r::COMPUTE_PGM_LO, &[(code_va >> 8) as u32, (code_va >> 40) as u32])?;
//! w.set_sh_reg(r::COMPUTE_PGM_RSRC1, &[rsrc1.bits(), rsrc2.bits()])?;
//! w.set_sh_reg(r::COMPUTE_PGM_RSRC3, &[rsrc3.bits()])?;
//! w.set_sh_reg(r::COMPUTE_TMPRING_SIZE, &[TmpringSize::new(gfx).bits()])?;
//! w.set_sh_reg(r::COMPUTE_USER_DATA_0, &[kernargs as u32, (kernargs >> 32) as u32])?;
//! w.set_sh_reg(r::COMPUTE_RESOURCE_LIMITS, &[ResourceLimits::default().bits()])?;
//! // START_X/Y/Z then NUM_THREAD_X/Y/Z: six consecutive registers, one packet.
//! w.set_sh_reg(r::COMPUTE_START_X, &[0, 0, 0, 256, 1, 1])?;
//! w.dispatch_direct(&DispatchDirect { x: 4096, y: 1, z: 1, initiator: DispatchInitiator::launch(true) })?;
//! w.event_write(&EventWrite::CS_PARTIAL_FLUSH)?;
//! w.release_mem(&ReleaseMem::fence32(fence, 1))?;
//!
//! assert_eq!(ib.len(), 52);
//! assert_eq!(ib[0], 0xC006_5800); // ACQUIRE_MEM, 7 payload dwords
//!
//! // The same stream decodes back into named packets and registers.
//! let packets = decode(&ib, gfx)?;
//! assert_eq!(packets.len(), 11);
//! assert_eq!(packets[7].name(), "SET_SH_REG");
//! assert!(packets[7].to_string().contains("COMPUTE_NUM_THREAD_X"));
//! assert_eq!(packets[8].name(), "DISPATCH_DIRECT");
//! # Ok(())
//! # }
//! ```
//!
//! [`dispatch::ComputeDispatch`] writes the same sequence from one struct, and
//! [`dispatch::write_preamble`] the one-time CU enables.

#![warn(missing_docs)]

pub mod decoder;
pub mod dispatch;
pub mod encoder;
pub mod error;
pub mod field;
pub mod fields;
pub mod gfx;
pub mod header;
pub mod opcode;
pub mod packets;
pub mod registers;

pub use decoder::{decode, words_from_hex_text, words_from_le_bytes, Body, Decoder, Packet, RegWrite};
pub use encoder::{PacketWriter, Sink, SliceSink};
pub use error::{
    DecodeError, DecodeErrorKind, EncodeError, Error, FieldError, ParseGfxError, ParseHexError, Result,
};
pub use gfx::Gfx;
pub use opcode::Opcode;
