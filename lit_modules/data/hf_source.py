"""Documents from a Hugging Face `datasets` source: a hub corpus or local json/parquet/csv/text files.

Hub corpora (FineWeb-Edu, TinyStories) are streamed and capped at
`max_documents`, so a 10B-token sample is never downloaded whole; the train/heldout
text files written from them are the cache from then on. In offline mode
(HF_HUB_OFFLINE=1) we instead read the regular `datasets` cache, which is the only
place a pre-downloaded copy can be. Local builders (`hf_path="json"` with
`data_files`) always stream, so they work fully offline and leave no Arrow cache.

Held-out documents are chosen per document from the hash of its text, so the
choice needs no second pass, does not depend on order, and identical documents
always land on the same side.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from lit_modules.config.data import DataConfig
from lit_modules.errors import DataError

from .hashing import unit_interval_hash
from .text_files import file_identity

LOCAL_BUILDERS = ("json", "parquet", "csv", "text", "arrow")


def is_local_builder(cfg: DataConfig) -> bool:
    return cfg.hf_path in LOCAL_BUILDERS


def hf_settings(cfg: DataConfig) -> dict:
    """Everything about the request that determines which documents we get."""
    files = (
        [file_identity(path) for path in cfg.data_files] if is_local_builder(cfg) else list(cfg.data_files)
    )
    return {
        "hf_path": cfg.hf_path,
        "hf_name": cfg.hf_name,
        "hf_split": cfg.hf_split,
        "text_field": cfg.text_field,
        "data_files": files,
    }


def is_heldout_text(text: str, fraction: float) -> bool:
    return unit_interval_hash(text) < fraction


def iter_hf_texts(cfg: DataConfig) -> Iterator[str]:
    """Raw document texts in source order, at most `max_documents`; errors become DataError."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - a project dependency
        raise DataError(
            "The `datasets` package is not installed; install it or use data=shakespeare."
        ) from None

    local = is_local_builder(cfg)
    streaming = (local or not datasets.config.HF_HUB_OFFLINE) and "[" not in cfg.hf_split
    try:
        dataset = datasets.load_dataset(
            cfg.hf_path,
            cfg.hf_name,
            split=cfg.hf_split,
            data_files=list(cfg.data_files) or None,
            streaming=streaming,
        )
        for record in itertools.islice(dataset, cfg.max_documents):
            if cfg.text_field not in record:
                raise DataError(
                    f"Records of {cfg.hf_path} have no field {cfg.text_field!r}; "
                    f"set data.text_field to one of {', '.join(sorted(record))}."
                )
            yield record[cfg.text_field] or ""
    except DataError:
        raise
    except Exception as error:
        explained = _explain(cfg, local, error)
        if explained is None:
            raise
        raise explained from None


def _explain(cfg: DataConfig, local: bool, error: Exception) -> DataError | None:
    """One actionable sentence for the failures a user can fix; None for anything else (a bug)."""
    from datasets.exceptions import DatasetNotFoundError, DatasetsError

    if local and isinstance(error, (OSError, DatasetsError, ValueError)):
        return DataError(
            f"Could not read the local data files {', '.join(cfg.data_files)} with the {cfg.hf_path} loader "
            f"({type(error).__name__}); check the paths and the file format."
        )
    if isinstance(error, ConnectionError):
        return DataError(
            f"The Hugging Face hub is unreachable and {cfg.hf_path} is not in the local cache; "
            "use data=shakespeare or point data.data_files at local files."
        )
    if isinstance(error, DatasetNotFoundError):
        return DataError(
            f"The dataset {cfg.hf_path} (config {cfg.hf_name}) was not found on the Hugging Face hub; "
            "check data.hf_path and data.hf_name."
        )
    if isinstance(error, (DatasetsError, ValueError, OSError)):
        return DataError(
            f"Loading {cfg.hf_path} (config {cfg.hf_name}, split {cfg.hf_split}) failed with "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no message'}."
        )
    return None
