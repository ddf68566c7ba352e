"""torch.linalg.svd on tpu against the CPU's LAPACK, size by size: compile
time of the SVD program and of the backward's programs, run time, the
singular values' largest relative error, the reconstruction error
|U S Vh - A| / |A| next to the CPU's own, and the size of the SVD
program's text (which must not grow with the matrix).

    .venv/bin/python benchmarks/linalg/svd.py                 # every size
    .venv/bin/python benchmarks/linalg/svd.py --sizes 512x512

Every compile is a real one (the persistent cache is off); each size runs
in a process of its own.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

SIZES = ["20x12:f64", "16x16", "64x64", "8x64x64", "128x128", "512x512"]


def one(spec, backward):
    os.environ["TORCHTPU_DISK_CACHE"] = "0"
    dump = tempfile.mkdtemp()
    os.environ["TORCHTPU_DUMP_DIR"] = dump
    import torch
    import torchtpu  # noqa: F401
    import torchtpu.debug as dbg

    shape, _, dt = spec.partition(":")
    dims = [int(d) for d in shape.split("x")]
    dtype = torch.float64 if dt == "f64" else torch.float32
    a = torch.randn(*dims, generator=torch.Generator().manual_seed(0), dtype=dtype)

    t0 = time.perf_counter()
    u, s, vh = torch.linalg.svd(a.to("tpu"), full_matrices=False)
    u, s, vh = u.cpu(), s.cpu(), vh.cpu()
    first = time.perf_counter() - t0
    comp = {c["what"]: c["seconds"] for c in dbg.compiles(clear=True)}
    svd_compile = sum(v for k, v in comp.items() if "svd" in k)
    t0 = time.perf_counter()
    torch.linalg.svd(a.to("tpu"), full_matrices=False)[1].cpu()
    run = time.perf_counter() - t0

    ue, se, vhe = torch.linalg.svd(a, full_matrices=False)
    # against the CPU's, relative to the largest; and each value against
    # float64 LAPACK, relative to itself, for ours and the CPU's
    rel_s = ((s - se).abs().amax(-1) / se.amax(-1)).max().item()
    s64 = torch.linalg.svdvals(a.double())
    own = ((s.double() - s64).abs() / s64).max().item()
    own_cpu = ((se.double() - s64).abs() / s64).max().item()
    nrm = torch.linalg.matrix_norm(a).max().item()
    rec = (torch.linalg.matrix_norm(u @ torch.diag_embed(s) @ vh - a).max() / nrm).item()
    rec_cpu = (torch.linalg.matrix_norm(ue @ torch.diag_embed(se) @ vhe - a).max() / nrm).item()
    k = s.shape[-1]
    orth = (u.mT @ u - torch.eye(k, dtype=dtype)).abs().max().item()
    orth_v = (vh @ vh.mT - torch.eye(k, dtype=dtype)).abs().max().item()
    size = max((os.path.getsize(os.path.join(dump, f)) for f in os.listdir(dump) if "svd" in f), default=0)

    line = (f"{spec:>10}  svd compile {svd_compile:6.2f} s  run {run:7.3f} s (first call {first:6.2f} s)  "
            f"S vs cpu {rel_s:.1e}, each vs f64 {own:.1e} (cpu {own_cpu:.1e})  "
            f"|USVh-A|/|A| {rec:.1e} (cpu {rec_cpu:.1e})  |U^TU-I| {orth:.1e} |VV^T-I| {orth_v:.1e}  "
            f"program {size} B")
    if backward:
        x = a.to("tpu").requires_grad_()
        t0 = time.perf_counter()
        uu, ss, vv = torch.linalg.svd(x, full_matrices=False)
        (ss.sum() + (uu @ vv).sum()).backward()
        g = x.grad.cpu()
        bwd = time.perf_counter() - t0
        comp = dbg.compiles(clear=True)
        bwd_compile = sum(c["seconds"] for c in comp if "svd" not in c["what"])
        worst = max(comp, key=lambda c: c["seconds"]) if comp else {"what": "-", "seconds": 0}
        xc = a.clone().requires_grad_()
        uc, sc, vc = torch.linalg.svd(xc, full_matrices=False)
        (sc.sum() + (uc @ vc).sum()).backward()
        gerr = ((g - xc.grad).abs().max() / xc.grad.abs().max()).item()
        line += (f"\n{'':>10}  backward: {len(comp)} programs, compile {bwd_compile:.2f} s in all "
                 f"(longest {worst['what']} {worst['seconds']:.2f} s), first call {bwd:.2f} s, "
                 f"grad rel err {gerr:.1e}")
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=",".join(SIZES), help="e.g. 512x512,8x64x64,20x12:f64")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one, not args.no_backward)
        return
    for spec in args.sizes.split(","):
        cmd = [sys.executable, __file__, "--one", spec] + (["--no-backward"] if args.no_backward else [])
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
