"""Local tasks on disk: lm-eval task YAML + JSONL data in the corpus cache, built once and reused.

Layout: `<cache_dir>/eval_tasks/<corpus>-<key>/<task>/{<task>.yaml, data.jsonl}` plus `manifest.json`
(written last, the commit marker) with the corpus fingerprint, seed, sizes and each file's sha256. The key
hashes everything that decides the items, so a changed corpus, seed or rule gets a fresh folder. Paths in
the YAML are absolute (lm-eval resolves relative `data_files` against the working directory), and the
folder can be used from lm-eval's own CLI: `lm_eval --include_path <folder> --tasks local_cloze_<corpus>`.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from lit_modules.config.eval_tasks import LOCAL_KINDS, local_task_name
from lit_modules.data.atomic import atomic_write_json, atomic_write_text
from lit_modules.data.corpus import Corpus
from lit_modules.data.documents import iter_documents
from lit_modules.data.hashing import fingerprint, sha256_file
from lit_modules.data.locking import build_lock
from lit_modules.data.records import read_record
from lit_modules.errors import DataError

from .local_tasks import BUILDER_VERSION, BUILDERS

MANIFEST_FILE = "manifest.json"
DATA_FILE = "data.jsonl"

_MULTIPLE_CHOICE = {
    "output_type": "multiple_choice",
    "doc_to_text": "context",  # a field name: lm-eval reads it verbatim, no template
    "doc_to_choice": "choices",
    "doc_to_target": "label",
    "target_delimiter": "",  # the context ends with the real separator; the adapter moves it onto each choice
    "metric_list": [
        {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
    ],
}
_ROLLING = {
    "output_type": "loglikelihood_rolling",
    "doc_to_text": "",
    "doc_to_target": "text",
    "metric_list": [
        {"metric": "bits_per_byte", "aggregation": "bits_per_byte", "higher_is_better": False},
        {"metric": "byte_perplexity", "aggregation": "weighted_perplexity", "higher_is_better": False},
        {"metric": "word_perplexity", "aggregation": "weighted_perplexity", "higher_is_better": False},
    ],
}
TASK_SHAPES = {"cloze": _MULTIPLE_CHOICE, "nextsent": _MULTIPLE_CHOICE, "ppl": _ROLLING}


def task_folder(corpus: Corpus, n_items: int, seed: int) -> Path:
    key = fingerprint(corpus.fingerprint, n_items, seed, BUILDER_VERSION)
    return Path(corpus.cache_dir).resolve() / "eval_tasks" / f"{corpus.name}-{key}"


def prepare_local_tasks(corpus: Corpus, n_items: int = 300, seed: int = 1234) -> tuple[Path, dict]:
    """Build (or verify and reuse) the three local tasks of `corpus`; returns (include folder, manifest)."""
    folder = task_folder(corpus, n_items, seed)
    with build_lock(folder):
        manifest = _read_manifest(folder)
        if manifest is None:
            manifest = _build(corpus, folder, n_items, seed)
    return folder, manifest


def _read_manifest(folder: Path) -> dict | None:
    path = folder / MANIFEST_FILE
    if not path.exists():
        return None
    return read_record(
        path,
        lambda m: all(sha256_file(folder / entry["data"]) == entry["sha256"] for entry in m["tasks"].values()),
        f"The cached eval tasks in {folder} are damaged; delete that folder and run again.",
        also=(OSError,),  # a task's data file gone is damage too
    )


def _build(corpus: Corpus, folder: Path, n_items: int, seed: int) -> dict:
    documents = list(iter_documents(corpus.heldout_path))  # the held-out split only, by construction
    tasks = {}
    for kind in LOCAL_KINDS:
        name = local_task_name(kind, corpus.name)
        items = BUILDERS[kind](documents, n_items, seed)
        if not items:
            raise DataError(
                f"The held-out split of {corpus.name} yields no {kind} items; hold out more text "
                "(data.heldout_fraction) or drop that task."
            )
        task_dir = folder / name
        task_dir.mkdir(parents=True, exist_ok=True)
        data_path = task_dir / DATA_FILE
        atomic_write_text(data_path, "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items))
        config = {
            "task": name,
            "dataset_path": "json",
            "dataset_kwargs": {
                "data_files": {"test": str(data_path)},
                "cache_dir": str(folder / "hf_cache"),  # keep datasets' Arrow cache next to the data
            },
            "test_split": "test",
            **TASK_SHAPES[kind],
            "metadata": {"version": BUILDER_VERSION, "corpus_fingerprint": corpus.fingerprint, "seed": seed},
        }
        atomic_write_text(
            task_dir / f"{name}.yaml", yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
        )
        tasks[name] = {
            "kind": kind,
            "items": len(items),
            "data": f"{name}/{DATA_FILE}",
            "sha256": sha256_file(data_path),
        }
    manifest = {
        "corpus": corpus.name,
        "corpus_fingerprint": corpus.fingerprint,
        "source": str(corpus.heldout_path),
        "seed": seed,
        "n_items": n_items,
        "builder_version": BUILDER_VERSION,
        "tasks": tasks,
    }
    atomic_write_json(folder / MANIFEST_FILE, manifest)
    return manifest


def read_items(folder: Path, task: str) -> list[dict]:
    """The items of one built local task, in doc-id order."""
    with open(folder / task / DATA_FILE, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
