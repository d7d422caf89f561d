//! The packet encoder and decoder: a dispatch's words against a golden capture, and encode /
//! decode round trips of every packet. One test binary; a module per area.

mod golden;
mod roundtrip;
