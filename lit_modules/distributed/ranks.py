"""Ranks started by an outside launcher (torchrun): which one is rank 0, and what rank 0 decided.

torchrun starts every rank as its own `python -m lit_modules.train ...`. Each composes the same config
(with the Compose API: no Hydra output folder per rank) and Lightning's DDP strategy finds its place
through TorchElasticEnvironment. Only rank 0 talks to the tracking store: it checks the store, opens the
one MLflow run, ends it, records its files and evaluates; Lightning writes checkpoints on rank 0 only.
What the other ranks need from rank 0 (the run id, a resume target, a skip decision) is broadcast through
the process group, which is made here with the backend Lightning would pick, so Lightning reuses it.

Under one process (or `ddp_spawn`, whose ranks exist only inside `Trainer.fit`) nothing here does
anything: `decide` just calls its function.
"""

from __future__ import annotations

import atexit
import os
import pickle
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

# torch and torch.distributed are imported in the functions that talk to other ranks: validation reads the
# layout (launched_ranks, launch_problems) before it knows whether torch is needed at all.

T = TypeVar("T")
# Strategies that start their own processes: under an outside launcher every rank would start more.
SPAWNING_STRATEGIES = ("ddp_spawn", "ddp_fork", "ddp_notebook")
# Strategies whose ranks, without a launcher, Lightning starts by running the whole command again.
SCRIPT_RELAUNCHING_STRATEGIES = ("ddp", "fsdp")


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    accelerator: str = "cpu"

    @property
    def is_zero(self) -> bool:
        return self.rank == 0

    @property
    def external(self) -> bool:
        """Several ranks, each a process a launcher started (not spawned by this one)."""
        return self.world_size > 1

    def decide(self, compute: Callable[[], T]) -> T:
        """`compute()` on rank 0 only; its result on every rank. An error on rank 0 is raised on every rank
        (the others would otherwise wait for a broadcast that never comes)."""
        if not self.external:
            return compute() if self.is_zero else None
        outcome, failure = None, None
        if self.is_zero:
            try:
                outcome = (True, compute())
            except Exception as err:  # noqa: BLE001 - re-raised here and on every other rank
                outcome, failure = (False, _portable(err)), err
        import torch.distributed as dist

        box = [outcome]
        dist.broadcast_object_list(box, src=0, group=_object_group(self.accelerator))
        ok, value = box[0]
        if ok:
            return value
        raise failure if failure is not None else value


def _portable(err: Exception) -> Exception:
    """`err` if it can travel to the other ranks (be pickled), else a RuntimeError with its message."""
    try:
        pickle.dumps(err)
        return err
    except Exception:  # noqa: BLE001 - any pickling problem means the same
        return RuntimeError(f"{type(err).__name__} on rank 0: {err}")


def launched_ranks(accelerator: str = "cpu", environ: Mapping[str, str] = os.environ) -> Ranks:
    """The layout a launcher put in the environment (torchrun's RANK, LOCAL_RANK, WORLD_SIZE,
    LOCAL_WORLD_SIZE); a single rank when there is none."""
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return Ranks(accelerator=accelerator)
    world = int(environ["WORLD_SIZE"])
    return Ranks(
        rank=int(environ["RANK"]),
        local_rank=int(environ.get("LOCAL_RANK", 0)),
        world_size=world,
        local_world_size=int(environ.get("LOCAL_WORLD_SIZE", world)),
        accelerator=accelerator,
    )


def launch_problems(trainer_cfg, ranks: Ranks) -> list[str]:
    """One sentence per way the trainer config disagrees with the ranks the launcher started (or, without
    a launcher, would need one)."""
    world = trainer_cfg.devices * trainer_cfg.num_nodes
    if not ranks.external:
        if trainer_cfg.strategy in SCRIPT_RELAUNCHING_STRATEGIES and world > 1:
            # Lightning would run this very command again per rank, and every copy would open its own run.
            ddp = trainer_cfg.strategy == "ddp"
            return [f"trainer.strategy={trainer_cfg.strategy} over {world} devices needs its ranks started by "
                    f"torchrun: torchrun --nproc_per_node={trainer_cfg.devices} -m lit_modules.train "
                    f"trainer={'ddp_torchrun' if ddp else 'fsdp'} ..."
                    + (" (or trainer=ddp, which spawns them from this process)." if ddp else ".")]
        return []
    problems = []
    if trainer_cfg.strategy in SPAWNING_STRATEGIES:
        problems.append(
            f"trainer.strategy={trainer_cfg.strategy} starts its own processes, but a launcher already started "
            f"{ranks.world_size} ranks; use trainer=ddp_torchrun."
        )
    if trainer_cfg.devices != ranks.local_world_size or world != ranks.world_size:
        problems.append(
            f"The launcher started {ranks.world_size} ranks ({ranks.local_world_size} per node), but "
            f"trainer.devices={trainer_cfg.devices} x trainer.num_nodes={trainer_cfg.num_nodes}; use "
            "trainer=ddp_torchrun, which reads both from torchrun."
        )
    return problems


_GROUPS: dict[str, object] = {}


def _object_group(accelerator: str):
    """A gloo group for Python objects, made once; the default group is made first if nobody has yet."""
    import torch.distributed as dist

    if accelerator not in _GROUPS:
        if not dist.is_initialized():
            # Lightning picks nccl for CUDA devices and gloo otherwise, and skips its own init_process_group
            # when one exists: the same choice here keeps one process group for the whole run.
            dist.init_process_group("nccl" if _uses_cuda(accelerator) else "gloo")  # env:// from torchrun
            atexit.register(_destroy)
        # Objects travel as CPU tensors: over the default group when it is gloo, else over a gloo subgroup.
        _GROUPS[accelerator] = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
    return _GROUPS[accelerator]


def _uses_cuda(accelerator: str) -> bool:
    import torch

    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
