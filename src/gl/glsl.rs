//! The GLSL the driver compiles for a kernel: `#version` and the user's `#extension` lines first,
//! then the spec's defines and workgroup size, then `#line 1` and the user's source (with those
//! lines blanked, so the driver's log points at the user's own line numbers and
//! `gl_WorkGroupSize` works anywhere). A `local_size` layout in the source must agree with the
//! spec. Also reads the storage block declarations (name, instance name, `readonly`), which GL's
//! introspection does not report.

use crate::hal::Api;
use crate::kernel::{KernelError, KernelSource, KernelSpec, SourceLanguage};

/// A `buffer` block as declared in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockDecl {
    pub name: String,
    pub instance: Option<String>,
    pub read_only: bool,
    /// The last member, if it is a runtime-sized array (`float data[];`).
    pub runtime_array: Option<String>,
}

/// The text handed to the driver, and what was read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assembled {
    pub text: String,
    pub blocks: Vec<BlockDecl>,
}

const DEFAULT_VERSION: &str = "#version 430 core";

/// The GLSL text the gl backend hands its driver for `kernel`: its GLSL source with `#version`,
/// the user's `#extension` lines, the spec's defines and workgroup size put in front.
///
/// For code that runs GL itself and should compile exactly what the backend compiles (the
/// benchmark lab's plain-GL loops on a [`PlainContext`](super::PlainContext)).
///
/// # Errors
/// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) when the spec has no GLSL source,
/// [`ErrorKind::InvalidKernel`](crate::ErrorKind::InvalidKernel) when the source disagrees with
/// the spec (a `local_size` layout other than its workgroup size).
pub fn driver_glsl(kernel: &KernelSpec) -> crate::Result<String> {
    let KernelSource::Glsl(source) = kernel.source(SourceLanguage::Glsl, super::Gl::NAME)? else {
        unreachable!("KernelSpec::source returns a source of the language asked for")
    };
    Ok(assemble(kernel, source)?.text)
}

pub(crate) fn assemble(spec: &KernelSpec, source: &str) -> Result<Assembled, KernelError> {
    let invalid = |problem: String| KernelError::InvalidSpec { kernel: spec.name.clone(), problem };
    let code = without_comments(source);
    let mut version = None;
    let mut extensions = Vec::new();
    let mut body = String::with_capacity(source.len() + 1);
    for (line, code_line) in source.split_inclusive('\n').zip(code.split_inclusive('\n')) {
        let directive = code_line.trim_start();
        let ending = if line.ends_with('\n') { "\n" } else { "" };
        if directive.starts_with("#version") {
            if version.is_some() || !extensions.is_empty() || !body.trim().is_empty() {
                return Err(invalid("`#version` must be the first line of the GLSL source".into()));
            }
            version = Some(directive.trim_end().to_owned());
            body.push_str(ending);
        } else if directive.starts_with("#extension") {
            extensions.push(directive.trim_end().to_owned());
            body.push_str(ending);
        } else {
            body.push_str(line);
        }
    }
    let tokens = tokenize(&code);
    let declared_size = local_size(&tokens).map_err(&invalid)?;
    if let Some(declared) = declared_size {
        if declared != spec.workgroup_size {
            return Err(invalid(format!(
                "the GLSL source declares local_size {declared:?} but the spec's workgroup size is {:?}; \
                 drop the layout line from the source (the spec's size is added) or make them agree",
                spec.workgroup_size
            )));
        }
    }
    let mut text = String::with_capacity(body.len() + 256);
    text.push_str(version.as_deref().unwrap_or(DEFAULT_VERSION));
    text.push('\n');
    for extension in &extensions {
        text.push_str(extension);
        text.push('\n');
    }
    for (name, value) in &spec.defines {
        text.push_str(&format!("#define {name} {value}\n"));
    }
    if declared_size.is_none() {
        let [x, y, z] = spec.workgroup_size;
        text.push_str(&format!("layout(local_size_x = {x}, local_size_y = {y}, local_size_z = {z}) in;\n"));
    }
    text.push_str("#line 1\n");
    text.push_str(&body);
    Ok(Assembled { text, blocks: blocks(&tokens) })
}

/// The source with comments replaced by spaces (line breaks kept), so positions and line
/// numbers stay those of the source.
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                out.push(' ');
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                    out.push(' ');
                }
            }
            ('/', Some('*')) => {
                chars.next();
                out.push_str("  ");
                let mut previous = ' ';
                for c in chars.by_ref() {
                    out.push(if c == '\n' { '\n' } else { ' ' });
                    if previous == '*' && c == '/' {
                        break;
                    }
                    previous = c;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Identifiers, numbers and single punctuation characters, outside preprocessor lines.
fn tokenize(code: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    for line in code.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_whitespace() {
                i += 1;
            } else if b.is_ascii_alphanumeric() || b == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                tokens.push(&line[start..i]);
            } else {
                let width = line[i..].chars().next().map_or(1, char::len_utf8);
                tokens.push(&line[i..i + width]);
                i += width;
            }
        }
    }
    tokens
}

/// The workgroup size a `layout(local_size_…) in;` declares, if the source has one.
fn local_size(tokens: &[&str]) -> Result<Option<[u32; 3]>, String> {
    let mut size = [1u32; 3];
    let mut found = false;
    for (i, token) in tokens.iter().enumerate() {
        let axis = match *token {
            "local_size_x" => 0,
            "local_size_y" => 1,
            "local_size_z" => 2,
            t if t.starts_with("local_size_") => {
                return Err(format!(
                "the GLSL source uses `{t}`; the workgroup size must be a number, and it comes from the spec"
            ))
            }
            _ => continue,
        };
        found = true;
        let value = match (tokens.get(i + 1), tokens.get(i + 2)) {
            (Some(&"="), Some(value)) => value.trim_end_matches(['u', 'U']).parse::<u32>().ok(),
            _ => None,
        };
        size[axis] = value.ok_or_else(|| {
            format!(
                "the GLSL source's `{token}` is not a plain number; give the workgroup size in the spec only"
            )
        })?;
    }
    Ok(found.then_some(size))
}

/// Every global `buffer` block declaration.
fn blocks(tokens: &[&str]) -> Vec<BlockDecl> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i] {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    start = i + 1;
                }
            }
            ";" if depth == 0 => start = i + 1,
            "buffer" if depth == 0 => {
                let read_only = tokens[start..i].contains(&"readonly");
                let Some(name) = tokens.get(i + 1).filter(|t| is_name(t)) else {
                    i += 1;
                    continue;
                };
                // Skip the member list to the matching brace.
                let mut j = i + 2;
                let mut inner = 0usize;
                while j < tokens.len() {
                    match tokens[j] {
                        "{" => inner += 1,
                        "}" => {
                            inner = inner.saturating_sub(1);
                            if inner == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let instance = tokens.get(j + 1).filter(|t| is_name(t)).map(|t| (*t).to_owned());
                let runtime_array = match tokens.get(j.saturating_sub(4)..j) {
                    Some([member, "[", "]", ";"]) if is_name(member) => Some((*member).to_owned()),
                    _ => None,
                };
                out.push(BlockDecl { name: (*name).to_owned(), instance, read_only, runtime_array });
                i = j;
                start = j + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn is_name(token: &str) -> bool {
    crate::kernel::is_identifier(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(source: &str) -> (KernelSpec, String) {
        (KernelSpec::new("k", [8, 4, 1]).define("N", 3), source.to_owned())
    }

    #[test]
    fn version_and_layout_come_first_and_line_numbers_are_kept() {
        let (spec, source) = spec("void main() { uvec3 s = gl_WorkGroupSize; }\n");
        let assembled = assemble(&spec, &source).unwrap();
        assert_eq!(
            assembled.text,
            "#version 430 core\n#define N 3\n\
             layout(local_size_x = 8, local_size_y = 4, local_size_z = 1) in;\n#line 1\n\
             void main() { uvec3 s = gl_WorkGroupSize; }\n"
        );
    }

    #[test]
    fn the_users_version_and_extensions_are_hoisted_in_place() {
        let (spec, source) =
            spec("#version 450\n#extension GL_KHR_shader_subgroup_basic : require\nvoid main() {}\n");
        let text = assemble(&spec, &source).unwrap().text;
        assert!(text
            .starts_with("#version 450\n#extension GL_KHR_shader_subgroup_basic : require\n#define N 3\n"));
        assert!(text.ends_with("#line 1\n\n\nvoid main() {}\n"), "{text}");
    }

    #[test]
    fn an_own_local_size_must_agree_with_the_spec() {
        let (spec, _) = spec("");
        let same = "layout(local_size_x = 8, local_size_y = 4) in;\nvoid main() {}\n";
        let text = assemble(&spec, same).unwrap().text;
        assert_eq!(text.matches("local_size_x").count(), 1, "{text}");
        let other = "layout(local_size_x = 64) in; // the spec says 8x4\nvoid main() {}\n";
        let err = assemble(&spec, other).unwrap_err().to_string();
        assert!(err.contains("[64, 1, 1]") && err.contains("[8, 4, 1]"), "{err}");
        let commented = "// layout(local_size_x = 64) in;\nvoid main() {}\n";
        assert!(assemble(&spec, commented).is_ok());
        assert!(assemble(&spec, "layout(local_size_x_id = 0) in;\nvoid main() {}\n").is_err());
    }

    #[test]
    fn buffer_blocks_are_read_with_their_qualifiers() {
        let source = "layout(std430, binding = 0) readonly buffer X { float x[]; };\n\
                      layout(std430, binding = 1) buffer Y { float y[]; } ys;\n\
                      /* readonly */ layout(binding = 2) coherent buffer Z { uint z; };\n\
                      void main() { float buffered = 1.0; }";
        let (spec, _) = spec("");
        let blocks = assemble(&spec, source).unwrap().blocks;
        assert_eq!(
            blocks,
            vec![
                BlockDecl {
                    name: "X".into(),
                    instance: None,
                    read_only: true,
                    runtime_array: Some("x".into())
                },
                BlockDecl {
                    name: "Y".into(),
                    instance: Some("ys".into()),
                    read_only: false,
                    runtime_array: Some("y".into())
                },
                BlockDecl { name: "Z".into(), instance: None, read_only: false, runtime_array: None },
            ]
        );
    }
}
