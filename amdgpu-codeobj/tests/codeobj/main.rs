//! Code objects: the committed ahead-of-time code objects of the suite, and code objects that
//! clang builds (descriptors, metadata, kernel arguments, printf). One test binary; a module per
//! area.

mod aot;
mod codeobj;
