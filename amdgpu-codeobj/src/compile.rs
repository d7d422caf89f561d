//! Compiling OpenCL C to AMDHSA code objects with clang and ld.lld (LLVM 22): finding the tools
//! (`SPARKLE_CLANG`, `SPARKLE_LLD`, `SPARKLE_LIBCLC` override them), the exact command lines,
//! linking libclc for standard OpenCL C built-ins, returning the compiler's log on failure, and the
//! compiler identity that goes into cache keys.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_64;

use crate::gfx_target::GfxTarget;
use crate::options::OpenClOptions;
use crate::{printf, subgroups, workgroups};
use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

/// Debian's package for the compiler, for messages.
pub const CLANG_PACKAGE: &str = "clang-22";
/// Debian's package for the linker.
pub const LLD_PACKAGE: &str = "lld-22";
/// Debian's package for the OpenCL built-in library.
pub const LIBCLC_PACKAGE: &str = "libclc-22";
/// The OpenCL compiler option that compiles for wave64.
pub const WAVE64_OPTION: &str = crate::options::WAVE64;
/// libclc's bitcode for the `amdgcn-amd-amdhsa` triple.
const LIBCLC_FILE: &str = "amdgcn-amd-amdhsa.bc";

/// Which built-in library a kernel is linked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtins {
    /// None: the kernel uses only clang builtins (`__builtin_amdgcn_workitem_id_x()`, …).
    None,
    /// libclc: standard OpenCL C (`get_global_id`, `barrier`, math functions).
    Libclc,
}

/// One compile job.
#[derive(Debug, Clone)]
pub struct CompileRequest<'a> {
    /// What is compiled, for messages (a kernel or file name).
    pub name: &'a str,
    /// OpenCL C source.
    pub source: &'a str,
    /// Target to compile for.
    pub target: GfxTarget,
    /// Which OpenCL built-ins are linked in.
    pub builtins: Builtins,
    /// `-D name=value` definitions, in order.
    pub defines: &'a [(String, String)],
    /// Compile in CU mode (`-mcumode`) instead of gfx10+'s default WGP mode.
    pub cu_mode: bool,
    /// The kernel's own OpenCL C options, checked ([`OpenClOptions::parse`]): the language
    /// version, optimization level, math options, include directories, definitions, wave64.
    pub options: &'a OpenClOptions,
    /// The entry point and the work-group size every dispatch of it uses, when known: the
    /// compiler is told (`reqd_work_group_size` on the entry point, unless the source gives it
    /// a work-group size of its own), so that a kernel may use up to 1024 work-items — clang's
    /// default limit for an OpenCL kernel is 256 — and the compiler knows the exact size.
    pub workgroup: Option<(&'a str, [u32; 3])>,
}

/// A compiled code object.
#[derive(Debug, Clone)]
pub struct CompiledObject {
    /// The linked code object (ELF).
    pub bytes: Vec<u8>,
    /// Warnings clang and ld.lld printed.
    pub log: String,
    /// The flags the compile used (what [`Compiler::flags`] returned).
    pub flags: Vec<String>,
    /// Wall time of compile + link.
    pub elapsed: Duration,
}

/// The LLVM tools and libraries a compile needs.
#[derive(Debug, Clone)]
pub struct Compiler {
    clang: PathBuf,
    lld: PathBuf,
    libclc: Option<PathBuf>,
    libclc_hash: Option<u64>,
    version: String,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

impl Compiler {
    /// Finds clang (`SPARKLE_CLANG`, else `clang-22` on PATH, else `/usr/lib/llvm-22/bin/clang`),
    /// ld.lld (`SPARKLE_LLD`, else next to clang, else `ld.lld-22` on PATH) and libclc
    /// (`SPARKLE_LIBCLC`, else where LLVM 22 installs it); runs `clang --version`.
    pub fn from_env() -> Result<Self> {
        let clang = match env_path("SPARKLE_CLANG") {
            Some(path) => path,
            None => on_path("clang-22")
                .or_else(|| Some(PathBuf::from("/usr/lib/llvm-22/bin/clang")).filter(|p| p.is_file()))
                .ok_or_else(|| {
                    AmdgpuError::Unavailable(format!(
                        "clang-22 was not found on PATH nor in /usr/lib/llvm-22/bin: install the {CLANG_PACKAGE} and {LLD_PACKAGE} packages (scripts/setup.sh does) or set SPARKLE_CLANG to a clang with the AMDGPU target"
                    ))
                })?,
        };
        let lld = match env_path("SPARKLE_LLD") {
            Some(path) => path,
            None => find_lld_near(&clang).ok_or_else(|| {
                AmdgpuError::Unavailable(format!(
                    "ld.lld was not found next to {} nor as ld.lld-22 on PATH: install {LLD_PACKAGE} or set SPARKLE_LLD",
                    clang.display()
                ))
            })?,
        };
        let libclc = match env_path("SPARKLE_LIBCLC") {
            Some(path) => Some(path),
            None => find_libclc_near(&clang),
        };
        Self::with_tools(clang, lld, libclc)
    }

    /// Uses the given tools; `libclc` is the `amdgcn-amd-amdhsa.bc` file, if any.
    pub fn with_tools(clang: PathBuf, lld: PathBuf, libclc: Option<PathBuf>) -> Result<Self> {
        let output = Command::new(&clang).arg("--version").output().map_err(|e| {
            AmdgpuError::Unavailable(format!(
                "cannot run {} ({e}): install {CLANG_PACKAGE} or set SPARKLE_CLANG",
                clang.display()
            ))
        })?;
        let text = String::from_utf8_lossy(&output.stdout);
        let version = text.lines().next().unwrap_or("").trim().to_string();
        if !output.status.success() || version.is_empty() {
            return Err(AmdgpuError::Unavailable(format!(
                "{} --version failed: {}",
                clang.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let libclc_hash = match &libclc {
            Some(path) => {
                Some(xxh3_64(&std::fs::read(path).map_err(|e| AmdgpuError::file("reading libclc", path, e))?))
            }
            None => None,
        };
        Ok(Self { clang, lld, libclc, libclc_hash, version })
    }

    /// Path of the clang it runs.
    pub fn clang(&self) -> &Path {
        &self.clang
    }

    /// Path of the ld.lld it runs.
    pub fn lld(&self) -> &Path {
        &self.lld
    }

    /// Path of libclc's bitcode for amdgcn, if found.
    pub fn libclc(&self) -> Option<&Path> {
        self.libclc.as_deref()
    }

    /// The first line of `clang --version`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// What identifies the compiler in a cache key: its version line, and the libclc build when
    /// the request links it. Flags are separate ([`flags`](Self::flags)).
    pub fn identity(&self, builtins: Builtins) -> String {
        match (builtins, self.libclc_hash) {
            (Builtins::Libclc, Some(hash)) => format!("{} + libclc {hash:016x}", self.version),
            _ => self.version.clone(),
        }
    }

    /// The clang flags for `request`, without file names (these go into cache keys and the AOT
    /// manifest). Libclc is named by file name only so that keys do not depend on where it lives.
    pub fn flags(&self, request: &CompileRequest<'_>) -> Vec<String> {
        let options = request.options;
        let std = options.std.as_deref().unwrap_or("CL2.0");
        let mut flags: Vec<String> = ["-x", "cl", &format!("-cl-std={std}"), "-target", "amdgcn-amd-amdhsa"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        flags.push(format!("-mcpu={}", request.target));
        // Argument names in the metadata: the backend matches a spec's bindings to them.
        flags.push(format!("-O{}", options.opt_level.unwrap_or(3)));
        flags.extend(["-nogpulib", "-cl-kernel-arg-info"].map(String::from));
        if request.cu_mode {
            flags.push("-mcumode".into());
        }
        if options.wave64 {
            flags.push(WAVE64_OPTION.into());
        }
        if request.builtins == Builtins::Libclc {
            // libclc-22's get_global_id adds a global offset it reads from the implicit-argument
            // area at the code-object-v4 offsets; under clang's default (v6) layout those hold
            // block counts and group sizes, and every id comes out shifted. Code object v4 puts
            // the (zero) global offsets there.
            flags.push("-mcode-object-version=4".into());
            flags.extend(["-Xclang", "-mlink-builtin-bitcode", "-Xclang"].map(String::from));
            flags.push(LIBCLC_FILE.into());
        }
        for (name, value) in request.defines {
            flags.push(format!("-D{name}={value}"));
        }
        flags.extend(options.clang_flags());
        flags
    }

    /// Everything about the compiler a cached blob of `request` depends on besides the source:
    /// the compiler identity, the flags and the device libraries appended, one per line. Feed it (with the source and entry
    /// point) into the cache key.
    pub fn key_material(&self, request: &CompileRequest<'_>) -> String {
        let mut material = format!("{}\n{}", self.identity(request.builtins), self.flags(request).join("\n"));
        // What is compiled includes the device libraries: new ones must not hit old entries.
        let (prefix, suffix) = device_libraries(request);
        if !prefix.is_empty() || !suffix.is_empty() {
            let hash = xxh3_64(format!("{prefix}\0{suffix}").as_bytes());
            material.push_str(&format!("\ndevice libraries {hash:016x}"));
        }
        material
    }

    /// Compiles and links `request` into a code object.
    pub fn compile(&self, request: &CompileRequest<'_>) -> Result<CompiledObject> {
        match self.compile_racing(request, &mut || false)? {
            Some(object) => Ok(object),
            None => unreachable!("a compile that never gives up finishes"),
        }
    }

    /// Compiles like [`compile`](Self::compile), asking `give_up` every millisecond or so whether
    /// the code object is still wanted: `Ok(None)` when it was not (the tool running then is
    /// killed).
    pub fn compile_racing(
        &self,
        request: &CompileRequest<'_>,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Option<CompiledObject>> {
        let started = Instant::now();
        let flags = self.flags(request);
        let libclc = match request.builtins {
            Builtins::None => None,
            Builtins::Libclc => Some(self.libclc.as_deref().ok_or_else(|| {
                AmdgpuError::Unavailable(format!(
                    "`{}` needs the OpenCL built-ins but libclc's {LIBCLC_FILE} was not found: install {LIBCLC_PACKAGE} or set SPARKLE_LIBCLC",
                    request.name
                ))
            })?),
        };
        let dir = tempfile::Builder::new()
            .prefix("sparkle-amdgpu-")
            .tempdir()
            .map_err(|e| AmdgpuError::io("creating a temporary folder for the compiler", e))?;
        let source = dir.path().join("kernel.cl");
        let object = dir.path().join("kernel.o");
        let linked = dir.path().join("kernel.co");
        let (prefix, suffix) = device_libraries(request);
        let user = match request.workgroup {
            Some((entry, size)) => with_required_size(request.source, entry, size),
            None => std::borrow::Cow::Borrowed(request.source),
        };
        let text = format!("{prefix}{user}{suffix}");
        std::fs::write(&source, text).map_err(|e| AmdgpuError::file("writing", &source, e))?;

        let mut clang = Command::new(&self.clang);
        for flag in &flags {
            if flag == LIBCLC_FILE {
                if let Some(path) = libclc {
                    clang.arg(path);
                }
            } else {
                clang.arg(flag);
            }
        }
        clang.arg("-c").arg(&source).arg("-o").arg(&object);
        let output = dir.path().join("tool.log");
        let Some(mut log) = run(clang, &self.clang, request.name, "clang", &output, give_up)? else {
            return Ok(None);
        };

        let mut lld = Command::new(&self.lld);
        lld.arg("-shared").arg(&object).arg("-o").arg(&linked);
        let lld_log = match run(lld, &self.lld, request.name, "ld.lld", &output, give_up) {
            Ok(Some(log)) => log,
            Ok(None) => return Ok(None),
            Err(AmdgpuError::Compile { what, log }) => {
                return Err(match missing_feature(&log) {
                    Some((feature, symbol)) => AmdgpuError::Unavailable(format!(
                        "`{what}`: the amdgpu backend has no {feature}: the kernel calls {symbol}, which neither \
                         the backend nor libclc provides"
                    )),
                    None => AmdgpuError::Compile { what, log },
                })
            }
            Err(other) => return Err(other),
        };
        log.push_str(&lld_log);

        let bytes = std::fs::read(&linked).map_err(|e| AmdgpuError::file("reading", &linked, e))?;
        if !log.trim().is_empty() {
            tracing::debug!(kernel = request.name, "compiler output:\n{log}");
        }
        Ok(Some(CompiledObject { bytes, log, flags, elapsed: started.elapsed() }))
    }
}

/// The OpenCL C the backend compiles with `request`'s source: printf's device runtime after
/// sources that call printf, and the sub-group built-ins before sources that use them (clang
/// declares only some of them, so the others must be defined before use; a `#line 1` then
/// gives the compiler's messages the user's line numbers). Both need libclc (atomics,
/// work-item functions), and the printf runtime reads its buffer at the code object v4 offset
/// that libclc builds ask for. Returns (prefix, suffix).
fn device_libraries(request: &CompileRequest<'_>) -> (String, String) {
    let (mut prefix, mut suffix) = (String::new(), String::new());
    if request.builtins == Builtins::Libclc {
        let collectives = workgroups::uses_collectives(request.source);
        if subgroups::uses_subgroups(request.source) || collectives {
            prefix.push_str(subgroups::DEVICE_LIBRARY);
            if collectives {
                prefix.push_str(workgroups::DEVICE_LIBRARY);
            }
            prefix.push_str("\n#line 1\n");
        }
        if printf::calls_printf(request.source) {
            suffix.push('\n');
            suffix.push_str(printf::DEVICE_RUNTIME);
        }
    }
    (prefix, suffix)
}

/// `source` with `__attribute__((reqd_work_group_size(x, y, z)))` after the `__kernel` (or
/// `kernel`) keyword of the declarations of `entry`, unless one of them already names a
/// work-group size (`reqd_work_group_size` or `amdgpu_flat_work_group_size`): then the source
/// is left as it is, and its own size is what the kernel gets (the backend checks that it is the
/// spec's). Also unchanged where no declaration of `entry` is found (a name made by a macro).
pub fn with_required_size<'s>(source: &'s str, entry: &str, size: [u32; 3]) -> std::borrow::Cow<'s, str> {
    let bytes = source.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // Each declaration of `entry`: (where its `kernel` keyword ends, its whole text).
    let mut insert_at = Vec::new();
    let mut from = 0;
    while let Some(found) = source[from..].find(entry) {
        let at = from + found;
        from = at + entry.len();
        let before_ok = at == 0 || !is_ident(bytes[at - 1]);
        let after = source[from..].trim_start();
        if !before_ok || !after.starts_with('(') || source[from..].starts_with(|c: char| is_ident(c as u8)) {
            continue;
        }
        // The declaration runs from the previous `;`, `{` or `}` to the body's `{` (or `;`).
        let start = source[..at].rfind([';', '{', '}']).map_or(0, |p| p + 1);
        let end = source[at..].find(['{', ';']).map_or(source.len(), |p| at + p);
        let declaration = &source[start..end];
        if declaration.contains("reqd_work_group_size") || declaration.contains("amdgpu_flat_work_group_size")
        {
            return std::borrow::Cow::Borrowed(source);
        }
        let keyword = ["__kernel", "kernel"].iter().find_map(|k| {
            let mut search = 0;
            while let Some(p) = declaration[search..].find(k) {
                let p = search + p;
                let end = p + k.len();
                let whole = (p == 0 || !is_ident(declaration.as_bytes()[p - 1]))
                    && declaration.as_bytes().get(end).is_none_or(|&b| !is_ident(b));
                if whole {
                    return Some(start + end);
                }
                search = end;
            }
            None
        });
        if let Some(k) = keyword {
            insert_at.push(k);
        }
    }
    insert_at.sort_unstable();
    insert_at.dedup();
    if insert_at.is_empty() {
        return std::borrow::Cow::Borrowed(source);
    }
    let attribute = format!(" __attribute__((reqd_work_group_size({}, {}, {})))", size[0], size[1], size[2]);
    let mut out = String::with_capacity(source.len() + insert_at.len() * attribute.len());
    let mut last = 0;
    for at in insert_at {
        out.push_str(&source[last..at]);
        out.push_str(&attribute);
        last = at;
    }
    out.push_str(&source[last..]);
    std::borrow::Cow::Owned(out)
}

/// The OpenCL feature behind the first undefined symbol of a failed link, in the user's
/// terms, and the symbol: images (read_imagef...), pipes, device-side enqueue. None for any
/// other failure, which is reported with the linker's log.
fn missing_feature(log: &str) -> Option<(&'static str, String)> {
    const FEATURES: [(&str, &[&str]); 3] = [
        ("images", &["read_image", "write_image", "get_image_", "ocl_image", "ocl_sampler"]),
        ("pipes", &["read_pipe", "write_pipe", "reserve_read_pipe", "reserve_write_pipe", "get_pipe_"]),
        ("device-side enqueue", &["enqueue_kernel", "enqueue_marker", "get_kernel_", "ndrange_"]),
    ];
    for line in log.lines() {
        let Some((_, symbol)) =
            line.split_once("undefined hidden symbol: ").or_else(|| line.split_once("undefined symbol: "))
        else {
            continue;
        };
        let symbol = symbol.trim();
        for (feature, prefixes) in FEATURES {
            if prefixes.iter().any(|p| symbol.contains(p)) {
                return Some((feature, symbol.to_string()));
            }
        }
    }
    None
}

/// How often a running tool is checked on (and `give_up` asked).
const TOOL_POLL: Duration = Duration::from_millis(1);

/// Runs a tool with its output (stdout and stderr together) going to the file `output`, asking
/// `give_up` while it runs: `Ok(None)` when it gave up (the tool is killed). A failure becomes
/// `Compile` with the tool's whole output.
fn run(
    mut command: Command,
    tool: &Path,
    what: &str,
    label: &str,
    output: &Path,
    give_up: &mut dyn FnMut() -> bool,
) -> Result<Option<String>> {
    // A file rather than pipes: nothing has to drain them while the tool runs.
    let file = std::fs::File::create(output).map_err(|e| AmdgpuError::file("creating", output, e))?;
    let copy = file.try_clone().map_err(|e| AmdgpuError::file("opening", output, e))?;
    command.stdin(std::process::Stdio::null()).stdout(copy).stderr(file);
    let mut child = command
        .spawn()
        .map_err(|e| AmdgpuError::Unavailable(format!("cannot run {} ({e})", tool.display())))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if give_up() => {
                // It may have just exited; either way nothing of it is used.
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            Ok(None) => std::thread::sleep(TOOL_POLL),
            Err(e) => {
                return Err(AmdgpuError::Unavailable(format!("cannot wait for {} ({e})", tool.display())))
            }
        }
    };
    let log = std::fs::read(output).map_err(|e| AmdgpuError::file("reading", output, e))?;
    let log = String::from_utf8_lossy(&log).into_owned();
    if !status.success() {
        return Err(AmdgpuError::Compile {
            what: what.to_string(),
            log: format!("{label} ({}) failed with {status}:\n{log}", tool.display()),
        });
    }
    Ok(Some(log))
}

fn find_lld_near(clang: &Path) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    for path in [Some(clang.to_path_buf()), std::fs::canonicalize(clang).ok()].into_iter().flatten() {
        if let Some(dir) = path.parent() {
            candidates.push(dir.join("ld.lld-22"));
            candidates.push(dir.join("ld.lld"));
        }
    }
    candidates.into_iter().find(|p| p.is_file()).or_else(|| on_path("ld.lld-22"))
}

fn find_libclc_near(clang: &Path) -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("/usr/lib/clc").join(LIBCLC_FILE)];
    if let Some(prefix) =
        std::fs::canonicalize(clang).ok().as_deref().and_then(Path::parent).and_then(Path::parent)
    {
        candidates.push(prefix.join("share/clc").join(LIBCLC_FILE));
        candidates.push(prefix.join("lib/clc").join(LIBCLC_FILE));
    }
    candidates.into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_compiler() -> Compiler {
        Compiler {
            clang: "clang".into(),
            lld: "ld.lld".into(),
            libclc: Some("/x/amdgcn-amd-amdhsa.bc".into()),
            libclc_hash: Some(0x1234),
            version: "clang version 22".into(),
        }
    }

    #[test]
    fn flags_name_the_exact_target_and_every_option() {
        let compiler = fake_compiler();
        let defines = [("TILE".to_string(), "16".to_string())];
        let request = CompileRequest {
            name: "sgemm",
            source: "",
            target: GfxTarget::new(11, 0, 1),
            builtins: Builtins::Libclc,
            defines: &defines,
            cu_mode: true,
            options: &OpenClOptions::default(),
            workgroup: None,
        };
        let flags = compiler.flags(&request).join(" ");
        assert_eq!(
            flags,
            "-x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=gfx1101 -O3 -nogpulib -cl-kernel-arg-info -mcumode -mcode-object-version=4 -Xclang -mlink-builtin-bitcode -Xclang amdgcn-amd-amdhsa.bc -DTILE=16"
        );
        let plain = CompileRequest { builtins: Builtins::None, cu_mode: false, defines: &[], ..request };
        assert!(!compiler.flags(&plain).join(" ").contains("bitcode"));
        assert_ne!(compiler.identity(Builtins::Libclc), compiler.identity(Builtins::None));
        let key = compiler.key_material(&request);
        assert!(key.starts_with("clang version 22 + libclc 0000000000001234\n-x\n"), "{key}");
        assert_ne!(key, compiler.key_material(&CompileRequest { cu_mode: false, ..request.clone() }));
    }

    #[test]
    fn undefined_image_pipe_and_enqueue_functions_name_the_feature() {
        let log = "ld.lld: error: undefined hidden symbol: read_imagef(ocl_image2d_ro, ocl_sampler, int vector[2])\n>>> referenced by k.o";
        let (feature, symbol) = missing_feature(log).unwrap();
        assert_eq!(feature, "images");
        assert!(symbol.starts_with("read_imagef("), "{symbol}");
        assert_eq!(missing_feature("ld.lld: error: undefined symbol: __read_pipe_2").unwrap().0, "pipes");
        assert_eq!(missing_feature("ld.lld: error: undefined hidden symbol: my_helper(int)"), None);
    }

    #[test]
    fn the_entry_point_gets_the_required_work_group_size_unless_it_names_one() {
        let source = "// kernel void k(...) in a comment\n__kernel void k(__global int *a) { a[0] = 1; }\nkernel void other(__global int *a) {}\n";
        let out = with_required_size(source, "k", [1024, 1, 1]);
        assert_eq!(out.matches("reqd_work_group_size(1024, 1, 1)").count(), 1, "{out}");
        assert!(out.contains("__kernel __attribute__((reqd_work_group_size(1024, 1, 1))) void k("), "{out}");
        let own = "__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void k(__global int *a) {}";
        assert_eq!(with_required_size(own, "k", [128, 1, 1]), own);
        let unknown = "__kernel void m(__global int *a) {}";
        assert_eq!(with_required_size(unknown, "k", [128, 1, 1]), unknown);
    }

    #[test]
    fn a_missing_clang_is_unavailable_naming_the_package() {
        let err = Compiler::with_tools("/nonexistent/clang".into(), "/nonexistent/ld.lld".into(), None)
            .unwrap_err();
        assert!(matches!(err, AmdgpuError::Unavailable(_)));
        assert!(err.to_string().contains(CLANG_PACKAGE), "{err}");
    }
}
