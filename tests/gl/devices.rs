//! Runtimes opened on the same EGL device share its one context, however the device was named
//! (by `SPARKLE_EGL_DEVICE` or by preference), so their objects work in each other; objects of a
//! different context are refused, never misread. The test sets the variable for the whole
//! process, so it runs in a process of its own.

use std::time::Duration;

use crate::isolated;
use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, ErrorKind, KernelSpec, Runtime, ScalarType};

#[test]
fn a_device_named_by_index_and_by_preference_is_one_context() {
    if isolated::ran_in_own_process(
        module_path!(),
        "a_device_named_by_index_and_by_preference_is_one_context",
        &[],
    ) {
        return;
    }
    let preferred = Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL context");
    // The context line names the EGL device the preferred runtime got.
    let context =
        preferred.info().details.iter().find(|(n, _)| n == "context").map(|(_, v)| v.clone()).unwrap();
    let Some(index) = context.split("EGL device ").nth(1).and_then(|rest| rest.split(' ').next()) else {
        eprintln!(
            "skipped: the context comes from the default EGL display, not an enumerated device ({context})"
        );
        return;
    };
    std::env::set_var(sparkle::gl::DEVICE_ENV, index);
    let pinned = Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("the same device by index");
    std::env::remove_var(sparkle::gl::DEVICE_ENV);

    let double = KernelSpec::new("double", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; }; uniform uint n;
               void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= 2.0; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let program = pinned.program(&double).unwrap();
    let data = preferred.upload(&[1.0f32, 2.0, 3.0], BufferUsage::InOut).unwrap();
    pinned
        .dispatch(&program, &[Arg::Buffer(&data), Arg::U32(3)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(30))
        .unwrap();
    assert_eq!(preferred.download::<f32>(&data).unwrap(), vec![2.0, 4.0, 6.0], "one context, one buffer");

    // A device index that names another device gives another context, whose objects are refused.
    let other = (0..8).map(|i| i.to_string()).find(|i| i != index).unwrap();
    std::env::set_var(sparkle::gl::DEVICE_ENV, &other);
    let opened = Runtime::open_backend("gl", &CacheConfig::memory_only());
    std::env::remove_var(sparkle::gl::DEVICE_ENV);
    match opened {
        Ok(second) => {
            let err = second.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(3)], [1, 1, 1]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(second.download::<f32>(&data).is_err());
        }
        Err(err) => {
            assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
            eprintln!("only one EGL device here: {err}");
        }
    }
}
