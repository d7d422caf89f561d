//! The fake backend of the runtime's and the executor's tests: the smallest backend there is,
//! written against the public `hal` seam as any backend is, and the first place to learn the
//! seam. Its "GPU" ([`Gpu`]) is shared by the device, its buffers and the test. A submission
//! completes only when the test says so: [`Gpu::complete`] runs the submission's dispatches and
//! signals its fence (a simulated GPU thread of a test calls it too), while signalling the
//! [`Gpu::timeline`] directly completes the work without running it. A dispatch runs as
//! `dst[i] = src[i] + add` over `n` u32s (its first two buffers; `add` is 0 where the kernel
//! declares none, so the runtime tests' `copy` kernel copies); copies are recorded, not
//! performed. Every device call is logged in order, buffers alive and reads are counted, and a
//! test can make the device fail a submission, refuse the n-th `submit`, settle a writer from a
//! read, or return from reads without writing anything.
//!
//! The fake's "source" language declares the program's interface, one declaration per line:
//! `buffer NAME ro|rw` (bindings in order), `scalar NAME u32|i32|f32`, or `error` (the fake
//! compiler fails).

#![allow(dead_code)]

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sparkle::cache::{Blob, CacheConfig, GpuId, LoadFailure};
use sparkle::hal::{
    self, Api, BufferUsage, Command, Compiled, DeviceClass, DeviceInfo, Limits, Prepared, ProgramInterface,
    ReadTarget, ScalarSlot, ScalarValue, StorageSlot, Timeline,
};
use sparkle::{Error, ErrorKind, KernelSource, KernelSpec, Result, Runtime, ScalarType, SourceLanguage};

pub struct Fake;

impl Api for Fake {
    const NAME: &'static str = "fake";
    type Device = FakeDevice;
    type Buffer = FakeBuffer;
    type Program = FakeProgram;
    type CompileInput = String;
}

type Bytes = Arc<Mutex<Vec<u8>>>;

/// What a dispatch does once the "GPU" runs it: `dst[i] = src[i] + add` over `n` u32s.
struct AddOp {
    src: Bytes,
    dst: Bytes,
    n: usize,
    add: u32,
}

/// The fake GPU: state shared by the fake device, its buffers and the test.
#[derive(Default)]
pub struct Gpu {
    pub timeline: Timeline,
    /// Every device call, in order (`submit` with the kinds of its commands).
    pub calls: Mutex<Vec<String>>,
    /// Submitted work not run yet, by fence.
    queued: Mutex<VecDeque<(u64, Vec<AddOp>)>>,
    /// Fences whose submission fails on the device.
    pub failing: Mutex<HashSet<u64>>,
    /// The n-th `submit` call (from 1) that the driver refuses; 0: none.
    pub refuse_submit: AtomicU64,
    pub submits: AtomicU64,
    pub live_buffers: AtomicUsize,
    pub peak_buffers: AtomicUsize,
    pub reads: AtomicUsize,
    /// Sources prepared for the program cache (a key derived).
    pub prepares: AtomicUsize,
    /// Reads of a buffer that unfinished work still writes: must stay 0.
    pub premature_reads: AtomicUsize,
    /// How a read that may settle its writer first behaves: `None`, the fake declines; else the
    /// writer settles with this outcome and the read happens in the same call.
    pub read_settles: Mutex<Option<Result<()>>>,
    /// A defective backend: reads return `Ok` without writing anything.
    pub skips_reads: AtomicBool,
}

impl Gpu {
    /// Runs (or fails) every submission up to `fence`, then signals it.
    pub fn complete(&self, fence: u64) {
        let mut queued = self.queued.lock().unwrap();
        while queued.front().is_some_and(|(f, _)| *f <= fence) {
            let (f, ops) = queued.pop_front().unwrap();
            if self.failing.lock().unwrap().contains(&f) {
                self.timeline.fail(f, Error::new(ErrorKind::DeviceLost, "the fake GPU faulted"));
            } else {
                for op in ops {
                    let src = op.src.lock().unwrap().clone();
                    let mut dst = op.dst.lock().unwrap();
                    for i in 0..op.n {
                        let value = u32::from_le_bytes(src[4 * i..4 * i + 4].try_into().unwrap());
                        dst[4 * i..4 * i + 4].copy_from_slice(&value.wrapping_add(op.add).to_le_bytes());
                    }
                }
            }
            self.timeline.signal(f);
        }
    }

    /// Runs every submission made so far.
    pub fn complete_all(&self) {
        self.complete(self.timeline.issued());
    }

    /// The last `n` device calls.
    pub fn last_calls(&self, n: usize) -> Vec<String> {
        let calls = self.calls.lock().unwrap();
        calls[calls.len() - n..].to_vec()
    }

    fn log(&self, call: impl Into<String>) {
        self.calls.lock().unwrap().push(call.into());
    }
}

pub struct FakeDevice {
    info: DeviceInfo,
    token: u64,
    gpu: Arc<Gpu>,
}

pub struct FakeBuffer {
    bytes: Bytes,
    gpu: Arc<Gpu>,
}

impl Drop for FakeBuffer {
    fn drop(&mut self) {
        self.gpu.live_buffers.fetch_sub(1, Ordering::SeqCst);
    }
}

pub struct FakeProgram {
    interface: ProgramInterface,
}

impl hal::Device<Fake> for FakeDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn token(&self) -> u64 {
        self.token
    }

    fn prepare(&self, kernel: &KernelSpec) -> Result<Prepared<String>> {
        self.gpu.prepares.fetch_add(1, Ordering::Relaxed);
        let KernelSource::Glsl(source) = kernel.source(SourceLanguage::Glsl, Fake::NAME)? else {
            unreachable!("asked for GLSL")
        };
        Ok(Prepared {
            key_material: vec![source.as_bytes().to_vec()],
            input: source.clone(),
            from_spec_alone: true,
        })
    }

    fn compile(&self, input: &String) -> Result<Compiled<FakeProgram>> {
        self.gpu.log("compile");
        Ok(Compiled { program: FakeProgram { interface: parse_interface(input)? }, blob: None })
    }

    fn load(&self, _: &String, _: &Blob) -> Result<FakeProgram, LoadFailure<Error>> {
        Err(LoadFailure::Refused("the fake keeps nothing".into()))
    }

    fn interface<'p>(&self, program: &'p FakeProgram) -> &'p ProgramInterface {
        &program.interface
    }

    fn create_buffer(&self, size: u64, _: BufferUsage) -> Result<FakeBuffer> {
        self.gpu.log("create_buffer");
        let live = self.gpu.live_buffers.fetch_add(1, Ordering::SeqCst) + 1;
        self.gpu.peak_buffers.fetch_max(live, Ordering::SeqCst);
        Ok(FakeBuffer { bytes: Arc::new(Mutex::new(vec![0; size as usize])), gpu: self.gpu.clone() })
    }

    fn write_buffer(&self, buffer: &FakeBuffer, offset: u64, data: &[u8]) -> Result<()> {
        self.gpu.log("write_buffer");
        buffer.bytes.lock().unwrap()[offset as usize..][..data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read_buffer(&self, buffer: &FakeBuffer, offset: u64, out: &mut ReadTarget<'_>) -> Result<()> {
        self.gpu.log("read_buffer");
        self.gpu.reads.fetch_add(1, Ordering::SeqCst);
        if self.gpu.skips_reads.load(Ordering::SeqCst) {
            return Ok(());
        }
        let queued = self.gpu.queued.lock().unwrap();
        let completed = self.gpu.timeline.completed();
        if queued
            .iter()
            .filter(|(fence, _)| *fence > completed)
            .flat_map(|(_, ops)| ops)
            .any(|op| Arc::ptr_eq(&op.dst, &buffer.bytes))
        {
            self.gpu.premature_reads.fetch_add(1, Ordering::SeqCst);
        }
        let len = out.len();
        out.bytes_mut().copy_from_slice(&buffer.bytes.lock().unwrap()[offset as usize..][..len]);
        Ok(())
    }

    fn read_buffer_once_settled(
        &self,
        buffer: &FakeBuffer,
        fence: u64,
        offset: u64,
        out: &mut ReadTarget<'_>,
    ) -> Result<bool> {
        self.gpu.log("read_buffer_once_settled");
        let Some(outcome) = self.gpu.read_settles.lock().unwrap().clone() else { return Ok(false) };
        if let Err(error) = outcome {
            self.gpu.timeline.fail(fence, error);
        }
        self.gpu.timeline.signal(fence);
        let len = out.len();
        out.bytes_mut().copy_from_slice(&buffer.bytes.lock().unwrap()[offset as usize..][..len]);
        Ok(true)
    }

    fn submit(&self, commands: &[Command<'_, Fake>]) -> Result<u64> {
        let kinds: Vec<&str> = commands
            .iter()
            .map(|command| match command {
                Command::Dispatch { .. } => "dispatch",
                Command::Copy { .. } => "copy",
                Command::Barrier => "barrier",
            })
            .collect();
        self.gpu.log(format!("submit {}", kinds.join(" ")));
        let number = self.gpu.submits.fetch_add(1, Ordering::SeqCst) + 1;
        if number == self.gpu.refuse_submit.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::OutOfMemory, "the fake driver refused the submission"));
        }
        let mut ops = Vec::new();
        for command in commands {
            if let Command::Dispatch { program, buffers, scalars, .. } = command {
                let scalar = |name: &str| {
                    scalars.iter().find(|(slot, _)| program.interface.scalars[*slot].name == name).map(
                        |(_, value)| match value {
                            ScalarValue::U32(v) => *v,
                            _ => unreachable!("the fake kernels take u32 scalars"),
                        },
                    )
                };
                if let (Some(n), [src, dst, ..]) = (scalar("n"), &buffers[..]) {
                    ops.push(AddOp {
                        src: src.buffer.bytes.clone(),
                        dst: dst.buffer.bytes.clone(),
                        n: n as usize,
                        add: scalar("add").unwrap_or(0),
                    });
                }
            }
        }
        let mut queued = self.gpu.queued.lock().unwrap();
        let fence = self.gpu.timeline.issue();
        queued.push_back((fence, ops));
        Ok(fence)
    }

    fn completed(&self) -> u64 {
        self.gpu.timeline.completed()
    }

    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool> {
        self.gpu.timeline.wait(fence, timeout)
    }
}

/// A runtime on a new fake device, and its GPU. Devices with the same `token` are one device to
/// the runtime (they share objects); a host read or write waits at most `host_timeout` for the
/// work it depends on.
pub fn runtime(token: u64, host_timeout: Duration) -> (Runtime, Arc<Gpu>) {
    let gpu = Arc::new(Gpu::default());
    let device = FakeDevice { info: device_info(&token.to_string()), token, gpu: gpu.clone() };
    let runtime = Runtime::from_device::<Fake>(device, &CacheConfig::memory_only());
    (runtime.with_host_timeout(host_timeout), gpu)
}

/// A fake device, told apart from others by `identity`.
fn device_info(identity: &str) -> DeviceInfo {
    DeviceInfo {
        backend: Fake::NAME,
        name: "fake device".into(),
        details: Vec::new(),
        gpu_id: GpuId::new(Fake::NAME, vec![("identity".into(), identity.to_owned())]),
        limits: Limits {
            max_workgroup_size: [1024; 3],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_shared_memory_bytes: 32768,
            max_storage_buffer_bytes: 1 << 20,
            max_storage_buffer_bindings: 8,
            storage_buffer_offset_alignment: 16,
            max_texel_buffer_texels: 1 << 27,
            texel_buffer_offset_alignment: 16,
        },
        persists_programs: false,
        parallel_compile: false,
        languages: vec![SourceLanguage::Glsl],
        class: DeviceClass::Simulator,
    }
}

/// The interface a fake "source" declares.
fn parse_interface(source: &str) -> Result<ProgramInterface> {
    let mut interface = ProgramInterface::default();
    for line in source.lines() {
        match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["buffer", name, access] => interface.storage.push(StorageSlot {
                binding: interface.storage.len() as u32,
                names: vec![name.to_owned()],
                min_bytes: 4,
                read_only: Some(access == "ro"),
                texels: None,
            }),
            ["scalar", name, ty] => interface.scalars.push(ScalarSlot {
                name: name.to_owned(),
                ty: Some(match ty {
                    "u32" => ScalarType::U32,
                    "i32" => ScalarType::I32,
                    _ => ScalarType::F32,
                }),
                type_name: ty.to_owned(),
            }),
            ["error"] => return Err(Error::new(ErrorKind::Compile, "fake compiler: syntax error")),
            _ => {}
        }
    }
    Ok(interface)
}
