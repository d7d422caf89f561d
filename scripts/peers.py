#!/usr/bin/env python3
"""Peers for `sparkle bench --peers`: PyTorch FP32 (TF32 off) matmul, conv2d and saxpy
(`y.add_(x, alpha=a)`) at the sizes given, on the same GPU, after warm-up, timed with CUDA
events (median of many runs). Prints one JSON object.

Problems are given as `sparkle tune` keys: `saxpy N`, `sgemm MxNxK`, `conv2d NxCxHxWxK`.
Memory-bound problems small enough to sit in a 50 MB L2 rotate through copies of their inputs,
as `sparkle bench` does.
"""
import json
import math
import sys

import torch

ROTATE_BELOW_BYTES = 256e6
MAX_COPIES = 8


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def timed(fn, copies, min_runs=30, budget_s=2.0):
    # Warm-up: at least 0.5 s of continuous work, so that the clock has risen.
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
            break
    times = []
    spent = 0.0
    while len(times) < min_runs or (len(times) < 1000 and spent < budget_s * 1e3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(len(times) % copies)
        e.record()
        e.synchronize()
        ms = s.elapsed_time(e)
        times.append(ms)
        spent += ms + 0.02
    return median(times)


def copies_for(flops, bytes_moved):
    if flops >= 4 * bytes_moved or bytes_moved >= ROTATE_BELOW_BYTES:
        return 1
    return max(1, min(MAX_COPIES, math.ceil(ROTATE_BELOW_BYTES / bytes_moved)))


def peer(kernel, shape):
    dims = [int(d) for d in shape.split("x")]
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(1)

    def rand(*size):
        return torch.rand(*size, device=dev, generator=gen) * 2 - 1

    if kernel == "saxpy":
        (n,) = dims
        copies = copies_for(2 * n, 12 * n)
        xs = [rand(n) for _ in range(copies)]
        ys = [rand(n) for _ in range(copies)]
        return "torch add_(alpha)", timed(lambda i: ys[i].add_(xs[i], alpha=1.5), copies)
    if kernel == "sgemm":
        m, n, k = dims
        a, b = rand(m, k), rand(k, n)
        out = torch.empty(m, n, device=dev)
        return "cuBLAS matmul", timed(lambda i: torch.matmul(a, b, out=out), 1)
    if kernel == "conv2d":
        n, c, h, w, k = dims
        x, wt, bias = rand(n, c, h, w), rand(k, c, 3, 3), rand(k)
        return "cuDNN conv2d", timed(
            lambda i: torch.nn.functional.conv2d(x, wt, bias, stride=1, padding=1), 1
        )
    raise SystemExit(f"peers.py: unknown kernel {kernel!r}")


def main():
    if not torch.cuda.is_available():
        raise SystemExit("peers.py: PyTorch sees no CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    results = []
    for key in sys.argv[1:]:
        kernel, shape = key.split(" ", 1)
        what, ms = peer(kernel, shape)
        results.append({"key": key, "what": what, "ms": ms})
        print(f"peers: {key}: {what} {ms:.4f} ms", file=sys.stderr)
    report = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "results": results,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
