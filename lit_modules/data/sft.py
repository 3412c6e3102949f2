"""Prompt/response fine-tuning data (SFT) with the loss on response tokens only.

The paper's fine-tuning (papers.md section 5: MetaMathQA and five other chain-of-thought sets) trains on
(prompt, response) pairs and scores only the response. Here:

- `load_prompt_response(source)` reads pairs from a local JSON-lines file or a Hugging Face dataset
  (e.g. `meta-math/MetaMathQA`, fields `query` / `response`; needs the hub or a pre-filled cache);
- `encode_example` lays one pair out as  EOS + template(prompt) + response + EOS  (our shards separate
  documents with EOS, so EOS is what a pre-trained model has seen before a document starts) and masks every
  target that is a prompt token with IGNORE_INDEX;
- `PromptResponseDataset` serves fixed-length (x, y) pairs, padded with targets IGNORE_INDEX;
- `masked_lm_loss` is the mean cross-entropy over unmasked targets.

Wiring: `CausalLMModule._loss` calls `F.cross_entropy(logits, y)`, whose default `ignore_index` is -100 =
IGNORE_INDEX, so batches from `SFTDataModule` already train and validate on response tokens only; the
LightningModule needs no change; `build.build_data` picks `prepare_sft_data` for `data.source=sft`.
Note: Lightning averages `val/loss` over batches weighted by batch size, not by the number of response
tokens per batch; `masked_lm_loss` and the fine-tune's before/after losses are token-weighted.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, IterableDataset

from lit_modules.config.data import DataConfig
from lit_modules.errors import DataError

from .hf_source import is_heldout_text

IGNORE_INDEX = -100  # torch's cross_entropy default ignore_index
DEFAULT_TEMPLATE = DataConfig.prompt_template  # one definition: the `data.prompt_template` default
METAMATH = {"source": "meta-math/MetaMathQA", "prompt_field": "query", "response_field": "response"}


@dataclass(frozen=True)
class PromptResponse:
    prompt: str
    response: str


# --- reading ----------------------------------------------------------------------------------------


def load_prompt_response(
    source: str,
    prompt_field: str = "query",
    response_field: str = "response",
    split: str = "train",
    max_examples: int | None = None,
) -> list[PromptResponse]:
    """Pairs from a local `.jsonl` file (one JSON object per line) or a Hugging Face dataset id."""
    path = Path(source)
    rows = _jsonl_rows(path) if path.suffix in (".jsonl", ".json") else _hub_rows(source, split)
    examples = []
    for number, row in enumerate(itertools.islice(rows, max_examples), start=1):
        missing = [f for f in (prompt_field, response_field) if not isinstance(row.get(f), str)]
        if missing:
            raise DataError(
                f"Example {number} of {source} has no text field {missing[0]!r}; "
                "set the prompt/response field names."
            )
        examples.append(PromptResponse(row[prompt_field], row[response_field]))
    if not examples:
        raise DataError(f"{source} holds no prompt/response examples.")
    return examples


def _jsonl_rows(path: Path) -> Iterator[dict]:
    if not path.is_file():
        raise DataError(f"There is no file {path}.")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    raise DataError(f"Line {number} of {path} is not valid JSON.") from None


def _hub_rows(dataset_id: str, split: str) -> Iterator[dict]:
    try:
        import datasets

        offline = bool(datasets.config.HF_HUB_OFFLINE)
        # Offline, only a copy already in the `datasets` cache can be read, and only without streaming.
        return iter(datasets.load_dataset(dataset_id, split=split, streaming=not offline))
    except Exception as err:  # noqa: BLE001 - offline, unknown id, ...: one sentence
        raise DataError(
            f"The dataset {dataset_id} cannot be read ({type(err).__name__}): the Hugging Face Hub is "
            "unreachable or offline here and no cached copy exists; point data.data_files at a local JSONL copy."
        ) from None


def split_examples(examples: Sequence[PromptResponse], heldout_fraction: float) -> tuple[list, list]:
    """(train, heldout) by a hash of the prompt: order-free, and a repeated prompt never crosses sides."""
    train, heldout = [], []
    for example in examples:
        (heldout if is_heldout_text(example.prompt, heldout_fraction) else train).append(example)
    return train, heldout


# --- encoding ---------------------------------------------------------------------------------------


def encode_example(
    tokenizer, example: PromptResponse, seq_len: int, template: str = DEFAULT_TEMPLATE
) -> tuple[list[int], list[int]] | None:
    """(inputs, targets) of length <= seq_len, targets IGNORE_INDEX where they are prompt tokens.

    Too long: the response is cut at the right. None when no response token would be left.
    """
    prompt_ids = [tokenizer.eos_id, *tokenizer.encode(template.format(prompt=example.prompt))]
    ids = (prompt_ids + tokenizer.encode(example.response) + [tokenizer.eos_id])[: seq_len + 1]
    inputs, targets = ids[:-1], ids[1:]
    # targets[i] is ids[i + 1]: a prompt token while i + 1 < len(prompt_ids).
    n_masked = len(prompt_ids) - 1
    if len(targets) <= n_masked:
        return None
    targets = [IGNORE_INDEX] * n_masked + targets[n_masked:]
    return inputs, targets


class PromptResponseDataset(Dataset):
    """Fixed-length (x, y) LongTensors [seq_len]; x padded with the pad id, y with IGNORE_INDEX."""

    def __init__(
        self, examples: Sequence[PromptResponse], tokenizer, seq_len: int, template: str = DEFAULT_TEMPLATE
    ):
        pad = getattr(tokenizer, "pad_id", None)
        pad = tokenizer.eos_id if pad is None else pad
        self.inputs, self.targets = [], []
        self.dropped = 0  # examples whose prompt fills the whole window
        for example in examples:
            encoded = encode_example(tokenizer, example, seq_len, template)
            if encoded is None:
                self.dropped += 1
                continue
            x, y = encoded
            self.inputs.append(x + [pad] * (seq_len - len(x)))
            self.targets.append(y + [IGNORE_INDEX] * (seq_len - len(y)))
        if not self.inputs:
            raise DataError(f"No example keeps a response token within seq_len={seq_len}; raise it.")
        self.seq_len = seq_len

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor(self.inputs[index]), torch.tensor(self.targets[index])

    def response_tokens(self) -> int:
        return sum(sum(t != IGNORE_INDEX for t in row) for row in self.targets)


def masked_lm_loss(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Mean next-token cross-entropy over the targets that are not `ignore_index` (0 if there are none)."""
    flat_logits = logits.float().reshape(-1, logits.size(-1))
    flat_targets = targets.reshape(-1)
    count = (flat_targets != ignore_index).sum()
    if count == 0:
        return flat_logits.sum() * 0.0  # keeps the graph, so a fully masked batch trains nothing
    total = F.cross_entropy(flat_logits, flat_targets, ignore_index=ignore_index, reduction="sum")
    return total / count


# --- DataModule -------------------------------------------------------------------------------------


class SFTBatchStream(IterableDataset):
    """Endless micro-batches; sample i of the stream is example perm_e[i mod N] with e = i // N and perm_e a
    permutation seeded by (seed, e), so the stream depends only on (seed, micro-batch index) and resumes."""

    def __init__(
        self, dataset: PromptResponseDataset, batch_size: int, seed: int, start_micro_batch: int = 0
    ):
        super().__init__()
        self.dataset, self.batch_size, self.seed, self.start = dataset, batch_size, seed, start_micro_batch

    def indices(self, micro_batch: int) -> list[int]:
        n = len(self.dataset)
        out = []
        for i in range(micro_batch * self.batch_size, (micro_batch + 1) * self.batch_size):
            epoch, position = divmod(i, n)
            out.append(int(np.random.default_rng([self.seed, epoch]).permutation(n)[position]))
        return out

    def batch(self, micro_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        pairs = [self.dataset[i] for i in self.indices(micro_batch)]
        return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        micro_batch = self.start
        while True:
            yield self.batch(micro_batch)
            micro_batch += 1


class SFTDataModule(L.LightningDataModule):
    """Train stream and fixed validation set of prompt/response pairs; same interface as LMDataModule."""

    def __init__(
        self, train: PromptResponseDataset, heldout: PromptResponseDataset, batch_size: int, seed: int
    ):
        super().__init__()
        self.train_set, self.heldout_set, self.batch_size, self.seed = train, heldout, batch_size, seed

    def train_dataloader(self) -> DataLoader:
        trainer = getattr(self, "trainer", None)
        # Resume from the micro-batch after the last optimizer step (k micro-batches per step).
        start = trainer.global_step * trainer.accumulate_grad_batches if trainer is not None else 0
        return DataLoader(SFTBatchStream(self.train_set, self.batch_size, self.seed, start), batch_size=None)

    def val_dataset(self) -> PromptResponseDataset:
        return self.heldout_set

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.heldout_set, batch_size=self.batch_size, shuffle=False)


# --- a run's SFT data -------------------------------------------------------------------------------


@dataclass
class SFTData:
    datamodule: SFTDataModule
    fingerprint: str  # what was read and how it was laid out: the run's data_fingerprint tag
    train_examples: int
    heldout_examples: int


def prepare_sft_data(cfg, tokenizer, seed: int) -> SFTData:
    """`data.source=sft`: pairs from `data_files` (JSON lines) or `hf_path`, split by prompt hash.

    Validation uses the first `val_batches * batch_size` held-out pairs, in file order, so every run of a
    recipe is scored on the same items.
    """
    import hashlib

    from .text_files import file_identity

    sources = list(cfg.data_files) or [cfg.hf_path]
    examples: list[PromptResponse] = []
    for source in sources:
        remaining = None if cfg.max_documents is None else cfg.max_documents - len(examples)
        if remaining is not None and remaining <= 0:
            break
        examples += load_prompt_response(source, cfg.prompt_field, cfg.response_field, cfg.hf_split, remaining)
    train, heldout = split_examples(examples, cfg.heldout_fraction)
    if not train or not heldout:
        raise DataError(
            f"The {len(examples)} prompt/response pairs leave an empty {'train' if not train else 'held-out'} "
            "split; add pairs or change data.heldout_fraction."
        )
    heldout = heldout[: cfg.val_batches * cfg.batch_size]
    train_set = PromptResponseDataset(train, tokenizer, cfg.seq_len, cfg.prompt_template)
    heldout_set = PromptResponseDataset(heldout, tokenizer, cfg.seq_len, cfg.prompt_template)
    identity = {
        "sources": [file_identity(s) if cfg.data_files else s for s in sources],
        "split": cfg.hf_split,
        "fields": [cfg.prompt_field, cfg.response_field],
        "template": cfg.prompt_template,
        "max_documents": cfg.max_documents,
        "heldout_fraction": cfg.heldout_fraction,
        "seq_len": cfg.seq_len,
        "tokenizer": type(tokenizer).__name__,
        "vocab_size": tokenizer.vocab_size,
        "pairs": len(examples),
    }
    fingerprint = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    datamodule = SFTDataModule(train_set, heldout_set, cfg.batch_size, seed)
    return SFTData(datamodule, fingerprint, len(train_set), len(heldout_set))
