"""Fine-tuning stage: starts exactly from the base run's final weights, trains and validates only on the
target corpus, logs before/after/plasticity consistently, is linked to its base, and refuses bad input
with one sentence."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers.runs import mlflow_client, tiny_overrides
from lit_modules.build import build_model
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.data import ByteTokenizer, DataConfig, TokenizerConfig, build_tokenizer, prepare_corpus, prepare_shards
from lit_modules.config.finetune_recipe import load_recipe
from lit_modules.finetune import base_tokenizer, finetune, finetune_config, main
from lit_modules.runs.finished import FinishedRun, RunCheckpoint
from lit_modules.runs.tags import BASE_VAL_LOSS as BASE_VAL
from lit_modules.runs.tags import PLASTICITY
from lit_modules.runs.tags import TARGET_LOSS_AFTER as AFTER
from lit_modules.runs.tags import TARGET_ACC_BEFORE, TARGET_ACC_FLOOR
from lit_modules.runs.tags import TARGET_LOSS_BEFORE as BEFORE
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config

WINDOW = 32  # a shared run of 32 byte tokens counts as "seen text"
FT = ["finetune.steps=10", "finetune.val_every_n_steps=5"]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, str]:
    runs_dir = tmp_path_factory.mktemp("ft") / "runs"
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="4")))
    assert result.status == "FINISHED"
    return runs_dir, result.run_id


class Recorder(L.Callback):
    """What the fine-tune run starts from and every batch it trains on."""

    def __init__(self):
        self.start_state: dict[str, torch.Tensor] = {}
        self.train_inputs: list[torch.Tensor] = []
        self.datamodule = None

    def on_train_start(self, trainer, pl_module):
        self.start_state = {k: v.detach().clone() for k, v in pl_module.model.state_dict().items()}
        self.datamodule = trainer.datamodule

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.train_inputs.append(torch.cat([batch[0], batch[1][:, -1:]], dim=1))  # the whole window


def windows(tokens: np.ndarray) -> set[bytes]:
    """Every length-WINDOW run of tokens with some variety (runs of spaces are shared by any two texts)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    view = np.lib.stride_tricks.sliding_window_view(tokens, WINDOW)
    return {row.tobytes() for row in view if len(set(row.tolist())) >= 8}


def finetune_args(runs_dir: Path, base_id: str) -> dict:
    recipe = load_recipe("python_docs", {"steps": "10", "val_every_n_steps": "5"})
    return {"base_run_id": base_id, "recipe": recipe, "runs_dir": str(runs_dir)}


def test_finetune_starts_from_base_weights_and_sees_only_target_text(base):
    runs_dir, base_id = base
    recorder = Recorder()
    result = finetune(**finetune_args(runs_dir, base_id), extra_callbacks=[recorder])
    assert result.status == "FINISHED"

    client = mlflow_client(runs_dir)
    base_run = client.get_run(base_id)
    ckpt = torch.load(Path(base_run.data.tags["checkpoint_dir"]) / "last.ckpt", map_location="cpu", weights_only=True)
    base_weights = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    assert set(recorder.start_state) == set(base_weights)
    for name, tensor in base_weights.items():
        assert torch.equal(recorder.start_state[name], tensor), name

    # Only the target corpus: its shards, its train stream, its held-out windows.
    dm = recorder.datamodule
    assert dm.shards.manifest["corpus"]["name"] == "python_docs"
    shakespeare = prepare_shards(prepare_corpus(DataConfig()), ByteTokenizer())
    pretrain_heldout = windows(shakespeare.heldout_tokens())
    known = windows(shakespeare.heldout_tokens()[1000:1000 + WINDOW + 40])
    assert known and known <= pretrain_heldout  # the check below can fire
    assert len(recorder.train_inputs) == 10
    for x in recorder.train_inputs:
        for row in x.numpy():
            assert not windows(row) & pretrain_heldout
    for x, _ in dm.val_dataloader():
        for row in x.numpy():
            assert not windows(row) & pretrain_heldout

    # Metrics: before at step 0, after = the final validation, plasticity = before - after.
    ft = client.get_run(result.run_id)
    m = ft.data.metrics
    val_history = sorted(client.get_metric_history(result.run_id, "val/loss"), key=lambda h: h.step)
    assert [h.step for h in client.get_metric_history(result.run_id, BEFORE)] == [0]
    assert m[AFTER] == pytest.approx(val_history[-1].value) and val_history[-1].step == 9
    assert m[PLASTICITY] == pytest.approx(m[BEFORE] - m[AFTER])
    assert m[BASE_VAL] == pytest.approx(base_run.data.metrics["val/loss"])
    assert result.plasticity == pytest.approx(m[PLASTICITY]) and result.before == pytest.approx(m[BEFORE])
    # "Before" is the base weights' mean loss over the target's validation windows (module loss per batch).
    # Its top-1 accuracy counts the argmax hits over every target; the floor is the commonest target's share.
    module_losses, hits, targets = [], 0, []
    model, _ = build_model(validate(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="4"))), [])
    model.load_state_dict(base_weights)
    with torch.no_grad():
        for x, y in dm.val_dataloader():
            logits = model(x)
            module_losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1)).item())
            hits += int((logits.argmax(-1) == y).sum())
            targets += y.reshape(-1).tolist()
    assert m[BEFORE] == pytest.approx(float(np.mean(module_losses)), rel=1e-5)
    assert m[TARGET_ACC_BEFORE] == pytest.approx(hits / len(targets))
    assert m[TARGET_ACC_FLOOR] == pytest.approx(max(np.bincount(targets)) / len(targets))
    assert 0 < m[TARGET_ACC_FLOOR] < 0.5 and 0 <= m["finetune/target_acc_after"] <= 1  # (20 steps: the space byte)

    # Linked to its base and nested under it; not an ablation cell; config records the recipe.
    tags, params = ft.data.tags, ft.data.params
    assert tags["finetune.base_run_id"] == base_id and tags["finetune.recipe"] == "python_docs"
    assert tags["mlflow.parentRunId"] == base_id and "ablation.arm" not in tags
    assert params["init_from"] == base_id and params["data.name"] == "python_docs"
    assert params["trainer.max_steps"] == "10" and params["optim.weight_decay"] == "0.0"
    assert params["tokenizer.kind"] == "byte" and params["model.vocab_size"] == base_run.data.params["model.vocab_size"]

    # The same fine-tune again is skipped, not repeated.
    again = finetune(**finetune_args(runs_dir, base_id))
    assert again.status == "SKIPPED" and again.run_id == result.run_id
    assert again.plasticity == pytest.approx(result.plasticity)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_bad_base_run_is_one_sentence_and_exit_2(base, capsys, tmp_path: Path):
    runs_dir, base_id = base
    assert main(["base_run=0123456789abcdef", f"runs_dir={runs_dir}"]) == 2
    assert "base_run=0123456789abcdef is not a run" in one_error_line(capsys)
    assert main([f"runs_dir={runs_dir}"]) == 2
    assert "base_run=<MLflow run id>" in one_error_line(capsys)
    assert main([f"base_run={base_id}", f"runs_dir={tmp_path / 'nowhere'}"]) == 2
    assert "no MLflow store" in one_error_line(capsys) and not (tmp_path / "nowhere").exists()
    assert main([f"base_run={base_id}", f"runs_dir={runs_dir}", "finetune=nope"]) == 2
    assert "no fine-tuning recipe 'nope'" in one_error_line(capsys)
    assert main([f"base_run={base_id}", f"runs_dir={runs_dir}", "finetune.epochs=3"]) == 2
    assert "Unknown recipe field 'epochs'" in one_error_line(capsys)
    assert main([f"base_run={base_id}", f"runs_dir={runs_dir}", "finetune.data=shakespeare", *FT]) == 2
    assert "is the base run's pre-training corpus" in one_error_line(capsys)
    assert main([f"base_run={base_id}", f"runs_dir={runs_dir}", "optim.no_such_key=1", *FT]) == 2
    one_error_line(capsys)
    client = mlflow_client(runs_dir)
    failed = client.create_run(client.get_run(base_id).info.experiment_id).info.run_id
    client.set_terminated(failed, status="FAILED")
    assert main([f"base_run={failed}", f"runs_dir={runs_dir}"]) == 2
    assert "is FAILED, not FINISHED" in one_error_line(capsys)


def test_a_bpe_base_keeps_its_own_tokenizer(tmp_path: Path):
    text = tmp_path / "a.txt"
    text.write_text("to be or not to be, that is the question. " * 400)
    other = tmp_path / "b.txt"
    other.write_text("whether tis nobler in the mind to suffer. " * 400)
    data = {"name": "tiny_text", "source": "text_files", "data_files": [str(text), str(other)],
            "cache_dir": str(tmp_path / "cache"), "heldout_fraction": 0.5}
    cfg = OmegaConf.merge(OmegaConf.structured(DataConfig), data)
    tok_cfg = TokenizerConfig(kind="bpe", vocab_size=300)
    recorded = compose_run_config(["tokenizer=bpe", "tokenizer.vocab_size=300"])
    recorded.data = cfg
    recorded = validate(recorded)
    assert recorded.model.vocab_size == 300
    base = FinishedRun("b" * 32, "base", "FINISHED", {}, {"val/loss": 1.0}, RunCheckpoint(tmp_path / "none.ckpt"),
                       OmegaConf.to_container(recorded))
    with pytest.raises(ConfigError, match="BPE tokenizer file .* is missing"):
        base_tokenizer(recorded)
    trained = build_tokenizer(tok_cfg, prepare_corpus(OmegaConf.to_object(cfg)))
    ft_cfg = finetune_config(base, load_recipe(), str(tmp_path / "runs"))
    assert ft_cfg.tokenizer.kind == "pretrained" and ft_cfg.model.vocab_size == recorded.model.vocab_size
    pinned = build_tokenizer(OmegaConf.to_object(ft_cfg.tokenizer))
    sample = "def f(x):\n    return x  # python text, never seen by this BPE"
    assert pinned.encode(sample) == trained.encode(sample)
    assert ft_cfg.data.name == "python_docs" and ft_cfg.data.cache_dir == str(tmp_path / "cache")


def test_the_finetune_reaches_the_store_its_base_was_found_in_not_the_masked_recorded_url(base, monkeypatch):
    """A base trained against a server with a password in its URL records the URL masked (user:***@); the
    fine-tune must connect with the URL this process opened the store with."""
    import json

    import lit_modules.train
    from lit_modules.training_run import RunResult

    runs_dir, base_id = base
    sidecar = Path(mlflow_client(runs_dir).get_run(base_id).data.tags["checkpoint_dir"]) / "config.json"
    original = sidecar.read_text()
    record = json.loads(original)
    record["config"]["logger"]["tracking_uri"] = "http://llm:***@tracking.example:5000"
    seen = {}

    def capture(cfg, **kwargs):
        seen["uri"] = cfg.logger.tracking_uri
        return RunResult(None, "DRY_RUN")

    monkeypatch.setattr(lit_modules.train, "run", capture)
    sidecar.write_text(json.dumps(record))
    try:
        finetune(**finetune_args(runs_dir, base_id))
    finally:
        sidecar.write_text(original)
    assert seen["uri"] == mlflow_client(runs_dir).tracking_uri and "***" not in seen["uri"]
