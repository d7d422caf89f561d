//! `pm4-dump`: decodes a PM4 indirect buffer into readable text.
//!
//! Input is either raw little-endian dwords or a hex text dump (one dword per line, `#` comments);
//! the format is detected from the content unless `--format` says otherwise. Every packet is
//! printed with its dword offset, raw header, name, registers and fields; decoding errors are
//! printed in place and make the exit status non-zero.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use pm4::{words_from_hex_text, words_from_le_bytes, Decoder, Gfx};
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Detect from the content: valid UTF-8 made of hex lines and comments is text.
    Auto,
    /// Little-endian dwords.
    Bin,
    /// One hex dword per line.
    Hex,
}

/// Decode a PM4 indirect buffer.
#[derive(Debug, Parser)]
#[command(name = "pm4-dump", version, about)]
struct Args {
    /// The IB: binary little-endian dwords or a hex text file.
    file: PathBuf,
    /// Register map to name registers with: gfx1030..gfx1036 or gfx1100..gfx1103.
    #[arg(long, default_value = "gfx1100", value_parser = parse_gfx)]
    gfx: Gfx,
    /// Input format.
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    format: Format,
}

fn parse_gfx(s: &str) -> Result<Gfx, String> {
    s.parse::<Gfx>().map_err(|e| e.to_string())
}

#[derive(Debug, Error)]
enum DumpError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Hex(#[from] pm4::ParseHexError),
    #[error("{path}: {len} bytes is not a whole number of dwords")]
    Partial { path: PathBuf, len: usize },
}

fn load(args: &Args) -> Result<Vec<u32>, DumpError> {
    let bytes =
        std::fs::read(&args.file).map_err(|source| DumpError::Read { path: args.file.clone(), source })?;
    let text = match args.format {
        Format::Bin => None,
        Format::Hex => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Format::Auto => std::str::from_utf8(&bytes)
            .ok()
            .filter(|t| words_from_hex_text(t).is_ok() && !t.trim().is_empty())
            .map(str::to_owned),
    };
    match text {
        Some(t) => Ok(words_from_hex_text(&t)?),
        None if bytes.len() % 4 != 0 => Err(DumpError::Partial { path: args.file.clone(), len: bytes.len() }),
        None => Ok(words_from_le_bytes(&bytes)),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let words = match load(&args) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("pm4-dump: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "# {} dwords, register map {}; offsets are dword offsets in hex, fields shown when non-zero",
        words.len(),
        args.gfx
    );
    let mut errors = 0usize;
    for item in Decoder::new(&words, args.gfx) {
        match item {
            Ok(packet) => println!("{packet}"),
            Err(e) => {
                errors += 1;
                let raw = words.get(e.offset).map_or_else(String::new, |w| format!("{w:08x}  "));
                println!("{:06x}  {raw}ERROR: {}", e.offset, e.kind);
            }
        }
    }
    if errors > 0 {
        eprintln!("pm4-dump: {errors} decoding error(s)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
