//! The runtime's own guarantees, checked against the fake backend (`fake`), whose submissions
//! complete only when the test says so: host reads wait only for
//! the work that writes a buffer, host writes for all work that uses it, objects live until the
//! work using them completed, failures reach their waiters, and another device's objects are
//! refused before any device call.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::fake::{self, Gpu};
use sparkle::hal::BufferUsage;
use sparkle::{Access, Arg, Error, ErrorKind, KernelSpec, Runtime, ScalarType};

/// A runtime on a fake device with `token`, and the device's GPU; host reads and writes give up
/// after 50 ms.
struct Harness {
    runtime: Runtime,
    gpu: Arc<Gpu>,
}

fn harness(token: u64) -> Harness {
    let (runtime, gpu) = fake::runtime(token, Duration::from_millis(50));
    Harness { runtime, gpu }
}

fn copy_kernel() -> KernelSpec {
    KernelSpec::new("copy", [64, 1, 1])
        .glsl("buffer src ro\nbuffer dst rw\nscalar n u32")
        .storage("src", Access::ReadOnly)
        .storage("dst", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
}

#[test]
fn host_reads_wait_for_writers_only_and_host_writes_for_every_user() {
    let h = harness(1);
    let program = h.runtime.program(&copy_kernel()).unwrap();
    let src = h.runtime.upload(&[1u32; 4], BufferUsage::Input).unwrap();
    let dst = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let unrelated = h.runtime.upload(&[9u32], BufferUsage::InOut).unwrap();
    let submission = h
        .runtime
        .dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)], [1, 1, 1])
        .unwrap();
    assert!(!submission.is_done());

    // Not written by the pending work: no wait.
    assert_eq!(h.runtime.download::<u32>(&unrelated).unwrap(), vec![9]);
    assert_eq!(h.runtime.download::<u32>(&src).unwrap(), vec![1; 4], "src is only read by the work");
    // Written by it: the read waits, and gives up after the host timeout.
    let err = h.runtime.download::<u32>(&dst).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    // Read by it: a host write must wait too.
    let err = h.runtime.write_buffer(&src, 0, &[0; 4]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    let err = submission.wait(Duration::from_millis(1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.to_string().contains("the submission of kernel `copy` did not finish within 1 ms"), "{err}");

    h.gpu.timeline.signal(submission.fence());
    submission.wait(Duration::ZERO).unwrap();
    assert_eq!(h.runtime.download::<u32>(&dst).unwrap(), vec![0; 4]);
    h.runtime.write_buffer(&src, 0, &[0; 4]).unwrap();

    // A timeout names what did not finish: each kernel once, and the copies.
    let mut commands = h.runtime.commands();
    commands.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)], [1, 1, 1]).unwrap();
    commands.copy(&dst, 0, &unrelated, 0, 4).unwrap();
    commands.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)], [1, 1, 1]).unwrap();
    commands.copy(&dst, 4, &unrelated, 0, 4).unwrap();
    let submission = h.runtime.submit(commands).unwrap();
    let err = submission.wait(Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains("the submission of kernel `copy` and 2 copies did not"), "{err}");
    // The work completes, so that closing the runtime has nothing in flight to wait for.
    h.gpu.timeline.signal(submission.fence());
}

/// `read_vec` hands the backend memory it never initialised, and gives it to the caller only
/// if the backend filled it: a backend that returns without writing costs an error.
#[test]
fn reads_into_new_vectors_return_what_the_buffer_holds_and_never_memory_nobody_wrote() {
    let h = harness(1);
    let buffer = h.runtime.upload(&[1u32, 2, 3, 4, 5], BufferUsage::InOut).unwrap();
    assert_eq!(h.runtime.read_vec::<u32>(&buffer, 4, 3).unwrap(), vec![2, 3, 4]);
    assert_eq!(h.runtime.read_vec::<u32>(&buffer, 0, 0).unwrap(), Vec::<u32>::new());
    assert_eq!(h.runtime.download::<u16>(&buffer).unwrap(), vec![1, 0, 2, 0, 3, 0, 4, 0, 5, 0]);
    for (offset, count) in [(4, 5), (21, 0), (0, usize::MAX / 2)] {
        let err = h.runtime.read_vec::<u32>(&buffer, offset, count).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.to_string().contains("past its end"), "{err}");
    }

    h.gpu.skips_reads.store(true, Ordering::SeqCst);
    let err = h.runtime.read_vec::<u32>(&buffer, 0, 5).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    assert!(err.to_string().contains("returned from a read of 20 bytes without filling them"), "{err}");
    let err = h.runtime.download::<u8>(&buffer).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    // Into the caller's initialised bytes, a defective read cannot expose anything unwritten.
    let mut bytes = [7u8; 4];
    h.runtime.read_buffer(&buffer, 0, &mut bytes).unwrap();
    assert_eq!(bytes, [7; 4]);
}

#[test]
fn a_read_right_after_its_writer_may_settle_it_and_read_at_once_but_never_returns_failed_work() {
    let h = harness(1);
    let program = h.runtime.program(&copy_kernel()).unwrap();
    let src = h.runtime.upload(&[1u32; 4], BufferUsage::Input).unwrap();
    let dst = h.runtime.upload(&[5u32; 4], BufferUsage::Output).unwrap();
    let args = [Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)];
    let last_calls = |n: usize| {
        let calls = h.gpu.calls.lock().unwrap();
        calls[calls.len() - n..].to_vec()
    };

    // The backend settles the writer and reads in one call: no wait, no second read.
    *h.gpu.read_settles.lock().unwrap() = Some(Ok(()));
    let submission = h.runtime.dispatch(&program, &args, [1, 1, 1]).unwrap();
    assert_eq!(h.runtime.download::<u32>(&dst).unwrap(), vec![5; 4]);
    assert!(submission.is_done());
    assert_eq!(last_calls(2), ["submit dispatch", "read_buffer_once_settled"]);

    // The writer failed: its error, not the bytes the backend copied.
    *h.gpu.read_settles.lock().unwrap() = Some(Err(Error::new(ErrorKind::DeviceLost, "the GPU was reset")));
    h.runtime.dispatch(&program, &args, [1, 1, 1]).unwrap();
    let err = h.runtime.download::<u32>(&dst).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    assert!(err.to_string().contains("the work that writes the buffer failed: the GPU was reset"), "{err}");

    // The backend declines (the work runs longer): the read waits as always, here in vain.
    *h.gpu.read_settles.lock().unwrap() = None;
    let submission = h.runtime.dispatch(&program, &args, [1, 1, 1]).unwrap();
    assert_eq!(h.runtime.download::<u32>(&dst).unwrap_err().kind(), ErrorKind::Timeout);
    assert_eq!(last_calls(2), ["submit dispatch", "read_buffer_once_settled"]);
    h.gpu.timeline.signal(submission.fence());
    assert_eq!(h.runtime.download::<u32>(&dst).unwrap(), vec![5; 4]);
    assert_eq!(last_calls(1), ["read_buffer"], "a finished writer needs no settling");
}

#[test]
fn objects_used_by_unfinished_work_live_until_it_completes() {
    let h = harness(1);
    let program = h.runtime.program(&copy_kernel()).unwrap();
    let src = h.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let dst = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let submission = h
        .runtime
        .dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)], [1, 1, 1])
        .unwrap();
    drop((src, dst, program));
    assert_eq!(h.gpu.live_buffers.load(Ordering::SeqCst), 2, "the pending work still holds both buffers");
    h.gpu.timeline.signal(submission.fence());
    assert!(submission.is_done());
    assert_eq!(h.gpu.live_buffers.load(Ordering::SeqCst), 0, "released once the work completed");
}

#[test]
fn a_failed_submission_reaches_its_waiters_and_the_readers_of_what_it_writes() {
    let h = harness(1);
    let program = h.runtime.program(&copy_kernel()).unwrap();
    let src = h.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let dst = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let submission = h
        .runtime
        .dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)], [1, 1, 1])
        .unwrap();
    h.gpu.timeline.fail(submission.fence(), Error::new(ErrorKind::DeviceLost, "the GPU was reset"));
    h.gpu.timeline.signal(submission.fence());
    let err = submission.wait(Duration::from_secs(1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost);
    let err = h.runtime.download::<u32>(&dst).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost);
    assert!(err.to_string().contains("the work that writes the buffer failed: the GPU was reset"), "{err}");
    // A host write needs the work over, not successful, and then defines the contents.
    h.runtime.write_buffer(&dst, 0, &[7; 16]).unwrap();
    assert_eq!(h.runtime.download::<u8>(&dst).unwrap(), vec![7; 16]);
}

#[test]
fn another_devices_objects_are_refused_before_any_device_call() {
    let ours = harness(1);
    let theirs = harness(2);
    let program = ours.runtime.program(&copy_kernel()).unwrap();
    let foreign = theirs.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let own = ours.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let calls_before = ours.gpu.calls.lock().unwrap().len();

    let err = ours
        .runtime
        .dispatch(&program, &[Arg::Buffer(&foreign), Arg::Buffer(&own), Arg::U32(4)], [1, 1, 1])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("made by another device"), "{err}");
    assert!(ours.runtime.download::<u32>(&foreign).is_err());
    assert!(ours.runtime.write_buffer(&foreign, 0, &[0; 4]).is_err());
    let their_program = theirs.runtime.program(&copy_kernel()).unwrap();
    assert!(ours
        .runtime
        .dispatch(&their_program, &[Arg::Buffer(&own), Arg::Buffer(&own), Arg::U32(4)], [1, 1, 1])
        .is_err());
    assert!(ours.runtime.submit(theirs.runtime.commands()).is_err());
    assert_eq!(ours.gpu.calls.lock().unwrap().len(), calls_before, "nothing reached the device");

    // A runtime on the same device instance (same token) shares objects.
    let twin = harness(1);
    let shared = twin.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let submission = ours
        .runtime
        .dispatch(&program, &[Arg::Buffer(&shared), Arg::Buffer(&own), Arg::U32(4)], [1, 1, 1])
        .unwrap();
    ours.gpu.timeline.signal(submission.fence());
}

#[test]
fn a_copy_after_a_dispatch_writing_its_source_gets_a_barrier() {
    let h = harness(1);
    let program = h.runtime.program(&copy_kernel()).unwrap();
    let src = h.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let dst = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let out = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let mut commands = h.runtime.commands();
    commands.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(4)], [1, 1, 1]).unwrap();
    // The copy reads what the dispatch wrote, and the next copy writes what this one wrote: each
    // gets a barrier before it.
    commands.copy(&dst, 0, &out, 0, 16).unwrap();
    commands.copy(&src, 0, &out, 0, 4).map(drop).unwrap();
    assert!(commands.copy(&out, 0, &out, 8, 12).is_err(), "overlapping ranges are refused");
    let submission = h.runtime.submit(commands).unwrap();
    assert_eq!(
        h.gpu.calls.lock().unwrap().last().map(String::as_str),
        Some("submit dispatch barrier copy barrier copy")
    );
    h.gpu.timeline.signal(submission.fence());
}

#[test]
fn a_command_writing_what_an_earlier_one_reads_gets_a_barrier_and_readers_share_none() {
    let h = harness(1);
    let program = h.runtime.program(&copy_kernel()).unwrap();
    let src = h.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let first = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let second = h.runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let fresh = h.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let spare = h.runtime.create_buffer(16, BufferUsage::Input).unwrap();
    let mut commands = h.runtime.commands();
    // Two readers of `src` writing buffers of their own: nothing to order.
    commands.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&first), Arg::U32(4)], [1, 1, 1]).unwrap();
    commands.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&second), Arg::U32(4)], [1, 1, 1]).unwrap();
    // A copy into `src` must wait for both reads; a dispatch writing `fresh` after a copy that
    // read it, likewise.
    commands.copy(&fresh, 0, &src, 0, 16).unwrap();
    commands.dispatch(&program, &[Arg::Buffer(&spare), Arg::Buffer(&fresh), Arg::U32(4)], [1, 1, 1]).unwrap();
    let submission = h.runtime.submit(commands).unwrap();
    assert_eq!(
        h.gpu.calls.lock().unwrap().last().map(String::as_str),
        Some("submit dispatch dispatch barrier copy barrier dispatch")
    );
    h.gpu.timeline.signal(submission.fence());
}

#[test]
fn a_spec_asked_for_again_finds_its_program_without_preparing_its_source() {
    let h = harness(11);
    let kernel = copy_kernel();
    let first = h.runtime.program(&kernel).unwrap();
    assert_eq!(h.gpu.prepares.load(Ordering::Relaxed), 1);
    let hits = h.runtime.cache_stats().memory_hits;
    let again = h.runtime.program(&kernel.clone()).unwrap();
    assert_eq!(h.gpu.prepares.load(Ordering::Relaxed), 1, "an equal spec's key is remembered");
    assert_eq!(h.runtime.cache_stats().memory_hits, hits + 1, "and counted as a memory hit");
    assert_eq!(again.spec(), first.spec());
    // Any field that differs is another spec: prepared (and checked) again.
    let mut defined = kernel.clone();
    defined.defines.push(("N".into(), "1".into()));
    h.runtime.program(&defined).unwrap();
    assert_eq!(h.gpu.prepares.load(Ordering::Relaxed), 2);
    let mut pinned = kernel.clone();
    pinned.workgroup_size = [32, 1, 1];
    h.runtime.program(&pinned).unwrap();
    assert_eq!(h.gpu.prepares.load(Ordering::Relaxed), 3);
    h.runtime.program(&kernel).unwrap();
    assert_eq!(h.gpu.prepares.load(Ordering::Relaxed), 3);
    // The fake's key is its source alone: one compile served all four.
    assert_eq!(h.gpu.calls.lock().unwrap().iter().filter(|c| *c == "compile").count(), 1);
}
