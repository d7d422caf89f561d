#!/usr/bin/env python3
"""Peers for `sparkle bench --peers`: PyTorch FP32 (TF32 off) matmul, conv2d with bias and saxpy
(`y.add_(x, alpha=a)`) at the sizes given, on the same GPU, timed the way `sparkle bench` times
Sparkle. Prints one JSON object.

Problems are given as `sparkle tune` keys, optionally followed by `@COPIES` and `/LAUNCHES`:
`saxpy N`, `sgemm MxNxK`, `conv2d NxCxHxWxK@6/200`, `conv2d NxCxHxWxKk1s2` (a 1x1 window at
stride 2; without `kRsS`, 3x3 at stride 1; padding is half the window, as Sparkle's). COPIES is how many copies of the inputs the
launches rotate through (as Sparkle does for memory-bound problems small enough to sit in a 50 MB
L2); LAUNCHES is how many launches one back-to-back batch holds (Sparkle's own count for this
problem). Without them the same rules as Sparkle's pick them.

Per problem, after at least 0.6 s of continuous work (the GPU's clock follows its load):
- `ms`: GPU time per launch of back-to-back launches: CUDA events around LAUNCHES launches,
  divided by LAUNCHES, median of several batches. Each batch is queued behind a short
  `torch.cuda._sleep` so that the host's launch cost is not in the window (the GPU never waits
  for the host between launches).
- `wall_ms`: one call's dispatch + wait on the host (launch, then `torch.cuda.synchronize()`),
  median of many calls.
- `single_event_ms`: CUDA events around one launch, median (the former method, which counts the
  launch gap: kept to show what it adds).
"""
import json
import math
import sys
import time

import torch

ROTATE_BELOW_BYTES = 256e6
MAX_COPIES = 8
# Back-to-back batches: about this long each, within these launch counts.
BATCH_SECONDS = 0.02
MIN_LAUNCHES, MAX_LAUNCHES = 10, 200
SLEEP_CYCLES_PER_LAUNCH = 100_000
METHOD = (
    "ms: CUDA events around LAUNCHES back-to-back launches (queued behind torch.cuda._sleep), "
    "divided by LAUNCHES, median of batches; wall_ms: launch + torch.cuda.synchronize() on the "
    "host, median; single_event_ms: CUDA events around one launch, median"
)


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def warm(fn, copies):
    """At least 0.6 s of continuous work, so that the clock has risen."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    i = 0
    while True:
        for _ in range(8):
            fn(i % copies)
            i += 1
        end.record()
        end.synchronize()
        if start.elapsed_time(end) >= 600.0:
            return


def back_to_back(fn, copies, launches, batches=7, budget_s=3.0):
    """GPU ms per launch of `launches` launches in a row, median of `batches` batches."""
    has_sleep = hasattr(torch.cuda, "_sleep")
    per_launch = []
    started = time.perf_counter()
    while len(per_launch) < batches and (len(per_launch) < 3 or time.perf_counter() - started < budget_s):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if has_sleep:
            # Keeps the GPU busy while the launches are queued behind it: about 50 µs of the
            # GPU's clock per launch, more than the host takes to queue one.
            torch.cuda._sleep(SLEEP_CYCLES_PER_LAUNCH * launches)
        s.record()
        for i in range(launches):
            fn(i % copies)
        e.record()
        e.synchronize()
        per_launch.append(s.elapsed_time(e) / launches)
    return median(per_launch), has_sleep


def single_calls(fn, copies, min_runs=30, budget_s=1.5):
    """(wall ms of launch + synchronize, events ms around one launch), medians."""
    walls, events = [], []
    started = time.perf_counter()
    while len(walls) < min_runs or (len(walls) < 1000 and time.perf_counter() - started < budget_s):
        i = len(walls) % copies
        t = time.perf_counter()
        fn(i)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t) * 1e3)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(i)
        e.record()
        e.synchronize()
        events.append(s.elapsed_time(e))
    return median(walls), median(events), len(walls)


def copies_for(flops, bytes_moved):
    """Sparkle's rule (src/suite/timing.rs), for keys given without `@COPIES`."""
    if flops >= 4 * bytes_moved or bytes_moved >= ROTATE_BELOW_BYTES or bytes_moved <= 0:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(ROTATE_BELOW_BYTES / bytes_moved)))


def problem(kernel, dims, copies):
    """(what, fn(i), flops, bytes) of one problem with `copies` copies of its inputs."""
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(1)

    def rand(*size):
        return torch.rand(*size, device=dev, generator=gen) * 2 - 1

    if kernel == "saxpy":
        (n,) = dims
        copies = copies or copies_for(2 * n, 12 * n)
        xs = [rand(n) for _ in range(copies)]
        ys = [rand(n) for _ in range(copies)]
        return "torch add_(alpha)", lambda i: ys[i].add_(xs[i], alpha=1.5), copies
    if kernel == "sgemm":
        m, n, k = dims
        copies = copies or copies_for(2 * m * n * k, 4 * (m * k + k * n + m * n))
        a = [rand(m, k) for _ in range(copies)]
        b = [rand(k, n) for _ in range(copies)]
        out = [torch.empty(m, n, device=dev) for _ in range(copies)]
        return "cuBLAS matmul", lambda i: torch.matmul(a[i], b[i], out=out[i]), copies
    if kernel == "conv2d":
        n, c, h, w, k, size, stride = dims
        outputs = n * k * ((h - 1) // stride + 1) * ((w - 1) // stride + 1)
        copies = copies or copies_for(outputs * (2 * size * size * c + 1), 4 * (n * c * h * w + outputs))
        x = [rand(n, c, h, w) for _ in range(copies)]
        wt, bias = rand(k, c, size, size), rand(k)
        return (
            "cuDNN conv2d",
            lambda i: torch.nn.functional.conv2d(x[i], wt, bias, stride=stride, padding=size // 2),
            copies,
        )
    raise SystemExit(f"peers.py: unknown kernel {kernel!r}")


def parse(arg):
    """`kernel shape[@copies][/launches]` -> (key, kernel, dims, copies or 0, launches or 0)."""
    launches = 0
    if "/" in arg:
        arg, launches = arg.rsplit("/", 1)
        launches = int(launches)
    copies = 0
    if "@" in arg:
        arg, copies = arg.rsplit("@", 1)
        copies = int(copies)
    kernel, shape = arg.split(" ", 1)
    window = [3, 1]
    if kernel == "conv2d" and "k" in shape:
        # `NxCxHxWxK` then `kRsS` for a window other than 3x3 at stride 1.
        shape, rest = shape.split("k", 1)
        window = [int(v) for v in rest.split("s", 1)]
    dims = [int(d) for d in shape.split("x")]
    if kernel == "conv2d":
        dims += window
    return arg, kernel, dims, copies, launches


def peer(arg):
    key, kernel, dims, copies, launches = parse(arg)
    what, fn, copies = problem(kernel, dims, copies)
    warm(fn, copies)
    wall_ms, single_event_ms, runs = single_calls(fn, copies)
    if not launches:
        launches = int(min(MAX_LAUNCHES, max(MIN_LAUNCHES, BATCH_SECONDS * 1e3 / max(single_event_ms, 1e-3))))
    warm(fn, copies)
    ms, queued = back_to_back(fn, copies, launches)
    return {
        "key": key,
        "what": what,
        "ms": ms,
        "wall_ms": wall_ms,
        "single_event_ms": single_event_ms,
        "launches": launches,
        "input_copies": copies,
        "single_runs": runs,
        "queued_behind_sleep": queued,
    }


def main():
    if not torch.cuda.is_available():
        raise SystemExit("peers.py: PyTorch sees no CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    results = []
    for arg in sys.argv[1:]:
        result = peer(arg)
        results.append(result)
        print(
            f"peers: {result['key']}: {result['what']} {result['ms']:.4f} ms back to back "
            f"({result['launches']} launches, {result['input_copies']} copies), "
            f"wall {result['wall_ms']:.4f} ms, one launch between events {result['single_event_ms']:.4f} ms",
            file=sys.stderr,
        )
    report = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "method": METHOD,
        "results": results,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
