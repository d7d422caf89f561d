//! A differential fuzz test of the whole path a user's kernel takes: random OpenCL C expressions
//! over the scalar and vector types (char to ulong, float and double; 1, 2 and 4 components),
//! compiled by clang-22 through the amdgpu backend and run on the simulated gfx1100 (and a few
//! on gfx1030 and in wave64), every work-item's result compared with the same expression
//! evaluated here on the CPU with OpenCL C's semantics. Kernels must run correctly or be
//! refused at load: a refusal or a lost device is a failure too.
//!
//! The generator is seeded: each program's seed is printed with the program on a mismatch, and
//! `SPARKLE_FUZZ_SEED=<seed>` reruns that one (`SPARKLE_FUZZ_CASES=<n>` runs n programs from
//! it). A default run is a fixed list of seeds, bounded in time for CI (each program is one
//! clang compile of a dozen expressions and a 64-work-item dispatch).

use std::fmt::Write as _;
use std::time::Duration;

use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimGpu, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::CacheConfig;
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::Arg;
use sparkle::Runtime;

/// Work-items (and values per operand) of each program.
const ITEMS: usize = 64;
/// Expressions per program.
const EXPRESSIONS: usize = 12;

/// Element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

use Elem::*;

const ELEMS: [Elem; 10] = [I8, U8, I16, U16, I32, U32, I64, U64, F32, F64];

impl Elem {
    fn name(self) -> &'static str {
        match self {
            I8 => "char",
            U8 => "uchar",
            I16 => "short",
            U16 => "ushort",
            I32 => "int",
            U32 => "uint",
            I64 => "long",
            U64 => "ulong",
            F32 => "float",
            F64 => "double",
        }
    }
    fn bits(self) -> u32 {
        match self {
            I8 | U8 => 8,
            I16 | U16 => 16,
            I32 | U32 | F32 => 32,
            I64 | U64 | F64 => 64,
        }
    }
    fn bytes(self) -> usize {
        self.bits() as usize / 8
    }
    fn float(self) -> bool {
        matches!(self, F32 | F64)
    }
    fn signed(self) -> bool {
        matches!(self, I8 | I16 | I32 | I64)
    }
    fn unsigned(self) -> Elem {
        match self {
            I8 => U8,
            I16 => U16,
            I32 => U32,
            I64 => U64,
            e => e,
        }
    }
    /// The value of the integer `x` wrapped to this type.
    fn wrap(self, x: i128) -> i128 {
        let bits = self.bits();
        let m = x & ((1i128 << bits) - 1);
        if self.signed() && m >> (bits - 1) != 0 {
            m - (1i128 << bits)
        } else {
            m
        }
    }
    fn min(self) -> i128 {
        if self.signed() {
            -(1i128 << (self.bits() - 1))
        } else {
            0
        }
    }
    fn max(self) -> i128 {
        if self.signed() {
            (1i128 << (self.bits() - 1)) - 1
        } else {
            (1i128 << self.bits()) - 1
        }
    }
}

/// A type: an element and 1, 2 or 4 components.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ty {
    elem: Elem,
    width: usize,
}

impl Ty {
    fn name(self) -> String {
        if self.width == 1 {
            self.elem.name().to_string()
        } else {
            format!("{}{}", self.elem.name(), self.width)
        }
    }
    fn with(self, elem: Elem) -> Ty {
        Ty { elem, width: self.width }
    }
}

/// One component's value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    I(i128),
    F(f64),
}

impl Val {
    fn i(self) -> i128 {
        match self {
            Val::I(x) => x,
            Val::F(_) => unreachable!("an integer operand"),
        }
    }
    fn f(self) -> f64 {
        match self {
            Val::F(x) => x,
            Val::I(_) => unreachable!("a float operand"),
        }
    }
}

#[derive(Debug, Clone)]
enum Expr {
    /// Operand 0, 1 or 2 of the expression's inputs.
    Input(usize),
    Const(Val),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Ternary(&'static str, Box<Expr>, Box<Expr>, Box<Expr>),
    /// convert_<type>[_sat] of an expression of element type `from` (same width).
    Convert(Elem, Box<Expr>),
}

/// A seeded xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

const INT_UNARY: [&str; 4] = ["-", "~", "popcount", "clz"];
const INT_BINARY: [&str; 18] = [
    "+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%", "min", "max", "add_sat", "sub_sat", "hadd", "rhadd",
    "mul_hi", "rotate",
];
const FLOAT_UNARY: [&str; 6] = ["-", "fabs", "floor", "ceil", "trunc", "rint"];
const FLOAT_BINARY: [&str; 5] = ["+", "-", "*", "fmin", "fmax"];

/// A random expression of type `ty`, at most `depth` deep. Inputs are x, y, z (of `ty`).
fn gen(rng: &mut Rng, ty: Ty, depth: usize) -> Expr {
    if depth == 0 || rng.below(5) == 0 {
        if rng.below(4) == 0 {
            let v = if ty.elem.float() {
                Val::F(rng.pick(&[0.5, -1.25, 3.0, 0.0, -0.0, 1024.0, 0.375]))
            } else {
                Val::I(ty.elem.wrap(rng.pick(&[0i128, 1, 2, 3, 7, 100, -1, -128, 255, 4096])))
            };
            return Expr::Const(v);
        }
        return Expr::Input(rng.below(3));
    }
    let sub = |rng: &mut Rng| Box::new(gen(rng, ty, depth - 1));
    let choice = rng.below(10);
    if choice == 0 {
        let from = rng.pick(&ELEMS);
        if from != ty.elem {
            return Expr::Convert(from, Box::new(gen(rng, ty.with(from), depth - 1)));
        }
    }
    if ty.elem.float() {
        match choice {
            1 | 2 => Expr::Unary(rng.pick(&FLOAT_UNARY), sub(rng)),
            3 => Expr::Ternary("fma", sub(rng), sub(rng), sub(rng)),
            4 if ty.width == 1 => Expr::Ternary("?:", sub(rng), sub(rng), sub(rng)),
            _ => Expr::Binary(rng.pick(&FLOAT_BINARY), sub(rng), sub(rng)),
        }
    } else {
        match choice {
            1 => Expr::Unary(rng.pick(&INT_UNARY), sub(rng)),
            2 => Expr::Ternary("clamp", sub(rng), sub(rng), sub(rng)),
            3 if ty.width == 1 => Expr::Ternary("?:", sub(rng), sub(rng), sub(rng)),
            4 if ty.elem.bits() < 64 => Expr::Ternary("mad_sat", sub(rng), sub(rng), sub(rng)),
            _ => Expr::Binary(rng.pick(&INT_BINARY), sub(rng), sub(rng)),
        }
    }
}

/// The expression as OpenCL C over `x`, `y`, `z` of type `ty`. Integer arithmetic goes through
/// the unsigned type (no signed overflow, no left shift of a negative value), shift counts are
/// masked, divisors are positive and odd: nothing undefined.
fn source(e: &Expr, ty: Ty) -> String {
    let t = ty.name();
    let u = ty.with(ty.elem.unsigned()).name();
    let mask = ty.elem.bits() - 1;
    // To the unsigned type and back: a conversion of a scalar (small ones promote to int in
    // between), a reinterpretation of a vector (whose signed and unsigned forms do not convert).
    let to_u = |x: &str| if ty.width == 1 { format!("(({u})({x}))") } else { format!("as_{u}({x})") };
    let to_t = |x: &str| if ty.width == 1 { format!("(({t})({x}))") } else { format!("as_{t}({x})") };
    match e {
        Expr::Input(i) => format!("{}_{}", ["x", "y", "z"][*i], ty.elem.name()),
        Expr::Const(Val::I(v)) => format!("(({t})({v}L))"),
        Expr::Const(Val::F(v)) => {
            let suffix = if ty.elem == F32 { "f" } else { "" };
            format!("(({t})({v:?}{suffix}))")
        }
        Expr::Unary(op, a) => {
            let a = source(a, ty);
            match *op {
                "-" if !ty.elem.float() => to_t(&format!("-{}", to_u(&a))),
                "-" | "~" => format!("(({t})({op}({a})))"),
                f => format!("{f}({a})"),
            }
        }
        Expr::Binary(op, a, b) => {
            let (a, b) = (source(a, ty), source(b, ty));
            match *op {
                "+" | "-" | "*" if !ty.elem.float() => to_t(&format!("{} {op} {}", to_u(&a), to_u(&b))),
                "+" | "-" | "*" | "&" | "|" | "^" => format!("(({t})(({a}) {op} ({b})))"),
                "<<" => to_t(&format!("{} << ({} & ({u})({mask}))", to_u(&a), to_u(&b))),
                ">>" => format!("(({t})(({a}) >> (({b}) & ({t})({mask}))))"),
                "/" | "%" => format!("(({t})(({a}) {op} ((({b}) & ({t})(0x7f)) | ({t})(1))))"),
                f => format!("{f}({a}, {b})"),
            }
        }
        Expr::Ternary(op, a, b, c) => {
            let (a, b, c) = (source(a, ty), source(b, ty), source(c, ty));
            match *op {
                // The conditional promotes small operands to int: back to the type.
                "?:" => format!("(({t})(({a}) < ({b}) ? ({c}) : ({a})))"),
                "clamp" => format!("clamp({a}, min({b}, {c}), max({b}, {c}))"),
                f => format!("{f}({a}, {b}, {c})"),
            }
        }
        Expr::Convert(from, a) => {
            let inner = source(a, ty.with(*from));
            let sat = if ty.elem.float() { "" } else { "_sat" };
            format!("convert_{t}{sat}({inner})")
        }
    }
}

/// Rounds an exact value to the element type's float format.
fn round_to(elem: Elem, x: f64) -> f64 {
    if elem == F32 {
        x as f32 as f64
    } else {
        x
    }
}

/// One component of `e` (of element type `elem`), with OpenCL C's semantics; `input(elem, i)`
/// is that component of operand i of an element type.
fn eval(e: &Expr, elem: Elem, input: &dyn Fn(Elem, usize) -> Val) -> Val {
    match e {
        Expr::Input(i) => input(elem, *i),
        Expr::Const(v) => *v,
        Expr::Unary(op, a) => {
            let a = eval(a, elem, input);
            if elem.float() {
                let x = a.f();
                Val::F(match *op {
                    "-" => -x,
                    "fabs" => x.abs(),
                    "floor" => x.floor(),
                    "ceil" => x.ceil(),
                    "trunc" => x.trunc(),
                    _ => x.round_ties_even(),
                })
            } else {
                let x = a.i();
                let bits = elem.bits();
                let pattern = (x & ((1i128 << bits) - 1)) as u128;
                Val::I(elem.wrap(match *op {
                    "-" => -x,
                    "~" => !x,
                    "popcount" => i128::from(pattern.count_ones()),
                    _ => i128::from(pattern.leading_zeros() - (128 - bits)),
                }))
            }
        }
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval(a, elem, input), eval(b, elem, input));
            if elem.float() {
                let (x, y) = (a.f(), b.f());
                let r = match *op {
                    "+" => x + y,
                    "-" => x - y,
                    "*" => x * y,
                    "fmin" => x.min(y),
                    _ => x.max(y),
                };
                // f32 sums and products of f32 values are exact in f64 but one rounding from
                // their f32 result.
                Val::F(round_to(elem, r))
            } else {
                let (x, y) = (a.i(), b.i());
                let bits = elem.bits();
                let ux = x & ((1i128 << bits) - 1);
                let divisor = (y & 0x7f) | 1;
                let count = (y & ((1i128 << bits) - 1)) as u32 & (bits - 1);
                Val::I(elem.wrap(match *op {
                    "+" => x + y,
                    "-" => x - y,
                    "*" => x.wrapping_mul(y),
                    "&" => x & y,
                    "|" => x | y,
                    "^" => x ^ y,
                    "<<" => ux << count,
                    ">>" => x >> count,
                    "/" => x / divisor,
                    "%" => x % divisor,
                    "min" => x.min(y),
                    "max" => x.max(y),
                    "add_sat" => (x + y).clamp(elem.min(), elem.max()),
                    "sub_sat" => (x - y).clamp(elem.min(), elem.max()),
                    "hadd" => (x + y) >> 1,
                    "rhadd" => (x + y + 1) >> 1,
                    "mul_hi" => {
                        if bits == 64 && !elem.signed() {
                            ((x as u128 * y as u128) >> 64) as i128
                        } else {
                            (x * y) >> bits
                        }
                    }
                    _ => {
                        let r = y.rem_euclid(i128::from(bits)) as u32;
                        let v = ux as u128;
                        let mask = (1u128 << bits) - 1;
                        (((v << r) | if r == 0 { 0 } else { v >> (bits - r) }) & mask) as i128
                    }
                }))
            }
        }
        Expr::Ternary(op, a, b, c) => {
            let (a, b, c) = (eval(a, elem, input), eval(b, elem, input), eval(c, elem, input));
            match (*op, elem.float()) {
                ("?:", true) => {
                    if a.f() < b.f() {
                        c
                    } else {
                        a
                    }
                }
                ("?:", false) => {
                    if a.i() < b.i() {
                        c
                    } else {
                        a
                    }
                }
                ("fma", _) => Val::F(if elem == F32 {
                    (a.f() as f32).mul_add(b.f() as f32, c.f() as f32) as f64
                } else {
                    a.f().mul_add(b.f(), c.f())
                }),
                ("clamp", _) => {
                    let (lo, hi) = (b.i().min(c.i()), b.i().max(c.i()));
                    Val::I(a.i().clamp(lo, hi))
                }
                _ => Val::I((a.i() * b.i() + c.i()).clamp(elem.min(), elem.max())),
            }
        }
        Expr::Convert(from, a) => {
            let v = eval(a, *from, input);
            match (from.float(), elem.float()) {
                (false, false) => Val::I(v.i().clamp(elem.min(), elem.max())),
                (false, true) => Val::F(if elem == F32 { v.i() as f32 as f64 } else { v.i() as f64 }),
                (true, true) => Val::F(round_to(elem, v.f())),
                (true, false) => {
                    let x = v.f();
                    Val::I(if x.is_nan() {
                        0
                    } else {
                        (x.trunc().clamp(-1e40, 1e40) as i128).clamp(elem.min(), elem.max())
                    })
                }
            }
        }
    }
}

/// The element types an expression reads inputs of.
fn input_types(e: &Expr, elem: Elem, out: &mut Vec<Elem>) {
    match e {
        Expr::Input(_) => {
            if !out.contains(&elem) {
                out.push(elem);
            }
        }
        Expr::Const(_) => {}
        Expr::Unary(_, a) => input_types(a, elem, out),
        Expr::Binary(_, a, b) => {
            input_types(a, elem, out);
            input_types(b, elem, out);
        }
        Expr::Ternary(_, a, b, c) => {
            input_types(a, elem, out);
            input_types(b, elem, out);
            input_types(c, elem, out);
        }
        Expr::Convert(from, a) => input_types(a, *from, out),
    }
}

/// Random operand values of `elem`, with its edge cases first.
fn operand(rng: &mut Rng, elem: Elem, k: usize) -> Val {
    if elem.float() {
        let edges = [0.0, -0.0, 1.0, -1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-40, 3.0e38, 0.5];
        if k < edges.len() && rng.below(2) == 0 {
            return Val::F(round_to(elem, edges[k]));
        }
        let magnitude = 2f64.powi(rng.below(40) as i32 - 20);
        let x = (rng.next() % 20001) as f64 / 1000.0 - 10.0;
        return Val::F(round_to(elem, x * magnitude));
    }
    let edges = [0, 1, -1, elem.min(), elem.max(), elem.min() + 1, 2, 127];
    if k < edges.len() && rng.below(2) == 0 {
        return Val::I(elem.wrap(edges[k]));
    }
    Val::I(elem.wrap(rng.next() as i64 as i128))
}

fn to_bytes(elem: Elem, v: Val) -> Vec<u8> {
    match (elem, v) {
        (F32, Val::F(x)) => (x as f32).to_le_bytes().to_vec(),
        (F64, Val::F(x)) => x.to_le_bytes().to_vec(),
        (e, Val::I(x)) => x.to_le_bytes()[..e.bytes()].to_vec(),
        _ => unreachable!("a value of its type"),
    }
}

fn from_bytes(elem: Elem, b: &[u8]) -> Val {
    match elem {
        F32 => Val::F(f32::from_le_bytes(b.try_into().unwrap()) as f64),
        F64 => Val::F(f64::from_le_bytes(b.try_into().unwrap())),
        e => {
            let mut wide = [0u8; 16];
            wide[..b.len()].copy_from_slice(b);
            Val::I(e.wrap(i128::from_le_bytes(wide)))
        }
    }
}

/// Whether the device's result matches: integers exactly; floats bit for bit, except that any
/// NaN matches any NaN and zeros match whatever their sign (fmin/fmax of +0 and -0 may return
/// either).
fn same(got: Val, want: Val) -> bool {
    match (got, want) {
        (Val::I(a), Val::I(b)) => a == b,
        (Val::F(a), Val::F(b)) => {
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a == 0.0 && b == 0.0)
        }
        _ => false,
    }
}

/// One random program: its expressions and types, the kernel, the input bytes.
struct Program {
    seed: u64,
    exprs: Vec<(Ty, Expr, Vec<Elem>)>,
    source: String,
    /// Per expression, per input element type: the three operands, per work-item and component.
    inputs: Vec<Vec<(Elem, [Vec<Val>; 3])>>,
    input_bytes: Vec<u8>,
    /// Per expression: the byte offset of its output in the output buffer.
    outputs: Vec<usize>,
    output_bytes: usize,
}

fn program(seed: u64) -> Program {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut exprs = Vec::new();
    for _ in 0..EXPRESSIONS {
        let ty = Ty { elem: rng.pick(&ELEMS), width: rng.pick(&[1, 1, 2, 4]) };
        let e = gen(&mut rng, ty, 3);
        let mut types = Vec::new();
        input_types(&e, ty.elem, &mut types);
        exprs.push((ty, e, types));
    }
    let mut body = String::new();
    let mut input_bytes = Vec::new();
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    let mut out_at = 0usize;
    for (k, (ty, e, types)) in exprs.iter().enumerate() {
        let _ = writeln!(body, "    {{");
        let mut these = Vec::new();
        for &elem in types {
            let t = ty.with(elem);
            let vals: [Vec<Val>; 3] = std::array::from_fn(|_| {
                (0..ITEMS * ty.width).map(|j| operand(&mut rng, elem, j / ty.width)).collect()
            });
            for (i, name) in ["x", "y", "z"].iter().enumerate() {
                while input_bytes.len() % 16 != 0 {
                    input_bytes.push(0);
                }
                let at = input_bytes.len();
                for v in &vals[i] {
                    input_bytes.extend(to_bytes(elem, *v));
                }
                let _ = writeln!(
                    body,
                    "        {tn} {name}_{en} = ((__global const {tn} *)(in + {at}))[i];",
                    tn = t.name(),
                    en = elem.name()
                );
            }
            these.push((elem, vals));
        }
        out_at = out_at.next_multiple_of(16);
        let _ = writeln!(body, "        /* expression {k} */");
        let _ = writeln!(
            body,
            "        ((__global {tn} *)(out + {out_at}))[i] = {};",
            source(e, *ty),
            tn = ty.name()
        );
        let _ = writeln!(body, "    }}");
        outputs.push(out_at);
        out_at += ITEMS * ty.width * ty.elem.bytes();
        inputs.push(these);
    }
    let source = format!(
        "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#pragma OPENCL FP_CONTRACT OFF\n\
         __kernel void fuzz(__global const uchar *in, __global uchar *out) {{\n    uint i = get_global_id(0);\n{body}}}\n"
    );
    Program { seed, exprs, source, inputs, input_bytes, outputs, output_bytes: out_at.next_multiple_of(16) }
}

/// Compiles and runs `p` on `rt`, and compares every result with the CPU's.
fn check(rt: &Runtime, p: &Program, wave64: bool) -> Result<(), String> {
    let mut spec = KernelSpec::new("fuzz", [ITEMS as u32, 1, 1])
        .opencl("fuzz", p.source.clone())
        .storage("in", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    if wave64 {
        spec = spec.opencl_option("-mwavefrontsize64");
    }
    let fail = |what: String| format!("seed {}: {what}\n{}", p.seed, p.source);
    let program = rt.program(&spec).map_err(|e| fail(format!("not loaded: {e}")))?;
    let input = rt.upload(&p.input_bytes, BufferUsage::Input).map_err(|e| fail(e.to_string()))?;
    let output =
        rt.create_buffer(p.output_bytes as u64, BufferUsage::Output).map_err(|e| fail(e.to_string()))?;
    rt.dispatch(&program, &[Arg::Buffer(&input), Arg::Buffer(&output)], [1, 1, 1])
        .and_then(|s| s.wait(Duration::from_secs(120)))
        .map_err(|e| fail(format!("did not run: {e}")))?;
    let got: Vec<u8> = rt.download(&output).map_err(|e| fail(e.to_string()))?;
    for (k, (ty, e, _)) in p.exprs.iter().enumerate() {
        let size = ty.elem.bytes();
        for item in 0..ITEMS {
            for comp in 0..ty.width {
                let j = item * ty.width + comp;
                let lookup = |elem: Elem, i: usize| -> Val {
                    let (_, vals) =
                        p.inputs[k].iter().find(|(e, _)| *e == elem).expect("inputs of each type");
                    vals[i][j]
                };
                let want = eval(e, ty.elem, &lookup);
                let at = p.outputs[k] + j * size;
                let value = from_bytes(ty.elem, &got[at..at + size]);
                if !same(value, want) {
                    let operands: Vec<String> = p.inputs[k]
                        .iter()
                        .map(|(elem, vals)| {
                            format!("{}: {:?} {:?} {:?}", elem.name(), vals[0][j], vals[1][j], vals[2][j])
                        })
                        .collect();
                    return Err(fail(format!(
                        "expression {k} ({}) work-item {item} component {comp}: got {value:?}, want {want:?}; operands {}",
                        ty.name(),
                        operands.join("; ")
                    )));
                }
            }
        }
    }
    Ok(())
}

fn sim(gpu: SimGpu) -> Runtime {
    let driver = SimDriver::new(SimOptions { gpu, ..SimOptions::default() });
    let device = AmdgpuDevice::<Simulated>::new(driver, DeviceOptions::default())
        .expect("the simulator opens anywhere");
    Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only())
}

/// The seeds a run checks: `SPARKLE_FUZZ_SEED` (and `SPARKLE_FUZZ_CASES` from it), else the
/// fixed list.
fn seeds(default: &[u64]) -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match var("SPARKLE_FUZZ_SEED") {
        Some(first) => (first..first + var("SPARKLE_FUZZ_CASES").unwrap_or(1)).collect(),
        None => default.to_vec(),
    }
}

fn run_seeds(gpu: SimGpu, wave64: bool, default: &[u64]) {
    let rt = sim(gpu);
    let failures: Vec<String> =
        seeds(default).into_iter().filter_map(|seed| check(&rt, &program(seed), wave64).err()).collect();
    assert!(failures.is_empty(), "{} of the programs failed:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn random_expressions_match_the_cpu_on_gfx1100() {
    run_seeds(SimGpu::Gfx1100, false, &(1..=16).collect::<Vec<_>>());
}

#[test]
fn random_expressions_match_the_cpu_on_gfx1100_in_wave64_and_on_gfx1030() {
    run_seeds(SimGpu::Gfx1100, true, &[101, 102, 103]);
    run_seeds(SimGpu::Gfx1030, false, &[201, 202, 203, 204]);
}

#[test]
fn the_generator_is_deterministic_and_its_reference_is_sound() {
    assert_eq!(program(7).source, program(7).source);
    assert_ne!(program(7).source, program(8).source);
    // The evaluator on a few hand-checked cases.
    let none = |_: Elem, _: usize| Val::I(0);
    let c = |v: i128| Box::new(Expr::Const(Val::I(v)));
    assert_eq!(eval(&Expr::Binary("add_sat", c(100), c(100)), I8, &none), Val::I(127));
    assert_eq!(eval(&Expr::Binary("sub_sat", c(107), c(202)), U8, &none), Val::I(0));
    assert_eq!(eval(&Expr::Binary("mul_hi", c(-2), c(3)), I32, &none), Val::I(-1));
    assert_eq!(eval(&Expr::Binary("rotate", c(0x81), c(1)), U8, &none), Val::I(0x03));
    assert_eq!(eval(&Expr::Unary("clz", c(1)), U16, &none), Val::I(15));
    assert_eq!(eval(&Expr::Binary(">>", c(-128), c(9)), I8, &none), Val::I(-64));
    assert_eq!(
        eval(&Expr::Convert(F32, Box::new(Expr::Const(Val::F(3.0e10)))), I32, &none),
        Val::I(i32::MAX as i128)
    );
}
