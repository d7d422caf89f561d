//! Builds the suite's AMDHSA code objects ahead of time: every suite kernel for every AOT target
//! into `shaders/aot/<target>/<kernel>.co`, and `shaders/aot/manifest.json` with the source hash,
//! flags, compiler and blob hash of each, so that the built-in suite runs without a compiler.
//!
//!     cargo run -p sparkle-tools --bin aot            # rebuild everything
//!     cargo run -p sparkle-tools --bin aot -- --check # only say whether the blobs are current

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use sparkle_amdgpu_codeobj::aot::{self, Manifest, ManifestEntry, AOT_TARGETS, MANIFEST_FORMAT, SUITE};
use sparkle_amdgpu_codeobj::codeobj::{CodeObject, RunLimits};
use sparkle_amdgpu_codeobj::compile::{Builtins, CompileRequest, Compiler};

#[derive(Parser)]
#[command(about = "Build the suite's code objects for gfx1030, gfx1100, gfx1101 and gfx1102")]
struct Args {
    /// Repository root (default: the workspace this tool was built in).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Check the committed blobs against their sources and exit non-zero if any is stale.
    #[arg(long)]
    check: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let root = args.root.unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")));
    let result = if args.check { check(&root) } else { build(&root) };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("aot: {message}");
            ExitCode::FAILURE
        }
    }
}

fn check(root: &std::path::Path) -> Result<(), String> {
    let manifest = Manifest::load(root).map_err(|e| e.to_string())?;
    let mut stale = Vec::new();
    for entry in &manifest.entries {
        if let Err(e) = entry.check_source(root).and_then(|_| entry.read_blob(root).map(|_| ())) {
            stale.push(e.to_string());
        }
    }
    if stale.is_empty() {
        println!("{} blobs are current", manifest.entries.len());
        Ok(())
    } else {
        Err(stale.join("\n"))
    }
}

fn build(root: &std::path::Path) -> Result<(), String> {
    let compiler = Compiler::from_env().map_err(|e| e.to_string())?;
    println!("compiler: {} ({})", compiler.version(), compiler.clang().display());
    let mut entries = Vec::new();
    for kernel in SUITE {
        let source_path = format!("shaders/{}", kernel.file);
        let source = std::fs::read_to_string(root.join(&source_path))
            .map_err(|e| format!("reading {source_path}: {e}"))?;
        let defines: Vec<(String, String)> =
            kernel.defines.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        for &target in AOT_TARGETS {
            let request = CompileRequest {
                name: kernel.name,
                source: &source,
                target,
                builtins: Builtins::Libclc,
                defines: &defines,
                cu_mode: false,
                options: &sparkle_amdgpu_codeobj::options::OpenClOptions::default(),
                workgroup: None,
            };
            let object = compiler.compile(&request).map_err(|e| e.to_string())?;
            // Never commit a blob the backend would refuse.
            let co = CodeObject::parse(&object.bytes).map_err(|e| e.to_string())?;
            co.check_runnable(kernel.name, &RunLimits::backend_default(target)).map_err(|e| e.to_string())?;
            let blob = aot::blob_path(kernel.name, target);
            let blob_file = root.join(&blob);
            if let Some(dir) = blob_file.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
            }
            std::fs::write(&blob_file, &object.bytes).map_err(|e| format!("writing {blob}: {e}"))?;
            println!("{blob}: {} bytes in {:.0?}", object.bytes.len(), object.elapsed);
            entries.push(ManifestEntry {
                kernel: kernel.name.to_string(),
                target: target.name(),
                source: source_path.clone(),
                source_xxh3: aot::hash_hex(source.as_bytes()),
                defines: defines.clone(),
                builtins: aot::builtins_name(Builtins::Libclc).to_string(),
                flags: object.flags.clone(),
                compiler: compiler.identity(Builtins::Libclc),
                blob,
                blob_xxh3: aot::hash_hex(&object.bytes),
                blob_size: object.bytes.len() as u64,
            });
        }
    }
    let manifest = Manifest { format: MANIFEST_FORMAT, entries };
    let path = aot::manifest_path(root);
    let mut text = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}
