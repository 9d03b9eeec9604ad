"""Multi-process training with PyTorch's own engine: DistributedDataParallel.

torchrun (or `nmt train --nproc N`, which starts its processes the same way) sets RANK,
WORLD_SIZE and LOCAL_RANK; we join the process group (NCCL on GPUs, Gloo
on CPUs), give each rank its own shard of every epoch's batches, and let rank 0 alone
validate, log and write checkpoints while the others wait at a barrier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    """Where this process stands among the training processes."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def from_environment(use_cuda: bool) -> Ranks:
    """Join the process group the environment describes (torchrun's variables); one process otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Ranks()
    ranks = Ranks(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        backend = "nccl" if use_cuda else "gloo"
        if use_cuda:
            torch.cuda.set_device(ranks.local_rank)
        try:
            dist.init_process_group(backend=backend)
        except RuntimeError as exc:  # DistNetworkError, DistStoreError: no meeting place
            from nmt_cli.errors import NmtError

            where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise NmtError(
                f"the training processes could not meet at {where} ({reason}): run again (a "
                "port taken meanwhile), or check the address and port given to torchrun"
            ) from None
    return ranks


def free_port() -> int:
    """A TCP port free on the loopback now, for MASTER_PORT (taken only when rank 0 binds it)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_environment(rank: int, world: int, port: int) -> dict[str, str]:
    """The variables of rank `rank` of `world` on this machine, as `torchrun --standalone`
    sets them for its workers."""
    return {
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
    }  # fmt: skip


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def shard(batches: list, ranks: Ranks) -> list:
    """This rank's batches: every world-th one, all ranks the same count so none waits forever."""
    if not ranks.distributed:
        return batches
    per_rank = len(batches) // ranks.world
    return batches[ranks.rank :: ranks.world][:per_rank]


def sum_values(values: list[float], ranks: Ranks, device: torch.device) -> list[float]:
    """Element-wise sum over ranks (identity on one process)."""
    if not ranks.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def broadcast(value: Any, ranks: Ranks) -> Any:
    """Rank 0's value on every rank."""
    if not ranks.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(ranks: Ranks) -> None:
    if ranks.distributed:
        dist.barrier()
