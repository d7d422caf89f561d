#!/usr/bin/env python3
"""Startup peers of `sparkle-bench bench-startup`: CuPy's RawKernel with its disk cache.

One fresh process per run, timed from the first line of this script (after the interpreter
started, as Sparkle's processes are timed from `main`): import and context ("open"), N
distinct kernels compiled or loaded from CuPy's cache (the same op chains as Sparkle's
generated kernels, in CUDA C), and every kernel's 64 results on the host, checked against
the CPU. Prints one JSON object. CUPY_CACHE_DIR picks the cache folder (empty: cold).

    python3 bench/scripts/startup_peers.py cupy --kernels 100
"""
import time

STARTED = time.perf_counter()

import argparse
import json
import math
import sys

STEPS = [
    ("x = x * 0.75f + 0.25f;", lambda x: x * 0.75 + 0.25),
    ("x = sinf(x);", math.sin),
    ("x = sqrtf(fabsf(x) + 1.0f);", lambda x: math.sqrt(abs(x) + 1.0)),
    ("x = x * 0.5f + 0.125f * x * x;", lambda x: x * 0.5 + 0.125 * x * x),
    ("x = fmaxf(x, 0.5f) * 0.75f;", lambda x: max(x, 0.5) * 0.75),
    ("x = x * x * 0.5f - 0.5f;", lambda x: x * x * 0.5 - 0.5),
    ("x = cosf(x) * 1.5f;", lambda x: math.cos(x) * 1.5),
    ("x = fminf(fmaxf(x, -1.0f), 1.0f) + 0.125f;", lambda x: min(max(x, -1.0), 1.0) + 0.125),
]
LANES = 64


def chain(index):
    return [(index >> (3 * digit)) & 7 for digit in range(5)]


def constant(index):
    return (index % 997) / 1024.0


def source(index):
    body = "\n        ".join(STEPS[s][0] for s in chain(index))
    return f"""extern "C" __global__ void chain{index}(const float *xs, float *ys, unsigned n) {{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        float x = xs[i];
        {body}
        ys[i] = x + {constant(index):.10f}f;
    }}
}}
"""


def evaluate(index, x):
    for s in chain(index):
        x = STEPS[s][1](x)
    return x + constant(index)


def ms_since_start():
    return (time.perf_counter() - STARTED) * 1e3


def cupy_run(kernels):
    import cupy as cp

    cp.cuda.Device(0).use()
    cp.zeros(1, dtype=cp.float32)  # the context exists once memory can be had
    cp.cuda.Device(0).synchronize()
    open_since_start = ms_since_start()
    started = time.perf_counter()
    functions = [cp.RawKernel(source(i), f"chain{i}") for i in range(kernels)]
    for f in functions:
        f.compile()  # compiled or loaded from CuPy's disk cache, and the module loaded
    programs_ms = (time.perf_counter() - started) * 1e3
    xs_host = [i / LANES * 4.0 - 2.0 for i in range(LANES)]
    xs = cp.asarray(xs_host, dtype=cp.float32)
    ys = cp.zeros(LANES * max(kernels, 1), dtype=cp.float32)
    for i, f in enumerate(functions):
        f((1,), (LANES,), (xs, ys[i * LANES:(i + 1) * LANES], cp.uint32(LANES)))
    got = cp.asnumpy(ys)
    done = ms_since_start()
    problems = []
    for i in range(kernels):
        for lane, x in enumerate(xs_host):
            want = evaluate(i, float(cp.float32(x)))
            if abs(want - float(got[i * LANES + lane])) > 1e-3 * max(abs(want), 1.0):
                problems.append(f"kernel {i} lane {lane}: {got[i * LANES + lane]} where the CPU gives {want}")
                break
    return {
        "peer": f"CuPy {cp.__version__}",
        "open_since_main_ms": open_since_start,
        "programs_ms": programs_ms,
        "done_since_main_ms": done,
        "correct": not problems,
        "problems": problems,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=["cupy"])
    parser.add_argument("--kernels", type=int, default=1)
    args = parser.parse_args()
    try:
        report = cupy_run(args.kernels)
    except ImportError as err:
        print(json.dumps({"skipped": f"CuPy is not installed ({err})"}))
        return 0
    print(json.dumps(report))
    return 0 if report["correct"] else 3


if __name__ == "__main__":
    sys.exit(main())
