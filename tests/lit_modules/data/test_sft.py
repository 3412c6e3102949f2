"""Prompt/response (SFT) data: layout, prompt masking with known answers, local JSONL reading, the seeded
stream, and that the unchanged LightningModule trains on response tokens only."""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import lightning as L
import pytest
import torch
import torch.nn.functional as F

from lit_modules.data import ByteTokenizer, DataError
from lit_modules.data.sft import (
    IGNORE_INDEX,
    PromptResponse,
    PromptResponseDataset,
    SFTBatchStream,
    SFTDataModule,
    encode_example,
    load_prompt_response,
    masked_lm_loss,
    split_examples,
)
from lit_modules.lm_module import CausalLMModule
from lit_modules.model import Llama, LlamaConfig

TOK = ByteTokenizer()


def write_jsonl(path: Path, n: int = 40) -> Path:
    rows = [{"query": f"What is {i} + {i}?", "response": f"{i} + {i} = {2 * i}. The answer is: {2 * i}", "type": "x"}
            for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_layout_masks_exactly_the_prompt_targets():
    x, y = encode_example(TOK, PromptResponse("hi", "ok"), seq_len=64, template="Q:{prompt}\nA:")
    prompt = [TOK.eos_id, *TOK.encode("Q:hi\nA:")]
    full = prompt + TOK.encode("ok") + [TOK.eos_id]
    assert x == full[:-1]
    n_prompt_targets = len(prompt) - 1  # targets 1..len(prompt)-1 are prompt tokens
    assert y == [IGNORE_INDEX] * n_prompt_targets + TOK.encode("ok") + [TOK.eos_id]


def test_truncation_cuts_the_response_and_drops_prompt_only_windows():
    x, y = encode_example(TOK, PromptResponse("ab", "0123456789"), seq_len=8, template="{prompt}")
    assert len(x) == len(y) == 8 and y[:2] == [IGNORE_INDEX] * 2 and y[2:] == TOK.encode("012345")
    assert encode_example(TOK, PromptResponse("a" * 20, "b"), seq_len=8, template="{prompt}") is None


def test_masked_loss_ignores_prompt_positions_known_answer():
    vocab = 5
    targets = torch.tensor([[IGNORE_INDEX, 2, IGNORE_INDEX, 1]])
    logits = torch.zeros(1, 4, vocab)  # uniform where scored: loss log(5) per response token
    logits[0, 0, 3] = logits[0, 2, 4] = 50.0  # confident garbage at prompt positions: must not count
    logits.requires_grad_(True)
    loss = masked_lm_loss(logits, targets)
    assert loss.item() == pytest.approx(math.log(vocab), rel=1e-6)
    loss.backward()
    assert logits.grad[0, 0].abs().max() == 0 and logits.grad[0, 2].abs().max() == 0
    assert logits.grad[0, 1].abs().max() > 0
    # The LightningModule's plain cross_entropy (ignore_index -100 by default) gives the same number.
    assert F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1)).item() == pytest.approx(loss.item())


def test_fully_masked_batch_is_zero_and_differentiable():
    logits = torch.randn(2, 3, 7, requires_grad=True)
    loss = masked_lm_loss(logits, torch.full((2, 3), IGNORE_INDEX))
    loss.backward()
    assert loss.item() == 0.0 and logits.grad.abs().max() == 0


def test_local_jsonl_with_metamath_fields(tmp_path: Path):
    examples = load_prompt_response(str(write_jsonl(tmp_path / "m.jsonl")), max_examples=30)
    assert len(examples) == 30 and examples[3] == PromptResponse("What is 3 + 3?", "3 + 3 = 6. The answer is: 6")
    with pytest.raises(DataError, match="no text field 'question'"):
        load_prompt_response(str(tmp_path / "m.jsonl"), prompt_field="question")
    with pytest.raises(DataError, match="no file"):
        load_prompt_response(str(tmp_path / "missing.jsonl"))
    train, heldout = split_examples(examples, 0.3)
    assert len(train) + len(heldout) == 30 and heldout and train
    assert split_examples(list(reversed(examples)), 0.3)[1] == list(reversed(heldout))  # order-free


def test_dataset_pads_with_ignored_targets_and_stream_is_a_seeded_permutation(tmp_path: Path):
    examples = load_prompt_response(str(write_jsonl(tmp_path / "m.jsonl", n=10)))
    data = PromptResponseDataset(examples, TOK, seq_len=96)  # long enough: nothing is truncated
    x, y = data[0]
    assert x.shape == y.shape == (96,)
    n_real = len(encode_example(TOK, examples[0], 96)[1])
    assert (y[n_real:] == IGNORE_INDEX).all() and (x[n_real:] == TOK.pad_id).all()
    assert data.response_tokens() == sum(len(TOK.encode(e.response)) + 1 for e in examples)
    stream = SFTBatchStream(data, batch_size=5, seed=7)
    first_epoch = stream.indices(0) + stream.indices(1)
    assert sorted(first_epoch) == list(range(10))  # every example once per epoch
    assert SFTBatchStream(data, 5, 7).indices(3) == stream.indices(3) != SFTBatchStream(data, 5, 8).indices(3)


def test_unchanged_lightning_module_trains_on_responses_only(tmp_path: Path):
    examples = load_prompt_response(str(write_jsonl(tmp_path / "m.jsonl", n=40)))
    train, heldout = split_examples(examples, 0.25)
    dm = SFTDataModule(PromptResponseDataset(train, TOK, 48), PromptResponseDataset(heldout, TOK, 48), batch_size=4, seed=0)
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab_size=TOK.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=64))
    module = CausalLMModule(model, optimizer_factory=lambda m: torch.optim.AdamW(m.parameters(), lr=3e-3),
                            schedule_factory=partial(torch.optim.lr_scheduler.LambdaLR, lr_lambda=lambda s: 1.0))
    x, y = next(iter(dm.train_dataloader()))
    assert module._loss((x, y)).item() == pytest.approx(masked_lm_loss(model(x), y).item(), rel=1e-6)
    trainer = L.Trainer(max_steps=6, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, val_check_interval=3,
                        check_val_every_n_epoch=None, num_sanity_val_steps=0, default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=dm)
    assert math.isfinite(float(trainer.callback_metrics["val/loss"]))
