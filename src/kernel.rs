//! `KernelSpec`: a user's compute kernel as every backend sees it — sources per backend language,
//! defines and options, the bindings it takes in order, and its workgroup size — plus the checks
//! that a dispatch's arguments and grid match the spec and the device before anything reaches a
//! driver.

use crate::backend::{Arg, DeviceInfo};
use crate::cache::{CacheKey, GpuId};

/// Why a kernel spec, or a dispatch of it, was refused before reaching a driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    #[error("kernel `{kernel}` has no {language} source; add one with KernelSpec::with_{language}")]
    MissingSource { kernel: String, language: &'static str },
    #[error("kernel `{kernel}`: {problem}")]
    InvalidSpec { kernel: String, problem: String },
    #[error("kernel `{kernel}` takes {expected} arguments ({bindings}) but the dispatch passed {got}")]
    ArgumentCount { kernel: String, expected: usize, got: usize, bindings: String },
    #[error("kernel `{kernel}`: argument {index} (`{name}`) must be {expected}, got {got}")]
    ArgumentType { kernel: String, index: usize, name: String, expected: String, got: String },
    #[error("kernel `{kernel}`: {problem} (device limit: {limit})")]
    ExceedsLimit { kernel: String, problem: String, limit: String },
}

/// The language a kernel source is written in; each backend consumes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceLanguage {
    /// GLSL compute shader for the gl backend. Write it without `#version` and without a
    /// `layout(local_size_*) in;` line: the backend adds both from the spec.
    Glsl,
    /// OpenCL C for the amdgpu backend.
    OpenCl,
}

impl SourceLanguage {
    pub fn name(self) -> &'static str {
        match self {
            SourceLanguage::Glsl => "glsl",
            SourceLanguage::OpenCl => "opencl",
        }
    }
}

/// The element type of a scalar kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarType {
    U32,
    I32,
    F32,
}

impl ScalarType {
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::U32 => "u32",
            ScalarType::I32 => "i32",
            ScalarType::F32 => "f32",
        }
    }
}

/// How a kernel uses a storage buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// One parameter of a kernel, in the order dispatch arguments are passed.
///
/// On gl, storage buffers bind to SSBO binding points 0, 1, 2… in the order they appear here
/// (scalars do not take a binding point) and scalars are uniforms looked up by `name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Binding {
    Storage { name: String, access: Access },
    Scalar { name: String, ty: ScalarType },
}

impl Binding {
    pub fn name(&self) -> &str {
        match self {
            Binding::Storage { name, .. } | Binding::Scalar { name, .. } => name,
        }
    }

    fn describe(&self) -> String {
        match self {
            Binding::Storage { .. } => "a storage buffer".to_owned(),
            Binding::Scalar { ty, .. } => format!("a {} scalar", ty.name()),
        }
    }
}

/// A compute kernel: what to compile, and how it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSpec {
    pub name: String,
    /// The function to run: `main` for GLSL; the `__kernel` function's name for OpenCL C.
    pub entry_point: String,
    pub sources: Vec<(SourceLanguage, String)>,
    /// Preprocessor definitions (`NAME` → `VALUE`), applied in order.
    pub defines: Vec<(String, String)>,
    /// Extra compiler options for backends that take them (OpenCL C).
    pub options: Vec<String>,
    pub bindings: Vec<Binding>,
    pub workgroup_size: [u32; 3],
}

impl KernelSpec {
    /// A kernel with no sources yet; add them with [`with_glsl`](Self::with_glsl) and friends.
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        Self {
            name: name.into(),
            entry_point: "main".to_owned(),
            sources: Vec::new(),
            defines: Vec::new(),
            options: Vec::new(),
            bindings: Vec::new(),
            workgroup_size,
        }
    }

    pub fn with_glsl(mut self, source: impl Into<String>) -> Self {
        self.set_source(SourceLanguage::Glsl, source.into());
        self
    }

    pub fn with_opencl(mut self, entry_point: impl Into<String>, source: impl Into<String>) -> Self {
        self.set_source(SourceLanguage::OpenCl, source.into());
        self.entry_point = entry_point.into();
        self
    }

    pub fn define(mut self, name: impl Into<String>, value: impl ToString) -> Self {
        self.defines.push((name.into(), value.to_string()));
        self
    }

    pub fn option(mut self, option: impl Into<String>) -> Self {
        self.options.push(option.into());
        self
    }

    pub fn storage(mut self, name: impl Into<String>, access: Access) -> Self {
        self.bindings.push(Binding::Storage { name: name.into(), access });
        self
    }

    pub fn scalar(mut self, name: impl Into<String>, ty: ScalarType) -> Self {
        self.bindings.push(Binding::Scalar { name: name.into(), ty });
        self
    }

    fn set_source(&mut self, language: SourceLanguage, source: String) {
        self.sources.retain(|(l, _)| *l != language);
        self.sources.push((language, source));
    }

    /// The source for `language`, or an error naming the kernel and the missing language.
    pub fn source(&self, language: SourceLanguage) -> Result<&str, KernelError> {
        self.sources.iter().find(|(l, _)| *l == language).map(|(_, s)| s.as_str()).ok_or_else(|| {
            KernelError::MissingSource { kernel: self.name.clone(), language: language.name() }
        })
    }

    /// Total invocations per workgroup.
    pub fn invocations_per_group(&self) -> u64 {
        self.workgroup_size.iter().map(|&d| u64::from(d)).product()
    }

    /// Checks the spec against a device's limits.
    pub fn validate(&self, device: &DeviceInfo) -> Result<(), KernelError> {
        let problem = |problem: String| KernelError::InvalidSpec { kernel: self.name.clone(), problem };
        if self.name.is_empty() {
            return Err(problem("the kernel name is empty".into()));
        }
        if self.workgroup_size.contains(&0) {
            return Err(problem(format!(
                "workgroup size {:?} has a zero dimension; every dimension must be at least 1",
                self.workgroup_size
            )));
        }
        for (axis, (&size, &max)) in
            self.workgroup_size.iter().zip(device.limits.max_workgroup_size.iter()).enumerate()
        {
            if size > max {
                return Err(KernelError::ExceedsLimit {
                    kernel: self.name.clone(),
                    problem: format!("workgroup size {} on axis {} is too large", size, AXES[axis]),
                    limit: max.to_string(),
                });
            }
        }
        if self.invocations_per_group() > u64::from(device.limits.max_workgroup_invocations) {
            return Err(KernelError::ExceedsLimit {
                kernel: self.name.clone(),
                problem: format!("workgroup size {:?} has too many invocations", self.workgroup_size),
                limit: device.limits.max_workgroup_invocations.to_string(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for binding in &self.bindings {
            if !seen.insert(binding.name()) {
                return Err(problem(format!("binding `{}` is declared twice", binding.name())));
            }
        }
        Ok(())
    }

    /// Checks a dispatch's arguments and grid against the spec and the device.
    pub fn validate_dispatch(
        &self,
        device: &DeviceInfo,
        args: &[Arg<'_>],
        groups: [u32; 3],
    ) -> Result<(), KernelError> {
        if args.len() != self.bindings.len() {
            return Err(KernelError::ArgumentCount {
                kernel: self.name.clone(),
                expected: self.bindings.len(),
                got: args.len(),
                bindings: self.bindings.iter().map(Binding::name).collect::<Vec<_>>().join(", "),
            });
        }
        for (index, (binding, arg)) in self.bindings.iter().zip(args).enumerate() {
            let matches = matches!(
                (binding, arg),
                (Binding::Storage { .. }, Arg::Buffer(_))
                    | (Binding::Scalar { ty: ScalarType::U32, .. }, Arg::U32(_))
                    | (Binding::Scalar { ty: ScalarType::I32, .. }, Arg::I32(_))
                    | (Binding::Scalar { ty: ScalarType::F32, .. }, Arg::F32(_))
            );
            if !matches {
                return Err(KernelError::ArgumentType {
                    kernel: self.name.clone(),
                    index,
                    name: binding.name().to_owned(),
                    expected: binding.describe(),
                    got: arg.describe(),
                });
            }
        }
        for (axis, (&count, &max)) in groups.iter().zip(device.limits.max_workgroup_count.iter()).enumerate()
        {
            if count == 0 || count > max {
                return Err(KernelError::ExceedsLimit {
                    kernel: self.name.clone(),
                    problem: format!(
                        "workgroup count {count} on axis {} must be between 1 and the limit",
                        AXES[axis]
                    ),
                    limit: max.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The cache key of this kernel on `gpu`: every input that changes the compiled program.
    pub fn cache_key(&self, gpu: &GpuId, language: SourceLanguage) -> Result<CacheKey, KernelError> {
        let source = self.source(language)?;
        let mut parts: Vec<&[u8]> =
            vec![language.name().as_bytes(), self.entry_point.as_bytes(), source.as_bytes()];
        let workgroup: Vec<u8> = self.workgroup_size.iter().flat_map(|d| d.to_le_bytes()).collect();
        parts.push(&workgroup);
        for (name, value) in &self.defines {
            parts.push(name.as_bytes());
            parts.push(value.as_bytes());
        }
        for option in &self.options {
            parts.push(option.as_bytes());
        }
        Ok(CacheKey::derive(gpu, &parts))
    }
}

const AXES: [&str; 3] = ["x", "y", "z"];
