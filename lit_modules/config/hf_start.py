"""A run that starts from a Hugging Face Llama folder: `init_from=hf:<folder>`.

The folder's config.json decides `model.*` (whatever the model group said), and with `tokenizer=pretrained`
its tokenizer.json is the tokenizer (tokenizer.path, when unset); a folder whose tokenizer.json is the byte
tokenizer (a byte run exported by lit_modules.export) also loads with the default `tokenizer=byte`. Everything is checked from config and
file headers before any data is read; the weights themselves are read by `lit_modules.hf.start.init_weights`
(from lit_modules.resume), after the run's other checks. This half lives in config/ because validation
calls it; hf/ below reads the folder and imports nothing of config/.
"""

from __future__ import annotations

from dataclasses import asdict

from omegaconf import DictConfig, OmegaConf

from lit_modules.config.byte_tokenizer_file import is_byte_tokenizer_file
from lit_modules.config.data import static_vocab_size
from lit_modules.hf import HF_PREFIX, ModelFolderError, hf_folder, is_hf_reference

TOKENIZER_FILE = "tokenizer.json"


def with_hf_start(cfg: DictConfig) -> DictConfig:
    """`cfg` with model and tokenizer taken from the folder `init_from=hf:<folder>` names (unchanged if none)."""
    if not is_hf_reference(cfg.get("init_from")):
        return cfg
    # Here, not at the top: the folder's checks load torch, which a run without init_from=hf: never pays for
    # before its refusal.
    from lit_modules.hf.folder import check_weights, read_hf_config

    folder = hf_folder(cfg.init_from)
    _, model = read_hf_config(folder)
    check_weights(folder, model)
    cfg = cfg.copy()
    cfg.init_from = f"{HF_PREFIX}{folder.resolve()}"  # the same folder from any working directory (resume)
    cfg.model = OmegaConf.merge(OmegaConf.structured(type(model)), asdict(model))
    tokenizer_file = folder / TOKENIZER_FILE
    kind = cfg.tokenizer.kind
    if kind == "pretrained" and not cfg.tokenizer.path:
        if not tokenizer_file.is_file():
            raise ModelFolderError(f"init_from=hf:{folder} has no {TOKENIZER_FILE}; set tokenizer.path=<a tokenizer.json> "
                              "for the ids its embedding was trained on.")
        cfg.tokenizer.path = str(tokenizer_file.resolve())
    elif kind == "byte" and tokenizer_file.is_file() and is_byte_tokenizer_file(tokenizer_file):
        pass  # the folder's file is the byte tokenizer (our own export of a byte run): the same ids
    elif kind != "pretrained" and tokenizer_file.is_file():
        raise ModelFolderError(f"init_from=hf:{folder} comes with its own {TOKENIZER_FILE}, and tokenizer={kind} would give "
                          "its embedding other ids; add tokenizer=pretrained (the folder's file is then used).")
    vocab = static_vocab_size(OmegaConf.to_object(cfg.tokenizer))
    if vocab > model.vocab_size:
        raise ModelFolderError(f"The tokenizer has {vocab} ids but hf:{folder}'s embedding has {model.vocab_size} rows; "
                          "use the tokenizer the model was trained with.")
    return cfg
