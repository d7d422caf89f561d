//! The ISA interpreter: instruction classes in assembly, the decoder against LLVM, the initial
//! wave state of a dispatch, loud failures, and OpenCL C kernels against CPU references. One
//! test binary; a module per area, with their helpers in `support`.

mod support;

mod asm;
mod coverage;
mod decode;
mod dispatch;
mod errors;
mod kernels;
mod modifiers;
mod reference;
