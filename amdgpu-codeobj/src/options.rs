//! The OpenCL C compiler options a kernel may pass (what users give `clBuildProgram`): a vetted
//! list, each checked and turned into the clang flags that do it. Anything else is refused with
//! the list of what is accepted, so that no option reaches the compiler unexamined (an `-o`,
//! `-Xclang`, `-mcpu` or `-fplugin` would change what is built or where it goes).
//!
//! Accepted: `-cl-std=CL1.2|CL2.0|CL3.0`; the math options `-cl-fast-relaxed-math`,
//! `-cl-mad-enable`, `-cl-finite-math-only`, `-cl-denorms-are-zero`, `-cl-no-signed-zeros`,
//! `-cl-unsafe-math-optimizations`, `-cl-single-precision-constant`; `-O0`..`-O3` and
//! `-cl-opt-disable`; `-D name` / `-Dname=value`; `-I dir` for an absolute path to an existing
//! directory (its headers become part of the program's identity: see
//! [`OpenClOptions::include_material`]); `-w`; `-mwavefrontsize64`. Each entry may hold several
//! options separated by spaces, as one `clBuildProgram` string does.

use std::fmt;
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

/// The option that compiles for wave64.
pub const WAVE64: &str = "-mwavefrontsize64";

/// What is accepted, for messages.
pub const ACCEPTED: &str =
    "-cl-std=CL1.2, -cl-std=CL2.0, -cl-std=CL3.0, -cl-fast-relaxed-math, -cl-mad-enable, \
-cl-finite-math-only, -cl-denorms-are-zero, -cl-no-signed-zeros, -cl-unsafe-math-optimizations, \
-cl-single-precision-constant, -cl-opt-disable, -O0, -O1, -O2, -O3, -D <name>[=<value>], \
-I <absolute directory>, -w, -mwavefrontsize64";

/// The math options, in the order their flags are given to clang.
const MATH: [&str; 7] = [
    "-cl-fast-relaxed-math",
    "-cl-mad-enable",
    "-cl-finite-math-only",
    "-cl-denorms-are-zero",
    "-cl-no-signed-zeros",
    "-cl-unsafe-math-optimizations",
    "-cl-single-precision-constant",
];

/// Files and bytes an include directory may hold: its headers are read for every program that
/// names it, so a directory of a whole tree is refused rather than hashed for seconds.
const INCLUDE_MAX_FILES: usize = 4096;
const INCLUDE_MAX_BYTES: u64 = 64 << 20;

/// Why an option list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    /// The option (or its argument) at fault.
    pub option: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenCL compiler option `{}` {}", self.option, self.reason)
    }
}

impl std::error::Error for OptionError {}

/// A kernel's OpenCL C options, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct OpenClOptions {
    /// `-cl-std=` (`CL1.2`, `CL2.0` or `CL3.0`); None: the default, CL2.0.
    pub std: Option<String>,
    /// `-O<n>`; None: the default, 3.
    pub opt_level: Option<u8>,
    /// The math options given, each once, in the order their flags are given to clang
    /// (`-cl-fast-relaxed-math` first, `-cl-single-precision-constant` last).
    pub math: Vec<String>,
    /// `-D` definitions in order (a definition without `=` defines the name as 1).
    pub defines: Vec<(String, Option<String>)>,
    /// `-I` directories, canonical.
    pub include_dirs: Vec<PathBuf>,
    /// `-w`: no warnings.
    pub no_warnings: bool,
    /// `-mwavefrontsize64`.
    pub wave64: bool,
}

fn refuse(option: &str, reason: impl Into<String>) -> OptionError {
    OptionError { option: option.to_string(), reason: reason.into() }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl OpenClOptions {
    /// Checks `options` (each entry one or more options separated by whitespace).
    pub fn parse(options: &[String]) -> Result<Self, OptionError> {
        let tokens: Vec<&str> = options.iter().flat_map(|o| o.split_whitespace()).collect();
        let mut out = OpenClOptions::default();
        let mut i = 0;
        while i < tokens.len() {
            let token = tokens[i];
            i += 1;
            // An option whose argument may be the next token.
            let mut argument = |prefix: &str| -> Result<String, OptionError> {
                match token.strip_prefix(prefix) {
                    Some("") => {
                        let next = tokens.get(i).ok_or_else(|| refuse(token, "needs an argument"))?;
                        i += 1;
                        Ok(next.to_string())
                    }
                    Some(rest) => Ok(rest.to_string()),
                    None => Err(refuse(token, "is not accepted")),
                }
            };
            match token {
                WAVE64 => out.wave64 = true,
                "-w" => out.no_warnings = true,
                "-cl-opt-disable" => out.opt_level = Some(0),
                "-O0" | "-O1" | "-O2" | "-O3" => out.opt_level = Some(token.as_bytes()[2] - b'0'),
                t if MATH.contains(&t) => {
                    if !out.math.iter().any(|m| m == t) {
                        out.math.push(t.to_string());
                    }
                }
                t if t.starts_with("-cl-std=") => {
                    let std = &t["-cl-std=".len()..];
                    if !matches!(std, "CL1.2" | "CL2.0" | "CL3.0") {
                        return Err(refuse(
                            t,
                            "names a version the backend does not compile (CL1.2, CL2.0 or CL3.0)",
                        ));
                    }
                    out.std = Some(std.to_string());
                }
                t if t.starts_with("-D") => {
                    let definition = argument("-D")?;
                    let (name, value) = match definition.split_once('=') {
                        Some((name, value)) => (name.to_string(), Some(value.to_string())),
                        None => (definition.clone(), None),
                    };
                    if !is_identifier(&name) {
                        return Err(refuse(
                            &definition,
                            "does not define a macro name (-D NAME or -D NAME=VALUE)",
                        ));
                    }
                    out.defines.push((name, value));
                }
                t if t.starts_with("-I") => {
                    let dir = argument("-I")?;
                    out.include_dirs.push(include_dir(&dir)?);
                }
                t => {
                    return Err(refuse(
                        t,
                        format!("is not accepted by the amdgpu backend; it accepts {ACCEPTED}"),
                    ));
                }
            }
        }
        out.math.sort_by_key(|m| MATH.iter().position(|k| k == m));
        Ok(out)
    }

    /// Whether the options flush f32 denormals (`-cl-denorms-are-zero`).
    pub fn flushes_denormals(&self) -> bool {
        self.math.iter().any(|m| m == "-cl-denorms-are-zero")
    }

    /// The clang flags besides `-cl-std` and `-O` (which replace the defaults in place):
    /// math options, include directories, definitions, `-w`.
    pub fn clang_flags(&self) -> Vec<String> {
        let mut flags: Vec<String> = self.math.clone();
        for dir in &self.include_dirs {
            flags.push(format!("-I{}", dir.display()));
        }
        for (name, value) in &self.defines {
            flags.push(match value {
                Some(value) => format!("-D{name}={value}"),
                None => format!("-D{name}"),
            });
        }
        if self.no_warnings {
            flags.push("-w".into());
        }
        flags
    }

    /// What the include directories hold, for the cache key: every file under each (relative
    /// path and contents), so that editing a header compiles again. Refused (naming the
    /// directory) when a directory holds more than 4096 files or 64 MiB, or cannot be read.
    pub fn include_material(&self) -> Result<String, OptionError> {
        let mut out = String::new();
        for dir in &self.include_dirs {
            let mut hasher = Xxh3::new();
            let mut files = Vec::new();
            collect_files(dir, dir, &mut files).map_err(|e| refuse(&dir.display().to_string(), e))?;
            files.sort();
            if files.len() > INCLUDE_MAX_FILES {
                return Err(refuse(
                    &dir.display().to_string(),
                    format!(
                        "names a directory of {} files; an include directory may hold {INCLUDE_MAX_FILES}",
                        files.len()
                    ),
                ));
            }
            let mut bytes = 0u64;
            for relative in &files {
                let contents = std::fs::read(dir.join(relative)).map_err(|e| {
                    refuse(
                        &dir.display().to_string(),
                        format!("cannot be read ({}: {e})", relative.display()),
                    )
                })?;
                bytes += contents.len() as u64;
                if bytes > INCLUDE_MAX_BYTES {
                    return Err(refuse(
                        &dir.display().to_string(),
                        "names a directory of more than 64 MiB; an include directory is for headers",
                    ));
                }
                hasher.update(relative.to_string_lossy().as_bytes());
                hasher.update(&[0]);
                hasher.update(&(contents.len() as u64).to_le_bytes());
                hasher.update(&contents);
            }
            out.push_str(&format!("include {} {:016x}\n", dir.display(), hasher.digest()));
        }
        Ok(out)
    }
}

/// An `-I` directory: absolute, existing, a directory; canonical (so that two spellings of one
/// directory are one key).
fn include_dir(dir: &str) -> Result<PathBuf, OptionError> {
    let path = Path::new(dir);
    if !path.is_absolute() {
        return Err(refuse(
            dir,
            "is not an absolute path: an include directory must not depend on the working directory",
        ));
    }
    let canonical =
        std::fs::canonicalize(path).map_err(|e| refuse(dir, format!("cannot be opened ({e})")))?;
    if !canonical.is_dir() {
        return Err(refuse(dir, "is not a directory"));
    }
    Ok(canonical)
}

/// The files under `dir` (relative to `root`), recursively, stopping early past the limit.
fn collect_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot be listed ({e})"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot be listed ({e})"))?;
        let kind = entry.file_type().map_err(|e| format!("cannot be listed ({e})"))?;
        let path = entry.path();
        if kind.is_dir() {
            collect_files(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path.strip_prefix(root).map(Path::to_path_buf).unwrap_or(path));
        }
        if out.len() > INCLUDE_MAX_FILES {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(options: &[&str]) -> Result<OpenClOptions, OptionError> {
        OpenClOptions::parse(&options.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn the_vetted_options_are_accepted() {
        let o = parse(&[
            "-cl-std=CL3.0 -cl-mad-enable",
            "-cl-fast-relaxed-math",
            "-O1",
            "-D",
            "N=4",
            "-DFLAG",
            "-mwavefrontsize64",
            "-cl-mad-enable",
        ])
        .unwrap();
        assert_eq!(o.std.as_deref(), Some("CL3.0"));
        assert_eq!(o.opt_level, Some(1));
        assert_eq!(o.math, ["-cl-fast-relaxed-math", "-cl-mad-enable"]);
        assert_eq!(o.defines, [("N".to_string(), Some("4".to_string())), ("FLAG".to_string(), None)]);
        assert!(o.wave64);
        assert_eq!(o.clang_flags(), ["-cl-fast-relaxed-math", "-cl-mad-enable", "-DN=4", "-DFLAG"]);
        assert!(!o.flushes_denormals());
        assert!(parse(&["-cl-denorms-are-zero"]).unwrap().flushes_denormals());
        assert_eq!(parse(&["-cl-opt-disable"]).unwrap().opt_level, Some(0));
    }

    #[test]
    fn anything_else_is_refused_with_the_list() {
        for bad in
            ["-o /tmp/x", "-Xclang -load", "-mcpu=gfx90a", "-cl-std=CL1.1", "-fplugin=x.so", "-D 1X=2", "-D"]
        {
            let err = parse(&[bad]).unwrap_err();
            assert!(!err.to_string().is_empty(), "{bad}");
            if bad.starts_with("-o")
                || bad.starts_with("-X")
                || bad.starts_with("-m")
                || bad.starts_with("-f")
            {
                assert!(err.to_string().contains(ACCEPTED), "{err}");
            }
        }
    }

    #[test]
    fn include_directories_are_absolute_existing_and_hashed_by_contents() {
        assert!(parse(&["-I include"]).unwrap_err().reason.contains("absolute"));
        assert!(parse(&["-I/nonexistent/sparkle-include"]).is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.h"), "#define A 1\n").unwrap();
        let options = parse(&[&format!("-I{}", dir.path().display())]).unwrap();
        let before = options.include_material().unwrap();
        assert!(before.starts_with("include "), "{before}");
        std::fs::write(dir.path().join("a.h"), "#define A 2\n").unwrap();
        assert_ne!(options.include_material().unwrap(), before, "an edited header changes the key");
        let file = dir.path().join("a.h");
        assert!(parse(&[&format!("-I{}", file.display())]).unwrap_err().reason.contains("not a directory"));
    }
}
