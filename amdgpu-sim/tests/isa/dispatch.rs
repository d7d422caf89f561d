//! The initial wave state a dispatch produces (LLVM AMDGPUUsage, "Initial Kernel Execution
//! State", gfx11): user SGPRs, enabled workgroup ids right after them, packed work-item ids in
//! VGPR0, EXEC covering only the threads of a partial last wave, MODE from RSRC1.

use sparkle_amdgpu_sim::isa::Gfx;
use sparkle_amdgpu_sim::isa::{initial_waves, Dispatch, ScratchRing, WaveStatus};

fn dispatch(rsrc2: u32, size: [u32; 3]) -> Dispatch {
    Dispatch {
        kernel_name: "k".into(),
        gfx: Gfx::Gfx11,
        code_address: 0x1000,
        rsrc1: 0x00af_0000,
        rsrc2,
        rsrc3: 0,
        user_data: vec![0x11, 0x22, 0x33, 0x44],
        workgroup_size: size,
        grid_workgroups: [10, 10, 10],
        wave32: true,
        instruction_budget: 1000,
        scratch: ScratchRing::NONE,
    }
}

#[test]
fn three_dimensional_group_with_all_ids_enabled() {
    // 3 user SGPRs, TGID_X/Y/Z, TIDIG_COMP_CNT 2, LDS_SIZE 2 granules.
    let rsrc2 = (3 << 1) | (1 << 7) | (1 << 8) | (1 << 9) | (2 << 11) | (2 << 15);
    let d = dispatch(rsrc2, [5, 3, 4]);
    assert_eq!(d.lds_bytes(), 1024);
    let waves = initial_waves(&d, [7, 8, 9]).unwrap();
    assert_eq!(waves.len(), 2, "60 threads are two wave32s");
    for (i, w) in waves.iter().enumerate() {
        assert_eq!(w.wave_id, i as u32);
        assert_eq!(w.pc, 0x1000);
        assert_eq!(w.status, WaveStatus::Running);
        assert_eq!(&w.sgpr[0..6], &[0x11, 0x22, 0x33, 7, 8, 9], "user SGPRs then group ids");
        assert_eq!(w.sgpr[6], 0, "nothing after the enabled system SGPRs");
        assert_eq!(w.mode >> 9 & 1, 1, "IEEE mode from RSRC1");
        for lane in 0..32u32 {
            let t = 32 * i as u32 + lane;
            let want = if t < 60 { (t % 5) | ((t / 5) % 3) << 10 | (t / 15) << 20 } else { 0 };
            assert_eq!(w.vgpr[0][lane as usize], want, "wave {i} lane {lane}");
        }
    }
    assert_eq!(waves[0].exec(), u64::from(u32::MAX));
    assert_eq!(waves[1].exec(), (1 << 28) - 1, "the last wave has 28 threads");
}

#[test]
fn only_enabled_ids_are_loaded() {
    // 2 user SGPRs, only TGID_Y, TIDIG_COMP_CNT 0: VGPR0 holds x alone.
    let rsrc2 = (2 << 1) | (1 << 8);
    let d = dispatch(rsrc2, [4, 4, 1]);
    let waves = initial_waves(&d, [3, 5, 6]).unwrap();
    assert_eq!(waves.len(), 1);
    let w = &waves[0];
    assert_eq!(&w.sgpr[0..4], &[0x11, 0x22, 5, 0]);
    assert_eq!(w.exec(), 0xffff);
    for lane in 0..16 {
        assert_eq!(w.vgpr[0][lane], lane as u32 % 4, "x only");
    }
}

#[test]
fn dispatch_from_compute_registers() {
    use sparkle_amdgpu_sim::isa::regs::*;
    use std::collections::HashMap;
    let mut r: HashMap<u32, u32> = HashMap::new();
    r.insert(COMPUTE_PGM_LO, 0x0012_3400);
    r.insert(COMPUTE_PGM_HI, 0x1);
    r.insert(COMPUTE_PGM_RSRC1, 0x00af_0000);
    r.insert(COMPUTE_PGM_RSRC2, (2 << 1) | (1 << 7) | (3 << 15));
    r.insert(COMPUTE_NUM_THREAD_X, 64);
    r.insert(COMPUTE_NUM_THREAD_Y, 2);
    r.insert(COMPUTE_NUM_THREAD_Z, 1);
    r.insert(COMPUTE_USER_DATA_0, 0xdead);
    r.insert(COMPUTE_USER_DATA_0 + 4, 0xbeef);
    let reg = |a: u32| r.get(&a).copied().unwrap_or(0);
    // compute enable, force start at 0, wave32.
    let initiator = 1 | (1 << 2) | (1 << 15);
    let d = Dispatch::from_registers("k", Gfx::Gfx11, reg, [3, 1, 1], initiator, 5000).unwrap();
    assert_eq!(d.code_address, 0x1_0012_3400 << 8);
    assert_eq!(d.workgroup_size, [64, 2, 1]);
    assert_eq!(&d.user_data[..3], &[0xdead, 0xbeef, 0]);
    assert_eq!(d.lds_bytes(), 1536);
    assert!(d.wave32);
    let waves = initial_waves(&d, [2, 0, 0]).unwrap();
    assert_eq!(waves.len(), 4);
    assert_eq!(&waves[3].sgpr[..3], &[0xdead, 0xbeef, 2]);
    // Without CS_W32_EN the waves have 64 lanes: 64x2 threads are two full waves.
    let wave64 = Dispatch::from_registers("k", Gfx::Gfx11, reg, [1, 1, 1], 1 | (1 << 2), 10).unwrap();
    assert!(!wave64.wave32);
    let waves = initial_waves(&wave64, [0, 0, 0]).unwrap();
    assert_eq!(waves.len(), 2);
    assert_eq!(waves[0].exec(), u64::MAX);
    assert_eq!(waves[1].exec(), u64::MAX);
    assert_eq!(waves[1].vgpr[0][63], 63, "lane 63 of the second wave has x = 63");
    let err =
        Dispatch::from_registers("k", Gfx::Gfx11, reg, [1, 1, 1], 1 | (1 << 1) | (1 << 15), 10).unwrap_err();
    assert!(err.to_string().contains("PARTIAL_TG_EN"), "{err}");
}

#[test]
fn gfx10_3_waves_learn_their_scratch_slot_offset() {
    // 4 user SGPRs (the private segment buffer), TGID_X, SCRATCH_EN; a 96-thread group is three
    // wave32s. TMPRING_SIZE: 8 slots of 2 KiB (WAVESIZE counts 1 KiB on gfx10.3).
    let rsrc2 = 1 | (4 << 1) | (1 << 7);
    let mut d = dispatch(rsrc2, [96, 1, 1]);
    d.gfx = Gfx::Gfx10_3;
    d.scratch = ScratchRing { base: 0, tmpring_size: 8 | 2 << 12 };
    assert_eq!(d.scratch.wave_bytes(Gfx::Gfx10_3), 2048);
    assert_eq!(d.scratch.wave_bytes(Gfx::Gfx11), 512, "256-byte units on gfx11");
    let waves = initial_waves(&d, [5, 0, 0]).unwrap();
    assert_eq!(waves.len(), 3);
    for (i, w) in waves.iter().enumerate() {
        assert_eq!(&w.sgpr[..6], &[0x11, 0x22, 0x33, 0x44, 5, 2048 * i as u32], "wave {i}");
        assert_eq!(w.lane_scratch_bytes, 64, "2 KiB over 32 lanes");
        assert_eq!(w.gfx, Gfx::Gfx10_3);
    }
    // gfx11 needs the scratch base register; gfx10.3 kernels get the ring in their descriptors.
    d.gfx = Gfx::Gfx11;
    assert!(initial_waves(&d, [0, 0, 0]).unwrap_err().to_string().contains("without a scratch ring"));
}
