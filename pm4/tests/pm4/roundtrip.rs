//! Encode → decode round trips for every packet kind on every generation, and property tests.

use pm4::fields::DispatchInitiator;
use pm4::packets::{
    AcquireMem, CompareFunc, CopyData, DataSel, DispatchDirect, DispatchIndirect, DmaData, DstSel, EventType,
    EventWrite, GcrCntl, IndirectBuffer, IntSel, ReleaseCache, ReleaseMem, WaitRegMem,
};
use pm4::registers::{self, Space};
use pm4::{decode, Body, DecodeErrorKind, Decoder, Gfx, PacketWriter};
use proptest::prelude::*;

fn one(gfx: Gfx, shader_type: bool, f: impl FnOnce(&mut PacketWriter<&mut Vec<u32>>)) -> pm4::Packet {
    let mut v = Vec::new();
    let mut w = PacketWriter::new(&mut v).with_shader_type_compute(shader_type);
    f(&mut w);
    let mut packets = decode(&v, gfx).unwrap();
    assert_eq!(packets.len(), 1);
    let p = packets.remove(0);
    assert_eq!(p.len, v.len());
    assert!(!p.to_string().is_empty());
    p
}

fn samples() -> Vec<Body> {
    let init = DispatchInitiator::launch(true);
    vec![
        Body::Nop { payload_len: 0 },
        Body::Nop { payload_len: 3 },
        Body::DispatchDirect(DispatchDirect { x: 7, y: 8, z: 9, initiator: init }),
        Body::DispatchIndirect(DispatchIndirect::Address { address: 0x1234_5678_9AB0, initiator: init }),
        Body::DispatchIndirect(DispatchIndirect::Offset { offset: 0x40, initiator: init }),
        Body::AcquireMem(AcquireMem::full_range(GcrCntl::INVALIDATE_ALL)),
        Body::AcquireMem(AcquireMem {
            coher_cntl: 0,
            size: 0x10,
            base: 0x1_0000,
            poll_interval: 4,
            gcr_cntl: GcrCntl::GLV_INV | GcrCntl::GL1_INV,
        }),
        Body::ReleaseMem(ReleaseMem::fence32(0x8000_0030_0000, 42)),
        Body::ReleaseMem(ReleaseMem {
            event: EventType::BOTTOM_OF_PIPE_TS,
            event_index: 5,
            cache: ReleaseCache::GL2_WB,
            dst_sel: DstSel::TC_L2,
            int_sel: IntSel::INTERRUPT_AFTER_WRITE_CONFIRM,
            data_sel: DataSel::GPU_CLOCK,
            address: 0x1000,
            data: 0,
            int_ctxid: 77,
        }),
        Body::EventWrite(EventWrite::CS_PARTIAL_FLUSH),
        Body::EventWrite(EventWrite { event: EventType::CACHE_FLUSH_TS, index: 5, address: Some(0x2000) }),
        Body::WaitRegMem(WaitRegMem::memory_geq(0x8000_0030_0000, 5)),
        Body::WaitRegMem(WaitRegMem {
            function: CompareFunc::NOT_EQUAL,
            mem_space: 0,
            operation: 0,
            engine: 1,
            address: 0x1234,
            reference: 1,
            mask: 0xFF,
            poll_interval: 10,
        }),
        Body::IndirectBuffer(IndirectBuffer::call(0x7000_0000_1000, 52)),
        Body::IndirectBuffer(IndirectBuffer {
            address: 0x4,
            size_dw: 0xF_FFFF,
            chain: true,
            pre_ena: true,
            valid: true,
            cache_policy: 2,
        }),
        Body::CopyData(CopyData {
            src_sel: CopyData::SEL_TIMESTAMP,
            dst_sel: CopyData::SEL_DST_MEM,
            count_64: true,
            wr_confirm: true,
            engine: 0,
            src: 0,
            dst: 0x9000,
        }),
        Body::DmaData(DmaData::copy(0x8000_0010_0000, 0x8000_0020_0040, DmaData::MAX_BYTES_GFX11)),
        Body::DmaData(DmaData {
            src_sel: DmaData::SRC_DATA,
            dst_sel: DmaData::DST_ADDR,
            cp_sync: false,
            engine: 1,
            src: 0xdead_beef,
            dst: 0x1000,
            byte_count: (1 << 26) - 1,
            raw_wait: false,
        }),
    ]
}

fn write(w: &mut PacketWriter<&mut Vec<u32>>, body: &Body) {
    match body {
        Body::Nop { payload_len } => w.nop(*payload_len),
        Body::DispatchDirect(d) => w.dispatch_direct(d),
        Body::DispatchIndirect(d) => w.dispatch_indirect(d),
        Body::AcquireMem(a) => w.acquire_mem(a),
        Body::ReleaseMem(r) => w.release_mem(r),
        Body::EventWrite(e) => w.event_write(e),
        Body::WaitRegMem(x) => w.wait_reg_mem(x),
        Body::IndirectBuffer(ib) => w.indirect_buffer(ib),
        Body::CopyData(c) => w.copy_data(c),
        Body::DmaData(d) => w.dma_data(d),
        Body::SetShReg(_) | Body::SetUconfigReg(_) | Body::Filler => unreachable!("covered elsewhere"),
    }
    .unwrap();
}

#[test]
fn every_fixed_packet_round_trips_on_every_generation() {
    for gfx in Gfx::ALL {
        for shader_type in [false, true] {
            for body in samples() {
                let p = one(gfx, shader_type, |w| write(w, &body));
                assert_eq!(p.body, body, "{gfx}");
                let compute = matches!(body, Body::DispatchDirect(_) | Body::DispatchIndirect(_));
                assert_eq!(p.compute, compute && shader_type, "{}", p.name());
            }
        }
    }
}

#[test]
fn register_packets_round_trip_on_every_generation() {
    for gfx in Gfx::ALL {
        for shader_type in [false, true] {
            let p = one(gfx, shader_type, |w| w.set_sh_reg(registers::COMPUTE_PGM_RSRC1, &[1, 2]).unwrap());
            assert_eq!(p.compute, shader_type);
            let Body::SetShReg(regs) = &p.body else { panic!() };
            assert_eq!(
                regs.iter().map(|r| (r.reg.name, r.value)).collect::<Vec<_>>(),
                [("COMPUTE_PGM_RSRC1", 1), ("COMPUTE_PGM_RSRC2", 2)]
            );
            let p = one(gfx, shader_type, |w| {
                w.set_uconfig_reg(registers::GRBM_GFX_INDEX, &[0xE000_0000]).unwrap()
            });
            assert!(!p.compute);
            let Body::SetUconfigReg(regs) = &p.body else { panic!() };
            assert_eq!(regs[0].reg.name, "GRBM_GFX_INDEX");
            assert!(p.to_string().contains("SE_BROADCAST_WRITES=1"));
        }
    }
}

#[test]
fn generation_specific_registers() {
    let scratch = registers::gfx11::COMPUTE_DISPATCH_SCRATCH_BASE_LO;
    let mut v = Vec::new();
    PacketWriter::new(&mut v).set_sh_reg(scratch, &[1, 2]).unwrap();
    assert!(decode(&v, Gfx::Gfx11).is_ok());
    let err = decode(&v, Gfx::Gfx10_3).unwrap_err();
    assert_eq!(err.offset, 0);
    assert!(matches!(err.kind, DecodeErrorKind::UnknownRegister { offset: 0xB840, .. }));
}

#[test]
fn decoder_reports_errors_with_offsets_and_resumes_when_it_can() {
    // NOP(1), unknown opcode 0x99 with 2 payload dwords, EVENT_WRITE, bad header, anything.
    let words = [0xC000_1000, 0, 0xC001_9900, 1, 2, 0xC000_4600, 0x407, 0x4000_0000, 0xC000_4600];
    let items: Vec<_> = Decoder::new(&words, Gfx::Gfx11).collect();
    assert_eq!(items.len(), 4);
    assert!(items[0].is_ok());
    let e = items[1].clone().unwrap_err();
    assert_eq!((e.offset, matches!(e.kind, DecodeErrorKind::UnknownOpcode { opcode: 0x99, .. })), (2, true));
    assert!(items[2].is_ok());
    let e = items[3].clone().unwrap_err();
    assert_eq!((e.offset, matches!(e.kind, DecodeErrorKind::BadHeader { ty: 1, .. })), (7, true));

    let truncated = [0xC006_5800, 0, 0];
    let e = decode(&truncated, Gfx::Gfx11).unwrap_err();
    assert_eq!(e.offset, 0);
    assert!(matches!(e.kind, DecodeErrorKind::Truncated { expected: 7, available: 2, .. }));

    let bad_len = [0xC000_1500, 1];
    let e = decode(&bad_len, Gfx::Gfx11).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::BadLength { got: 1, .. }));

    let empty_run = [0xC000_7600, 0x20C];
    assert!(matches!(decode(&empty_run, Gfx::Gfx11).unwrap_err().kind, DecodeErrorKind::BadLength { .. }));

    let unknown_reg = [0xC001_7600, 0x3FF, 0];
    assert!(matches!(
        decode(&unknown_reg, Gfx::Gfx11).unwrap_err().kind,
        DecodeErrorKind::UnknownRegister { offset: 0xBFFC, .. }
    ));
    // Index far beyond the space: no overflow, just an unknown register.
    let huge = [0xC001_7900, u32::MAX, 0];
    assert!(matches!(decode(&huge, Gfx::Gfx11).unwrap_err().kind, DecodeErrorKind::UnknownRegister { .. }));
}

#[test]
fn type2_filler_and_header_only_nop() {
    let words = [0x8000_0000, 0xFFFF_1000, 0xC000_4600, 0x407];
    let p = decode(&words, Gfx::Gfx10_3).unwrap();
    assert_eq!(p.len(), 3);
    assert_eq!(p[0].body, Body::Filler);
    assert_eq!(p[1].body, Body::Nop { payload_len: 0 });
}

fn known_runs(gfx: Gfx) -> Vec<(u32, usize)> {
    // Maximal runs of consecutive known SH registers.
    let mut runs = Vec::new();
    let regs: Vec<_> = registers::table(gfx).iter().filter(|r| Space::Sh.contains_run(r.offset, 1)).collect();
    let mut i = 0;
    while i < regs.len() {
        let start = regs[i].offset;
        let mut n = 1;
        while i + n < regs.len() && regs[i + n].offset == start + 4 * n as u32 {
            n += 1;
        }
        runs.push((start, n));
        i += n;
    }
    runs
}

proptest! {
    #[test]
    fn random_register_runs_round_trip(
        gfx_i in 0usize..2,
        run_i in any::<prop::sample::Index>(),
        skip in any::<prop::sample::Index>(),
        values in prop::collection::vec(any::<u32>(), 1..40),
        shader_type in any::<bool>(),
    ) {
        let gfx = Gfx::ALL[gfx_i];
        let runs = known_runs(gfx);
        let (start, n) = runs[run_i.index(runs.len())];
        let first = skip.index(n);
        let len = values.len().min(n - first);
        let offset = start + 4 * first as u32;
        let mut v = Vec::new();
        PacketWriter::new(&mut v).with_shader_type_compute(shader_type).set_sh_reg(offset, &values[..len]).unwrap();
        prop_assert_eq!(v.len(), len + 2);
        prop_assert_eq!(v[0], 0xC000_7600 | ((len as u32) << 16) | ((shader_type as u32) << 1));
        prop_assert_eq!(v[1], (offset - 0xB000) >> 2);
        let p = decode(&v, gfx).unwrap();
        prop_assert_eq!(p.len(), 1);
        let Body::SetShReg(regs) = &p[0].body else { panic!("wrong body") };
        prop_assert_eq!(regs.len(), len);
        for (i, r) in regs.iter().enumerate() {
            prop_assert_eq!(r.reg.offset, offset + 4 * i as u32);
            prop_assert_eq!(r.value, values[i]);
        }
    }

    #[test]
    fn decoder_never_panics_and_offsets_stay_in_bounds(words in prop::collection::vec(any::<u32>(), 0..64)) {
        for gfx in Gfx::ALL {
            for item in Decoder::new(&words, gfx) {
                match item {
                    Ok(p) => {
                        prop_assert!(p.offset + p.len <= words.len());
                        let _ = p.to_string();
                    }
                    Err(e) => prop_assert!(e.offset < words.len()),
                }
            }
        }
    }

    #[test]
    fn random_streams_of_valid_packets_round_trip(picks in prop::collection::vec(0usize..16, 0..30)) {
        let all = samples();
        let bodies: Vec<_> = picks.iter().map(|&i| all[i % all.len()].clone()).collect();
        let mut v = Vec::new();
        {
            let mut w = PacketWriter::new(&mut v);
            for b in &bodies {
                write(&mut w, b);
            }
        }
        let decoded = decode(&v, Gfx::Gfx11).unwrap();
        prop_assert_eq!(decoded.into_iter().map(|p| p.body).collect::<Vec<_>>(), bodies);
    }
}

#[test]
fn dma_data_copy_has_the_documented_layout_and_decodes_back() {
    let mut words = Vec::new();
    PacketWriter::new(&mut words).dma_data(&DmaData::copy(0x8000_0010_0000, 0x8000_0020_0040, 4096)).unwrap();
    // Header: type 3, six payload dwords, opcode 0x50. Control: CP_SYNC, SRC_SEL and DST_SEL = 3
    // (through GL2). Command: byte count with RAW_WAIT.
    assert_eq!(words, [0xC005_5000, 0xE030_0000, 0x0010_0000, 0x8000, 0x0020_0040, 0x8000, 4096 | (1 << 30)]);
    for gfx in Gfx::ALL {
        let packets = pm4::decode(&words, gfx).unwrap();
        assert_eq!(packets.len(), 1);
        assert_eq!(packets[0].name(), "DMA_DATA");
        let Body::DmaData(d) = &packets[0].body else { panic!("{:?}", packets[0].body) };
        assert_eq!((d.src, d.dst, d.byte_count), (0x8000_0010_0000, 0x8000_0020_0040, 4096));
        let text = packets[0].to_string();
        assert!(text.contains("CP_SYNC=1") && text.contains("4096 bytes"), "{text}");
    }
    let too_big = DmaData { byte_count: 1 << 26, ..DmaData::copy(0, 0, 0) };
    assert!(PacketWriter::new(&mut Vec::new()).dma_data(&too_big).is_err());
}
