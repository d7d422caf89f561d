//! The real kernel driver: a DRM render node opened read-write, its driver name and version read
//! with the `drm` crate, and the amdgpu ioctls issued with `libc::ioctl` (errors through `nix`).
//! CPU mappings use `memmap2::MmapRaw`: it unmaps on drop and hands out a raw pointer, which fits
//! memory the GPU writes behind our back better than a `&mut [u8]`.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;

use super::error::{AmdgpuError, Result};
use super::kmd::{
    BoHandle, BufferDesc, ContextId, ContextState, CpuMapping, DriverVersion, HwIp, KernelDriver, SeqNo,
    Submission, Timeout, VaFlags, WaitStatus,
};
use super::uapi;

/// How often CS is retried when the kernel is short of memory or busy.
const CS_RETRIES: u32 = 10;
/// Pause between CS retries (doubles each time).
const CS_RETRY_PAUSE: Duration = Duration::from_micros(200);

/// An open render node.
#[derive(Debug)]
pub struct RenderNode {
    file: File,
    path: PathBuf,
    version: DriverVersion,
}

/// The `drm` crate's view of the node.
struct DrmFd<'a>(BorrowedFd<'a>);

impl AsFd for DrmFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0
    }
}

impl drm::Device for DrmFd<'_> {}

/// Reads the driver name and version of an open DRM node.
pub fn driver_version_of(file: &File) -> std::io::Result<DriverVersion> {
    let driver = drm::Device::get_driver(&DrmFd(file.as_fd()))?;
    let (major, minor, patch) = driver.version;
    Ok(DriverVersion { name: driver.name().to_string_lossy().into_owned(), major, minor, patch })
}

/// Opens a DRM node read-write (close-on-exec).
pub fn open_node(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open(path)
}

/// Issues one ioctl, retrying on EINTR/EAGAIN as libdrm's drmIoctl does.
fn ioctl<T>(fd: &File, request: u64, arg: &mut T) -> std::result::Result<(), Errno> {
    loop {
        match ioctl_once(fd, request, arg) {
            Err(Errno::EAGAIN) => continue,
            other => return other,
        }
    }
}

/// Issues one ioctl, retrying only on EINTR (the caller decides about EAGAIN).
fn ioctl_once<T>(fd: &File, request: u64, arg: &mut T) -> std::result::Result<(), Errno> {
    debug_assert_eq!(
        ((request >> 16) & 0x3fff) as usize,
        std::mem::size_of::<T>(),
        "ioctl {request:#x} size"
    );
    loop {
        // SAFETY: `request` encodes `size_of::<T>()` (asserted above; amdgpu-kmd/tests/uapi_layout.rs
        // checks each request number against the kernel headers), `arg` is a valid, exclusive
        // `T` for the whole call, and `T` is a `#[repr(C)]` mirror of the kernel's struct.
        let result = unsafe { libc::ioctl(fd.as_raw_fd(), request as libc::c_ulong, arg as *mut T) };
        match Errno::result(result) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

fn io_error(what: String, errno: Errno) -> AmdgpuError {
    AmdgpuError::io(what, std::io::Error::from_raw_os_error(errno as i32))
}

fn monotonic_now_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => (ts.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec() as u64),
        // CLOCK_MONOTONIC cannot fail on Linux; a deadline of "now" then times out at once.
        Err(_) => 0,
    }
}

impl RenderNode {
    /// Opens `path` and reads its driver; refuses nodes whose driver is not `amdgpu`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = open_node(path).map_err(|e| AmdgpuError::file("opening", path, e))?;
        let version = driver_version_of(&file)
            .map_err(|e| AmdgpuError::file("reading the DRM driver version of", path, e))?;
        if version.name != "amdgpu" {
            return Err(AmdgpuError::Unavailable(format!(
                "{} is driven by `{}`, not amdgpu",
                path.display(),
                version.name
            )));
        }
        Ok(Self { file, path: path.to_path_buf(), version })
    }

    fn info<T: Default>(&self, query: u32, request: uapi::drm_amdgpu_info_request, what: &str) -> Result<T> {
        let mut out = T::default();
        let mut info = uapi::drm_amdgpu_info {
            return_pointer: &mut out as *mut T as u64,
            return_size: std::mem::size_of::<T>() as u32,
            query,
            request,
        };
        ioctl(&self.file, uapi::DRM_IOCTL_AMDGPU_INFO, &mut info)
            .map_err(|e| io_error(format!("AMDGPU_INFO {what} on {}", self.path.display()), e))?;
        Ok(out)
    }

    fn ctx_op(&self, op: u32, ctx_id: u32) -> Result<uapi::drm_amdgpu_ctx> {
        let mut arg = uapi::drm_amdgpu_ctx {
            in_: uapi::drm_amdgpu_ctx_in { op, flags: 0, ctx_id, priority: uapi::AMDGPU_CTX_PRIORITY_NORMAL },
        };
        ioctl(&self.file, uapi::DRM_IOCTL_AMDGPU_CTX, &mut arg)
            .map_err(|e| io_error(format!("AMDGPU_CTX op {op} on {}", self.path.display()), e))?;
        Ok(arg)
    }

    fn gem_va(&self, bo: BoHandle, operation: u32, va: u64, size: u64, flags: u32) -> Result<()> {
        let mut arg = uapi::drm_amdgpu_gem_va {
            handle: bo.0,
            operation,
            flags,
            va_address: va,
            offset_in_bo: 0,
            map_size: size,
            ..Default::default()
        };
        ioctl(&self.file, uapi::DRM_IOCTL_AMDGPU_GEM_VA, &mut arg).map_err(|e| {
            io_error(format!("GEM_VA op {operation} of buffer {} at {va:#x}+{size:#x}", bo.0), e)
        })
    }
}

impl KernelDriver for RenderNode {
    fn driver_version(&self) -> DriverVersion {
        self.version.clone()
    }

    fn describe(&self) -> String {
        format!("{} ({})", self.path.display(), self.version)
    }

    fn device_info(&self) -> Result<uapi::drm_amdgpu_info_device> {
        let request = uapi::drm_amdgpu_info_request { query_hw_ip: Default::default() };
        self.info(uapi::AMDGPU_INFO_DEV_INFO, request, "DEV_INFO")
    }

    fn hw_ip_info(&self, ip: HwIp) -> Result<uapi::drm_amdgpu_info_hw_ip> {
        let request = uapi::drm_amdgpu_info_request {
            query_hw_ip: uapi::drm_amdgpu_info_query_hw_ip { type_: ip.uapi(), ip_instance: 0 },
        };
        self.info(uapi::AMDGPU_INFO_HW_IP_INFO, request, "HW_IP_INFO")
    }

    fn memory_info(&self) -> Result<uapi::drm_amdgpu_memory_info> {
        let request = uapi::drm_amdgpu_info_request { query_hw_ip: Default::default() };
        self.info(uapi::AMDGPU_INFO_MEMORY, request, "MEMORY")
    }

    fn gem_create(&self, desc: &BufferDesc) -> Result<BoHandle> {
        let mut flags = 0;
        if desc.cpu_access {
            flags |= uapi::AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED;
        } else if desc.domain == super::kmd::Domain::Vram {
            flags |= uapi::AMDGPU_GEM_CREATE_NO_CPU_ACCESS;
        }
        if desc.cleared {
            flags |= uapi::AMDGPU_GEM_CREATE_VRAM_CLEARED;
        }
        let mut arg = uapi::drm_amdgpu_gem_create {
            in_: uapi::drm_amdgpu_gem_create_in {
                bo_size: desc.size,
                alignment: desc.alignment,
                domains: desc.domain.uapi(),
                domain_flags: flags,
            },
        };
        match ioctl(&self.file, uapi::DRM_IOCTL_AMDGPU_GEM_CREATE, &mut arg) {
            // SAFETY: the kernel filled the `out` member; both members are plain integers, so any
            // bit pattern is a valid `drm_amdgpu_gem_create_out`.
            Ok(()) => Ok(BoHandle(unsafe { arg.out.handle })),
            Err(Errno::ENOMEM) => Err(AmdgpuError::OutOfMemory(format!(
                "GEM_CREATE of {} bytes in {:?} failed on {}",
                desc.size,
                desc.domain,
                self.path.display()
            ))),
            Err(e) => Err(io_error(format!("GEM_CREATE of {} bytes in {:?}", desc.size, desc.domain), e)),
        }
    }

    fn gem_close(&self, bo: BoHandle) -> Result<()> {
        let mut arg = uapi::drm_gem_close { handle: bo.0, pad: 0 };
        ioctl(&self.file, uapi::DRM_IOCTL_GEM_CLOSE, &mut arg)
            .map_err(|e| io_error(format!("GEM_CLOSE of buffer {}", bo.0), e))
    }

    fn map_cpu(&self, bo: BoHandle, size: u64) -> Result<Box<dyn CpuMapping>> {
        let mut arg =
            uapi::drm_amdgpu_gem_mmap { in_: uapi::drm_amdgpu_gem_mmap_in { handle: bo.0, _pad: 0 } };
        ioctl(&self.file, uapi::DRM_IOCTL_AMDGPU_GEM_MMAP, &mut arg)
            .map_err(|e| io_error(format!("GEM_MMAP of buffer {}", bo.0), e))?;
        // SAFETY: the kernel filled the `out` member; it is a plain u64.
        let offset = unsafe { arg.out.addr_ptr };
        let len = usize::try_from(size)
            .map_err(|_| AmdgpuError::OutOfMemory(format!("cannot map {size} bytes")))?;
        let map = memmap2::MmapOptions::new()
            .offset(offset)
            .len(len)
            .map_raw(&self.file)
            .map_err(|e| AmdgpuError::io(format!("mmap of buffer {} ({size} bytes)", bo.0), e))?;
        Ok(Box::new(NodeMapping { map }))
    }

    fn va_map(&self, bo: BoHandle, va: u64, size: u64, flags: VaFlags) -> Result<()> {
        self.gem_va(bo, uapi::AMDGPU_VA_OP_MAP, va, size, flags.uapi())
    }

    fn va_unmap(&self, bo: BoHandle, va: u64, size: u64) -> Result<()> {
        self.gem_va(bo, uapi::AMDGPU_VA_OP_UNMAP, va, size, 0)
    }

    fn ctx_create(&self) -> Result<ContextId> {
        let arg = self.ctx_op(uapi::AMDGPU_CTX_OP_ALLOC_CTX, 0)?;
        // SAFETY: the kernel filled `out.alloc`; all members are plain integers.
        Ok(ContextId(unsafe { arg.out.alloc.ctx_id }))
    }

    fn ctx_destroy(&self, ctx: ContextId) -> Result<()> {
        self.ctx_op(uapi::AMDGPU_CTX_OP_FREE_CTX, ctx.0).map(|_| ())
    }

    fn ctx_state(&self, ctx: ContextId) -> Result<ContextState> {
        let arg = self.ctx_op(uapi::AMDGPU_CTX_OP_QUERY_STATE2, ctx.0)?;
        // SAFETY: the kernel filled `out.state`; all members are plain integers.
        Ok(ContextState::from_query2_flags(unsafe { arg.out.state.flags }))
    }

    fn submit(&self, submission: &Submission<'_>) -> Result<SeqNo> {
        if submission.ibs.is_empty() {
            return Err(AmdgpuError::io("CS", std::io::Error::other("a submission needs at least one IB")));
        }
        let entries: Vec<uapi::drm_amdgpu_bo_list_entry> = submission
            .buffers
            .iter()
            .map(|bo| uapi::drm_amdgpu_bo_list_entry { bo_handle: bo.0, bo_priority: 0 })
            .collect();
        let bo_list = uapi::drm_amdgpu_bo_list_in {
            operation: !0,
            list_handle: !0,
            bo_number: entries.len() as u32,
            bo_info_size: std::mem::size_of::<uapi::drm_amdgpu_bo_list_entry>() as u32,
            bo_info_ptr: entries.as_ptr() as u64,
        };
        let ibs: Vec<uapi::drm_amdgpu_cs_chunk_ib> = submission
            .ibs
            .iter()
            .map(|ib| uapi::drm_amdgpu_cs_chunk_ib {
                _pad: 0,
                flags: ib.flags,
                va_start: ib.va,
                ib_bytes: ib.size_bytes,
                ip_type: ib.ip.uapi(),
                ip_instance: 0,
                ring: ib.ring,
            })
            .collect();
        let mut chunks: Vec<uapi::drm_amdgpu_cs_chunk> = ibs
            .iter()
            .map(|ib| uapi::drm_amdgpu_cs_chunk {
                chunk_id: uapi::AMDGPU_CHUNK_ID_IB,
                length_dw: (std::mem::size_of::<uapi::drm_amdgpu_cs_chunk_ib>() / 4) as u32,
                chunk_data: ib as *const _ as u64,
            })
            .collect();
        chunks.push(uapi::drm_amdgpu_cs_chunk {
            chunk_id: uapi::AMDGPU_CHUNK_ID_BO_HANDLES,
            length_dw: (std::mem::size_of::<uapi::drm_amdgpu_bo_list_in>() / 4) as u32,
            chunk_data: &bo_list as *const _ as u64,
        });
        let chunk_pointers: Vec<u64> = chunks.iter().map(|c| c as *const _ as u64).collect();

        let mut pause = CS_RETRY_PAUSE;
        for attempt in 0..=CS_RETRIES {
            let mut arg = uapi::drm_amdgpu_cs {
                in_: uapi::drm_amdgpu_cs_in {
                    ctx_id: submission.ctx.0,
                    bo_list_handle: 0,
                    num_chunks: chunk_pointers.len() as u32,
                    flags: 0,
                    chunks: chunk_pointers.as_ptr() as u64,
                },
            };
            match ioctl_once(&self.file, uapi::DRM_IOCTL_AMDGPU_CS, &mut arg) {
                // SAFETY: the kernel filled `out`; it is a plain u64. `entries`, `bo_list`, `ibs`,
                // `chunks` and `chunk_pointers` outlived the call that read them.
                Ok(()) => return Ok(SeqNo(unsafe { arg.out.handle })),
                Err(Errno::ENOMEM) | Err(Errno::EAGAIN) | Err(Errno::EBUSY) if attempt < CS_RETRIES => {
                    tracing::debug!(attempt, "CS was refused for lack of memory or a busy queue; retrying");
                    std::thread::sleep(pause);
                    pause *= 2;
                }
                Err(Errno::ENOMEM) | Err(Errno::EAGAIN) | Err(Errno::EBUSY) => {
                    return Err(AmdgpuError::OutOfMemory(format!(
                        "CS with {} buffers failed after {CS_RETRIES} retries",
                        submission.buffers.len()
                    )))
                }
                Err(Errno::ECANCELED) | Err(Errno::ENODEV) => {
                    return Err(AmdgpuError::DeviceLost(format!(
                        "CS refused on {}: the context was lost to a GPU reset",
                        self.path.display()
                    )))
                }
                Err(e) => return Err(io_error(format!("CS on {}", self.path.display()), e)),
            }
        }
        Err(AmdgpuError::OutOfMemory("CS retries exhausted".into()))
    }

    fn wait(&self, ctx: ContextId, ip: HwIp, ring: u32, seq: SeqNo, timeout: Timeout) -> Result<WaitStatus> {
        let deadline = match timeout {
            Timeout::AbsoluteMonotonicNs(ns) => ns,
            Timeout::Relative(d) => {
                monotonic_now_ns().saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            }
        };
        let mut arg = uapi::drm_amdgpu_wait_cs {
            in_: uapi::drm_amdgpu_wait_cs_in {
                handle: seq.0,
                timeout: deadline,
                ip_type: ip.uapi(),
                ip_instance: 0,
                ring,
                ctx_id: ctx.0,
            },
        };
        match ioctl(&self.file, uapi::DRM_IOCTL_AMDGPU_WAIT_CS, &mut arg) {
            Ok(()) => {
                // SAFETY: the kernel filled `out`; it is a plain u64.
                let status = unsafe { arg.out.status };
                Ok(if status == 0 { WaitStatus::Completed } else { WaitStatus::Busy })
            }
            Err(Errno::ETIME) | Err(Errno::ETIMEDOUT) => Ok(WaitStatus::Busy),
            Err(Errno::ECANCELED) | Err(Errno::ENODEV) => Err(AmdgpuError::DeviceLost(format!(
                "WAIT_CS on {}: the submission was lost to a GPU reset",
                self.path.display()
            ))),
            Err(e) => Err(io_error(format!("WAIT_CS for sequence {} on {}", seq.0, self.path.display()), e)),
        }
    }
}

/// An mmap of a buffer.
struct NodeMapping {
    map: memmap2::MmapRaw,
}

fn out_of_range(offset: usize, len: usize, mapped: usize) -> AmdgpuError {
    AmdgpuError::io(
        "CPU access to a mapped buffer",
        std::io::Error::other(format!(
            "bytes {offset}..{} are outside the {mapped}-byte mapping",
            offset.saturating_add(len)
        )),
    )
}

impl CpuMapping for NodeMapping {
    fn len(&self) -> usize {
        self.map.len()
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        if offset.checked_add(data.len()).is_none_or(|end| end > self.map.len()) {
            return Err(out_of_range(offset, data.len(), self.map.len()));
        }
        // SAFETY: the range is inside the live mapping (checked above) and `data` is a separate
        // host allocation, so the copy stays in bounds and the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_mut_ptr().add(offset), data.len())
        };
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if offset.checked_add(out.len()).is_none_or(|end| end > self.map.len()) {
            return Err(out_of_range(offset, out.len(), self.map.len()));
        }
        // SAFETY: as in `write`, with source and destination swapped.
        unsafe { std::ptr::copy_nonoverlapping(self.map.as_ptr().add(offset), out.as_mut_ptr(), out.len()) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_no_drm_node_is_refused_naming_it() {
        let err = RenderNode::open(Path::new("/dev/null")).unwrap_err().to_string();
        assert!(err.contains("/dev/null") && err.contains("DRM driver version"), "{err}");
        let err = RenderNode::open(Path::new("/nonexistent/renderD128")).unwrap_err().to_string();
        assert!(err.contains("opening /nonexistent/renderD128"), "{err}");
    }
}
