"""LMDataModule: shifted train windows, seeds, ranks and accumulation, resume, fixed validation windows."""

import numpy as np
import pytest
import torch

from lit_modules.data import DataError
from lit_modules.data.datamodule import LMDataModule
from tests.helpers.data import BATCH, SEQ_LEN, assert_one_sentence


def collect(stream, count):
    iterator = iter(stream)
    return [next(iterator) for _ in range(count)]


def test_train_batches_are_shifted_windows_of_train_tokens(datamodule, shards):
    from lit_modules.data.sampling import window_starts

    x, y = next(iter(datamodule.train_dataloader(start_step=0)))
    assert x.shape == y.shape == (BATCH, SEQ_LEN) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    train = shards.train_tokens()
    starts = window_starts(np.arange(BATCH, dtype=np.uint64), 1234, len(train) - SEQ_LEN)
    for row, start in zip(x, starts):
        assert np.array_equal(row.numpy(), train[start : start + SEQ_LEN])
    assert datamodule.tokens_per_step(world_size=2) == 2 * BATCH * SEQ_LEN


def test_train_batches_from_a_micro_batch_are_the_training_sampler_at_those_ids(datamodule, shards):
    """`train_batches(size, first, count)`: micro-batch m reads sample ids [m*size, (m+1)*size) of the
    training sampler (same corpus and seed), so a measurement past the run's budget reads unseen windows."""
    from lit_modules.data.sampling import window_starts

    size, first = 3, 5
    batches = datamodule.train_batches(size, first, count=2)
    train = shards.train_tokens()
    for k, (x, y) in enumerate(batches):
        ids = np.arange((first + k) * size, (first + k + 1) * size, dtype=np.uint64)
        starts = window_starts(ids, 1234, len(train) - SEQ_LEN)
        assert x.shape == y.shape == (size, SEQ_LEN) and torch.equal(x[:, 1:], y[:, :-1])
        for row, start in zip(x, starts):
            assert np.array_equal(row.numpy(), train[start : start + SEQ_LEN])
    assert not torch.equal(batches[0][0], batches[1][0])


def test_same_seed_same_batches_different_seed_different(shards):
    def first_batches(seed):
        module = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=seed)
        return [x for x, _ in collect(module.train_dataloader(start_step=0), 5)]

    same = zip(first_batches(7), first_batches(7))
    assert all(torch.equal(a, b) for a, b in same)
    assert not all(torch.equal(a, b) for a, b in zip(first_batches(7), first_batches(8)))


def test_one_process_with_double_batch_equals_two_ranks(shards):
    single = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=2 * BATCH, seed=3).train_stream(start_step=0)
    pair = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=3)
    rank0, rank1 = (pair.train_stream(start_step=0, rank=r, world_size=2) for r in (0, 1))
    for (x, _), (x0, _), (x1, _) in zip(collect(single, 4), collect(rank0, 4), collect(rank1, 4)):
        assert torch.equal(x, torch.cat([x0, x1]))


def test_gradient_accumulation_sees_the_same_samples_as_ranks(shards):
    accumulating = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=3, accumulate_grad_batches=2)
    pair = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=3)
    micro = collect(accumulating.train_stream(start_step=0), 6)
    rank0, rank1 = (collect(pair.train_stream(start_step=0, rank=r, world_size=2), 3) for r in (0, 1))
    for step in range(3):
        assert torch.equal(
            torch.cat([micro[2 * step][0], micro[2 * step + 1][0]]),
            torch.cat([rank0[step][0], rank1[step][0]]),
        )


def test_resume_continues_the_uninterrupted_stream(shards):
    module = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=5, accumulate_grad_batches=2)
    full = collect(module.train_dataloader(start_step=0), 10)
    resumed = collect(module.train_dataloader(start_step=3), 4)
    for (x, y), (x_full, y_full) in zip(resumed, full[6:]):
        assert torch.equal(x, x_full) and torch.equal(y, y_full)


def test_val_windows_are_fixed_spread_and_heldout_only(datamodule, shards):
    dataset = datamodule.val_dataset()
    heldout = shards.heldout_tokens()
    assert len(dataset) == 3 * BATCH
    starts = dataset.starts
    assert starts[0] == 0 and starts[-1] == len(heldout) - (SEQ_LEN + 1)
    assert np.all(np.diff(starts) >= SEQ_LEN + 1)
    for index, start in enumerate(starts):
        x, y = dataset[index]
        assert np.array_equal(x.numpy(), heldout[start : start + SEQ_LEN]) and np.array_equal(
            y.numpy(), heldout[start + 1 : start + SEQ_LEN + 1]
        )
    loader = datamodule.val_dataloader()
    batches = list(loader)
    assert len(batches) == 3 and torch.equal(batches[0][0], list(datamodule.val_dataloader())[0][0])


def test_too_small_heldout_split_is_refused_when_the_datamodule_is_built(shards):
    # Built before any run opens (build_data), so the refusal comes before a run, not at the first validation.
    with pytest.raises(DataError) as error:
        LMDataModule(shards, seq_len=SEQ_LEN, batch_size=10_000, seed=0, val_batches=100)
    assert_one_sentence(str(error.value))
    assert "data.val_batches" in str(error.value)


def test_state_dict_refuses_different_data(datamodule, corpus):
    state = datamodule.state_dict()
    datamodule.load_state_dict(state)
    with pytest.raises(DataError) as error:
        datamodule.load_state_dict({**state, "corpus_fingerprint": "0000000000000000"})
    assert_one_sentence(str(error.value))


@pytest.mark.filterwarnings("ignore:You passed in a `val_dataloader`")
def test_lightning_resume_reads_the_same_batches_as_an_uninterrupted_run(shards, tmp_path):
    """Lightning restores global_step before building dataloaders, so a resumed run continues the stream."""
    import lightning as L

    class Recorder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Embedding(259, 1)
            self.seen = []

        def training_step(self, batch, batch_idx):
            x, _ = batch
            self.seen.append(x.clone())
            return self.layer(x).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def fit(max_steps, ckpt_path=None):
        module = Recorder()
        trainer = L.Trainer(
            max_steps=max_steps,
            accumulate_grad_batches=2,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            default_root_dir=tmp_path,
        )
        data = LMDataModule(shards, seq_len=8, batch_size=2, seed=11, accumulate_grad_batches=2)
        trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
        return trainer, module.seen

    _, uninterrupted = fit(max_steps=5)
    first, _ = fit(max_steps=2)
    first.save_checkpoint(tmp_path / "step2.ckpt")
    _, resumed = fit(max_steps=5, ckpt_path=tmp_path / "step2.ckpt")
    assert len(uninterrupted) == 10 and len(resumed) == 6
    assert all(torch.equal(a, b) for a, b in zip(resumed, uninterrupted[4:]))
