"""Export a PC-trained checkpoint as a plain model whose Linears hold the merged effective weights.

    python -m lit_modules.techniques.pc_layer.export runs/checkpoints/<run id>/last.ckpt merged.pt
    python -m lit_modules.techniques.pc_layer.export <ckpt> <out.pt> --refresh-iters 100

Reads the run's resolved config from the `config.json` next to the checkpoint, rebuilds the model with
the same PC transform (lit_modules.runs.finished.RunCheckpoint), loads the trained weights (and u, v,
gamma), merges (`merge.merge_pc`) and saves `{"model_config": {...}, "state_dict": {...}}`; the state_dict
loads into a plain `Llama` (`load_merged`), with the baseline's keys and the baseline's inference cost. A checkpoint that does not
match its checksum is refused in one sentence (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from lit_modules.config.errors import ConfigError
from lit_modules.model import Llama, LlamaConfig
from lit_modules.runs.finished import RunCheckpoint
from lit_modules.techniques.pc_layer.merge import DEFAULT_MERGE_ITERS, merge_pc


def export_checkpoint(checkpoint: Path, out: Path, refresh_iters: int = DEFAULT_MERGE_ITERS) -> Path:
    source = RunCheckpoint(Path(checkpoint))
    if not source.sidecar.is_file():
        raise ConfigError(f"{source.sidecar} is missing; it holds the run's config needed to rebuild the model.")
    model = source.trained_model()  # the checkpoint is verified first
    merge_pc(model.eval(), refresh_iters=refresh_iters)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_config": source.config()["model"], "state_dict": model.state_dict()}, out)
    return out


def load_merged(path: Path) -> Llama:
    """A plain `Llama` (no parametrization) holding the merged weights."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = Llama(LlamaConfig(**saved["model_config"]))
    model.load_state_dict(saved["state_dict"])
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--refresh-iters", type=int, default=DEFAULT_MERGE_ITERS)
    args = parser.parse_args(argv)
    try:
        print(export_checkpoint(args.checkpoint, args.out, args.refresh_iters))
    except ConfigError as err:  # a missing config.json or a checkpoint that fails its checksum
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
