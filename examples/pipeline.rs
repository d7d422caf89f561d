//! A `Pipeline` over a stream of batches: while batch i computes, batch i+1 is uploaded and
//! batch i−1 read back, with at most `depth` buffer sets in flight. You describe one batch with
//! a `Stage`; the pipeline runs the stream and gives the results back in order.
//!
//! ```sh
//! cargo run --example pipeline
//! ```
//!
//! The kernel is GLSL (the `gl` backend: any GL 4.3 driver, or Mesa's llvmpipe, where the
//! overlap gains little since the CPU does everything).

use std::process::ExitCode;

use sparkle::cache::CacheConfig;
use sparkle::{
    Access, Arg, Buffer, BufferUsage, Commands, KernelSpec, Pipeline, Program, Result, Runtime, ScalarType,
    Stage,
};

/// The longest batch; each buffer set is made this large once and reused.
const MAX_BATCH: usize = 4096;
const BATCHES: usize = 40;

/// One batch's work: y = 2·x + 1.
struct TwiceAndOne {
    program: Program,
}

/// The buffers of one batch in flight, and the length of the batch they hold.
struct Set {
    data: Buffer,
    len: usize,
}

impl Stage for TwiceAndOne {
    type Input = Vec<f32>;
    type Output = Vec<f32>;
    type Set = Set;

    fn create_set(&self, runtime: &Runtime) -> Result<Set> {
        Ok(Set { data: runtime.create_buffer(MAX_BATCH as u64 * 4, BufferUsage::InOut)?, len: 0 })
    }

    fn upload(&self, runtime: &Runtime, set: &mut Set, input: Vec<f32>) -> Result<()> {
        set.len = input.len();
        runtime.write_buffer(&set.data, 0, bytemuck::cast_slice(&input))
    }

    fn record(&self, _: &Runtime, set: &Set, commands: &mut Commands) -> Result<()> {
        let n = set.len as u32;
        commands.dispatch(&self.program, &[Arg::Buffer(&set.data), Arg::U32(n)], [n.div_ceil(64), 1, 1])?;
        Ok(())
    }

    fn download(&self, runtime: &Runtime, set: &mut Set) -> Result<Vec<f32>> {
        let mut out = vec![0f32; set.len];
        runtime.read_buffer(&set.data, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}

/// Batch `index`: a length that changes from batch to batch, and values no other batch has
/// (integers below 2^24, so the results are exact).
fn batch(index: usize) -> Vec<f32> {
    let len = 1 + (index * 997) % MAX_BATCH;
    (0..len).map(|j| (index * MAX_BATCH + j) as f32).collect()
}

/// Whether `output` is batch `index` through the stage; says where it is not.
fn check(index: usize, output: &[f32]) -> bool {
    let want: Vec<f32> = batch(index).iter().map(|x| 2.0 * x + 1.0).collect();
    if output == want {
        return true;
    }
    let at = (0..want.len()).find(|&i| output.get(i) != Some(&want[i])).unwrap_or(want.len());
    eprintln!(
        "MISMATCH in batch {index} ({} values, {} expected) at {at}: got {:?}, want {:?}",
        output.len(),
        want.len(),
        output.get(at),
        want.get(at)
    );
    false
}

fn main() -> ExitCode {
    // Errors are printed with their message (a compile error carries the compiler's log).
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode> {
    let runtime = Runtime::open_backend("gl", &CacheConfig::from_env()?)?;
    println!("running on {} ({} backend)", runtime.info().name, runtime.backend());
    let kernel = KernelSpec::new("twice_and_one", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; };
             uniform uint n;
             void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] = 2.0 * v[i] + 1.0; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let stage = TwiceAndOne { program: runtime.program(&kernel)? };
    let pipeline = Pipeline::new(&runtime, stage).with_depth(3)?;

    // 1. `run`: feed an iterator, take each result in a callback, in order.
    let mut wrong = 0;
    let count = pipeline.run((0..BATCHES).map(batch), |index, output| {
        if !check(index as usize, &output) {
            wrong += 1;
        }
        Ok(())
    })?;
    println!("run: {count} batches back in order");

    // 2. `start`: push from one thread, take results on another (here: this one). `push`
    // blocks while `depth` batches are in flight, so memory stays bounded however fast the
    // producer is. The pipeline reuses the buffer sets of the first stream.
    let (mut feeder, results) = pipeline.start()?;
    let producer = std::thread::spawn(move || {
        for index in 0..BATCHES {
            if feeder.push(batch(index)).is_err() {
                break; // the stream stopped; its error comes through `results`
            }
        }
        // Dropping the feeder ends the stream once its batches are read back.
    });
    let mut streamed = 0;
    for (index, output) in results.enumerate() {
        // A failure names its batch (`BatchError`) and is the last item.
        if !check(index, &output?) {
            wrong += 1;
        }
        streamed += 1;
    }
    if producer.join().is_err() {
        eprintln!("the producer thread panicked");
        return Ok(ExitCode::FAILURE);
    }
    println!("start: {streamed} batches streamed back in order");

    if wrong > 0 || count != BATCHES as u64 || streamed != BATCHES {
        eprintln!("{wrong} wrong batches; {count} and {streamed} of {BATCHES} came back");
        return Ok(ExitCode::FAILURE);
    }
    println!("pipeline: all {} batches correct", 2 * BATCHES);
    Ok(ExitCode::SUCCESS)
}
