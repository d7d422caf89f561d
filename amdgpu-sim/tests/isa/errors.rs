//! Failures are loud and precise: page faults (read, write, fetch), unknown instructions, LDS
//! out of range, a hung kernel hitting the instruction budget, and refused dispatch settings.

use crate::support::*;
use sparkle_amdgpu_sim::isa::{run_dispatch, Access, Dispatch, SimError};

#[test]
fn store_to_unmapped_address_is_a_page_fault_naming_address_kind_kernel_and_pc() {
    // Instructions 0..2 are 4 bytes each, so the store sits at code offset 12.
    let body = "
        s_mov_b32 s4, 0
        s_mov_b32 s5, 9
        v_mov_b32 v1, 0
        global_store_b32 v1, v1, s[4:5]
        s_endpgm
    ";
    let err = run_asm(body, vec![0; 64], 32, 1, 0).expect_err("the store must fault");
    assert_eq!(
        err,
        SimError::PageFault {
            addr: 0x9_0000_0000,
            access: Access::Write,
            kernel: "asm_test".into(),
            pc: ASM_CODE + 12
        }
    );
    let msg = err.to_string();
    assert_eq!(msg, "GPU page fault at 0x900000000 (write) in kernel asm_test at PC 0x10000000c");
}

#[test]
fn write_to_read_only_mapping_and_read_of_unmapped_memory_fault() {
    let code = assemble("v_mov_b32 v1, 0\nglobal_store_b32 v1, v1, s[0:1]\ns_endpgm\n");
    let mut mem = TestMemory::default();
    mem.map(ASM_CODE, code, false, true);
    mem.map(ASM_DATA, vec![0; 64], false, false);
    let d = asm_dispatch(ASM_CODE, ASM_DATA, 1, 1, 0);
    let err = run_dispatch(&d, &mut mem).unwrap_err();
    assert!(
        matches!(err, SimError::PageFault { addr: ASM_DATA, access: Access::Write, pc, .. } if pc == ASM_CODE + 4),
        "{err}"
    );

    let err = run_asm("s_load_b32 s4, s[0:1], 0x100\ns_endpgm\n", vec![0; 64], 1, 1, 0).unwrap_err();
    assert!(
        matches!(err, SimError::PageFault { addr, access: Access::Read, pc: ASM_CODE, .. } if addr == ASM_DATA + 0x100),
        "{err}"
    );
}

#[test]
fn jump_into_non_executable_memory_is_a_fetch_fault() {
    let err = run_asm("s_setpc_b64 s[0:1]\n", vec![0; 64], 1, 1, 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("GPU page fault at {ASM_DATA:#x} (fetch) in kernel asm_test at PC {ASM_DATA:#x}")
    );
}

#[test]
fn unknown_instruction_names_opcode_encoding_and_pc() {
    // ds_bvh_stack_rtn_b32 (DS opcode 173, ray tracing) decodes but is not implemented.
    let err = run_asm(
        "v_mov_b32 v1, 0\nds_bvh_stack_rtn_b32 v1, v2, v3, v[4:7]\ns_endpgm\n",
        vec![0; 64],
        32,
        1,
        512,
    )
    .unwrap_err();
    match &err {
        SimError::UnknownInstruction { encoding, opcode, pc, .. } => {
            assert_eq!((*encoding, *opcode, *pc), ("DS", 173, ASM_CODE + 4));
        }
        other => panic!("expected an unknown instruction, got {other}"),
    }
    assert!(err.to_string().contains("DS opcode 173"), "{err}");
    // An image instruction is refused the same way, naming its encoding.
    let err =
        run_asm("image_load v0, v0, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D\ns_endpgm\n", vec![0; 64], 32, 1, 0)
            .unwrap_err();
    assert!(matches!(err, SimError::UnknownInstruction { encoding: "MIMG", pc: ASM_CODE, .. }), "{err}");
}

#[test]
fn unknown_instruction_is_reported_even_with_exec_zero() {
    let err = run_asm(
        "s_mov_b32 exec_lo, 0\nds_bvh_stack_rtn_b32 v1, v2, v3, v[4:7]\ns_endpgm\n",
        vec![0; 64],
        32,
        1,
        512,
    )
    .unwrap_err();
    assert!(matches!(err, SimError::UnknownInstruction { opcode: 173, .. }), "{err}");
}

#[test]
fn lds_access_out_of_range_is_an_error() {
    let err =
        run_asm("v_mov_b32 v1, 0x200\nds_store_b32 v1, v1\ns_endpgm\n", vec![0; 64], 1, 1, 512).unwrap_err();
    assert!(matches!(err, SimError::LdsOutOfRange { addr: 0x200, size: 4, lds_bytes: 512, .. }), "{err}");
}

#[test]
fn infinite_loop_hits_the_instruction_budget() {
    let code = assemble("s_mov_b32 s4, 0\nhang:\ns_add_u32 s4, s4, 1\ns_branch hang\n");
    let mut mem = TestMemory::default();
    mem.map(ASM_CODE, code, false, true);
    let mut d = asm_dispatch(ASM_CODE, ASM_DATA, 64, 1, 0);
    d.instruction_budget = 100_000;
    let err = run_dispatch(&d, &mut mem).unwrap_err();
    match &err {
        SimError::Timeout { budget, pc, .. } => {
            assert_eq!(*budget, 100_000);
            assert!(*pc == ASM_CODE + 4 || *pc == ASM_CODE + 8, "pc {pc:#x} inside the loop");
        }
        other => panic!("expected a timeout, got {other}"),
    }
    assert!(err.to_string().contains("did not finish within its budget of 100000"), "{err}");
}

#[test]
fn refused_dispatch_settings_name_the_setting() {
    let base = asm_dispatch(ASM_CODE, ASM_DATA, 64, 1, 0);
    let mut mem = TestMemory::default();
    type Change = Box<dyn Fn(&mut Dispatch)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|d| d.rsrc2 |= 1), "SCRATCH_EN"),
        (Box::new(|d| d.rsrc1 &= !(0xf << 16)), "FLOAT_DENORM_MODE"),
        (Box::new(|d| d.rsrc1 |= 1 << 12), "FLOAT_ROUND_MODE"),
        (Box::new(|d| d.user_data.clear()), "user SGPRs"),
        (Box::new(|d| d.rsrc2 |= 1 << 10), "TG_SIZE_EN"),
        (Box::new(|d| d.workgroup_size = [2048, 1, 1]), "workgroup size"),
    ];
    for (change, words) in cases {
        let mut d = base.clone();
        change(&mut d);
        let err = run_dispatch(&d, &mut mem).unwrap_err();
        assert!(matches!(err, SimError::InvalidDispatch { .. }), "{err}");
        assert!(err.to_string().contains(words), "{err} should mention {words}");
    }
}
