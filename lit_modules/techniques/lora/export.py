"""Export a LoRA fine-tune's checkpoint as a plain model: every adapter merged into its weight.

    python -m lit_modules.techniques.lora.export runs/checkpoints/<run id>/last.ckpt merged.pt

Rebuilds the run's model from the `config.json` beside the checkpoint (lit_modules.runs.finished), loads the
verified weights, applies every technique's inference form (LoRA: W + scaling * B @ A, `adapter.merge`) and
saves `{"model_config": {...}, "state_dict": {...}}` in the PC export's format, so
`lit_modules.techniques.pc_layer.export.load_merged` loads it into a plain `Llama` with the base's keys.
A checkpoint that fails its checksum, or has no config.json beside it, is refused in one sentence (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.nn.utils import parametrize

from lit_modules.config.errors import ConfigError
from lit_modules.runs.finished import RunCheckpoint


def export_checkpoint(checkpoint: Path, out: Path) -> Path:
    source = RunCheckpoint(Path(checkpoint))
    if not source.sidecar.is_file():
        raise ConfigError(f"{source.sidecar} is missing; it holds the run's config needed to rebuild the model.")
    model = source.trained_model(for_inference=True)  # verified first; adapters merged
    if any(parametrize.is_parametrized(m) for m in model.modules()):
        raise ConfigError(f"The run of {checkpoint} still has parametrized weights after merging; it cannot be "
                          "exported as a plain model.")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_config": source.config()["model"], "state_dict": model.state_dict()}, out)
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m lit_modules.techniques.lora.export <checkpoint> <out.pt>", file=sys.stderr)
        return 2
    try:
        print(export_checkpoint(Path(argv[0]), Path(argv[1])))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
