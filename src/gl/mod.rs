//! The gl backend: OpenGL 4.3+ compute shaders on a headless EGL context, with linked programs
//! kept across runs as program binaries in the shared cache. It implements the [`hal`] seam and
//! nothing above it.
//!
//! All GL calls run on one GL thread per EGL device per process, shared by every runtime opened
//! on it (`thread.rs` says why); [`GlDevice`] is `Send + Sync` and forwards work to it. Code
//! that makes its own GL calls where the backend would (the benchmark lab's plain-GL loops) opens
//! a [`PlainContext`] through the same discovery and context creation.
//!
//! Files by role. The roles and their file names are the same in `amdgpu/`, so a reader who
//! knows one backend finds their way in the other:
//!
//! | role | file | here |
//! |---|---|---|
//! | device | `device.rs` | [`GlDevice`] on the runtime seam ([`hal::Device`]), [`Gl`] |
//! | device info | `device_info.rs` | what the context reports: identity, version, extensions, binary formats, limits, the cache's `GpuId` |
//! | discovery | `discovery.rs` | which EGL display: devices hardware first, `SPARKLE_EGL_DEVICE`, the default display |
//! | memory | `memory.rs` | buffers, mapped Staging buffers, uploads and read-backs (and `transfer.rs`: the staging rings) |
//! | program | `program.rs` | compile, link, program binaries, load (with `glsl.rs` and `interface.rs`) |
//! | submit | `submit.rs` | recorded commands run as GL calls, each submission ended by a fence (and `fences.rs`: waiting for them) |
//! | error | `error.rs` | [`GlError`] → [`ErrorKind`](crate::ErrorKind); GL error codes |
//!
//! Backend-specific files: `context.rs` (the EGL context, shared with [`PlainContext`]),
//! `plain.rs` ([`PlainContext`]), `thread.rs` (the GL thread), `polling.rs` (how long its threads
//! poll), `host_copies.rs`, `copy_helpers.rs` and `stream_copy.rs` (host copies through
//! mappings), `texels.rs` (buffer textures), `clock_hold.rs` (NVIDIA clocks), `driver_cache.rs`
//! (the driver's own shader cache), `live.rs` (GL name counts).
//!
//! [`hal`]: crate::hal
//! [`hal::Device`]: crate::hal::Device

mod clock_hold;
mod context;
mod copy_helpers;
mod device;
mod device_info;
mod discovery;
mod driver_cache;
mod error;
mod fences;
mod glsl;
mod gpu_trace;
mod host_copies;
mod interface;
mod live;
mod memory;
mod plain;
mod polling;
mod program;
mod stream_copy;
mod submit;
mod texels;
mod thread;
mod transfer;

pub use clock_hold::HOLD_CLOCKS_ENV;
pub use device::{Gl, GlDevice};
pub use discovery::DEVICE_ENV;
pub use error::{check_gl_error, gl_error_name, take_gl_error, GlError};
pub use glsl::driver_glsl;
pub use live::{live_objects, LiveObjects};
pub use memory::GlBuffer;
pub use plain::{pinned_device_index, PlainContext};
pub use program::GlProgram;
pub use thread::FENCES_ENV;
