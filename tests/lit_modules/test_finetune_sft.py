"""`data.source=sft` wired into real runs: a pre-trained base fine-tuned on prompt/response pairs with the
prompt masked, before/after measured token-weighted on held-out responses, impossible combinations refused
with one sentence, and a dataset id that cannot be read offline reported in one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import pytest
import torch
from omegaconf import OmegaConf

from tests.helpers.runs import all_runs, mlflow_client, tiny_overrides
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.data import ByteTokenizer, DataConfig, DataError
from lit_modules.data.sft import IGNORE_INDEX, masked_lm_loss, prepare_sft_data
from lit_modules.config.finetune_recipe import load_recipe
from lit_modules.finetune import finetune
from lit_modules.runs.tags import PLASTICITY
from lit_modules.runs.tags import TARGET_LOSS_AFTER as AFTER
from lit_modules.runs.tags import TARGET_LOSS_BEFORE as BEFORE
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config

TOK = ByteTokenizer()


def write_pairs(path: Path, n: int = 60) -> Path:
    rows = [{"query": f"What is {i} times 3?", "response": f"{i} times 3 is {3 * i}. The answer is: {3 * i}"}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sft_data(path: Path, **extra) -> DataConfig:
    settings = dict(name="pairs", source="sft", data_files=[str(path)], seq_len=64, batch_size=4, val_batches=2,
                    heldout_fraction=0.25)
    settings.update(extra)
    return DataConfig(**settings)


def test_prepare_splits_by_prompt_caps_validation_and_fingerprints_the_file(tmp_path: Path):
    path = write_pairs(tmp_path / "pairs.jsonl")
    data = prepare_sft_data(sft_data(path), TOK, seed=0)
    assert data.train_examples + data.heldout_examples <= 60
    assert data.heldout_examples == 2 * 4  # val_batches x batch_size, the first held-out pairs
    x, y = next(iter(data.datamodule.train_dataloader()))
    assert x.shape == y.shape == (4, 64)
    assert prepare_sft_data(sft_data(path), TOK, seed=0).fingerprint == data.fingerprint
    assert prepare_sft_data(sft_data(path, prompt_template="Q: {prompt}\nA: "), TOK, 0).fingerprint != data.fingerprint
    write_pairs(path, n=61)
    assert prepare_sft_data(sft_data(path), TOK, seed=0).fingerprint != data.fingerprint


def test_too_few_pairs_for_a_held_out_split_is_one_sentence(tmp_path: Path):
    path = write_pairs(tmp_path / "pairs.jsonl", n=2)
    with pytest.raises(DataError, match="leave an empty"):
        prepare_sft_data(sft_data(path, heldout_fraction=0.01), TOK, seed=0)


def test_a_dataset_id_offline_is_one_sentence(tmp_path: Path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cfg = sft_data(tmp_path / "unused.jsonl", data_files=[], hf_path="no-such-org/no-such-sft-set")
    with pytest.raises(DataError, match="unreachable or offline here") as err:
        prepare_sft_data(cfg, TOK, seed=0)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        ({"tokenizer": "bpe"}, "no text corpus to train a BPE"),
        ({"eval": "local"}, "set eval=default"),
        ({"trainer.devices": "2"}, "run it on one device"),
        ({"data.data_files": "[]"}, "names neither data.data_files"),
        ({"data.prompt_template": "'no slot'"}, "must contain {prompt}"),
    ],
)
def test_impossible_sft_combinations_are_refused(tmp_path: Path, extra: dict, sentence: str):
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    settings = {"data": "metamath", "data.data_files": f"[{pairs}]", "data.hf_path": "null", **extra}
    cfg = compose_run_config(tiny_overrides(tmp_path / "runs", **settings))
    with pytest.raises(ConfigError, match=sentence.replace("{", r"\{").replace("}", r"\}")):
        validate(cfg)
    assert not all_runs(tmp_path / "runs")


class FirstBatches(L.Callback):
    def __init__(self):
        self.targets: list[torch.Tensor] = []
        self.inputs: list[torch.Tensor] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.inputs.append(batch[0].clone())
        self.targets.append(batch[1].clone())


def test_finetune_on_prompt_response_pairs_end_to_end(tmp_path: Path):
    runs_dir = tmp_path / "runs"
    base = run(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="3")))
    assert base.status == "FINISHED"
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    recipe = load_recipe("metamath", {"steps": "8", "val_every_n_steps": "4", "seq_len": "64", "batch_size": "4"})
    recorder = FirstBatches()
    result = finetune(base.run_id, recipe, str(runs_dir), overrides=[f"data.data_files=[{pairs}]", "data.hf_path=null",
                                                                      "data.val_batches=2"], extra_callbacks=[recorder])
    assert result.status == "FINISHED"

    # Every training target that is a prompt token is masked: "Question: ... Answer: " never scores.
    prompt_prefix = [TOK.eos_id, *TOK.encode("Question: ")]
    assert len(recorder.targets) == 8
    for x, y in zip(recorder.inputs, recorder.targets):
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            assert row_x[: len(prompt_prefix)] == prompt_prefix
            marker = TOK.encode("Answer: ")
            first_response = next(i for i in range(len(row_x)) if row_x[i - len(marker):i] == marker)
            # y[i] is the token after x[i]: the first scored target predicts the first response token.
            assert all(t == IGNORE_INDEX for t in row_y[: first_response - 1])
            assert row_y[first_response - 1] == row_x[first_response] != IGNORE_INDEX

    # before/after are token-weighted over the held-out responses, and plasticity is their difference.
    client = mlflow_client(runs_dir)
    ft = client.get_run(result.run_id)
    m = ft.data.metrics
    assert m[PLASTICITY] == pytest.approx(m[BEFORE] - m[AFTER]) and m[PLASTICITY] > 0
    cfg = OmegaConf.create(json.loads((Path(ft.data.tags["checkpoint_dir"]) / "config.json").read_text())["config"])
    heldout = prepare_sft_data(OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DataConfig), cfg.data)),
                               TOK, seed=cfg.seed).datamodule.val_dataloader()
    from lit_modules.build import build_model

    model, _ = build_model(validate(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="3"))), [])
    state = torch.load(Path(ft.data.tags["checkpoint_dir"]) / "last.ckpt", map_location="cpu", weights_only=True)
    model.load_state_dict({k.removeprefix("model."): v for k, v in state["state_dict"].items() if k.startswith("model.")})
    with torch.no_grad():
        xs, ys = zip(*heldout)
        after = masked_lm_loss(model(torch.cat(xs)), torch.cat(ys)).item()
    assert m[AFTER] == pytest.approx(after, rel=1e-5)

    tags, params = ft.data.tags, ft.data.params
    assert tags["finetune.base_run_id"] == base.run_id and tags["finetune.recipe"] == "metamath"
    assert params["data.source"] == "sft" and params["eval.tasks"] == "[]"
    assert tags["data_fingerprint"] == prepare_sft_data(
        OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DataConfig), cfg.data)), TOK, cfg.seed).fingerprint
