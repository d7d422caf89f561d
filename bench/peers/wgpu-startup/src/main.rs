//! The wgpu peer of `sparkle-bench bench-startup`: one fresh process, timed from `main` as
//! Sparkle's are. Opens wgpu on Vulkan (instance, adapter, device: "open"), creates N compute
//! pipelines — the same op chains as Sparkle's generated kernels, in WGSL — with a
//! `PipelineCache` loaded from and saved to a file (plus the driver's own cache), runs each
//! once into its own 64 results, reads them back and checks them against the CPU. Prints one
//! JSON object like `bench/scripts/startup_peers.py`.
//!
//!     wgpu-startup-peer --kernels 100 --cache <file>

use std::time::Instant;

const LANES: usize = 64;

/// A step's WGSL and the same on the CPU.
type Step = (&'static str, fn(f32) -> f32);

/// The steps of `bench/src/startup.rs`, in WGSL: kept identical by hand, since this crate is
/// built apart from the workspace.
const STEPS: [Step; 8] = [
    ("x = x * 0.75 + 0.25;", |x| x * 0.75 + 0.25),
    ("x = sin(x);", f32::sin),
    ("x = sqrt(abs(x) + 1.0);", |x| (x.abs() + 1.0).sqrt()),
    ("x = x * 0.5 + 0.125 * x * x;", |x| x * 0.5 + 0.125 * x * x),
    ("x = max(x, 0.5) * 0.75;", |x| x.max(0.5) * 0.75),
    ("x = x * x * 0.5 - 0.5;", |x| x * x * 0.5 - 0.5),
    ("x = cos(x) * 1.5;", |x| x.cos() * 1.5),
    ("x = clamp(x, -1.0, 1.0) + 0.125;", |x| x.clamp(-1.0, 1.0) + 0.125),
];

fn chain(index: usize) -> Vec<usize> {
    (0..5).map(|digit| (index >> (3 * digit)) & 7).collect()
}

fn constant(index: usize) -> f32 {
    (index % 997) as f32 / 1024.0
}

fn source(index: usize) -> String {
    let body: Vec<&str> = chain(index).into_iter().map(|s| STEPS[s].0).collect();
    format!(
        "@group(0) @binding(0) var<storage, read> xs: array<f32>;
@group(0) @binding(1) var<storage, read_write> ys: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
    let i = id.x;
    if (i < arrayLength(&xs)) {{
        var x = xs[i];
        {}
        ys[i] = x + {:.10};
    }}
}}
",
        body.join("\n        "),
        constant(index)
    )
}

fn evaluate(index: usize, mut x: f32) -> f32 {
    for s in chain(index) {
        x = STEPS[s].1(x);
    }
    x + constant(index)
}

fn main() {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let kernels: usize = arg("--kernels").and_then(|v| v.parse().ok()).unwrap_or(1);
    let cache_file = arg("--cache").map(std::path::PathBuf::from);
    let ms = |since: Instant| since.elapsed().as_secs_f64() * 1e3;

    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    descriptor.backends = wgpu::Backends::VULKAN;
    let instance = wgpu::Instance::new(descriptor);
    let adapter = match pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    })) {
        Ok(adapter) => adapter,
        Err(err) => return skipped(&format!("no Vulkan adapter ({err})")),
    };
    let features = adapter.features() & wgpu::Features::PIPELINE_CACHE;
    let (device, queue) = match pollster::block_on(
        adapter.request_device(&wgpu::DeviceDescriptor { required_features: features, ..Default::default() }),
    ) {
        Ok(opened) => opened,
        Err(err) => return skipped(&format!("the Vulkan adapter gave no device ({err})")),
    };
    let open_since_main_ms = ms(started);

    let programs_started = Instant::now();
    let data = cache_file.as_ref().and_then(|file| std::fs::read(file).ok());
    let cache = features.contains(wgpu::Features::PIPELINE_CACHE).then(|| {
        // SAFETY: the data is what `get_data` of this program saved for this adapter's cache
        // key, or nothing; `fallback` makes an empty cache of data the driver refuses.
        unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: None,
                data: data.as_deref(),
                fallback: true,
            })
        }
    });
    let pipelines: Vec<wgpu::ComputePipeline> = (0..kernels)
        .map(|index| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(source(index).into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: cache.as_ref(),
            })
        })
        .collect();
    let programs_ms = ms(programs_started);

    let input: Vec<f32> = (0..LANES).map(|i| i as f32 / LANES as f32 * 4.0 - 2.0).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    let xs = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: bytes.len() as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&xs, 0, &bytes);
    let out_size = (LANES * 4 * kernels.max(1)) as u64;
    let ys = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: out_size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: out_size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    for (index, pipeline) in pipelines.iter().enumerate() {
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: xs.as_entire_binding() },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &ys,
                        offset: (index * LANES * 4) as u64,
                        size: std::num::NonZeroU64::new((LANES * 4) as u64),
                    }),
                },
            ],
        });
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    encoder.copy_buffer_to_buffer(&ys, 0, &readback, 0, out_size);
    queue.submit([encoder.finish()]);
    let slice = readback.slice(..);
    let (mapped_tx, mapped_rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |result| {
        let _ = mapped_tx.send(result);
    });
    let mapped = device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|err| err.to_string())
        .and_then(|_| mapped_rx.recv().map_err(|err| err.to_string()))
        .and_then(|result| result.map_err(|err| err.to_string()))
        .and_then(|()| slice.get_mapped_range().map_err(|err| err.to_string()));
    let got: Vec<f32> = match mapped {
        Ok(view) => view.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        Err(err) => return failed(&format!("the read-back failed: {err}")),
    };
    let done_since_main_ms = ms(started);

    let mut problems = Vec::new();
    for index in 0..kernels {
        for (lane, &x) in input.iter().enumerate() {
            let want = evaluate(index, x);
            let have = got[index * LANES + lane];
            if (want - have).abs() > 1e-3 * want.abs().max(1.0) {
                problems.push(format!("kernel {index} lane {lane}: {have} where the CPU gives {want}"));
                break;
            }
        }
    }
    if let (Some(cache), Some(file)) = (&cache, &cache_file) {
        if let Some(data) = cache.get_data() {
            let _ = std::fs::write(file, data);
        }
    }
    let info = adapter.get_info();
    println!(
        "{}",
        serde_json::json!({
            "peer": format!("wgpu 30 on Vulkan ({}, driver {}), pipeline cache {}", info.name, info.driver_info,
                if cache.is_some() { "on" } else { "not offered" }),
            "open_since_main_ms": open_since_main_ms,
            "programs_ms": programs_ms,
            "done_since_main_ms": done_since_main_ms,
            "correct": problems.is_empty(),
            "problems": problems,
        })
    );
}

/// The report of a run that could not happen on this machine (`bench-startup` skips the peer).
fn skipped(why: &str) {
    println!("{}", serde_json::json!({ "skipped": why }));
}

/// The report of a run that went wrong: counted as a wrong result.
fn failed(why: &str) {
    println!("{}", serde_json::json!({ "correct": false, "problems": [why] }));
    std::process::exit(3);
}
