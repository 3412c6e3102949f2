"""How many times a run reads its data: the permutation sampler reads no token twice within an epoch, and every
run logs `data/epochs` (tokens consumed / tokens of the training split) when it ends."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
from omegaconf import OmegaConf

from lit_modules.config.composition import compose_run_config
from lit_modules.config.data import DataConfig
from lit_modules.config.identity import identity_of
from lit_modules.data.datamodule import EPOCHS_METRIC, TrainWindowStream
from lit_modules.data.sampling import disjoint_window_layout, permuted_window_starts
from lit_modules.train import run
from tests.helpers.runs import all_runs, metric_history, tiny_overrides


def test_an_epoch_reads_every_disjoint_window_once():
    n_tokens, window, seed = 10_007, 33, 5
    offset, count = disjoint_window_layout(n_tokens, window, seed)
    assert 0 <= offset < window and count == (n_tokens - offset) // window
    first = permuted_window_starts(np.arange(count), seed, n_tokens, window)
    second = permuted_window_starts(np.arange(count, 2 * count), seed, n_tokens, window)
    expected = offset + window * np.arange(count)
    assert sorted(first) == list(expected) and sorted(second) == list(expected)
    assert not np.array_equal(first, second)  # each epoch its own order
    assert first.max() + window <= n_tokens
    # a pure function of (seed, id): any slice agrees with the whole
    assert np.array_equal(permuted_window_starts(np.arange(7, 19), seed, n_tokens, window), first[7:19])
    other = permuted_window_starts(np.arange(count), seed + 1, n_tokens, window)
    assert not np.array_equal(other, first)  # another seed, another order


def test_the_stream_reads_no_token_twice_within_an_epoch():
    tokens = np.arange(4_000, dtype=np.uint16)
    stream = TrainWindowStream(tokens, seq_len=15, batch_size=4, seed=3, sampler="permutation")
    windows = (len(tokens) - disjoint_window_layout(len(tokens), 16, 3)[0]) // 16
    seen = np.concatenate([np.concatenate([x.numpy(), y.numpy()[:, -1:]], axis=1).ravel()
                           for x, y in (stream.batch(m) for m in range(windows // 4))])
    assert len(seen) == len(np.unique(seen)) == (windows // 4) * 4 * 16
    # two ranks of batch 2 read what one process of batch 4 reads, step by step
    ranks = [TrainWindowStream(tokens, 15, 2, 3, rank=r, world_size=2, sampler="permutation") for r in (0, 1)]
    for step in range(5):
        joined = np.concatenate([ranks[0].batch(step)[0].numpy(), ranks[1].batch(step)[0].numpy()])
        assert np.array_equal(joined, stream.batch(step)[0].numpy())


def test_sampler_is_checked_and_its_default_keeps_every_recorded_identity():
    assert DataConfig(sampler="shuffle").problems() == [
        "data.sampler is 'shuffle' but must be one of random, permutation."]
    default = identity_of(OmegaConf.to_container(compose_run_config([]), resolve=True))
    assert "sampler" not in default["data"]
    chosen = identity_of(OmegaConf.to_container(compose_run_config(["data.sampler=permutation"]), resolve=True))
    assert chosen["data"]["sampler"] == "permutation"


@pytest.mark.parametrize("sampler", ["permutation", "random"])
def test_a_tiny_run_logs_how_many_epochs_it_read(runs_dir, sampler):
    steps = 20
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=steps, seed="4") + [f"data.sampler={sampler}"]))
    assert result.status == "FINISHED"
    from lit_modules.data import DataConfig as Data, TokenizerConfig, build_tokenizer, prepare_corpus, prepare_shards

    corpus = prepare_corpus(Data())
    train_tokens = prepare_shards(corpus, build_tokenizer(TokenizerConfig(kind="byte"), corpus)).n_tokens("train")
    history = metric_history(runs_dir, result.run_id, EPOCHS_METRIC)
    assert history == [(steps - 1, pytest.approx(steps * 8 * 64 / train_tokens))]
    assert 0 < history[0][1] < 0.01


class _StopAtStep(L.Callback):
    def __init__(self, exc: BaseException):
        self.exc = exc

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 6:
            raise self.exc


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("disk on fire")], ids=["killed", "failed"])
def test_a_run_stopped_early_logs_the_epochs_it_read(runs_dir, exc):
    with pytest.raises((type(exc), SystemExit)):
        run(compose_run_config(tiny_overrides(runs_dir, steps=20, seed="4")), extra_callbacks=[_StopAtStep(exc)])
    (only,) = all_runs(runs_dir)
    assert only.info.status == ("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
    (logged,) = metric_history(runs_dir, only.info.run_id, EPOCHS_METRIC)
    assert logged[0] == 5 and 0 < logged[1] < 0.01  # 6 of 20 steps: read less than a finished run


def test_the_evidence_export_keeps_data_epochs():
    import pandas as pd

    from analysis.ablation import slim_runs

    frame = pd.DataFrame([{"run_id": "r", "status": "FINISHED", "metrics.data/epochs": 0.37,
                           "metrics.data/other": 1.0}])
    kept = slim_runs(frame)
    assert "metrics.data/epochs" in kept.columns and "metrics.data/other" not in kept.columns
    assert kept["metrics.data/epochs"].tolist() == [0.37]
