"""lm-eval's model interface over the live model and our tokenizer: no Hugging Face conversion.

Works with any `nn.Module` that maps token ids [B, T] to logits [B, T, V] (a tuple output's first element is
taken) and a maximum context `max_seq_len` (read from `model.cfg.max_seq_len` / `model.max_seq_len` unless
given), on CPU or GPU.

Scoring rules (they change scores, so they are explicit and logged with the results):
- Trailing whitespace of a context moves onto the continuation (" word" is scored, not "word"), as lm-eval
  does; context and continuation are tokenized separately, so exactly the continuation's tokens are scored.
- `add_bos`: every sequence starts with the document-start token (`bos_token`: our EOS by default, which is
  what precedes a document in training). An empty context always gets it, so there is something to
  condition on.
- Contexts longer than `max_seq_len` are left-truncated (see `windows.py`); a rolling document longer than
  that is scored in disjoint windows that predict every token exactly once (lm-eval's rolling windows). A
  continuation longer than that (lm-eval's HF model refuses one) is scored in overlapping windows, so every
  one of its tokens is predicted from at least `max_seq_len - 1` preceding tokens, context included; those
  windows are batched on their own, so the other requests' scores are what they are without them.
- Requests become windows, right-padded to a multiple of `pad_multiple` tokens (at most `max_seq_len`) and
  batched `batch_size` at a time among windows of the same padded length. A causal model never attends to
  the padding, and a row's arithmetic then depends only on its padded length (checked bit for bit on CPU),
  so a score does not depend on `batch_size` or on the other requests: batch size 1 gives the same bits.
- A window whose inputs begin another window of the same padded length (e.g. the choices of one item that
  differ only in their last token, or one context's shorter continuations) is read from that window's
  forward pass: the positions it reads are computed exactly as in its own.
The model is moved to `device` and put in eval mode while scoring (its train/eval mode is restored after).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Iterable, Optional, Sequence

import torch
import torch.nn.functional as F
from lm_eval.api.model import LM
from torch import nn

from .windows import Window, continuation_windows, is_long_continuation, scoring_windows


PAD_MULTIPLE = 32  # padded lengths: few shapes to batch together, at most 31 wasted positions per row


def padded_length(length: int, max_len: int, multiple: int = PAD_MULTIPLE) -> int:
    """The length a window of `length` inputs is computed at: the next multiple, at most `max_len`."""
    return min(max_len, -(-length // multiple) * multiple) if length <= max_len else length


def shared_forwards(windows: Sequence[Window], max_len: int, multiple: int = PAD_MULTIPLE) -> list[tuple[int, tuple[int, ...], list[int]]]:
    """(padded length, inputs to run, indices of the windows read from that forward), longest first.

    Within one padded length, a window whose inputs are a prefix of another's joins the longer one's
    forward. In lexicographic order a sequence with any extension is a prefix of its successor, and every
    sequence between it and that extension extends it too, so one backward walk finds each chain's host.
    """
    by_length: dict[int, dict[tuple[int, ...], list[int]]] = {}
    for index, window in enumerate(windows):
        length = padded_length(len(window.inputs), max_len, multiple)
        by_length.setdefault(length, {}).setdefault(tuple(window.inputs), []).append(index)
    forwards: list[tuple[int, tuple[int, ...], list[int]]] = []
    for length in sorted(by_length, reverse=True):
        groups = by_length[length]
        hosts: list[tuple[int, tuple[int, ...], list[int]]] = []
        successor: tuple[int, ...] | None = None
        for inputs in sorted(groups, reverse=True):
            if successor is not None and successor[: len(inputs)] == inputs:
                hosts[-1][2].extend(groups[inputs])
            else:
                hosts.append((length, inputs, list(groups[inputs])))
            successor = inputs
        forwards += hosts
    return forwards


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def model_max_seq_len(model: nn.Module) -> int:
    for owner in (getattr(model, "cfg", None), model):
        value = getattr(owner, "max_seq_len", None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(
        "the model has no max_seq_len (cfg.max_seq_len or max_seq_len); pass max_seq_len= explicitly"
    )


def _logits(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


class LiveLM(LM):
    """An lm-eval `LM` backed by an in-memory model; see the module docstring for the scoring rules."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer,
        *,
        batch_size: int = 16,
        add_bos: bool = True,
        bos_token: str = "eos",
        max_seq_len: Optional[int] = None,
        device: str = "auto",
        precision: str = "32-true",
        max_gen_toks: int = 256,
        seed: int = 0,
        pad_multiple: int = PAD_MULTIPLE,
    ) -> None:
        super().__init__()
        if bos_token not in ("eos", "bos"):
            raise ValueError(f"bos_token must be 'eos' or 'bos', not {bos_token!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = int(batch_size)
        self.add_bos = bool(add_bos)
        self.bos_token = bos_token
        self.prefix_id = tokenizer.eos_id if bos_token == "eos" else tokenizer.bos_id
        self.max_seq_len = int(max_seq_len or model_max_seq_len(model))
        self._device = resolve_device(device)
        self.precision = precision
        self.max_gen_toks = int(max_gen_toks)
        self.seed = int(seed)  # sampled generation: request i draws from a generator seeded (seed, i)
        if pad_multiple < 1:
            raise ValueError(f"pad_multiple must be at least 1, not {pad_multiple}")
        self.pad_multiple = int(pad_multiple)

    # ---- settings logged with every result ------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {
            "batch_size": self.batch_size,
            "add_bos": self.add_bos,
            "bos_token": self.bos_token,
            "prefix_token_id": self.prefix_id,
            "max_seq_len": self.max_seq_len,
            "truncation": "left",
            "padding": f"right, to a multiple of {self.pad_multiple} tokens; shared prefixes read once",
            "long_continuations": "overlapping windows",
            "device": str(self._device),
            "precision": self.precision,
            "tokenizer": getattr(self.tokenizer, "name", type(self.tokenizer).__name__),
            "tokenizer_fingerprint": getattr(self.tokenizer, "fingerprint", None),
        }

    def get_model_info(self) -> dict[str, Any]:  # lm-eval copies this into results["config"]
        return {"adapter": type(self).__name__, **self.settings()}

    @property
    def tokenizer_name(self) -> str:
        return getattr(self.tokenizer, "name", type(self.tokenizer).__name__)

    # ---- tokenization ---------------------------------------------------------------------------------
    def _start(self, context_ids: list[int]) -> list[int]:
        return [self.prefix_id] + context_ids if self.add_bos or not context_ids else context_ids

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(conditioning tokens incl. any start token, continuation tokens)."""
        stripped = context.rstrip()
        continuation = context[len(stripped) :] + continuation
        return self._start(self.tokenizer.encode(stripped) if stripped else []), self.tokenizer.encode(
            continuation
        )

    # ---- the forward pass -----------------------------------------------------------------------------
    def _autocast(self):
        if self.precision == "bf16-mixed" and self._device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _forward(self, batch: Sequence[Sequence[int]], length: int | None = None) -> torch.Tensor:
        longest = length or max(len(row) for row in batch)
        ids = torch.zeros((len(batch), longest), dtype=torch.long)
        for i, row in enumerate(batch):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        with self._autocast():
            logits = _logits(self.model(ids.to(self._device)))
        return logits.float()

    @contextlib.contextmanager
    def _eval_mode(self):
        was_training = self.model.training
        self.model.to(self._device).eval()
        try:
            with torch.inference_mode():
                yield
        finally:
            self.model.train(was_training)

    def score_windows(self, windows: Sequence[Window]) -> list[tuple[float, bool]]:
        """(sum of log p(target), every target is the argmax) per window, in the given order."""
        forwards = shared_forwards(windows, self.max_seq_len, self.pad_multiple)
        results: list[tuple[float, bool]] = [(0.0, True)] * len(windows)
        with self._eval_mode():
            start = 0
            while start < len(forwards):
                length = forwards[start][0]
                stop = start + 1
                while stop < len(forwards) and stop - start < self.batch_size and forwards[stop][0] == length:
                    stop += 1
                chunk = forwards[start:stop]
                logits = self._forward([inputs for _, inputs, _ in chunk], length)
                self._read_scores(logits, chunk, windows, results)
                start = stop
        return results

    @staticmethod
    def _read_scores(logits: torch.Tensor, chunk, windows: Sequence[Window], results: list) -> None:
        """Every window's scored rows of this batch in one log-softmax (a row's own reduction, whatever the
        rows beside it); each window's sum is exactly rounded (fsum), so no layout changes its bits."""
        rows, targets, members = [], [], []
        for row, (_, _, indices) in enumerate(chunk):
            for i in indices:
                window = windows[i]
                end, n = len(window.inputs), len(window.targets)
                rows.append(logits[row, end - n : end])
                targets.extend(window.targets)
                members.append((i, n))
        logprobs = F.log_softmax(torch.cat(rows), dim=-1)
        wanted = torch.tensor(targets, device=logprobs.device)
        picked = logprobs.gather(-1, wanted[:, None]).squeeze(-1).double().tolist()
        greedy = (logprobs.argmax(-1) == wanted).tolist()
        offset = 0
        for i, n in members:
            results[i] = (math.fsum(picked[offset : offset + n]), all(greedy[offset : offset + n]))
            offset += n

    def score_token_requests(
        self, requests: Sequence[tuple[list[int], list[int]]], rolling: bool = False
    ) -> list[tuple[float, bool]]:
        """(log p(continuation | prefix), greedy?) for token-level (prefix, continuation) pairs.

        `rolling`: disjoint windows (a document's perplexity), else a long continuation gets overlapping ones.
        """
        cut = scoring_windows if rolling else continuation_windows
        fitting: list[Window] = []
        long: list[Window] = []  # batched apart, so they never change how the fitting requests are batched
        for index, (prefix, continuation) in enumerate(requests):
            tokens = list(prefix) + list(continuation)
            apart = not rolling and is_long_continuation(len(tokens), len(prefix), self.max_seq_len)
            (long if apart else fitting).extend(cut(index, tokens, len(prefix), self.max_seq_len))
        totals = [[0.0, True] for _ in requests]
        for windows in (fitting, long):
            for window, (logprob, greedy) in zip(windows, self.score_windows(windows)):
                totals[window.request][0] += logprob
                totals[window.request][1] = totals[window.request][1] and greedy
        return [(total, greedy) for total, greedy in totals]

    # ---- lm-eval's three request types ----------------------------------------------------------------
    def loglikelihood(self, requests: Iterable, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [self.encode_pair(*request.args) for request in requests]
        return self.score_token_requests(pairs)

    def loglikelihood_rolling(self, requests: Iterable, disable_tqdm: bool = False) -> list[float]:
        """log p(document | start token): every token predicted once, with as much context as fits."""
        pairs = [([self.prefix_id], self.tokenizer.encode(request.args[0])) for request in requests]
        return [logprob for logprob, _ in self.score_token_requests(pairs, rolling=True)]

    def generate_until(self, requests: Iterable, disable_tqdm: bool = False) -> list[str]:
        """Decoding, batched; stops at any `until` string, at EOS, or after `max_gen_toks` tokens.

        Greedy unless a request's gen_kwargs has `do_sample: true` and `temperature > 0`: then each token is
        drawn from softmax(logits / temperature) with a generator of its own, seeded from (`seed`, the
        request's position in `requests`): the same requests and seed give the same samples, and a request's
        draws do not depend on the other requests' (lm-eval repeats a request k times for k samples: each
        repeat has its own position).
        No KV cache: every step re-reads the whole window (fine for the small models here)."""
        requests = list(requests)
        jobs = []
        for position, request in enumerate(requests):
            context, gen_kwargs = request.args
            gen_kwargs = dict(gen_kwargs or {})
            until = gen_kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(gen_kwargs.get("max_gen_toks", self.max_gen_toks))
            temperature = float(gen_kwargs.get("temperature", 0.0) or 0.0)
            sampler = None
            if gen_kwargs.get("do_sample", False) and temperature > 0:
                sampler = (temperature, torch.Generator().manual_seed(self.seed * 1_000_003 + position))
            prefix = self._start(self.tokenizer.encode(context) if context else [])
            jobs.append((prefix, until, max_new, sampler))
        order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][0]))
        outputs = [""] * len(jobs)
        with self._eval_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                for i, text in zip(chunk, self._generate_batch([jobs[i] for i in chunk])):
                    outputs[i] = text
        return outputs

    def _generate_batch(self, jobs: list[tuple]) -> list[str]:
        sequences = [list(prefix) for prefix, *_ in jobs]
        generated: list[list[int]] = [[] for _ in jobs]
        texts = [""] * len(jobs)
        active = [max_new > 0 for _, _, max_new, _ in jobs]
        while any(active):
            rows = [i for i, alive in enumerate(active) if alive]
            windows = [sequences[i][-self.max_seq_len :] for i in rows]  # left-truncate long contexts
            logits = self._forward(windows)
            for row, i in enumerate(rows):
                _, until, max_new, sampler = jobs[i]
                next_id = _next_token(logits[row, len(windows[row]) - 1], sampler)
                if next_id == self.tokenizer.eos_id:
                    active[i] = False
                    continue
                sequences[i].append(next_id)
                generated[i].append(next_id)
                texts[i] = self.tokenizer.decode(generated[i])
                cut = min((texts[i].find(stop) for stop in until if stop and stop in texts[i]), default=-1)
                if cut >= 0:
                    texts[i] = texts[i][:cut]
                    active[i] = False
                elif len(generated[i]) >= max_new:
                    active[i] = False
        return texts


def _next_token(logits: torch.Tensor, sampler: tuple[float, torch.Generator] | None) -> int:
    """argmax, or a draw from softmax(logits / temperature) (on the CPU, so a seed means the same draw anywhere)."""
    if sampler is None:
        return int(logits.argmax())
    temperature, generator = sampler
    probs = F.softmax(logits.float().cpu() / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))
