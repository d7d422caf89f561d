//! The pipelined executor on the simulated amdgpu (`amdgpu-sim`): a batch whose kernel faults
//! (a GPU page fault, reported by the simulated device) is that batch's error, after every
//! earlier batch's result, and the stream ends there.

#![cfg(feature = "amdgpu")]

use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::runtime::{Pipeline, Stage};
use sparkle::{
    Access, Arg, Buffer, BufferUsage, Commands, ErrorKind, KernelSpec, Program, Result, Runtime, ScalarType,
};

/// Each batch stores its own number at `out[id + offset]`: an offset far past the buffer faults.
struct StoreAt {
    program: Program,
}

struct Set {
    out: Buffer,
    offset: u32,
}

const ITEMS: u32 = 64;

impl Stage for StoreAt {
    type Input = u32;
    type Output = Vec<u32>;
    type Set = Set;

    fn create_set(&self, rt: &Runtime) -> Result<Set> {
        Ok(Set { out: rt.create_buffer(u64::from(ITEMS) * 4, BufferUsage::Output)?, offset: 0 })
    }

    fn upload(&self, _: &Runtime, set: &mut Set, offset: u32) -> Result<()> {
        set.offset = offset;
        Ok(())
    }

    fn record(&self, _: &Runtime, set: &Set, commands: &mut Commands) -> Result<()> {
        commands.dispatch(&self.program, &[Arg::Buffer(&set.out), Arg::U32(set.offset)], [1, 1, 1])?;
        Ok(())
    }

    fn download(&self, rt: &Runtime, set: &mut Set) -> Result<Vec<u32>> {
        rt.download(&set.out)
    }
}

#[test]
fn a_faulting_batch_is_its_own_error_after_the_earlier_results() {
    let rt = Runtime::open_backend("amdgpu-sim", &CacheConfig::memory_only()).expect("the simulator opens");
    let spec = KernelSpec::new("store_at", [ITEMS, 1, 1])
        .opencl(
            "store_at",
            "__kernel void store_at(__global uint *out, uint offset) {
                 out[get_local_id(0) + offset] = 7u;
             }",
        )
        .storage("out", Access::ReadWrite)
        .scalar("offset", ScalarType::U32);
    let pipeline = Pipeline::new(&rt, StoreAt { program: rt.program(&spec).unwrap() })
        .with_depth(2)
        .unwrap()
        .with_timeout(Duration::from_secs(60));
    let mut delivered = Vec::new();
    // Batches 0 and 1 are in bounds; batch 2 writes a gigabyte past its buffer.
    let err = pipeline
        .run([0, 0, 1 << 28, 0, 0], |index, out| {
            assert!(out.iter().all(|&v| v == 7), "batch {index}: {out:?}");
            delivered.push(index);
            Ok(())
        })
        .unwrap_err();
    assert_eq!(delivered, [0, 1], "every batch before the faulting one, in order");
    assert_eq!(err.index, 2, "{err}");
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    assert!(err.to_string().contains("GPU page fault") && err.to_string().contains("store_at"), "{err}");
}
