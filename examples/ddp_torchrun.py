"""Data-parallel training with DistributedDataParallel on device ``tpu``.

Launch one process per rank with torchrun:

    torchrun --nproc-per-node 2 examples/ddp_torchrun.py                 # MLP 64-512-512-8, 300 steps
    torchrun --nproc-per-node 2 examples/ddp_torchrun.py --hidden 32 --steps 30   # tiny

Each rank binds one tpu device, joins the ``"tpu"`` c10d backend, and trains
the same model on its own shard of a synthetic classification set (labels
from a fixed random "teacher" network), through a DataLoader with a
DistributedSampler. DDP averages the gradients across ranks in every
backward; at the end the script checks that every rank holds exactly the
same parameters, and prints how the collectives ran
(``torchtpu.distributed.path()``: ranks in separate processes on the XLA CPU
plugin stage collectives through host memory over gloo).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import torchtpu


def make_dataset(n, features, classes, seed):
    """Inputs with labels from a fixed random teacher MLP: learnable, and the
    same on every rank (each rank reads its own shard of it)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w1 = torch.randn(features, 64, generator=g) / features ** 0.5
    w2 = torch.randn(64, classes, generator=g) / 8
    y = (torch.tanh(x @ w1) @ w2).argmax(1)
    return TensorDataset(x, y)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    # torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
    # One device per rank: tpu:LOCAL_RANK when the host has that many
    # (TORCHTPU_NUM_DEVICES=N gives the CPU plugin N), else tpu:0.
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("tpu", local_rank % torch.tpu.device_count())
    torch.tpu.set_device(device)
    dist.init_process_group("tpu")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(args.features, args.hidden), nn.GELU(),
                          nn.Linear(args.hidden, args.hidden), nn.GELU(),
                          nn.Linear(args.hidden, args.classes)).to(device)
    model = DDP(model)  # also broadcasts rank 0's parameters to the others
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    data = make_dataset(args.samples, args.features, args.classes, args.seed)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, seed=args.seed,
                                 drop_last=True)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler, drop_last=True)

    if rank == 0:
        print(f"{world} ranks, backend {dist.get_backend()}, collectives: "
              f"{torchtpu.distributed.path()}; {len(loader)} batches of {args.batch} per rank "
              f"per epoch", flush=True)
    log_every = max(1, args.steps // 10)
    step, epoch, losses = 0, 0, []
    t0 = time.perf_counter()
    while step < args.steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            if step % log_every == 0 or step == args.steps - 1:
                mean = loss.detach().clone()
                dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # the loss over all ranks
                losses.append(mean.item())
                if rank == 0:
                    print(f"step {step:4d}  loss {losses[-1]:.4f}", flush=True)
            step += 1
            if step == args.steps:
                break
        epoch += 1
    elapsed = time.perf_counter() - t0

    # Every replica must hold the same parameters: compare with rank 0's.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    diff = (flat - reference).abs().max()
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    diff = diff.item()
    if rank == 0:
        print(f"trained {args.steps} steps in {elapsed:.1f} s; loss {losses[0]:.4f} -> "
              f"{losses[-1]:.4f}", flush=True)
        print(f"replicas equal: {diff == 0.0} (largest difference from rank 0: {diff:.3g})",
              flush=True)
    dist.destroy_process_group()
    if diff != 0.0:
        raise SystemExit(f"rank {rank}: parameters differ from rank 0's by {diff}")


if __name__ == "__main__":
    main()
