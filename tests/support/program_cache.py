"""Many distinct shapes in one process: the program cache stays bounded.

    .venv/bin/python benchmarks/program_cache.py [--shapes 20000] [--every 2000]

Runs a small chain of ops (a matmul, a softmax, a reduction) on a new
sequence length each step, as a server answering requests of every length
would, so each step compiles new programs. Prints, every --every shapes,
the programs loaded and evicted, the process's memory mappings (lines of
/proc/self/maps; the kernel stops a process at vm.max_map_count, 65530 by
default) and its resident memory, and checks each step's result against
the CPU. With TORCHTPU_PROGRAM_CACHE_SIZE=0 (no bound) the same run grows
without limit. Exits 1 on a wrong result, or when the mapping count or
RSS grows past what the bound allows in the second half of the run.

benchmarks/program_cache.py is the command; tests/runtime/test_reliability.py runs
main() with a few hundred shapes.
"""
import argparse
import sys
import time
import warnings

import torch

import torchtpu


def mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def step(n, w, device):
    x = torch.arange(n * 8, dtype=torch.float32, device=device).reshape(n, 8) / (n * 8)
    y = torch.softmax(x @ w, dim=0)
    return y.sum(dim=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=int, default=20000)
    p.add_argument("--every", type=int, default=2000)
    p.add_argument("--cache-size", type=int, default=None,
                   help="programs kept loaded (default: the engine's)")
    a = p.parse_args(argv)
    # Every step is a new shape on purpose: the recompile warning is right
    # and beside the point here.
    warnings.filterwarnings("ignore", message=".*has been recompiled")
    if a.cache_size is not None:
        torchtpu.debug.set_program_cache_size(a.cache_size)
    torch.manual_seed(0)
    w_cpu = torch.randn(8, 8)
    w = w_cpu.to("tpu")
    samples = []
    t0 = time.perf_counter()
    print(f"{'shapes':>7} {'loaded':>7} {'evicted':>8} {'mappings':>9} {'RSS MB':>8} {'s':>7}")
    for i in range(1, a.shapes + 1):
        n = i  # a new length every step: every program is new
        got = step(n, w, "tpu").cpu()
        want = step(n, w_cpu, "cpu")
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            print(f"wrong result at length {n}: max diff {(got - want).abs().max()}")
            return 1
        if i % a.every == 0 or i == a.shapes:
            m = torchtpu.debug.metrics()
            samples.append((i, m["programs_loaded"], m["programs_evicted"], mappings(), rss_mb()))
            print(f"{i:7d} {samples[-1][1]:7d} {samples[-1][2]:8d} {samples[-1][3]:9d} "
                  f"{samples[-1][4]:8.0f} {time.perf_counter() - t0:7.1f}", flush=True)
    m = torchtpu.debug.metrics()
    bound = m["program_cache_size"]
    print(f"program cache size {bound or 'unbounded'}; compiles {m['compiles']}, "
          f"evicted {m['programs_evicted']}")
    if not bound or len(samples) < 4:
        return 0
    # Once the cache is full, mappings and RSS may wobble but not climb:
    # compare the last sample with the one at the half-way point.
    half = samples[len(samples) // 2]
    last = samples[-1]
    grew_maps = last[3] - half[3]
    grew_rss = last[4] - half[4]
    print(f"second half: mappings {grew_maps:+d}, RSS {grew_rss:+.0f} MB")
    if grew_maps > 256 or grew_rss > 0.25 * half[4]:
        print("FAIL: memory grows with the number of shapes")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
