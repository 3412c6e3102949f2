"""init_from=hf:<folder>: a Hugging Face Llama folder (random, tiny, made here) becomes our model with the same
logits, its tokenizer.json the run's tokenizer; what we cannot represent is refused in one sentence naming the
field, before anything runs; a fine-tune from a folder trains and resumes exactly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lit_modules.config.composition import compose_run_config
from lit_modules.hf import ModelFolderError
from lit_modules.config.validate import validated
from lit_modules.resume import init_weights_from
from lit_modules.rebuild import rebuild_model
from tests.helpers.hf import DROP, edit_config, hf_folder, hf_logits
from tests.helpers.models import tokens
from tests.helpers.runs import REPO, all_runs, tiny_overrides

VARIANTS = {
    "gqa_untied": dict(),
    "mha_tied_theta": dict(num_key_value_heads=4, tie_word_embeddings=True, rope_theta=500000.0, rms_norm_eps=1e-5),
    "sharded_wide": dict(intermediate_size=80, num_key_value_heads=1, vocab_size=300, shard=True),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf_in")
    return {name: hf_folder(root / name, seed=i, **params) for i, (name, params) in enumerate(VARIANTS.items())}


def _cfg(runs_dir: Path, folder: Path, *extra: str):
    cfg = compose_run_config([*tiny_overrides(runs_dir, steps=4), "tokenizer=pretrained", *extra])
    cfg.init_from = f"hf:{folder}"
    return cfg


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_imported_folder_computes_the_logits_transformers_computes(folders, tmp_path, variant):
    folder = folders[variant]
    cfg = validated(_cfg(tmp_path, folder)).config
    hf = VARIANTS[variant]
    assert cfg.model.vocab_size == hf.get("vocab_size", 259) and cfg.model.d_ff == hf.get("intermediate_size", 48)
    assert cfg.model.tie_embeddings == hf.get("tie_word_embeddings", False)
    assert cfg.tokenizer.path == str((folder / "tokenizer.json").resolve())  # tokenizer=pretrained found it
    model = rebuild_model(cfg)
    init_weights_from(cfg.init_from, client=None).load_into(model)
    x = tokens(cfg.model.vocab_size)
    with torch.no_grad():
        ours = model.eval()(x)
    diff = (ours - hf_logits(folder, x)).abs().max().item()
    print(f"hf -> ours [{variant}]: max |logit diff| {diff:.2e}")
    assert diff < 1e-4
    assert not (tmp_path / "mlflow.db").exists()  # checking opened no store


def _copy(folders, tmp_path) -> Path:
    return Path(shutil.copytree(folders["gqa_untied"], tmp_path / "model"))


REFUSALS = {
    "rope_scaling": (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rope_scaling="),
    "rope_type": (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}), "rope_parameters.rope_type="),
    "attention_bias": (dict(attention_bias=True), "attention_bias=True"),
    "mlp_bias": (dict(mlp_bias=True), "mlp_bias=True"),
    "model_type": (dict(model_type="mistral"), "model_type='mistral'"),
    "architectures": (dict(architectures=["LlamaForSequenceClassification"]), "architectures="),
    "hidden_act": (dict(hidden_act="gelu"), "hidden_act='gelu'"),
    "head_dim": (dict(head_dim=16), "head_dim=16"),
    "attention_dropout": (dict(attention_dropout=0.1), "attention_dropout=0.1"),
    "quantization": (dict(quantization_config={"quant_method": "bitsandbytes"}), "quantization_config="),
    "missing_size": (dict(hidden_size=DROP), "lacks hidden_size"),
    "shape": (dict(intermediate_size=64), "has shape"),
    "tensor": (dict(num_hidden_layers=3), "lacks model.layers.2"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_config_we_cannot_represent_is_refused_naming_the_field(folders, tmp_path, case):
    changes, words = REFUSALS[case]
    folder = _copy(folders, tmp_path)
    edit_config(folder, **changes)
    with pytest.raises(ModelFolderError) as err:
        validated(_cfg(tmp_path / "runs", folder))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()


def _not_quite_bytes(path: Path) -> None:
    """A tokenizer.json with the byte tokenizer's 259 tokens that lowercases first: other ids for "A"."""
    from tokenizers import normalizers

    from lit_modules.config.byte_tokenizer_file import byte_tokenizer_backend

    backend = byte_tokenizer_backend()
    backend.normalizer = normalizers.Lowercase()
    path.write_text(backend.to_str())


@pytest.mark.parametrize("case", ["not_a_folder", "no_config", "no_weights", "byte_over_own_tokenizer",
                                  "no_tokenizer", "tokenizer_too_big", "truncated_weights", "config_not_an_object"])
def test_a_folder_that_cannot_start_a_run_is_refused_in_one_sentence(folders, tmp_path, case):
    folder = _copy(folders, tmp_path)
    extra, words = [], ""
    if case == "not_a_folder":
        folder, words = tmp_path / "TinyLlama/TinyLlama-1.1B", "nothing is fetched from a hub"
    elif case == "no_config":
        (folder / "config.json").unlink()
        words = "has no config.json"
    elif case == "no_weights":
        (folder / "model.safetensors").unlink()
        words = "has neither model.safetensors nor model.safetensors.index.json"
    elif case == "byte_over_own_tokenizer":  # a tokenizer.json that is not the byte tokenizer (same size)
        _not_quite_bytes(folder / "tokenizer.json")
        extra, words = ["tokenizer=byte"], "add tokenizer=pretrained"
    elif case == "truncated_weights":  # safe_open's SafetensorError was a traceback
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[:-100])
        words = "model.safetensors is not a complete safetensors file"
    elif case == "config_not_an_object":
        (folder / "config.json").write_text("[1, 2]")
        words = "config.json holds a JSON list"
    elif case == "no_tokenizer":
        (folder / "tokenizer.json").unlink()
        words = "has no tokenizer.json; set tokenizer.path"
    else:
        folder = hf_folder(tmp_path / "small_vocab", vocab_size=200)  # byte tokenizer.json: 259 ids
        words = "tokenizer has 259 ids but"
    with pytest.raises(ModelFolderError) as err:
        validated(_cfg(tmp_path / "runs", folder, *extra))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "runs").exists()


def test_a_folder_with_the_byte_tokenizer_starts_a_run_with_the_default_tokenizer(folders, tmp_path):
    """Our own export of a byte run (its tokenizer.json is the byte tokenizer) imports back without
    tokenizer=pretrained: the default tokenizer=byte gives the same ids."""
    cfg = compose_run_config(tiny_overrides(tmp_path / "runs", steps=4))
    assert cfg.tokenizer.kind == "byte"
    cfg.init_from = f"hf:{folders['gqa_untied']}"
    checked = validated(cfg).config
    assert checked.tokenizer.kind == "byte" and checked.model.vocab_size == 259
    assert not (tmp_path / "runs").exists()


def test_the_command_line_refuses_with_exit_2_before_any_run(folders, tmp_path):
    folder = _copy(folders, tmp_path)
    edit_config(folder, rope_scaling={"rope_type": "llama3", "factor": 8.0})
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "lit_modules.finetune", f"base_run=hf:{folder}",
                           f"runs_dir={tmp_path / 'runs'}"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().count("\n") == 0 and "rope_scaling=" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_fine_tune_from_a_folder_trains_and_resumes_exactly(folders, tmp_path):
    from lit_modules.config.finetune_recipe import load_recipe
    from lit_modules.finetune import finetune
    from lit_modules.train import run

    folder = folders["gqa_untied"]
    recipe = load_recipe("python_docs", {"steps": "6", "val_every_n_steps": "3", "seq_len": "32", "batch_size": "4"})
    straight = finetune(f"hf:{folder}", recipe, runs_dir=str(tmp_path / "a"))
    assert straight.status == "FINISHED" and straight.after < straight.before  # it trained
    first = finetune(f"hf:{folder}", recipe, runs_dir=str(tmp_path / "b"), overrides=["trainer.stop_after_steps=3"])
    assert first.status == "KILLED"
    resumed = run(compose_run_config([f"resume={first.run_id}", f"runs_dir={tmp_path / 'b'}"]))
    assert resumed.status == "FINISHED" and resumed.run_id == first.run_id
    [run_a], [run_b] = all_runs(tmp_path / "a"), all_runs(tmp_path / "b")
    assert run_a.data.tags["finetune.base_run_id"] == f"hf:{folder.resolve()}"
    assert "mlflow.parentRunId" not in run_a.data.tags  # a folder is no run to nest under
    a = torch.load(tmp_path / "a" / "checkpoints" / straight.run_id / "last.ckpt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "b" / "checkpoints" / first.run_id / "last.ckpt", weights_only=True)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
