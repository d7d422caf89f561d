//! OpenCL `printf` on amdgpu: the layout of a dispatch's printf buffer, the code object's format
//! table (`amdhsa.printf` metadata), and turning the records kernels wrote into text on the
//! host, the way C's printf would have printed them.
//!
//! clang lowers each `printf` call into a call of `__printf_alloc(bytes)` followed by stores of
//! the format's id and the arguments into the bytes it returned; the format strings themselves
//! stay in the metadata (`id:count:size,...:format` after splitting on `:`). The backend
//! defines `__printf_alloc` (see `compile`): it reserves whole records in the buffer whose
//! address the kernel finds in its `hidden_printf_buffer` argument, and counts the records that
//! did not fit instead of writing part of them — a full buffer loses records, never corrupts
//! them.
//!
//! Buffer layout (little-endian): `used` (u32, bytes of records written), `capacity` (u32, bytes
//! available for records), `dropped` (u32, records that did not fit), a reserved u32, then the
//! records back to back.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Bytes before the first record.
pub const HEADER_BYTES: usize = 16;
/// Bytes of records one dispatch's printf buffer holds.
pub const DEFAULT_CAPACITY: u32 = 1 << 20;

/// The device half, appended to OpenCL C that calls printf before it is compiled: clang's
/// printf lowering calls `__printf_alloc(bytes)` for each record. It finds the buffer in the
/// kernel's hidden arguments (code object v4, which the compiler driver asks for: after the
/// three 64-bit global offsets), reserves `bytes` with a compare-and-swap that never moves
/// `used` past `capacity`, and on a full buffer counts the record in `dropped` and returns
/// null, which the lowering checks before storing.
pub const DEVICE_RUNTIME: &str = r#"
__global char *__printf_alloc(uint bytes) {
    __constant ulong *hidden = (__constant ulong *)__builtin_amdgcn_implicitarg_ptr();
    volatile __global uint *header = (volatile __global uint *)hidden[3];
    if (header == 0) return 0;
    uint capacity = header[1];
    uint used = header[0];
    for (;;) {
        if (bytes > capacity || used > capacity - bytes) {
            atomic_inc(header + 2);
            return 0;
        }
        uint seen = atomic_cmpxchg(header, used, used + bytes);
        if (seen == used) break;
        used = seen;
    }
    return (__global char *)header + 16 + used;
}
"#;

/// Whether OpenCL C source may call printf (then [`DEVICE_RUNTIME`] goes with it).
pub fn calls_printf(source: &str) -> bool {
    source.contains("printf")
}

/// The header of an empty buffer of `capacity` bytes of records.
pub fn empty_header(capacity: u32) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[4..8].copy_from_slice(&capacity.to_le_bytes());
    h
}

/// One format of the code object's printf table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Format {
    /// Bytes each argument occupies in a record, in order.
    arg_sizes: Vec<u32>,
    text: String,
}

/// The printf formats of a code object, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrintfFormats {
    formats: BTreeMap<u32, Format>,
}

impl PrintfFormats {
    /// Parses the `amdhsa.printf` entries (`id:count:size:...:format`, the format keeping any
    /// further colons); the error names the entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut formats = BTreeMap::new();
        for entry in entries {
            let bad = |why: &str| format!("printf metadata entry `{entry}`: {why}");
            let mut parts = entry.splitn(3, ':');
            let id: u32 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(|| bad("no format id"))?;
            let count: usize =
                parts.next().and_then(|p| p.parse().ok()).ok_or_else(|| bad("no argument count"))?;
            let mut rest = parts.next().ok_or_else(|| bad("no format"))?;
            let mut arg_sizes = Vec::with_capacity(count);
            for _ in 0..count {
                let (size, tail) = rest.split_once(':').ok_or_else(|| bad("fewer sizes than arguments"))?;
                let size: u32 = size.parse().map_err(|_| bad("an argument size is not a number"))?;
                if size == 0 || size > 128 {
                    return Err(bad("an argument size is outside 1..=128 bytes"));
                }
                arg_sizes.push(size);
                rest = tail;
            }
            formats.insert(id, Format { arg_sizes, text: unescape(rest) });
        }
        Ok(Self { formats })
    }

    /// Whether the code object declares no formats (does not call printf).
    pub fn is_empty(&self) -> bool {
        self.formats.is_empty()
    }
}

/// LLVM writes the format with C escapes for control characters (`\n`, `\t`, `\\`, `\NNN`).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\u{7}'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some(d @ '0'..='7') => {
                let mut value = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(v) => {
                            value = value * 8 + v;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(value).unwrap_or('?'));
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// What one dispatch printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintfOutput {
    /// The kernel that printed it.
    pub kernel: String,
    /// The records, formatted, in the order the kernel reserved them.
    pub text: String,
    /// Records that did not fit in the buffer and were not printed.
    pub dropped_records: u32,
    /// Set when the buffer held something that is not a record of this kernel's formats; the
    /// text stops before it.
    pub damaged: Option<String>,
}

/// Where printf output goes: standard output (the default), or a function of the caller's.
/// Either way each dispatch's output is also logged through `tracing` (target
/// `sparkle::printf`).
#[derive(Clone, Default)]
pub enum PrintfSink {
    /// Standard output of the process.
    #[default]
    Stdout,
    /// Called once per dispatch that printed anything, in submission order. It runs on the
    /// thread that noticed the submission finished and must not wait for the device.
    Callback(Arc<dyn Fn(&PrintfOutput) + Send + Sync>),
}

impl std::fmt::Debug for PrintfSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Stdout => "Stdout",
            Self::Callback(_) => "Callback",
        })
    }
}

impl PrintfSink {
    /// Delivers one dispatch's output.
    pub fn deliver(&self, output: &PrintfOutput) {
        if !output.text.is_empty() {
            tracing::info!(target: "sparkle::printf", kernel = %output.kernel, "{}", output.text.trim_end());
        }
        if output.dropped_records > 0 {
            tracing::warn!(
                kernel = %output.kernel,
                dropped = output.dropped_records,
                "the printf buffer was full: {} records were not printed",
                output.dropped_records
            );
        }
        if let Some(why) = &output.damaged {
            tracing::warn!(kernel = %output.kernel, "printf output cut short: {why}");
        }
        match self {
            Self::Stdout => {
                use std::io::Write as _;
                let mut out = std::io::stdout().lock();
                // Printing is best effort, as C's printf: a closed stdout loses the text.
                let _ = out.write_all(output.text.as_bytes());
                let _ = out.flush();
            }
            Self::Callback(f) => f(output),
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Formats the records of one dispatch's printf buffer (`buffer` from its start).
pub fn decode(kernel: &str, formats: &PrintfFormats, buffer: &[u8]) -> PrintfOutput {
    let mut out =
        PrintfOutput { kernel: kernel.to_owned(), text: String::new(), dropped_records: 0, damaged: None };
    let (Some(used), Some(capacity), Some(dropped)) =
        (u32_at(buffer, 0), u32_at(buffer, 4), u32_at(buffer, 8))
    else {
        out.damaged = Some("the printf buffer is shorter than its header".into());
        return out;
    };
    out.dropped_records = dropped;
    let end = HEADER_BYTES + used.min(capacity) as usize;
    let Some(records) = buffer.get(HEADER_BYTES..end) else {
        out.damaged = Some(format!("the header claims {used} bytes of records, more than the buffer holds"));
        return out;
    };
    let mut at = 0usize;
    while at < records.len() {
        let Some(id) = u32_at(records, at) else {
            out.damaged = Some(format!("a record at offset {at} is cut short"));
            break;
        };
        let Some(format) = formats.formats.get(&id) else {
            out.damaged = Some(format!("unknown format id {id} at offset {at}"));
            break;
        };
        let size: usize = format.arg_sizes.iter().map(|&s| s as usize).sum();
        let Some(args) = records.get(at + 4..at + 4 + size) else {
            out.damaged = Some(format!("the record at offset {at} is cut short"));
            break;
        };
        let mut values = Vec::with_capacity(format.arg_sizes.len());
        let mut offset = 0;
        for &s in &format.arg_sizes {
            values.push(&args[offset..offset + s as usize]);
            offset += s as usize;
        }
        format_c(&mut out.text, &format.text, &values);
        at += 4 + size;
    }
    out
}

/// One conversion specification.
#[derive(Debug, Default, Clone, Copy)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
    /// `hh` 1, `h` 2, `l`/`ll` 8 bytes; 0 without a length modifier.
    length: usize,
    /// Elements of a `%vN` vector conversion (1 otherwise).
    vector: usize,
    conversion: char,
}

/// Widths and precisions beyond this are clamped: a format string must not make the host
/// allocate without bound.
const MAX_FIELD: usize = 4096;

/// Appends `format` with `args` (each argument's bytes) to `out`, as C's printf.
fn format_c(out: &mut String, format: &str, args: &[&[u8]]) {
    let mut args = args.iter();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec { vector: 1, ..Spec::default() };
        let mut raw = String::from("%");
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.left = true,
                '+' => spec.plus = true,
                ' ' => spec.space = true,
                '#' => spec.alt = true,
                '0' => spec.zero = true,
                _ => break,
            }
            raw.push(f);
            chars.next();
        }
        let number = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>, raw: &mut String| {
            let mut n = 0usize;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                n = n.saturating_mul(10).saturating_add(d as usize);
                raw.push(chars.next().unwrap_or('0'));
            }
            n.min(MAX_FIELD)
        };
        spec.width = number(&mut chars, &mut raw);
        if chars.peek() == Some(&'.') {
            raw.push('.');
            chars.next();
            spec.precision = Some(number(&mut chars, &mut raw));
        }
        if chars.peek() == Some(&'v') {
            raw.push('v');
            chars.next();
            spec.vector = number(&mut chars, &mut raw).max(1);
        }
        loop {
            match chars.peek() {
                Some('h') => {
                    spec.length = if spec.length == 2 { 1 } else { 2 };
                }
                Some('l') => {
                    // `hl` (vectors: 32-bit elements) or `l`/`ll`.
                    spec.length = if spec.length == 2 { 4 } else { 8 };
                }
                _ => break,
            }
            raw.push(chars.next().unwrap_or('l'));
        }
        let Some(conversion) = chars.next() else {
            out.push_str(&raw);
            break;
        };
        spec.conversion = conversion;
        if conversion == '%' {
            out.push('%');
            continue;
        }
        let Some(bytes) = args.next() else {
            // More conversions than arguments: print the specification as written.
            out.push_str(&raw);
            out.push(conversion);
            continue;
        };
        if conversion == 's' {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            let mut s = String::from_utf8_lossy(&bytes[..end]).into_owned();
            if let Some(p) = spec.precision {
                s = s.chars().take(p).collect();
            }
            pad(out, &spec, "", &s);
            continue;
        }
        let elements = spec.vector.max(1);
        let element = bytes.len() / elements;
        for i in 0..elements {
            if i > 0 {
                out.push(',');
            }
            let e = &bytes[i * element..(i + 1) * element];
            format_one(out, &spec, e);
        }
    }
}

/// The element's bits, zero-extended.
fn bits_of(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(word)
}

fn format_one(out: &mut String, spec: &Spec, bytes: &[u8]) {
    let raw = bits_of(bytes);
    let size = bytes.len().clamp(1, 8);
    match spec.conversion {
        'd' | 'i' => {
            let bits = if spec.length > 0 && spec.length < size { spec.length } else { size };
            let shift = 64 - 8 * bits as u32;
            let v = ((raw << shift) as i64) >> shift;
            let sign = if v < 0 {
                "-"
            } else if spec.plus {
                "+"
            } else if spec.space {
                " "
            } else {
                ""
            };
            integer(out, spec, sign, "", v.unsigned_abs(), 10, false);
        }
        'u' | 'o' | 'x' | 'X' => {
            let bits = if spec.length > 0 && spec.length < size { spec.length } else { size };
            let v = if bits >= 8 { raw } else { raw & ((1u64 << (8 * bits)) - 1) };
            let (base, upper) = match spec.conversion {
                'o' => (8, false),
                'x' => (16, false),
                'X' => (16, true),
                _ => (10, false),
            };
            let prefix = match (spec.alt && v != 0, spec.conversion) {
                (true, 'x') => "0x",
                (true, 'X') => "0X",
                (true, 'o') => "0",
                _ => "",
            };
            integer(out, spec, "", prefix, v, base, upper);
        }
        'c' => pad(out, spec, "", &char::from(raw as u8).to_string()),
        'p' => {
            let body = format!("0x{raw:x}");
            pad(out, spec, "", &body);
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' => {
            let value = match size {
                8 => f64::from_bits(raw),
                2 => half_to_f64(raw as u16),
                _ => f32::from_bits(raw as u32) as f64,
            };
            float(out, spec, value);
        }
        other => {
            // Unknown conversion: print it as written, as most C libraries do.
            out.push('%');
            out.push(other);
        }
    }
}

fn half_to_f64(h: u16) -> f64 {
    let sign = if h >> 15 != 0 { -1.0 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let mant = (h & 0x3ff) as f64;
    sign * match exp {
        0 => mant * 2f64.powi(-24),
        31 if mant == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + mant / 1024.0) * 2f64.powi(e as i32 - 15),
    }
}

/// Pads `sign + prefix + body` to the width (left, or right with spaces; zero padding goes
/// between the prefix and the body).
fn pad(out: &mut String, spec: &Spec, sign_prefix: &str, body: &str) {
    let len = sign_prefix.chars().count() + body.chars().count();
    let fill = spec.width.saturating_sub(len);
    if spec.left {
        out.push_str(sign_prefix);
        out.push_str(body);
        out.extend(std::iter::repeat_n(' ', fill));
    } else if spec.zero && !matches!(spec.conversion, 's' | 'c' | 'p') {
        out.push_str(sign_prefix);
        out.extend(std::iter::repeat_n('0', fill));
        out.push_str(body);
    } else {
        out.extend(std::iter::repeat_n(' ', fill));
        out.push_str(sign_prefix);
        out.push_str(body);
    }
}

fn integer(out: &mut String, spec: &Spec, sign: &str, prefix: &str, v: u64, base: u32, upper: bool) {
    let mut digits = match base {
        8 => format!("{v:o}"),
        16 if upper => format!("{v:X}"),
        16 => format!("{v:x}"),
        _ => v.to_string(),
    };
    if let Some(p) = spec.precision {
        if p == 0 && v == 0 {
            digits.clear();
        }
        while digits.len() < p {
            digits.insert(0, '0');
        }
    }
    // A precision turns zero padding off.
    let spec = Spec { zero: spec.zero && spec.precision.is_none(), ..*spec };
    pad(out, &spec, &format!("{sign}{prefix}"), &digits);
}

/// C's `%e` body for a finite non-negative value: `d.ddde+XX`.
fn exponential(v: f64, precision: usize, upper: bool) -> (String, i32) {
    let s = format!("{v:.precision$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let e = if upper { 'E' } else { 'e' };
    let sign = if exp < 0 { '-' } else { '+' };
    (format!("{mantissa}{e}{sign}{:02}", exp.unsigned_abs()), exp)
}

fn strip_zeros(s: &str) -> String {
    // Only the fraction's trailing zeros (and then a dangling point) go.
    let (body, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let body = if body.contains('.') { body.trim_end_matches('0').trim_end_matches('.') } else { body };
    format!("{body}{exp}")
}

fn hex_float(v: f64, upper: bool) -> String {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = bits & ((1u64 << 52) - 1);
    let (lead, e) = match (exp, mant) {
        (0, 0) => (0, 0),
        (0, _) => (0, -1022),
        _ => (1, exp - 1023),
    };
    let mut frac = format!("{mant:013x}");
    while frac.ends_with('0') {
        frac.pop();
    }
    let point = if frac.is_empty() { String::new() } else { format!(".{frac}") };
    let s = format!("0x{lead}{point}p{}{}", if e < 0 { '-' } else { '+' }, e.unsigned_abs());
    if upper {
        s.to_uppercase()
    } else {
        s
    }
}

fn float(out: &mut String, spec: &Spec, value: f64) {
    let upper = spec.conversion.is_ascii_uppercase();
    let sign = if value.is_sign_negative() && !value.is_nan() {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    let v = value.abs();
    if !v.is_finite() {
        let body = match (v.is_nan(), upper) {
            (true, false) => "nan",
            (true, true) => "NAN",
            (false, false) => "inf",
            (false, true) => "INF",
        };
        let spec = Spec { zero: false, ..*spec };
        pad(out, &spec, sign, body);
        return;
    }
    let precision = spec.precision.unwrap_or(6);
    let mut body = match spec.conversion.to_ascii_lowercase() {
        'f' => format!("{v:.precision$}"),
        'e' => exponential(v, precision, upper).0,
        'g' => {
            let p = precision.max(1);
            let (_, x) = exponential(v, p - 1, upper);
            let s = if x < p as i32 && x >= -4 {
                let decimals = (p as i32 - 1 - x) as usize;
                format!("{v:.decimals$}")
            } else {
                exponential(v, p - 1, upper).0
            };
            if spec.alt {
                s
            } else {
                strip_zeros(&s)
            }
        }
        _ => hex_float(v, upper),
    };
    if spec.alt && !body.contains('.') && matches!(spec.conversion, 'f' | 'F' | 'e' | 'E') {
        let at = body.find(['e', 'E']).unwrap_or(body.len());
        body.insert(at, '.');
    }
    pad(out, spec, sign, &body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(format: &str, args: &[&[u8]]) -> String {
        let mut s = String::new();
        format_c(&mut s, format, args);
        s
    }

    #[test]
    fn conversions_print_as_c_does() {
        let i = |v: i32| v.to_le_bytes().to_vec();
        let f = |v: f32| v.to_le_bytes().to_vec();
        let d = |v: f64| v.to_le_bytes().to_vec();
        assert_eq!(fmt("hello %u\n", &[&i(42)]), "hello 42\n");
        assert_eq!(fmt("[%5d|%-5d|%05d|%+d]", &[&i(-42), &i(7), &i(-3), &i(9)]), "[  -42|7    |-0003|+9]");
        assert_eq!(fmt("%x %X %#x %o %.3u", &[&i(255), &i(255), &i(255), &i(8), &i(5)]), "ff FF 0xff 10 005");
        assert_eq!(
            fmt("%ld %lu", &[&(-5i64).to_le_bytes(), &u64::MAX.to_le_bytes()]),
            "-5 18446744073709551615"
        );
        assert_eq!(fmt("%hhd %hd", &[&i(0x1ff), &i(0x18000)]), "-1 -32768");
        assert_eq!(
            fmt("%f %.2f %8.3f %e", &[&f(1.5), &f(2.345), &f(-2.0), &f(12345.678)]),
            "1.500000 2.35   -2.000 1.234568e+04"
        );
        assert_eq!(
            fmt("%g %g %g %G", &[&d(100000.0), &d(1e-5), &d(0.5), &d(1e20)]),
            "100000 1e-05 0.5 1E+20"
        );
        assert_eq!(fmt("%f %F %e", &[&d(f64::INFINITY), &d(f64::NAN), &d(-0.0)]), "inf NAN -0.000000e+00");
        assert_eq!(fmt("%a", &[&d(1.0)]), "0x1p+0");
        assert_eq!(fmt("%s|%5s|%.2s", &[b"str\0", b"ab\0\0", b"xyz\0"]), "str|   ab|xy");
        assert_eq!(fmt("%c%c 100%%", &[&i(72), &i(105)]), "Hi 100%");
        let v: Vec<u8> = [1.0f32, 2.5, -1.0, 0.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(fmt("%v4hlf", &[&v]), "1.000000,2.500000,-1.000000,0.000000");
        assert_eq!(fmt("%d %d", &[&i(1)]), "1 %d");
        // A huge width or precision is clamped, not allocated.
        assert_eq!(fmt("%.99999999999f", &[&f(1.0)]).len(), 2 + MAX_FIELD);
    }

    #[test]
    fn formats_parse_and_records_decode_in_order() {
        let formats =
            PrintfFormats::parse(&["1:1:4:hello %u\\n".into(), "2:2:4:8:a:b %d %ld\\n".into()]).unwrap();
        let mut buf = empty_header(64).to_vec();
        let mut records = Vec::new();
        records.extend(1u32.to_le_bytes());
        records.extend(7u32.to_le_bytes());
        records.extend(2u32.to_le_bytes());
        records.extend((-1i32).to_le_bytes());
        records.extend(5i64.to_le_bytes());
        buf[0..4].copy_from_slice(&(records.len() as u32).to_le_bytes());
        buf[8..12].copy_from_slice(&3u32.to_le_bytes());
        buf.extend(&records);
        let out = decode("k", &formats, &buf);
        assert_eq!(out.text, "hello 7\na:b -1 5\n");
        assert_eq!(out.dropped_records, 3);
        assert_eq!(out.damaged, None);
        // An unknown id stops the output there instead of printing garbage.
        buf[HEADER_BYTES..HEADER_BYTES + 4].copy_from_slice(&9u32.to_le_bytes());
        let out = decode("k", &formats, &buf);
        assert_eq!(out.text, "");
        assert!(out.damaged.unwrap().contains("unknown format id 9"));
        assert!(PrintfFormats::parse(&["x:1:4:%d".into()]).is_err());
        assert!(PrintfFormats::parse(&["1:2:4:%d %d".into()]).is_err());
    }
}
