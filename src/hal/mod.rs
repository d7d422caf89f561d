//! The seam every backend implements: device work only. A backend names its object types
//! ([`Api`]) and does what needs its driver ([`Device`]): say what its compiler will see for a
//! kernel, compile and load programs, report a program's interface, make and access buffers,
//! and run recorded commands asynchronously behind a fence. Everything backend-neutral —
//! validation, the program cache and its statistics, warm-up, keeping objects alive while the GPU
//! uses them, selection from `SPARKLE_BACKEND` — lives in [`crate::runtime`] above it.
//!
//! | seam operation | gl | amdgpu |
//! |---|---|---|
//! | [`Device::prepare`] | assemble GLSL (`#version`, defines, workgroup size) | clang flags + target + source |
//! | [`Device::compile`] | `glCompileShader`/`glLinkProgram`/`glGetProgramBinary` | clang + lld → code object |
//! | [`Device::load`] | `glProgramBinary` + `GL_LINK_STATUS` | ELF/descriptor checks, upload code to an executable BO |
//! | [`Device::interface`] | `glGetProgramResource*` + `readonly` blocks | msgpack metadata arguments |
//! | [`Device::create_buffer`] | `glBufferData` | GEM_CREATE + GEM_VA + mmap |
//! | [`Device::write_buffer`] / [`Device::read_buffer`] | `glBufferSubData` / `glGetBufferSubData` | memcpy through the CPU mapping |
//! | [`Device::submit`] | `glDispatchCompute`, `glCopyBufferSubData`, `glMemoryBarrier`, `glFenceSync` on the GL thread | PM4 IB + BO list → CS ioctl |
//! | [`Device::completed`] / [`Device::wait`] | `glClientWaitSync` on the GL thread | WAIT_CS on the sequence number |
//! | [`Device::submit_timed`] / [`Device::take_gpu_time`] (optional) | `GL_TIME_ELAPSED` query around the commands, read after the fence | not yet (default: unsupported) |
//!
//! This folder holds only what every backend and the runtime share: the traits and neutral
//! types (this file), the host memory a read fills ([`ReadTarget`], `read_target.rs`), the
//! fence contract as a ready-made type for backends with a worker thread ([`Timeline`],
//! `timeline.rs`), and the poll-before-sleeping loop with its `SPARKLE_SPIN_US` window
//! ([`spin`]). A backend's own machinery lives in its folder (`gl/`, `amdgpu/`).

mod read_target;
pub mod spin;
mod timeline;

use std::time::Duration;

use serde::Serialize;

pub use read_target::ReadTarget;
pub use timeline::Timeline;

use crate::cache::{Blob, GpuId, LoadFailure};
use crate::kernel::{KernelSpec, ScalarType, SourceLanguage, TexelComponent, TexelFormat};
use crate::Result;

/// A backend's types. Objects of one backend never reach another: the runtime checks which
/// device made an object before handing it down.
pub trait Api: Sized + Send + Sync + 'static {
    /// The backend's name in `SPARKLE_BACKEND`, cache folders and messages.
    const NAME: &'static str;
    /// The device: a driver connection, everything below the seam.
    type Device: Device<Self>;
    /// A buffer in device memory.
    type Buffer: Send + Sync + 'static;
    /// A compiled program, loaded on the device.
    type Program: Send + Sync + 'static;
    /// What [`Device::prepare`] hands to [`Device::compile`] and [`Device::load`].
    type CompileInput: Send + Sync + 'static;
}

/// Limits a kernel and a dispatch are checked against before they reach the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Largest workgroup size in x, y and z.
    pub max_workgroup_size: [u32; 3],
    /// Most invocations in one workgroup (x·y·z).
    pub max_workgroup_invocations: u32,
    /// Most workgroups one dispatch may launch in x, y and z.
    pub max_workgroup_count: [u32; 3],
    /// Shared (workgroup-local) memory per workgroup, in bytes.
    pub max_shared_memory_bytes: u32,
    /// Largest buffer a kernel may bind, in bytes.
    pub max_storage_buffer_bytes: u64,
    /// Most storage buffers one kernel may bind.
    pub max_storage_buffer_bindings: u32,
    /// A bound range's offset must be a multiple of this.
    pub storage_buffer_offset_alignment: u64,
    /// Most texels a buffer read as texels ([`Access::Texels`](crate::Access::Texels)) may
    /// bind; 0 where the backend has no texel buffers.
    pub max_texel_buffer_texels: u64,
    /// A range read as texels must start at a multiple of this many bytes.
    pub texel_buffer_offset_alignment: u64,
}

/// What a backend reports about the device it drives.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// The backend's name (`gl`, `amdgpu`, `amdgpu-sim`).
    pub backend: &'static str,
    /// The device's name as its driver gives it (`GL_RENDERER`, the marketing name).
    pub name: String,
    /// Backend-specific details worth showing (driver, API version, …), in display order.
    pub details: Vec<(String, String)>,
    /// What the program cache keys this device's programs by: changes whenever a compiled
    /// program could stop being valid (driver, compiler, GPU).
    pub gpu_id: GpuId,
    /// What kernels and dispatches are checked against.
    pub limits: Limits,
    /// Whether compiled programs can be serialized and kept across processes.
    pub persists_programs: bool,
    /// Whether the driver compiles on its own threads, so many compiles can be started at once.
    pub parallel_compile: bool,
    /// The kernel source languages this backend takes, in the order it prefers them.
    pub languages: Vec<SourceLanguage>,
    /// What runs the kernels: benchmarks size their problems and kernels pick variants by it.
    pub class: DeviceClass,
}

/// What runs a device's kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceClass {
    /// A GPU.
    Gpu,
    /// A renderer on the CPU (Mesa's llvmpipe).
    Cpu,
    /// A simulated GPU interpreting the ISA on the CPU.
    Simulator,
}

/// How a buffer will be used; backends may pick memory placement from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferUsage {
    /// Written by the host once or rarely, read by kernels.
    Input,
    /// Written by kernels, read back by the host.
    Output,
    /// Read and written by both.
    InOut,
    /// Written or read by the host every time it is used: a staging area for streams of
    /// batches. A backend that can keep such a buffer mapped in host-visible memory does, so
    /// that host writes and reads are plain memory copies on the calling thread (gl: a
    /// persistent, coherent mapping from GL 4.4's `glBufferStorage`); the others treat it as
    /// `InOut`. Kernels may read it more slowly (the driver may place it in host memory): copy
    /// it into an `Input` buffer on the device when a kernel reads it many times.
    Staging,
}

/// The compiler input of one kernel: the bytes that decide the compiled program (the key is a
/// hash of them and the device's `GpuId`) and the backend's own form of it.
pub struct Prepared<C> {
    /// Everything the compiler sees — exact source text, flags, compiler identity, target — so
    /// that two kernels share a cache entry exactly when their compiles would be identical.
    pub key_material: Vec<Vec<u8>>,
    /// The backend's compiler input, for [`Device::compile`] and [`Device::load`].
    pub input: C,
    /// Whether the key material comes from the spec alone (no file read, nothing of the machine
    /// beyond the device itself): the runtime then remembers the spec's key and finds its
    /// program in memory again without preparing it. False where a prepare reads files (OpenCL
    /// headers found through `-I`): an edited header must give another key.
    pub from_spec_alone: bool,
}

/// What a compile produced.
pub struct Compiled<P> {
    /// The program, loaded on the device.
    pub program: P,
    /// The blob to persist, if this device can serialize programs.
    pub blob: Option<Blob>,
}

/// A storage buffer the program declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSlot {
    /// The binding point (gl) or argument index (amdgpu) the runtime binds it at.
    pub binding: u32,
    /// Names a spec may use for it: block name, instance name, member or argument name.
    pub names: Vec<String>,
    /// The smallest buffer the program may be given (its fixed-size part).
    pub min_bytes: u64,
    /// Whether the program is guaranteed not to write it (`None`: the backend cannot tell).
    pub read_only: Option<bool>,
    /// `Some` where the program reads it as texels (a texel buffer of this component type)
    /// rather than as a storage buffer.
    pub texels: Option<TexelComponent>,
}

/// A scalar the program declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalarSlot {
    /// The scalar's name in the program.
    pub name: String,
    /// `None`: a type no spec can pass (a vector, a matrix, …); named in errors.
    pub ty: Option<ScalarType>,
    /// The program's own name for the type, for messages.
    pub type_name: String,
}

/// What a compiled program declares, read from the program itself (not from the spec).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramInterface {
    /// The storage buffers, in the backend's order (the runtime matches them to a spec by name).
    pub storage: Vec<StorageSlot>,
    /// The scalars, in the backend's order.
    pub scalars: Vec<ScalarSlot>,
}

/// A storage buffer bound for one dispatch.
pub struct BoundBuffer<'a, A: Api> {
    /// Index into [`ProgramInterface::storage`].
    pub slot: usize,
    /// The buffer bound there.
    pub buffer: &'a A::Buffer,
    /// Where the bound range starts in the buffer, in bytes (aligned to
    /// [`Limits::storage_buffer_offset_alignment`]).
    pub offset: u64,
    /// The bound range's length in bytes, inside the buffer.
    pub size: u64,
    /// `Some` where the program reads the range as texels of this format.
    pub texels: Option<TexelFormat>,
}

/// A scalar value for one dispatch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalarValue {
    /// A `u32` scalar.
    U32(u32),
    /// An `i32` scalar.
    I32(i32),
    /// An `f32` scalar.
    F32(f32),
}

/// One recorded command.
pub enum Command<'a, A: Api> {
    /// Runs `program` over a grid of `groups` workgroups; checked against the program's
    /// interface and the device's limits before it gets here.
    Dispatch {
        /// The program to run.
        program: &'a A::Program,
        /// Every storage buffer the program declares, bound.
        buffers: Vec<BoundBuffer<'a, A>>,
        /// (index into [`ProgramInterface::scalars`], value).
        scalars: Vec<(usize, ScalarValue)>,
        /// Workgroups in x, y and z.
        groups: [u32; 3],
        /// For messages (timeouts, faults).
        kernel: &'a str,
    },
    /// Copies `size` bytes from `src` at `src_offset` to `dst` at `dst_offset` (ranges inside
    /// the buffers; not overlapping when both are one buffer).
    Copy {
        /// The buffer copied from.
        src: &'a A::Buffer,
        /// Where the copy starts in `src`, in bytes.
        src_offset: u64,
        /// The buffer copied to.
        dst: &'a A::Buffer,
        /// Where the copy lands in `dst`, in bytes.
        dst_offset: u64,
        /// Bytes copied.
        size: u64,
    },
    /// Everything written before is visible to everything after.
    Barrier,
}

/// The device work of one backend. Every method may be called from any thread, and none may
/// wait for the GPU except [`wait`](Self::wait) (and [`read_buffer`](Self::read_buffer), which
/// the runtime calls only once the buffer's writers completed).
pub trait Device<A: Api>: Send + Sync + 'static {
    /// What the device is and what it takes.
    fn info(&self) -> &DeviceInfo;

    /// Identifies this device instance: objects made by one device are refused by another
    /// whose token differs. Two runtimes sharing one device instance share objects.
    fn token(&self) -> u64;

    /// The compiler input for `kernel`; fails if the kernel has no source this backend takes.
    fn prepare(&self, kernel: &KernelSpec) -> Result<Prepared<A::CompileInput>>;

    /// Compiles (and links) a program from what [`prepare`](Self::prepare) returned, with its
    /// blob to persist where the device can serialize programs; the compiler's log is in the
    /// error when it fails.
    fn compile(&self, input: &A::CompileInput) -> Result<Compiled<A::Program>>;

    /// Compiles like [`compile`](Self::compile), asking `give_up` between steps whether the
    /// program is still wanted; `Ok(None)` when it was not and the work was dropped (the
    /// cache races a compile against a slow remote lookup). A backend whose compile cannot
    /// stop early keeps the default, which compiles to the end.
    fn compile_racing(
        &self,
        input: &A::CompileInput,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Compiled<A::Program>>> {
        let _ = give_up;
        self.compile(input).map(Some)
    }

    /// Loads a verified blob. [`LoadFailure::Refused`] when the driver does not take the blob.
    fn load(&self, input: &A::CompileInput, blob: &Blob) -> Result<A::Program, LoadFailure<crate::Error>>;

    /// What the compiled program declares.
    fn interface<'p>(&self, program: &'p A::Program) -> &'p ProgramInterface;

    /// A buffer of `size` bytes (at least 1, at most the device's limit; contents undefined).
    fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<A::Buffer>;
    /// Host writes; ranges were checked and no unfinished submission uses the buffer.
    fn write_buffer(&self, buffer: &A::Buffer, offset: u64, data: &[u8]) -> Result<()>;
    /// Host reads; ranges were checked and every submission writing the buffer completed. On
    /// success every byte of `out` was written and `out` says so ([`ReadTarget::is_filled`]);
    /// the runtime refuses the read otherwise.
    fn read_buffer(&self, buffer: &A::Buffer, offset: u64, out: &mut ReadTarget<'_>) -> Result<()>;

    /// A host read of a buffer whose last writer, submission `fence`, may still be running:
    /// where the backend can let the fence settle and read in one step on its worker (the
    /// polling window of [`spin`] at most), it does so and returns `Ok(true)`; `Ok(false)`
    /// means nothing was read (the work runs longer, or the backend has no such path) and the
    /// runtime waits and calls [`read_buffer`](Self::read_buffer). The runtime checks the
    /// outcome of `fence` either way: a failed write is never returned as data.
    fn read_buffer_once_settled(
        &self,
        _buffer: &A::Buffer,
        _fence: u64,
        _offset: u64,
        _out: &mut ReadTarget<'_>,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Queues the commands as one submission and returns its fence value at once; values grow
    /// by one per submission. The objects stay alive until the fence completes (the runtime
    /// holds them). A failure while running it is reported by [`wait`](Self::wait).
    fn submit(&self, commands: &[Command<'_, A>]) -> Result<u64>;

    /// The highest fence value whose submission (and every earlier one) has completed.
    fn completed(&self) -> u64;

    /// Waits until `fence` completed (`Ok(true)`), or `timeout` passed (`Ok(false)`). A
    /// submission that failed on the device returns its error.
    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool>;

    /// Whether [`submit_timed`](Self::submit_timed) measures the GPU time of a submission. An
    /// optional capability: the defaults below say "unsupported".
    fn measures_gpu_time(&self) -> bool {
        false
    }

    /// [`submit`](Self::submit), also measuring the time the device spends on the commands
    /// (from the first starting to the last finishing), to be read with
    /// [`take_gpu_time`](Self::take_gpu_time) once the fence completed.
    fn submit_timed(&self, commands: &[Command<'_, A>]) -> Result<u64> {
        self.submit(commands)
    }

    /// The GPU time of the timed submission `fence`, once it completed; `None` if it was not
    /// timed, is not complete, the device cannot measure, or it was taken already.
    fn take_gpu_time(&self, fence: u64) -> Option<Duration> {
        let _ = fence;
        None
    }
}
