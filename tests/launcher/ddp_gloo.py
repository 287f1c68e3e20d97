"""A PyTorch DistributedDataParallel script as users write it for torchrun: nothing in it knows
dltune. It joins the job through env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), trains a
small model on rank-dependent data with the gloo backend, and checks that every rank ends with
the same parameters (DDP averaged the gradients).

Prints one line per rank, "ddp rank=R/W local=L/LW group=G host=H node=N master=A:P loss=X
sum=S" (N: the Slurm node, "-" elsewhere),
then "ddp ok: ..." from rank 0. Exit 0 on success, 3 when the ranks' parameters differ.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_RANK"])
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)  # every rank sees different data
    for _ in range(20):
        x = torch.randn(32, 8, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    print(f"ddp rank={rank}/{world} local={local}/{os.environ['LOCAL_WORLD_SIZE']} "
          f"group={os.environ['GROUP_RANK']} host={socket.gethostname()} "
          f"node={os.environ.get('SLURMD_NODENAME', '-')} "
          f"master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
          f"loss={loss.item():.4f} sum={flat.sum().item():.6f}", flush=True)
    dist.barrier()
    if rank == 0:
        verdict = "ok" if same else "FAILED"
        print(f"ddp {verdict}: {world} ranks ended with identical parameters" if same else
              f"ddp {verdict}: the ranks' parameters differ", flush=True)
    dist.destroy_process_group()
    return 0 if same else 3


if __name__ == "__main__":
    sys.exit(main())
