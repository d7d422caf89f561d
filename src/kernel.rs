//! `KernelSpec`: a user's compute kernel as every backend sees it — its sources (GLSL, OpenCL C,
//! prebuilt code objects per GPU target), defines, the bindings it takes in order, and its
//! workgroup size — and the checks a spec must pass on its own, before any backend sees it.

use std::sync::Arc;

/// Why a kernel spec, or a dispatch of it, was refused before reaching a driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
///
/// Every variant names the kernel (`kernel`: its [`KernelSpec::name`]); the other fields are
/// the details its message shows.
#[allow(missing_docs)] // Fields: see each variant's message.
pub enum KernelError {
    /// The spec has no source in the language the backend compiles.
    #[error("kernel `{kernel}` has no {language} source, which the {backend} backend needs; add one with KernelSpec::{builder}")]
    MissingSource { kernel: String, language: &'static str, backend: String, builder: &'static str },
    /// The spec contradicts itself or its source (a zero workgroup size, a `local_size` that
    /// disagrees with the spec, a duplicate binding name, …).
    #[error("kernel `{kernel}`: {problem}")]
    InvalidSpec { kernel: String, problem: String },
    /// The spec asks for more than the device offers (`limit`: the device's figure).
    #[error("kernel `{kernel}`: {problem} (device limit: {limit})")]
    ExceedsLimit { kernel: String, problem: String, limit: String },
    /// The spec and the compiled program disagree about a binding.
    #[error("kernel `{kernel}`, binding `{binding}`: {problem}")]
    Interface { kernel: String, binding: String, problem: String },
    /// A dispatch passed `got` arguments where the spec has `expected` bindings.
    #[error("kernel `{kernel}` takes {expected} arguments ({bindings}) but the dispatch passed {got}")]
    ArgumentCount { kernel: String, expected: usize, got: usize, bindings: String },
    /// Argument `index` is of another kind or type than its binding.
    #[error("kernel `{kernel}`: argument {index} (`{name}`) must be {expected}, got {got}")]
    ArgumentType { kernel: String, index: usize, name: String, expected: String, got: String },
    /// Argument `index` is of the right kind but unusable (a buffer of another runtime, too
    /// small for the program, or written while declared read-only elsewhere in the dispatch).
    #[error("kernel `{kernel}`: argument {index} (`{name}`): {problem}")]
    Argument { kernel: String, index: usize, name: String, problem: String },
    /// The grid of workgroups is empty or over the device's limits.
    #[error("kernel `{kernel}`: {problem}")]
    Grid { kernel: String, problem: String },
}

/// The languages kernel sources come in; each backend consumes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceLanguage {
    /// GLSL compute shaders, for the gl backend.
    Glsl,
    /// OpenCL C, for the amdgpu backends.
    OpenCl,
    /// AMDHSA code objects built ahead of time, for the amdgpu backends.
    CodeObject,
}

impl SourceLanguage {
    /// The language's name in messages (`"GLSL"`, `"OpenCL C"`, `"code object"`).
    pub fn name(self) -> &'static str {
        match self {
            SourceLanguage::Glsl => "GLSL",
            SourceLanguage::OpenCl => "OpenCL C",
            SourceLanguage::CodeObject => "code object",
        }
    }

    fn builder(self) -> &'static str {
        match self {
            SourceLanguage::Glsl => "glsl",
            SourceLanguage::OpenCl => "opencl",
            SourceLanguage::CodeObject => "code_object",
        }
    }
}

/// A prebuilt code object for one GPU target (e.g. `gfx1100`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeObject {
    /// The full GPU target it was built for, e.g. `gfx1100`.
    pub target: String,
    /// The ELF file's bytes.
    pub bytes: Arc<[u8]>,
}

/// One way of giving a kernel to a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// A GLSL compute shader body. `#version` is optional (430 core is added); the workgroup size
    /// comes from the spec (a `local_size` layout in the source must agree with it).
    Glsl(String),
    /// OpenCL C, with the `__kernel` function to run and extra compiler options.
    OpenCl {
        /// The OpenCL C text.
        source: String,
        /// The `__kernel` function to run.
        entry_point: String,
        /// Extra compiler options, after Sparkle's own.
        options: Vec<String>,
    },
    /// Code objects built ahead of time, one per GPU target, with the kernel to run.
    CodeObjects {
        /// The kernel's symbol in the code objects.
        entry_point: String,
        /// One code object per GPU target; the device's exact target is picked.
        objects: Vec<CodeObject>,
    },
}

impl KernelSource {
    /// The language this source is in.
    pub fn language(&self) -> SourceLanguage {
        match self {
            KernelSource::Glsl(_) => SourceLanguage::Glsl,
            KernelSource::OpenCl { .. } => SourceLanguage::OpenCl,
            KernelSource::CodeObjects { .. } => SourceLanguage::CodeObject,
        }
    }
}

/// The element type of a scalar kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarType {
    /// `uint` in GLSL, `uint` in OpenCL C.
    U32,
    /// `int`.
    I32,
    /// `float`.
    F32,
}

impl ScalarType {
    /// The Rust name of the type (`"u32"`, `"i32"`, `"f32"`), as messages show it.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::U32 => "u32",
            ScalarType::I32 => "i32",
            ScalarType::F32 => "f32",
        }
    }
}

/// How a kernel uses a storage buffer. The runtime orders work by it: a read of a buffer waits
/// only for the submissions that write it, so a kernel must not write a buffer it takes as
/// `ReadOnly` — backends check that against the compiled program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// The kernel only reads the buffer.
    ReadOnly,
    /// The kernel may read and write the buffer.
    ReadWrite,
    /// The kernel only reads the buffer, as texels of this format through a texel buffer (GLSL:
    /// a `samplerBuffer`, `isamplerBuffer` or `usamplerBuffer` uniform read with `texelFetch`,
    /// its `layout(binding = …)` the buffer's place among the spec's storage buffers). A texel
    /// past the bound range reads as zero without a bounds test in the kernel's code, which
    /// storage-buffer loads carry on some drivers. Devices whose limits have no texel buffers
    /// (`max_texel_buffer_texels` = 0: the amdgpu backends) refuse such kernels.
    Texels(TexelFormat),
}

impl Access {
    /// Whether the kernel may write the buffer.
    pub fn writes(self) -> bool {
        self == Access::ReadWrite
    }
}

/// The format of a texel buffer's texels: one or four 32-bit components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TexelFormat {
    /// One `float` (`samplerBuffer`; `texelFetch(…).x` is the value).
    R32F,
    /// Four `float`s (`samplerBuffer`).
    Rgba32F,
    /// One `uint` (`usamplerBuffer`).
    R32Ui,
    /// Four `uint`s (`usamplerBuffer`).
    Rgba32Ui,
    /// One `int` (`isamplerBuffer`).
    R32I,
    /// Four `int`s (`isamplerBuffer`).
    Rgba32I,
}

/// The component type a texel buffer hands a kernel: which kind of sampler reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TexelComponent {
    /// `float` (`samplerBuffer`).
    Float,
    /// `uint` (`usamplerBuffer`).
    Uint,
    /// `int` (`isamplerBuffer`).
    Int,
}

impl TexelComponent {
    /// The GLSL sampler type that reads such texels.
    pub fn sampler(self) -> &'static str {
        match self {
            TexelComponent::Float => "samplerBuffer",
            TexelComponent::Uint => "usamplerBuffer",
            TexelComponent::Int => "isamplerBuffer",
        }
    }
}

impl TexelFormat {
    /// Bytes per texel.
    pub fn bytes(self) -> u64 {
        match self {
            TexelFormat::R32F | TexelFormat::R32Ui | TexelFormat::R32I => 4,
            TexelFormat::Rgba32F | TexelFormat::Rgba32Ui | TexelFormat::Rgba32I => 16,
        }
    }

    /// The component type of its texels.
    pub fn component(self) -> TexelComponent {
        match self {
            TexelFormat::R32F | TexelFormat::Rgba32F => TexelComponent::Float,
            TexelFormat::R32Ui | TexelFormat::Rgba32Ui => TexelComponent::Uint,
            TexelFormat::R32I | TexelFormat::Rgba32I => TexelComponent::Int,
        }
    }

    /// The format's name in messages (`r32f`, `rgba32f`, …; GLSL's image format names).
    pub fn name(self) -> &'static str {
        match self {
            TexelFormat::R32F => "r32f",
            TexelFormat::Rgba32F => "rgba32f",
            TexelFormat::R32Ui => "r32ui",
            TexelFormat::Rgba32Ui => "rgba32ui",
            TexelFormat::R32I => "r32i",
            TexelFormat::Rgba32I => "rgba32i",
        }
    }
}

/// One parameter of a kernel, in the order dispatch arguments are passed.
///
/// Storage buffers are matched to the program's buffers by name and take binding points (or
/// argument slots) 0, 1, 2… in the order they appear here; scalars are matched by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Binding {
    /// A storage buffer.
    Storage {
        /// The buffer's name in the source: its block, instance or member name (GLSL), or its
        /// parameter name (OpenCL C).
        name: String,
        /// How the kernel uses it.
        access: Access,
    },
    /// A scalar parameter: a uniform in GLSL, a by-value argument in OpenCL C.
    Scalar {
        /// The parameter's name in the source.
        name: String,
        /// Its type.
        ty: ScalarType,
    },
}

impl Binding {
    /// The binding's name in the source.
    pub fn name(&self) -> &str {
        match self {
            Binding::Storage { name, .. } | Binding::Scalar { name, .. } => name,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Binding::Storage { access: Access::ReadOnly, .. } => "a read-only storage buffer".to_owned(),
            Binding::Storage { access: Access::ReadWrite, .. } => "a storage buffer".to_owned(),
            Binding::Storage { access: Access::Texels(format), .. } => {
                format!("a storage buffer read as {} texels", format.name())
            }
            Binding::Scalar { ty, .. } => format!("a {} scalar", ty.name()),
        }
    }
}

/// A compute kernel: what to compile, and how it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSpec {
    /// The kernel's name, in messages, statistics and cache listings.
    pub name: String,
    /// At most one source per language; each backend compiles the one it takes.
    pub sources: Vec<KernelSource>,
    /// Preprocessor definitions (`NAME` → `VALUE`), applied in order.
    pub defines: Vec<(String, String)>,
    /// The parameters, in the order dispatch arguments are passed.
    pub bindings: Vec<Binding>,
    /// Invocations per workgroup in x, y and z; each at least 1.
    pub workgroup_size: [u32; 3],
    /// `u32` scalars the program is built for (`NAME` → value, the source having that value as
    /// a constant): a dispatch passing any other value is refused before it runs.
    pub pinned: Vec<(String, u32)>,
}

impl KernelSpec {
    /// A kernel with no sources yet; add them with [`glsl`](Self::glsl) and friends.
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        Self {
            name: name.into(),
            sources: Vec::new(),
            defines: Vec::new(),
            bindings: Vec::new(),
            workgroup_size,
            pinned: Vec::new(),
        }
    }

    /// Adds (or replaces) the GLSL source.
    pub fn glsl(self, source: impl Into<String>) -> Self {
        self.with_source(KernelSource::Glsl(source.into()))
    }

    /// Adds (or replaces) the OpenCL C source, running `entry_point`.
    pub fn opencl(self, entry_point: impl Into<String>, source: impl Into<String>) -> Self {
        self.with_source(KernelSource::OpenCl {
            source: source.into(),
            entry_point: entry_point.into(),
            options: Vec::new(),
        })
    }

    /// Adds an OpenCL C compiler option (the OpenCL source must be set first).
    pub fn opencl_option(mut self, option: impl Into<String>) -> Self {
        for source in &mut self.sources {
            if let KernelSource::OpenCl { options, .. } = source {
                options.push(option.into());
                break;
            }
        }
        self
    }

    /// Adds a prebuilt code object for `target`, running `entry_point`.
    pub fn code_object(
        mut self,
        entry_point: impl Into<String>,
        target: impl Into<String>,
        bytes: &[u8],
    ) -> Self {
        let entry_point = entry_point.into();
        let object = CodeObject { target: target.into(), bytes: bytes.into() };
        for source in &mut self.sources {
            if let KernelSource::CodeObjects { entry_point: entry, objects } = source {
                *entry = entry_point;
                objects.retain(|o| o.target != object.target);
                objects.push(object);
                return self;
            }
        }
        self.with_source(KernelSource::CodeObjects { entry_point, objects: vec![object] })
    }

    /// Adds (or replaces) a source of the same language.
    pub fn with_source(mut self, source: KernelSource) -> Self {
        self.sources.retain(|s| s.language() != source.language());
        self.sources.push(source);
        self
    }

    /// Adds the preprocessor definition `#define NAME VALUE` (`-D NAME=VALUE` for OpenCL C).
    pub fn define(mut self, name: impl Into<String>, value: impl ToString) -> Self {
        self.defines.push((name.into(), value.to_string()));
        self
    }

    /// Adds a storage buffer parameter, named as in the source.
    pub fn storage(mut self, name: impl Into<String>, access: Access) -> Self {
        self.bindings.push(Binding::Storage { name: name.into(), access });
        self
    }

    /// Adds a scalar parameter, named as in the source.
    pub fn scalar(mut self, name: impl Into<String>, ty: ScalarType) -> Self {
        self.bindings.push(Binding::Scalar { name: name.into(), ty });
        self
    }

    /// Pins the `u32` scalar `name` to `value`: the program is built for that value alone (a
    /// constant in its source), and every dispatch must pass it.
    pub fn pin(mut self, name: impl Into<String>, value: u32) -> Self {
        self.pinned.push((name.into(), value));
        self
    }

    /// The source in `language`, or an error naming the kernel, the backend and the fix.
    pub fn source(&self, language: SourceLanguage, backend: &str) -> Result<&KernelSource, KernelError> {
        self.sources.iter().find(|s| s.language() == language).ok_or_else(|| KernelError::MissingSource {
            kernel: self.name.clone(),
            language: language.name(),
            backend: backend.to_owned(),
            builder: language.builder(),
        })
    }

    /// Total invocations per workgroup.
    pub fn invocations_per_group(&self) -> u64 {
        self.workgroup_size.iter().map(|&d| u64::from(d)).product()
    }

    /// The storage bindings, in binding-point order.
    pub fn storage_bindings(&self) -> impl Iterator<Item = (&str, Access)> {
        self.bindings.iter().filter_map(|b| match b {
            Binding::Storage { name, access } => Some((name.as_str(), *access)),
            Binding::Scalar { .. } => None,
        })
    }

    /// Checks what can be checked without a device: names, workgroup size, defines.
    pub fn check(&self) -> Result<(), KernelError> {
        let problem = |problem: String| KernelError::InvalidSpec { kernel: self.name.clone(), problem };
        if self.name.trim().is_empty() {
            return Err(problem("the kernel name is empty".into()));
        }
        if self.name.contains('\0') {
            return Err(problem("the kernel name contains a NUL byte".into()));
        }
        if self.workgroup_size.contains(&0) {
            return Err(problem(format!(
                "workgroup size {:?} has a zero dimension; every dimension must be at least 1",
                self.workgroup_size
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for binding in &self.bindings {
            if !is_identifier(binding.name()) {
                return Err(problem(format!(
                    "binding name {:?} is not an identifier (letters, digits and `_`, not starting with a digit)",
                    binding.name()
                )));
            }
            if !seen.insert(binding.name()) {
                return Err(problem(format!("binding `{}` is declared twice", binding.name())));
            }
        }
        for (name, _) in &self.pinned {
            let declared = self
                .bindings
                .iter()
                .any(|b| matches!(b, Binding::Scalar { name: n, ty: ScalarType::U32 } if n == name));
            if !declared {
                return Err(problem(format!("pinned scalar `{name}` is not a declared u32 scalar")));
            }
        }
        for (name, value) in &self.defines {
            if !is_identifier(name) {
                return Err(problem(format!("define name {name:?} is not an identifier")));
            }
            if value.contains(['\n', '\r', '\0']) {
                return Err(problem(format!(
                    "the value of define `{name}` contains a line break or NUL byte"
                )));
            }
        }
        Ok(())
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: what GLSL and OpenCL C accept as a name.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_identifiers() {
        let bad = KernelSpec::new("k", [1, 1, 1]).scalar("n\0", ScalarType::U32);
        let err = bad.check().unwrap_err().to_string();
        assert!(err.contains("not an identifier"), "{err}");
        assert!(KernelSpec::new("k", [1, 1, 1]).scalar("_n2", ScalarType::U32).check().is_ok());
        assert!(KernelSpec::new("k", [1, 1, 1]).storage("2x", Access::ReadOnly).check().is_err());
        assert!(KernelSpec::new("k", [1, 1, 1]).define("A B", 1).check().is_err());
        assert!(KernelSpec::new("k", [0, 1, 1]).check().is_err());
    }

    #[test]
    fn only_declared_u32_scalars_can_be_pinned() {
        let spec = KernelSpec::new("k", [1, 1, 1]).scalar("n", ScalarType::U32).scalar("a", ScalarType::F32);
        assert!(spec.clone().pin("n", 4096).check().is_ok());
        for (name, why) in [("m", "undeclared"), ("a", "not u32")] {
            let err = spec.clone().pin(name, 1).check().unwrap_err().to_string();
            assert!(
                err.contains(&format!("pinned scalar `{name}` is not a declared u32 scalar")),
                "{why}: {err}"
            );
        }
    }

    #[test]
    fn a_missing_source_names_the_backend_and_the_builder() {
        let spec = KernelSpec::new("k", [1, 1, 1]).glsl("void main() {}");
        let err = spec.source(SourceLanguage::OpenCl, "amdgpu").unwrap_err().to_string();
        assert!(
            err.contains("OpenCL C") && err.contains("amdgpu") && err.contains("KernelSpec::opencl"),
            "{err}"
        );
        assert!(spec.source(SourceLanguage::Glsl, "gl").is_ok());
    }
}
