"""Structured-config schemas for the `data` and `tokenizer` Hydra groups.

Only plain field types are used so OmegaConf can type-check YAML against them.
`problems()` reports impossible values up front, before anything is read or
downloaded, so a bad override fails in the first second instead of mid-run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, List, Optional

from lit_modules.errors import DataError

SOURCES = ("embedded", "hf", "text_files", "sft")
EMBEDDED_CORPORA = ("shakespeare", "python_docs", "evidence_en")  # evidence_en: data/evidence_corpus.py
TOKENIZER_KINDS = ("byte", "bpe", "pretrained")
# UTF-8 bytes 0..255 plus BOS, EOS and PAD; see data/tokenization.ByteTokenizer.
BYTE_VOCAB_SIZE = 259
SAMPLERS = ("random", "permutation")
# Fields added after runs were recorded, at their "not used" value: left out of a run's identity hash there.
DATA_ADDED_DEFAULTS = {"sampler": "random"}


@dataclass
class DataConfig:
    name: str = "shakespeare"
    source: str = "embedded"  # "embedded" | "hf" | "text_files" | "sft" (prompt/response pairs, see data/sft.py)
    seq_len: int = 128
    batch_size: int = 16  # micro-batch per device
    val_batches: int = 8
    heldout_fraction: float = 0.05
    cache_dir: str = "data/cache"
    hf_path: Optional[str] = None
    hf_name: Optional[str] = None
    hf_split: str = "train"
    text_field: str = "text"
    data_files: List[str] = field(default_factory=list)
    max_documents: Optional[int] = None  # any source: keep only the first N documents
    # Training windows drawn with replacement ("random") or read as a seeded permutation of disjoint windows,
    # so no token is read twice within an epoch ("permutation"; lit_modules/data/sampling.py).
    sampler: str = "random"
    # source=sft only: JSON-lines `data_files` or a Hugging Face dataset `hf_path`, one pair per record;
    # the loss is on response tokens only.
    prompt_field: str = "query"
    response_field: str = "response"
    prompt_template: str = "Question: {prompt}\nAnswer: "

    def problems(self) -> list[str]:
        """One sentence per impossible setting; empty when the config is usable."""
        found = []
        if self.source not in SOURCES:
            found.append(f"data.source is {self.source!r} but must be one of {', '.join(SOURCES)}.")
        if self.source == "embedded" and self.name not in EMBEDDED_CORPORA:
            found.append(
                f"data.name is {self.name!r} but the embedded corpora are {', '.join(EMBEDDED_CORPORA)}."
            )
        if self.seq_len < 2:
            found.append(f"data.seq_len is {self.seq_len} but must be at least 2.")
        if self.sampler not in SAMPLERS:
            found.append(f"data.sampler is {self.sampler!r} but must be one of {', '.join(SAMPLERS)}.")
        if self.batch_size < 1:
            found.append(f"data.batch_size is {self.batch_size} but must be at least 1.")
        if self.val_batches < 1:
            found.append(f"data.val_batches is {self.val_batches} but must be at least 1.")
        if not 0.0 < self.heldout_fraction < 1.0:
            found.append(
                f"data.heldout_fraction is {self.heldout_fraction} but must lie strictly between 0 and 1."
            )
        if self.source == "hf" and not self.hf_path:
            found.append("data.source is hf but data.hf_path is not set.")
        if self.source == "text_files" and not self.data_files:
            found.append("data.source is text_files but data.data_files lists no files.")
        if self.source == "sft" and not (self.hf_path or self.data_files):
            found.append("data.source is sft but names neither data.data_files (JSON lines) nor data.hf_path.")
        if self.source == "sft" and "{prompt}" not in self.prompt_template:
            found.append("data.prompt_template must contain {prompt}, where the prompt text goes.")
        if self.max_documents is not None and self.max_documents < 2:
            found.append(
                f"data.max_documents is {self.max_documents} but must be at least 2 "
                "(one to train on, one to hold out)."
            )
        if not self.name or "/" in self.name or self.name.startswith("."):
            found.append(f"data.name {self.name!r} must be a plain folder name.")
        return found

    @classmethod
    def from_any(cls, cfg: Any) -> DataConfig:
        return _to_dataclass(cls, cfg)


@dataclass
class TokenizerConfig:
    kind: str = "byte"  # "byte" | "bpe" | "pretrained"
    vocab_size: int = 4096  # bpe only
    path: Optional[str] = None  # pretrained only: a tokenizer.json file

    def problems(self) -> list[str]:
        found = []
        if self.kind not in TOKENIZER_KINDS:
            found.append(f"tokenizer.kind is {self.kind!r} but must be one of {', '.join(TOKENIZER_KINDS)}.")
        if self.kind == "bpe" and not 260 <= self.vocab_size <= 2**32 - 1:
            found.append(
                f"tokenizer.vocab_size is {self.vocab_size} but BPE needs at least 260 "
                "(256 bytes, 3 specials, 1 merge)."
            )
        if self.kind == "pretrained" and not self.path:
            found.append("tokenizer.kind is pretrained but tokenizer.path is not set.")
        return found

    @classmethod
    def from_any(cls, cfg: Any) -> TokenizerConfig:
        return _to_dataclass(cls, cfg)


def static_vocab_size(cfg: TokenizerConfig | Any) -> int:
    """The vocabulary size a tokenizer config will produce, without reading any corpus.

    Lets a dry run size the model before data exists. For BPE this is the requested
    size, which training reaches on any corpus of realistic size.
    """
    cfg = TokenizerConfig.from_any(cfg)
    if cfg.kind == "byte":
        return BYTE_VOCAB_SIZE
    if cfg.kind == "bpe":
        return cfg.vocab_size
    if cfg.kind == "pretrained":
        return _tokenizer_file_vocab_size(Path(cfg.path or ""))
    raise DataError(TokenizerConfig(kind=cfg.kind).problems()[0])


def _tokenizer_file_vocab_size(path: Path) -> int:
    from lit_modules.config.tokenizer_file import load_tokenizer_file  # local import: `tokenizers` loads only when needed

    return load_tokenizer_file(path).get_vocab_size(with_added_tokens=True)


def _to_dataclass(cls, cfg: Any):
    """Accept the dataclass itself, a Hydra DictConfig or a plain mapping."""
    if isinstance(cfg, cls):
        return cfg
    if cfg is None:
        return cls()
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            cfg = OmegaConf.to_container(cfg, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf is a project dependency
        pass
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise DataError(
            f"Unknown {cls.__name__} keys {', '.join(unknown)}; "
            f"the valid keys are {', '.join(sorted(known))}."
        )
    values = dict(cfg)
    if "data_files" in values and values["data_files"] is not None:
        values["data_files"] = list(values["data_files"])
    return cls(**values)
