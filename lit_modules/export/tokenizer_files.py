"""The run's tokenizer as Hugging Face tokenizer files: tokenizer.json and tokenizer_config.json.

byte: written (byte_tokenizer.py, the same ids); bpe: the file the run trained (in the data cache);
pretrained: the run's tokenizer.json, with its folder's tokenizer_config.json / special_tokens_map.json
where it came from a model folder. A bpe or pretrained file that is no longer there is left out (the card
says so); the model still loads.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lit_modules.data.tokenization import PAD_TOKEN, HFTokenizer
from lit_modules.export.byte_tokenizer import byte_tokenizer_json

COMPANIONS = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


@dataclass(frozen=True)
class TokenIds:
    bos: int | None = None
    eos: int | None = None
    pad: int | None = None


@dataclass(frozen=True)
class WrittenTokenizer:
    ids: TokenIds
    note: str  # one line for the model card


def _tokenizer_file(cfg: DictConfig) -> Path | None:
    tok = cfg.tokenizer
    if tok.kind == "pretrained":
        return Path(tok.path)
    from lit_modules.data import prepare_corpus
    from lit_modules.data.tokenization import bpe_cache_path

    corpus = prepare_corpus(OmegaConf.to_object(cfg.data))
    return bpe_cache_path(corpus.cache_dir, corpus.fingerprint, tok.vocab_size)


def write_tokenizer_files(cfg: DictConfig, folder: Path) -> WrittenTokenizer:
    """The run's tokenizer files into `folder`; their special-token ids for config.json."""
    from tokenizers import Tokenizer

    kind = cfg.tokenizer.kind
    if kind == "byte":
        text, source = byte_tokenizer_json(), None
        note = "the platform's byte tokenizer (UTF-8 bytes 0-255, <|bos|> 256, <|eos|> 257, <|pad|> 258)"
    else:
        source = _tokenizer_file(cfg)
        if not source.is_file():
            return WrittenTokenizer(TokenIds(), f"not included: the run's {kind} tokenizer file {source} is gone")
        text = source.read_text()
        note = f"the run's {kind} tokenizer ({source.name}, {Tokenizer.from_str(text).get_vocab_size()} ids)"
    (folder / "tokenizer.json").write_text(text)
    backend = Tokenizer.from_str(text)
    wrapped = HFTokenizer(backend, name=kind)  # finds BOS/EOS as the run did
    pad = backend.token_to_id(PAD_TOKEN)
    ids = TokenIds(wrapped.bos_id, wrapped.eos_id, pad)
    companions = [source.parent / c for c in COMPANIONS] if source is not None and source.name == "tokenizer.json" else []
    if any(c.is_file() for c in companions):
        for companion in companions:
            if companion.is_file():
                shutil.copyfile(companion, folder / companion.name)
    else:
        token = backend.id_to_token
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": token(ids.bos),
            "eos_token": token(ids.eos),
            "pad_token": token(pad) if pad is not None else None,
            "model_max_length": int(cfg.model.max_seq_len),
            "clean_up_tokenization_spaces": False,
        }
        (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return WrittenTokenizer(ids, note)
