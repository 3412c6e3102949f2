"""Linear probes: how linearly decodable is a property of held-out text from each layer's hidden states?

Labels come from the held-out split only:
- `document`: which held-out document (e.g. which play) a passage comes from; passages are consecutive
  non-overlapping token windows, balanced across documents.
- `speaker`: who speaks a line, for text in the plays' `NAME:` layout; the most frequent speakers are kept.
Features are each layer's residual stream (`model(idx, return_hidden=True)`: embedding output and every
block's output) mean-pooled over the passage. Per layer, a standardised logistic regression is fitted on a
seeded, stratified train split and scored on the rest; the majority-class accuracy is the floor to beat.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch import nn

from lit_modules.config.errors import EvalError

from .adapter import resolve_device

_SPEECH = re.compile(r"^([A-Z][A-Z .'&-]*[A-Z]):\n(.+?)(?=\n\s*\n|\Z)", re.M | re.S)


@dataclass
class ProbeResult:
    layer_acc: list[float]  # index i = hidden state i (0: embeddings, i: after block i)
    majority_acc: float
    n_classes: int
    n_train: int
    n_test: int
    labels: str
    classes: list[str] = field(default_factory=list)

    def metrics(self, prefix: str = "eval/probe") -> dict[str, float]:
        found = {f"{prefix}/layer_{i}/acc": acc for i, acc in enumerate(self.layer_acc)}
        found[f"{prefix}/majority_acc"] = self.majority_acc
        found[f"{prefix}/best_acc"] = max(self.layer_acc)
        return found


def _balanced(by_class: dict[str, list[list[int]]], max_passages: int, min_per_class: int, seed: int):
    classes = sorted(name for name, rows in by_class.items() if len(rows) >= min_per_class)
    if len(classes) < 2:
        return [], []
    rng = random.Random(f"{seed}:probe")
    per_class = max(min_per_class, max_passages // len(classes))
    passages, labels = [], []
    for name in classes:
        rows = by_class[name]
        keep = sorted(rng.sample(range(len(rows)), min(per_class, len(rows))))
        passages += [rows[i] for i in keep]
        labels += [name] * len(keep)
    return passages, labels


def document_passages(
    documents: Sequence[str], tokenizer, seq_len: int, max_passages: int, seed: int, min_per_class: int = 10
) -> tuple[list[list[int]], list[str]]:
    by_class = {}
    for index, text in enumerate(documents):
        ids = tokenizer.encode(text)
        title = text.strip().split("\n", 1)[0][:40]
        by_class[f"{index}:{title}"] = [
            ids[s : s + seq_len] for s in range(0, len(ids) - seq_len + 1, seq_len)
        ]
    return _balanced(by_class, max_passages, min_per_class, seed)


def speaker_passages(
    documents: Sequence[str],
    tokenizer,
    seq_len: int,
    max_passages: int,
    seed: int,
    n_speakers: int = 4,
    min_tokens: int = 16,
) -> tuple[list[list[int]], list[str]]:
    speeches: dict[str, list[list[int]]] = {}
    for text in documents:
        for match in _SPEECH.finditer(text):
            ids = tokenizer.encode(match.group(2))[:seq_len]
            if len(ids) >= min_tokens:
                speeches.setdefault(match.group(1), []).append(ids)
    top = [
        name
        for name, _ in sorted(
            Counter({k: len(v) for k, v in speeches.items()}).items(), key=lambda kv: (-kv[1], kv[0])
        )
    ]
    return _balanced({name: speeches[name] for name in top[:n_speakers]}, max_passages, 10, seed)


@torch.inference_mode()
def pooled_hidden_states(
    model: nn.Module, passages: list[list[int]], device: str = "auto", batch_size: int = 16
) -> list[np.ndarray]:
    """Per hidden state, an array [n_passages, d_model] of the mean over each passage's own tokens."""
    device_ = resolve_device(device)
    was_training = model.training
    model.to(device_).eval()
    per_layer: list[list[np.ndarray]] = []
    try:
        for start in range(0, len(passages), batch_size):
            rows = passages[start : start + batch_size]
            longest = max(len(r) for r in rows)
            ids = torch.zeros((len(rows), longest), dtype=torch.long)
            mask = torch.zeros((len(rows), longest, 1))
            for i, row in enumerate(rows):
                ids[i, : len(row)] = torch.tensor(row)
                mask[i, : len(row)] = 1.0
            try:
                _, hidden = model(ids.to(device_), return_hidden=True)
            except TypeError:
                raise EvalError(
                    "Probes need a model whose forward accepts return_hidden=True; "
                    "set eval.probe=false for this model."
                ) from None
            mask = mask.to(device_)
            for layer, states in enumerate(hidden):
                pooled = (states.float() * mask).sum(1) / mask.sum(1)
                if layer == len(per_layer):
                    per_layer.append([])
                per_layer[layer].append(pooled.cpu().numpy())
    finally:
        model.train(was_training)
    return [np.concatenate(chunks) for chunks in per_layer]


def fit_probes(
    features: list[np.ndarray], labels: list[str], seed: int, test_fraction: float = 0.3
) -> ProbeResult:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(labels)
    train_idx, test_idx = train_test_split(
        np.arange(len(y)), test_size=test_fraction, random_state=seed, stratify=y
    )
    majority = Counter(y[train_idx]).most_common(1)[0][0]
    accuracies = []
    for x in features:
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        probe.fit(x[train_idx], y[train_idx])
        accuracies.append(float(probe.score(x[test_idx], y[test_idx])))
    return ProbeResult(
        layer_acc=accuracies,
        majority_acc=float(np.mean(y[test_idx] == majority)),
        n_classes=len(set(labels)),
        n_train=len(train_idx),
        n_test=len(test_idx),
        labels="",
        classes=sorted(set(labels)),
    )


def run_probes(
    model: nn.Module,
    tokenizer,
    documents: Sequence[str],
    labels: str = "document",
    seq_len: int = 128,
    max_passages: int = 400,
    seed: int = 1234,
    device: str = "auto",
    batch_size: int = 16,
) -> ProbeResult:
    """Probe every hidden state of `model` for `labels` on passages of the given (held-out) documents."""
    builder = {"document": document_passages, "speaker": speaker_passages}[labels]
    passages, names = builder(documents, tokenizer, seq_len, max_passages, seed)
    if not passages:
        raise EvalError(
            f"The held-out text has fewer than two {labels} classes with enough passages for a probe; "
            "use another eval.probe_labels or hold out more text."
        )
    result = fit_probes(pooled_hidden_states(model, passages, device, batch_size), names, seed)
    result.labels = labels
    return result
