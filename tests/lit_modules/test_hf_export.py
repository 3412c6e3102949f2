"""python -m lit_modules.export hf: a run (baseline, PC layer, LoRA / rsLoRA / PiSSA) as a folder transformers
loads with our merged model's logits, its tokenizer files (the byte tokenizer too), a model card, PEFT adapters
that reproduce the merged model on the exported base, and back in through init_from=hf:. Refusals leave
nothing behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated
from lit_modules.data.tokenization import ByteTokenizer
from lit_modules.export.__main__ import main as export_main
from lit_modules.export.hf_export import export_hf
from lit_modules.resume import init_weights_from
from lit_modules.rebuild import rebuild_model, trained_model
from lit_modules.runs.finished import finished_run
from lit_modules.train import run
from tests.helpers.hf import hf_logits
from tests.helpers.models import tokens
from tests.helpers.runs import mlflow_client, tiny_overrides

TEXTS = ["To be, or not to be: that is the question.", "héllo wörld — ✓ 日本語 🙂\n\ttabs  and  spaces", ""]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A baseline, a PC-layer run and LoRA / rsLoRA / PiSSA fine-tunes of the baseline, a few steps each."""
    runs_dir = tmp_path_factory.mktemp("hf_out") / "runs"
    made = {"base": run(compose_run_config(tiny_overrides(runs_dir, steps=8, seed="2"))).run_id}
    made["pc"] = run(compose_run_config(tiny_overrides(runs_dir, steps=6, pc_layer="level4"))).run_id
    for variant in ("lora", "rslora", "pissa"):
        overrides = tiny_overrides(runs_dir, steps=6, lora=variant, init_from=made["base"], **{"techniques.lora.rank": "4"})
        made[variant] = run(compose_run_config(overrides)).run_id
    return {"runs_dir": runs_dir, **made}


def _merged(runs, key):
    return trained_model(finished_run(mlflow_client(runs["runs_dir"]), runs[key]).checkpoint, for_inference=True).eval()


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exports")
    return {key: export_hf(runs[key], root / key, runs["runs_dir"]) for key in ("base", "pc", "lora", "rslora", "pissa")}


@pytest.mark.parametrize("key", ["base", "pc", "lora", "rslora", "pissa"])
def test_an_exported_run_loads_in_transformers_with_our_logits(runs, exported, key):
    ours = _merged(runs, key)
    x = tokens(ours.cfg.vocab_size, length=32)
    with torch.no_grad():
        diff = _diff(hf_logits(exported[key], x), ours(x))
    print(f"ours -> hf [{key}]: max |logit diff| {diff:.2e}")
    assert diff < 1e-4
    names = {p.name for p in exported[key].iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md"} <= names
    assert ({"adapter", "adapter_base"} <= names) == (key in ("lora", "rslora", "pissa"))
    assert not [p for p in exported[key].parent.iterdir() if p.name.startswith(".")]  # no staging folder left


@pytest.mark.parametrize("key", ["lora", "rslora", "pissa"])
def test_the_peft_adapters_on_the_exported_base_reproduce_the_merged_model(runs, exported, key):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    folder = exported[key]
    config = json.loads((folder / "adapter" / "adapter_config.json").read_text())
    assert (config["r"], config["use_rslora"]) == (4, key == "rslora")
    base = AutoModelForCausalLM.from_pretrained(folder / "adapter_base")
    model = PeftModel.from_pretrained(base, folder / "adapter").eval()
    ours = _merged(runs, key)
    x = tokens(ours.cfg.vocab_size, length=32, seed=1)
    with torch.no_grad():
        diff = _diff(model(x).logits, ours(x))
        base_diff = _diff(hf_logits(folder / "adapter_base", x), ours(x))
    print(f"peft adapters on the exported base [{key}]: max |logit diff| {diff:.2e}")
    assert diff < 1e-4 and base_diff > 1e-3  # the adapters carry the fine-tune
    if key == "pissa":  # the base PiSSA needs is the residual, not the weights it started from
        start = _merged(runs, "base")
        with torch.no_grad():
            assert _diff(hf_logits(folder / "adapter_base", x), start(x)) > 1e-3


def test_the_byte_tokenizer_exported_reads_text_as_ours(exported):
    from transformers import AutoTokenizer

    theirs, ours = AutoTokenizer.from_pretrained(exported["base"]), ByteTokenizer()
    for text in TEXTS:
        ids = theirs.encode(text, add_special_tokens=False)
        assert ids == ours.encode(text)
        assert theirs.decode(ids) == ours.decode(ids)
    assert (theirs.bos_token_id, theirs.eos_token_id, theirs.pad_token_id) == (256, 257, 258)
    assert json.loads((exported["base"] / "config.json").read_text())["eos_token_id"] == 257


def test_the_model_card_names_run_commit_data_and_techniques(runs, exported):
    client = mlflow_client(runs["runs_dir"])
    for key, technique in (("base", "none (the baseline)"), ("pc", "`pc_layer`: "), ("pissa", "`lora`: variant=pissa")):
        card = (exported[key] / "README.md").read_text()
        tags = client.get_run(runs[key]).data.tags
        assert runs[key] in card and tags["git_commit"] in card and technique in card
        assert "shakespeare" in card and "byte tokenizer" in card


def test_export_then_import_is_the_same_model_and_tokenizer(runs, exported, tmp_path):
    # With the defaults: the exported tokenizer.json is the byte tokenizer, so tokenizer=byte takes it.
    default = validated(compose_run_config([*tiny_overrides(tmp_path, steps=2), f"init_from=hf:{exported['pc']}"]))
    assert default.config.tokenizer.kind == "byte"
    cfg = compose_run_config([*tiny_overrides(tmp_path, steps=2), "tokenizer=pretrained"])
    cfg.init_from = f"hf:{exported['pc']}"
    cfg = validated(cfg).config
    model = rebuild_model(cfg)
    init_weights_from(cfg.init_from, client=None).load_into(model)
    ours = _merged(runs, "pc")
    x = tokens(ours.cfg.vocab_size, length=32, seed=2)
    with torch.no_grad():
        diff = _diff(model.eval()(x), ours(x))
    print(f"ours -> hf -> ours [pc]: max |logit diff| {diff:.2e}")
    assert diff == 0.0  # the same float32 tensors
    from lit_modules.data.tokenization import PretrainedTokenizer

    pretrained = PretrainedTokenizer(cfg.tokenizer.path)
    assert all(pretrained.encode(t) == ByteTokenizer().encode(t) for t in [*TEXTS, "<|eos|> as text"])


def test_the_plain_format_goes_through_the_same_module(runs, tmp_path):
    from lit_modules.export.plain import load_merged

    out = tmp_path / "merged.pt"
    assert export_main(["plain", runs["lora"], str(out), "--runs-dir", str(runs["runs_dir"])]) == 0
    ours = _merged(runs, "lora")
    x = tokens(ours.cfg.vocab_size, seed=3)
    with torch.no_grad():
        assert _diff(load_merged(out).eval()(x), ours(x)) == 0.0


def test_what_cannot_be_exported_is_refused_in_one_sentence_and_nothing_is_written(runs, exported, tmp_path, capsys):
    runs_dir = runs["runs_dir"]
    # A gated-attention run has no Hugging Face Llama equivalent: refused from config.json alone (the
    # checkpoint here is not even a checkpoint, so nothing was read).
    gated = tmp_path / "gated"
    gated.mkdir()
    record = json.loads((runs_dir / "checkpoints" / runs["base"] / "config.json").read_text())
    record["config"]["model"]["attn_gate"] = "elementwise"
    (gated / "config.json").write_text(json.dumps(record))
    (gated / "last.ckpt").write_bytes(b"not read")
    broken = Path(shutil.copytree(runs_dir / "checkpoints" / runs["base"], tmp_path / "broken"))
    (broken / "config.json").write_text('{"config": ')  # a damaged sidecar was json's traceback
    cases = [
        ([str(gated), str(tmp_path / "g")], "model.attn_gate=elementwise has no Hugging Face Llama equivalent"),
        ([runs["base"], str(exported["base"])], "already exists"),
        (["0123456789abcdef", str(tmp_path / "n")], "0123456789abcdef is not a run in the MLflow store"),
        ([str(tmp_path / "nowhere/last.ckpt"), str(tmp_path / "m")], "is neither a checkpoint nor"),
        ([str(broken), str(tmp_path / "b")], "config.json cannot be read as the run's config (not valid JSON"),
        ([runs["base"], str(tmp_path / "gated" / "config.json" / "x")], "config.json is a file, not a folder"),
    ]
    for words, expected in cases:
        assert export_main(["hf", *words, "--runs-dir", str(runs_dir)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and expected in err and "\n" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken", "gated"]  # nothing else was written
    assert export_main(["hf", runs["base"], str(tmp_path / "x"), "--runs-dir", str(tmp_path / "none")]) == 2
    assert "pass --runs-dir <the folder the run was trained in>" in capsys.readouterr().err  # the flag it has
    ckpt = runs_dir / "checkpoints" / runs["base"]
    copy = Path(shutil.copytree(ckpt, tmp_path / "copy", ignore=shutil.ignore_patterns("*.sha256")))
    assert export_main(["hf", str(copy), str(tmp_path / "c")]) == 2  # no checksum: not trusted
    assert "has no checksum file" in capsys.readouterr().err and not (tmp_path / "c").exists()


@pytest.mark.parametrize("argv", [["bogus", "x", "y"], ["hf"]])
def test_bad_arguments_are_one_line(argv, capsys):
    """argparse printed its usage block, then the error: two lines."""
    with pytest.raises(SystemExit) as stop:
        export_main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: ") and "usage: " in err[0]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc, which takes no new folder")
@pytest.mark.parametrize("fmt", ["hf", "plain"])
def test_an_unwritable_destination_is_refused_before_the_checkpoint_is_read(runs, fmt, capsys, monkeypatch):
    """temp.mkdir() under /proc was a FileNotFoundError traceback, after the checkpoint had been read."""
    from lit_modules.runs.finished import RunCheckpoint

    monkeypatch.setattr(RunCheckpoint, "state", lambda self: pytest.fail("the checkpoint was read"))
    assert export_main([fmt, runs["base"], "/proc/llm-ablate-export", "--runs-dir", str(runs["runs_dir"])]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: /proc/llm-ablate-export cannot be written: /proc takes no new folder (No such file or "
                   "directory); export into a folder you can write (nothing was read).")


def test_a_tensor_hugging_face_llama_lacks_is_refused_before_anything_is_written(runs, tmp_path, capsys, monkeypatch):
    """A technique whose inference form keeps a parameter of its own (here one added to the merged model) was
    a KeyError from hf/names.py after the checkpoint was read."""
    from lit_modules.export.source import ExportSource

    merged = ExportSource.inference_model

    def with_a_gain(self, weights):
        model = merged(self, weights)
        model.layers[0].attn.register_parameter("gain", torch.nn.Parameter(torch.ones(1)))
        return model

    monkeypatch.setattr(ExportSource, "inference_model", with_a_gain)
    target = tmp_path / "deep" / "out"
    assert export_main(["hf", runs["base"], str(target), "--runs-dir", str(runs["runs_dir"])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: The merged model has layers.0.attn.gain (1 such tensor), which a Hugging Face "
                          "Llama has no place for") and "lit_modules.export plain" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []  # neither the folder nor the parents made for it


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_failed_export_leaves_neither_its_temporary_nor_the_folders_made_for_it(tmp_path, kind):
    from lit_modules.export.staging import staged_file, staged_folder

    (tmp_path / "kept").mkdir()
    target = tmp_path / "kept" / "a" / "b" / "out"
    with pytest.raises(RuntimeError, match="disk full"):
        with (staged_folder if kind == "folder" else staged_file)(target) as temp:
            (temp / "x" if kind == "folder" else temp).write_text("partial")
            raise RuntimeError("disk full")
    assert [p.name for p in tmp_path.rglob("*")] == ["kept"]
    with (staged_folder if kind == "folder" else staged_file)(target) as temp:
        (temp / "x" if kind == "folder" else temp).write_text("whole")
    assert (target / "x" if kind == "folder" else target).read_text() == "whole"
    assert sorted(p.name for p in (tmp_path / "kept" / "a" / "b").iterdir()) == ["out"]
