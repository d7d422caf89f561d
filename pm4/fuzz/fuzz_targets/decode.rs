//! Feeds arbitrary bytes, as little-endian dwords, to the decoder for every generation and formats
//! whatever comes out: nothing may panic, and every reported offset must lie inside the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pm4::{words_from_le_bytes, Decoder, Gfx};

fuzz_target!(|data: &[u8]| {
    let words = words_from_le_bytes(data);
    for gfx in Gfx::ALL {
        for item in Decoder::new(&words, gfx) {
            match item {
                Ok(packet) => {
                    assert!(packet.offset + packet.len <= words.len());
                    std::hint::black_box(packet.to_string());
                }
                Err(err) => {
                    assert!(err.offset < words.len());
                    std::hint::black_box(err.to_string());
                }
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        std::hint::black_box(pm4::words_from_hex_text(text).ok());
    }
});
