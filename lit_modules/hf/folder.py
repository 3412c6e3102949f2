"""A local Hugging Face Llama folder: its config.json and its weights (model.safetensors, or shards listed in
model.safetensors.index.json). Every check reads file headers only, so a folder that does not fit is refused
before any tensor is loaded."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lit_modules.hf import ModelFolderError
from lit_modules.hf.config_map import llama_config_from_hf
from lit_modules.hf.names import expected_hf_names, our_name
from lit_modules.model.config import LlamaConfig

if TYPE_CHECKING:  # torch loads with the first tensor read: a folder refused from its headers never pays for it
    import torch

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
# Tensors some checkpoints carry that are not weights (older transformers saved RoPE's inverse frequencies).
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def read_hf_config(folder: Path) -> tuple[dict, LlamaConfig]:
    """(config.json as read, our LlamaConfig); ModelFolderError for a missing folder or an unsupported config."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFolderError(f"hf:{folder} is not a local folder; download the model first (nothing is fetched from "
                          "a hub) and pass its folder.")
    path = folder / "config.json"
    if not path.is_file():
        raise ModelFolderError(f"hf:{folder} has no config.json; pass a Hugging Face model folder.")
    hf = _read_json(path)
    return hf, llama_config_from_hf(hf, str(folder))


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; ModelFolderError (naming the file) for anything else."""
    try:
        value = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ModelFolderError(f"{path} is not valid JSON ({err.msg} at line {err.lineno}).") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ModelFolderError(f"{path} cannot be read ({getattr(err, 'strerror', None) or type(err).__name__}).") from None
    if not isinstance(value, dict):
        raise ModelFolderError(f"{path} holds a JSON {type(value).__name__}, not the object of settings it should.")
    return value


@contextlib.contextmanager
def _safetensors(path: Path, folder: Path) -> Iterator[Any]:
    """`safe_open(path)`; a file whose header does not parse or whose data it does not cover (cut short) is a
    ModelFolderError naming it."""
    from safetensors import SafetensorError, safe_open

    try:
        handle = safe_open(str(path), "pt")
    except (SafetensorError, OSError) as err:
        raise ModelFolderError(f"hf:{folder}'s {path.name} is not a complete safetensors file ({_first_line(err)}); "
                               "it is cut short or damaged: copy it again from its source.") from None
    with handle as f:
        yield f


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def weight_files(folder: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it."""
    folder = Path(folder)
    if (folder / INDEX).is_file():
        weight_map = _read_json(folder / INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ModelFolderError(f"{folder}/{INDEX} has no weight_map of tensor names to shard files; pass a "
                                   "folder whose index transformers wrote.")
        files = {name: folder / file for name, file in weight_map.items()}
        missing = sorted({str(p.name) for p in files.values() if not p.is_file()})
        if missing:
            raise ModelFolderError(f"{folder}/{INDEX} lists the shard {missing[0]}, which is not in the folder.")
        return files
    if (folder / SINGLE).is_file():
        with _safetensors(folder / SINGLE, folder) as f:
            return {name: folder / SINGLE for name in f.keys()}
    found = "; it has pytorch_model.bin, convert it to safetensors first" if (folder / "pytorch_model.bin").exists() else ""
    raise ModelFolderError(f"hf:{folder} has neither {SINGLE} nor {INDEX}{found}.")


def check_weights(folder: Path, cfg: LlamaConfig) -> dict[str, Path]:
    """The folder's tensor files after checking every name and shape against `cfg` (headers only)."""
    files = {k: v for k, v in weight_files(folder).items() if not k.endswith(IGNORED_SUFFIXES)}
    expected = expected_hf_names(cfg.n_layers, cfg.tie_embeddings)
    if cfg.tie_embeddings:
        files.pop("lm_head.weight", None)  # some tied checkpoints store the head too; the embedding is it
    missing, unexpected = sorted(expected - set(files)), sorted(set(files) - expected)
    if missing or unexpected:
        what = f"lacks {missing[0]}" if missing else f"has {unexpected[0]}, which this platform's Llama does not have"
        raise ModelFolderError(f"The weights in hf:{folder} do not fit its config.json: it {what} "
                          f"({len(missing)} missing, {len(unexpected)} unexpected tensors).")
    from lit_modules.model.meta import meta_llama

    shapes = {k: tuple(v.shape) for k, v in meta_llama(cfg).state_dict().items()}
    for path in sorted(set(files.values())):
        with _safetensors(path, folder) as f:
            for name in f.keys():
                if files.get(name) != path:
                    continue
                shape = tuple(f.get_slice(name).get_shape())
                if shape != shapes[our_name(name)]:
                    raise ModelFolderError(f"hf:{folder}'s tensor {name} has shape {list(shape)}, but its config.json "
                                      f"makes it {list(shapes[our_name(name)])}.")
    return files


def read_weights(folder: Path, cfg: LlamaConfig) -> dict[str, torch.Tensor]:
    """The folder's weights under our names, as float32 (the dtype our runs train in)."""
    from safetensors import SafetensorError

    files = check_weights(folder, cfg)
    out: dict[str, torch.Tensor] = {}
    for path in sorted(set(files.values())):
        with _safetensors(path, folder) as f:
            for name in f.keys():
                if files.get(name) != path:
                    continue
                try:
                    out[our_name(name)] = f.get_tensor(name).float()
                except SafetensorError as err:
                    raise ModelFolderError(f"hf:{folder}'s tensor {name} in {path.name} cannot be read "
                                           f"({_first_line(err)}); copy the file again from its source.") from None
    if cfg.tie_embeddings:
        out["lm_head.weight"] = out["tok_emb.weight"]
    return out


def write_weights(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """One safetensors file in Hugging Face's layout ({"format": "pt"} is what transformers expects)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
