//! Simulated wave instructions per second: the suite's sgemm and conv2d (their prebuilt gfx1100
//! code objects, exactly as shipped) dispatched through the runtime on the `amdgpu-sim` backend,
//! with the instruction count the simulated GPU reports. Criterion prints the rate as
//! "elements/s" = wave instructions per second.

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::CacheConfig;
use sparkle::suite::{conv2d, sgemm, Case};
use sparkle::Runtime;

fn simulated(c: &mut Criterion) {
    let driver = SimDriver::new(SimOptions::default());
    let device = AmdgpuDevice::<Simulated>::new(Arc::<SimDriver>::clone(&driver), DeviceOptions::default())
        .expect("the simulated device opens");
    let runtime = Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only());
    let cases: Vec<Box<dyn Case>> = vec![
        Box::new(sgemm::Sgemm::random(128, 128, 128, 1)),
        Box::new(conv2d::Conv2d::random(conv2d::Shape { n: 1, c: 16, h: 28, w: 28, k: 16 }, 1)),
    ];
    let mut group = c.benchmark_group("amdgpu-sim");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for case in &cases {
        let program = runtime.program(&case.spec()).expect("the suite kernel loads");
        let buffers = case.upload(&runtime).expect("inputs");
        let run = || {
            case.dispatch(&runtime, &program, &buffers)
                .and_then(|s| s.wait(Duration::from_secs(600)))
                .expect("the dispatch runs")
        };
        let before = driver.wave_instructions();
        run();
        group.throughput(Throughput::Elements(driver.wave_instructions() - before));
        group.bench_function(case.describe(), |b| b.iter(run));
    }
    group.finish();
}

criterion_group!(benches, simulated);
criterion_main!(benches);
