"""lm-eval's results dict -> flat metrics and files that let two runs be compared item by item."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


ITEMS = "items"  # eval/<task>/items: how many items the task scored (a reader's chance floor needs it)


def flat_metrics(results: dict, prefix: str = "eval") -> dict[str, float]:
    """`eval/<task>/<metric>` for every numeric metric; lm-eval's default filter suffix ",none" is dropped
    and another filter becomes a suffix (`acc/<filter>`). Stderr entries are kept only when numeric.
    `eval/<task>/items` is the number of items scored (lm-eval's `sample_len`)."""
    metrics: dict[str, float] = {}
    for task, values in results.get("results", {}).items():
        if isinstance(values.get("sample_len"), int) and not isinstance(values["sample_len"], bool):
            metrics[f"{prefix}/{task}/{ITEMS}"] = float(values["sample_len"])
        for key, value in values.items():
            if "," not in key or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if isinstance(value, float) and math.isnan(value):
                continue
            metric, filter_name = key.split(",", 1)
            name = metric if filter_name == "none" else f"{metric}/{filter_name}"
            metrics[f"{prefix}/{task}/{name}"] = float(value)
    return metrics


def _plain(value: Any) -> Any:
    """JSON-safe copy of lm-eval values (tuples, numpy scalars, sets)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def sample_record(sample: dict, output_type: str) -> dict:
    """One line of a per-sample file: id, target, the model's scores, and each per-sample metric."""
    record: dict[str, Any] = {"doc_id": sample["doc_id"], "target": _plain(sample.get("target"))}
    responses = sample.get("filtered_resps", [])
    if output_type == "multiple_choice":
        record["loglikelihoods"] = [float(r[0]) for r in responses]
        record["is_greedy"] = [bool(r[1]) for r in responses]
        record["correct"] = bool(sample.get("acc", 0.0) == 1.0)
    elif output_type == "loglikelihood":
        record["loglikelihood"], record["is_greedy"] = float(responses[0][0]), bool(responses[0][1])
    elif output_type == "loglikelihood_rolling":
        record.pop("target")  # the whole passage: the doc id and hashes identify it
        record["loglikelihood"] = float(
            responses[0][0] if isinstance(responses[0], (list, tuple)) else responses[0]
        )
    else:
        record["response"] = _plain(responses[0] if responses else None)
    for metric in sample.get("metrics", []):
        if metric in sample:
            record[metric] = _plain(sample[metric])
    for key, value in sample.items():
        if key.endswith("_hash") and key not in record:
            record[key] = value
    return record


def write_samples(results: dict, folder: Path) -> list[Path]:
    """`<folder>/<task>.jsonl` per task, rows in doc-id order."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for task, samples in sorted((results.get("samples") or {}).items()):
        output_type = results.get("configs", {}).get(task, {}).get("output_type", "")
        path = folder / f"{task}.jsonl"
        rows = sorted((sample_record(s, output_type) for s in samples), key=lambda r: r["doc_id"])
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        written.append(path)
    return written


def write_results(results: dict, path: Path, extra: dict) -> Path:
    """lm-eval's results without the per-sample list, plus our settings under `live_model`."""
    kept = {k: v for k, v in results.items() if k != "samples"}
    kept["live_model"] = extra
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(kept), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
