//! The render-node driver on a real AMD GPU: discovery, DEV_INFO/HW_IP_INFO, buffers mapped for
//! the GPU and the CPU, a context, one submission whose WRITE_DATA packet stores a value the CPU
//! then reads, the wait, and the context state. Run on a machine with an RDNA2/RDNA3 card:
//!
//!     cargo test -p sparkle --lib amdgpu::tests::render_node -- --nocapture
//!
//! Without an amdgpu render node it prints why and passes without checking anything.

use std::sync::Arc;
use std::time::Duration;

use crate::amdgpu::device_info::DeviceInfo;
use crate::amdgpu::discovery::{find_node, DrmPaths, SystemProber};
use crate::amdgpu::kmd::{HwIp, IbDesc, KernelDriver, Submission, Timeout, WaitStatus};
use crate::amdgpu::memory::{BufferKind, Memory};
use crate::amdgpu::render_node::RenderNode;

/// PM4 type-3 header: count is the number of payload dwords.
fn pkt3(opcode: u32, count: u32) -> u32 {
    (3 << 30) | ((count - 1) << 16) | (opcode << 8)
}

const NOP: u32 = 0x10;
const WRITE_DATA: u32 = 0x37;

#[test]
fn write_data_round_trip_on_a_real_gpu() {
    let paths = DrmPaths::default();
    let node = match find_node(&paths, &SystemProber { paths: paths.clone() }) {
        Ok(node) => node,
        Err(e) => {
            eprintln!("skipping the render-node test: {e}");
            return;
        }
    };
    let driver = Arc::new(RenderNode::open(&node).unwrap());
    let info = DeviceInfo::query(driver.as_ref()).unwrap();
    eprintln!("{}: {}", driver.describe(), info.summary());
    assert!(info.va_end > info.va_start);
    let compute = driver.hw_ip_info(HwIp::Compute).unwrap();
    assert!(compute.available_rings != 0, "no compute ring");

    let memory = Memory::for_device(driver.clone(), &info);
    let target = memory.allocate(4096, BufferKind::Signals).unwrap();
    let commands = memory.allocate(4096, BufferKind::Commands).unwrap();
    let value = 0x5ca1_ab1eu32;
    let address = target.gpu_address();
    let mut ib = vec![
        pkt3(WRITE_DATA, 4),
        (5 << 8) | (1 << 20), // destination: memory, confirm the write
        address as u32,
        (address >> 32) as u32,
        value,
    ];
    // Pad to the ring's IB size alignment (bytes) with one NOP packet of at least one dword.
    let align = (compute.ib_size_alignment.max(4) / 4) as usize;
    let mut nop_payload = (align - (ib.len() + 1) % align) % align;
    if nop_payload == 0 {
        nop_payload = align;
    }
    ib.push(pkt3(NOP, nop_payload as u32));
    ib.extend(std::iter::repeat_n(0, nop_payload));
    assert_eq!(ib.len() % align, 0);
    let bytes: Vec<u8> = ib.iter().flat_map(|d| d.to_le_bytes()).collect();
    commands.write(0, &bytes).unwrap();

    let ctx = driver.ctx_create().unwrap();
    let seq = driver
        .submit(&Submission {
            ctx,
            ibs: &[IbDesc {
                va: commands.gpu_address(),
                size_bytes: bytes.len() as u32,
                ip: HwIp::Compute,
                ring: 0,
                flags: 0,
            }],
            buffers: &[target.handle(), commands.handle()],
        })
        .unwrap();
    let status = driver.wait(ctx, HwIp::Compute, 0, seq, Timeout::Relative(Duration::from_secs(5))).unwrap();
    assert_eq!(status, WaitStatus::Completed, "{}", driver.ctx_state(ctx).unwrap().describe());
    let mut out = [0u8; 4];
    target.read(0, &mut out).unwrap();
    assert_eq!(u32::from_le_bytes(out), value);
    assert!(driver.ctx_state(ctx).unwrap().is_healthy());
    driver.ctx_destroy(ctx).unwrap();
    drop((target, commands));
    assert!(memory.live_objects().is_zero());
}
