#!/usr/bin/env python3
"""Peers for `sparkle bench-overhead --peers` and `sparkle bench-transfer --peers`: PyTorch on the
same GPU, timed on the wall clock around each whole operation, as Sparkle's side is (the host
waits until the GPU is done: `torch.cuda.synchronize()`, or `.item()` / `.cpu()`, which wait).
Prints one JSON object.

  overhead DISPATCHES ROUND_TRIPS   tiny-op stream (`x.add_(1.0)` on 1024 floats, DISPATCHES in a
                                    row, one synchronize) and round trips (`add_` then `.item()`
                                    of a one-element tensor; `add_` then `.cpu()` of 1024 floats)
  transfers SIZE...                 host→device and device→host copies of SIZE bytes from and to
                                    pageable and pinned host memory (`copy_`, then synchronize)
"""
import json
import sys
import time

import torch


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def quantile(values, q):
    values = sorted(values)
    return values[round((len(values) - 1) * q)]


def warm(seconds=0.6):
    """Keeps the GPU busy so that its clock has risen before anything is timed."""
    x = torch.ones(1 << 22, device="cuda")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(16):
            x.mul_(1.0)
        torch.cuda.synchronize()


def overhead(dispatches, round_trips):
    warm()
    x = torch.zeros(1024, device="cuda")
    one = torch.zeros(1, device="cuda")
    stream = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(dispatches):
            x.add_(1.0)
        torch.cuda.synchronize()
        stream.append((time.perf_counter() - start) / dispatches * 1e6)
    item, cpu = [], []
    for _ in range(round_trips):
        start = time.perf_counter()
        one.add_(1.0)
        one.item()
        item.append((time.perf_counter() - start) * 1e6)
        start = time.perf_counter()
        x.add_(1.0)
        x.cpu()
        cpu.append((time.perf_counter() - start) * 1e6)
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "tiny_op_stream_us": median(stream),
        "item_round_trip_median_us": median(item),
        "item_round_trip_p90_us": quantile(item, 0.9),
        "cpu_round_trip_median_us": median(cpu),
        "cpu_round_trip_p90_us": quantile(cpu, 0.9),
    }


def reps(size):
    return 20 if size <= 1 << 20 else 8 if size <= 1 << 24 else 3


def timed(fn, size):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps(size)):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return size / median(times) / 1e9


def transfers(sizes):
    warm()
    rows = []
    for size in sizes:
        device = torch.empty(size, dtype=torch.uint8, device="cuda")
        pageable = torch.ones(size, dtype=torch.uint8)
        pinned = torch.ones(size, dtype=torch.uint8).pin_memory()
        rows.append({
            "bytes": size,
            "pageable_up_gbps": timed(lambda: device.copy_(pageable), size),
            "pageable_down_gbps": timed(lambda: pageable.copy_(device), size),
            "pinned_up_gbps": timed(lambda: device.copy_(pinned, non_blocking=True), size),
            "pinned_down_gbps": timed(lambda: pinned.copy_(device, non_blocking=True), size),
        })
        del device, pageable, pinned
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}


def main(argv):
    if len(argv) >= 1 and argv[0] == "overhead" and len(argv) == 3:
        report = overhead(int(argv[1]), int(argv[2]))
    elif len(argv) >= 2 and argv[0] == "transfers":
        report = transfers([int(s) for s in argv[1:]])
    else:
        sys.exit(__doc__)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
