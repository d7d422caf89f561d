//! The simulated command processor runs each packet the way its fields say: fences written by
//! RELEASE_MEM (32 and 64 bits), COPY_DATA and DMA_DATA copies and fills, WAIT_REG_MEM that
//! holds (and one that never could), INDIRECT_BUFFER calls and chains, several IBs and
//! submissions in order with increasing sequence numbers.

use crate::support::*;
use pm4::packets::{CopyData, DataSel, DmaData, IndirectBuffer, ReleaseMem, WaitRegMem};
use pm4::PacketWriter;
use sparkle::amdgpu::kmd::{HwIp, IbDesc, Submission, VaFlags, WaitStatus};

#[test]
fn release_copy_and_dma_packets_write_what_their_fields_say() {
    let gpu = Gpu::new();
    let src = gpu.buffer(4096, VaFlags::READ_ONLY);
    let dst = gpu.buffer(8192, VaFlags::READ_WRITE);
    let pattern: Vec<u32> = (0..300u32).map(|i| i.wrapping_mul(0x0101_0101) ^ 0xdead).collect();
    src.write_u32s(0, &pattern);
    let mut words = Vec::new();
    let mut w = PacketWriter::new(&mut words);
    w.release_mem(&ReleaseMem::fence32(dst.va, 0x1111_2222)).unwrap();
    w.release_mem(&ReleaseMem {
        data_sel: DataSel::VALUE_64,
        data: 0x0123_4567_89ab_cdef,
        ..ReleaseMem::fence32(dst.va + 8, 0)
    })
    .unwrap();
    w.copy_data(&CopyData {
        src_sel: CopyData::SEL_IMM,
        dst_sel: CopyData::SEL_DST_MEM,
        count_64: false,
        wr_confirm: true,
        engine: 0,
        src: 0xfeed_beef,
        dst: dst.va + 16,
    })
    .unwrap();
    w.copy_data(&CopyData {
        src_sel: CopyData::SEL_SRC_MEM,
        dst_sel: CopyData::SEL_DST_MEM,
        count_64: true,
        wr_confirm: true,
        engine: 0,
        src: src.va + 8,
        dst: dst.va + 24,
    })
    .unwrap();
    w.dma_data(&DmaData::copy(src.va, dst.va + 1024, 1200)).unwrap();
    w.dma_data(&DmaData {
        src_sel: DmaData::SRC_DATA,
        src: 0x5a5a_5a5a,
        ..DmaData::copy(0, dst.va + 4096, 64)
    })
    .unwrap();
    let clock = ReleaseMem { data_sel: DataSel::GPU_CLOCK, ..ReleaseMem::fence32(dst.va + 32, 0) };
    w.release_mem(&clock).unwrap();
    w.release_mem(&ReleaseMem { address: dst.va + 40, ..clock }).unwrap();
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit(&ib, words.len(), &[src.bo, dst.bo]).unwrap();
    assert_eq!(gpu.wait(seq).unwrap(), WaitStatus::Completed);

    let got = dst.read_u32s(0, 8);
    assert_eq!(got[0], 0x1111_2222);
    assert_eq!((got[2], got[3]), (0x89ab_cdef, 0x0123_4567));
    assert_eq!(got[4], 0xfeed_beef);
    assert_eq!((got[6], got[7]), (pattern[2], pattern[3]));
    let clocks = dst.read_u32s(32, 4);
    let (first, second) =
        (clocks[0] as u64 | (clocks[1] as u64) << 32, clocks[2] as u64 | (clocks[3] as u64) << 32);
    assert!(first > 0 && second >= first, "GPU clock values {first} then {second}");
    assert_eq!(dst.read_u32s(1024, 300), pattern);
    assert_eq!(dst.read_u32s(4096, 17), [[0x5a5a_5a5a; 16].as_slice(), &[0]].concat());
}

#[test]
fn indirect_buffers_are_called_and_chained_and_several_ibs_run_in_order() {
    let gpu = Gpu::new();
    let out = gpu.buffer(4096, VaFlags::READ_WRITE);
    let fence = |address: u64, value: u32| {
        let mut words = Vec::new();
        PacketWriter::new(&mut words).release_mem(&ReleaseMem::fence32(address, value)).unwrap();
        words
    };
    // Called IB: writes 2 at +4, then returns to the caller, which writes 3 at +8.
    let called = gpu.ib_buffer(&fence(out.va + 4, 2));
    // Chained IB: writes 5 at +16; the rest of the chaining IB never runs.
    let chained = gpu.ib_buffer(&fence(out.va + 16, 5));
    let mut top = fence(out.va, 1);
    let mut w = PacketWriter::new(&mut top);
    w.indirect_buffer(&IndirectBuffer::call(called.va, 8)).unwrap();
    top.extend(fence(out.va + 8, 3));
    let mut w = PacketWriter::new(&mut top);
    w.indirect_buffer(&IndirectBuffer { chain: true, ..IndirectBuffer::call(chained.va, 8) }).unwrap();
    top.extend(fence(out.va + 12, 4));
    let top_ib = gpu.ib_buffer(&top);
    let second = gpu.ib_buffer(&fence(out.va + 20, 6));
    let ibs = [
        IbDesc { va: top_ib.va, size_bytes: (top.len() * 4) as u32, ip: HwIp::Compute, ring: 0, flags: 0 },
        IbDesc { va: second.va, size_bytes: 32, ip: HwIp::Compute, ring: 0, flags: 0 },
    ];
    let list = [top_ib.bo, called.bo, chained.bo, second.bo, out.bo];
    let seq = gpu.kmd.submit(&Submission { ctx: gpu.ctx, ibs: &ibs, buffers: &list }).unwrap();
    assert_eq!(gpu.wait(seq).unwrap(), WaitStatus::Completed);
    assert_eq!(out.read_u32s(0, 6), [1, 2, 3, 0, 5, 6]);

    // Sequence numbers grow per submission; waiting on an older one after a newer is fine.
    let again = gpu.kmd.submit(&Submission { ctx: gpu.ctx, ibs: &ibs, buffers: &list }).unwrap();
    assert_eq!(again.0, seq.0 + 1);
    assert_eq!(gpu.wait(again).unwrap(), WaitStatus::Completed);
    assert_eq!(gpu.wait(seq).unwrap(), WaitStatus::Completed);
}

#[test]
fn wait_reg_mem_passes_when_memory_holds_and_reports_a_wait_that_could_never_end() {
    let gpu = Gpu::new();
    let signal = gpu.buffer(4096, VaFlags::READ_WRITE);
    signal.write_u32s(0, &[41]);
    let mut words = Vec::new();
    let mut w = PacketWriter::new(&mut words);
    w.wait_reg_mem(&WaitRegMem::memory_geq(signal.va, 41)).unwrap();
    w.release_mem(&ReleaseMem::fence32(signal.va + 4, 1)).unwrap();
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit(&ib, words.len(), &[signal.bo]).unwrap();
    assert_eq!(gpu.wait(seq).unwrap(), WaitStatus::Completed);
    assert_eq!(signal.read_u32s(4, 1), [1]);

    let mut words = Vec::new();
    PacketWriter::new(&mut words).wait_reg_mem(&WaitRegMem::memory_geq(signal.va, 42)).unwrap();
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit(&ib, words.len(), &[signal.bo]).unwrap();
    let message = gpu.wait(seq).unwrap_err().to_string();
    assert!(
        message.contains("WAIT_REG_MEM at dword 0") && message.contains("would wait forever"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{:#x}", signal.va)) && message.contains("0x29 GREATER_EQUAL 0x2a"),
        "{message}"
    );
}

#[test]
fn threads_submitting_on_their_own_contexts_all_complete_in_order() {
    let gpu = std::sync::Arc::new(Gpu::new());
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let gpu = gpu.clone();
            std::thread::spawn(move || {
                let ctx = gpu.kmd.ctx_create().unwrap();
                let out = gpu.buffer(4096, VaFlags::READ_WRITE);
                let mut last = None;
                for i in 0..20u32 {
                    let mut words = Vec::new();
                    PacketWriter::new(&mut words)
                        .release_mem(&ReleaseMem::fence32(out.va + 4 * i as u64, t * 100 + i))
                        .unwrap();
                    let ib = gpu.ib_buffer(&words);
                    let seq = gpu.submit_on(ctx, &ib, words.len(), &[out.bo]).unwrap();
                    assert_eq!(seq.0, i as u64 + 1, "sequence numbers count per context");
                    last = Some((seq, ib));
                }
                let (seq, _ib) = last.unwrap();
                assert_eq!(gpu.wait_on(ctx, seq).unwrap(), WaitStatus::Completed);
                let want: Vec<u32> = (0..20).map(|i| t * 100 + i).collect();
                assert_eq!(out.read_u32s(0, 20), want);
                gpu.kmd.ctx_destroy(ctx).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn an_ib_chain_that_loops_is_a_hang_not_a_stuck_simulator() {
    let gpu = Gpu::new();
    let ib = gpu.buffer(4096, VaFlags::READ_ONLY);
    let mut words = Vec::new();
    PacketWriter::new(&mut words)
        .indirect_buffer(&IndirectBuffer { chain: true, ..IndirectBuffer::call(ib.va, 4) })
        .unwrap();
    ib.write_u32s(0, &words);
    let seq = gpu.submit(&ib, words.len(), &[]).unwrap();
    let message = gpu.wait(seq).unwrap_err().to_string();
    assert!(message.contains("INDIRECT_BUFFER chains") && message.contains("the chain loops"), "{message}");
}

/// Fields the simulated CP cannot honour stop the submission, naming the packet and its dword.
#[test]
fn packet_fields_the_cp_does_not_model_are_refused_by_name() {
    use pm4::packets::{AcquireMem, EventType, EventWrite, GcrCntl};
    let gpu = Gpu::new();
    let out = gpu.buffer(4096, VaFlags::READ_WRITE);
    let inner = gpu.buffer(4096, VaFlags::READ_ONLY);
    // An IB that itself calls another: a third level the CP does not have.
    let mut nested = Vec::new();
    PacketWriter::new(&mut nested).indirect_buffer(&IndirectBuffer::call(inner.va, 4)).unwrap();
    inner.write_u32s(0, &nested);
    type Build = Box<dyn Fn(&mut PacketWriter<&mut Vec<u32>>)>;
    let (o, i) = (out.va, inner.va);
    let cases: Vec<(Build, [&str; 2])> = vec![
        (
            Box::new(|w| {
                w.event_write(&EventWrite { event: EventType::BOTTOM_OF_PIPE_TS, index: 5, address: None })
                    .unwrap()
            }),
            ["EVENT_WRITE (opcode 0x46) at dword 0 of the IB", "only CS_PARTIAL_FLUSH"],
        ),
        (
            Box::new(move |w| {
                w.release_mem(&ReleaseMem {
                    event: EventType::CS_PARTIAL_FLUSH,
                    event_index: 4,
                    ..ReleaseMem::fence32(o, 1)
                })
                .unwrap()
            }),
            ["RELEASE_MEM (opcode 0x49) at dword 0 of the IB", "event 0x7 index 4"],
        ),
        (
            Box::new(|w| {
                w.acquire_mem(&AcquireMem {
                    coher_cntl: 1 << 23,
                    ..AcquireMem::full_range(GcrCntl::INVALIDATE_ALL)
                })
                .unwrap()
            }),
            ["ACQUIRE_MEM (opcode 0x58) at dword 0 of the IB", "COHER_CNTL 0x800000"],
        ),
        (
            Box::new(move |w| {
                w.indirect_buffer(&IndirectBuffer { valid: false, ..IndirectBuffer::call(i, 4) }).unwrap()
            }),
            ["INDIRECT_BUFFER (opcode 0x3f) at dword 0 of the IB", "the VALID bit"],
        ),
        (
            Box::new(move |w| w.indirect_buffer(&IndirectBuffer::call(i, 4)).unwrap()),
            ["INDIRECT_BUFFER (opcode 0x3f) at dword 0 of the IB", "cannot call another"],
        ),
        (
            Box::new(move |w| {
                w.wait_reg_mem(&WaitRegMem { mem_space: 0, ..WaitRegMem::memory_geq(0x1234, 0) }).unwrap()
            }),
            ["WAIT_REG_MEM (opcode 0x3c) at dword 0 of the IB", "waiting on a register"],
        ),
        (
            Box::new(move |w| {
                w.copy_data(&CopyData {
                    src_sel: CopyData::SEL_REG,
                    dst_sel: CopyData::SEL_DST_MEM,
                    count_64: false,
                    wr_confirm: false,
                    engine: 0,
                    src: 0x2000,
                    dst: o,
                })
                .unwrap()
            }),
            ["COPY_DATA (opcode 0x40) at dword 0 of the IB", "SRC_SEL 0"],
        ),
        (
            Box::new(move |w| w.release_mem(&ReleaseMem::fence32(o + 0x10_0000, 1)).unwrap()),
            ["GPU page fault at", "by the command processor writing RELEASE_MEM data"],
        ),
    ];
    for (build, expected) in cases {
        let ctx = gpu.kmd.ctx_create().unwrap();
        let mut words = Vec::new();
        build(&mut PacketWriter::new(&mut words));
        let ib = gpu.ib_buffer(&words);
        let seq = gpu.submit_on(ctx, &ib, words.len(), &[out.bo, inner.bo]).unwrap();
        let message = gpu.wait_on(ctx, seq).unwrap_err().to_string();
        for part in expected {
            assert!(message.contains(part), "expected {part:?} in: {message}");
        }
        assert!(gpu.kmd.ctx_state(ctx).unwrap().guilty);
    }
}
