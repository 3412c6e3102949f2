"""The LightningModule's loss-term hook: terms are added to what the optimizer minimizes, the next-token
loss is reported unchanged, and without terms the objective is the next-token loss itself."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lit_modules.lm_module import CausalLMModule
from lit_modules.model import Llama, LlamaConfig


def _module(loss_terms=()) -> CausalLMModule:
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=16))
    return CausalLMModule(model, optimizer_factory=None, schedule_factory=None, loss_terms=loss_terms)


def test_terms_join_the_objective_and_the_loss_stays_the_next_token_loss():
    x = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    y = torch.roll(x, -1, dims=1)
    plain = _module()
    objective, loss, terms = plain.training_objective((x, y))
    assert objective is loss and terms == {}  # no hook, no extra op: the baseline's graph exactly
    logits = plain.model(x)
    assert torch.equal(loss, F.cross_entropy(logits.float().reshape(-1, 32), y.reshape(-1)))

    seen = []

    def mean_logit(logits, batch):
        seen.append((logits.shape, batch[1] is y))
        return {"mean_logit": logits.mean()}

    hooked = _module([mean_logit, lambda logits, batch: {"two": torch.tensor(2.0)}])
    objective, loss, terms = hooked.training_objective((x, y))
    assert seen == [((2, 8, 32), True)] and set(terms) == {"mean_logit", "two"}
    assert torch.equal(loss, F.cross_entropy(logits.float().reshape(-1, 32), y.reshape(-1)))
    assert torch.allclose(objective, loss + logits.mean() + 2.0)
    objective.backward()  # the terms carry gradient into the model
    assert hooked.model.lm_head.weight.grad is not None
