"""The `eval` config group: every preset matches the schema, `default` spells out the schema defaults."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from omegaconf import OmegaConf

from lit_modules.evaluation import EvalConfig, EvalError
from tests.helpers.runs import REPO

CONF = REPO / "conf" / "eval"


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_presets_match_the_schema(path):
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(EvalConfig), OmegaConf.load(path)))
    assert cfg.problems("shakespeare", check_hub=False) == []


def test_default_preset_is_the_schema_default():
    assert OmegaConf.to_container(OmegaConf.load(CONF / "default.yaml")) == asdict(EvalConfig())


def test_zero_shot_lists_the_papers_suite():
    tasks = OmegaConf.load(CONF / "zero_shot.yaml").tasks
    assert list(tasks) == [
        "boolq",
        "arc_easy",
        "arc_challenge",
        "piqa",
        "winogrande",
        "hellaswag",
        "lambada_openai",
    ]


def test_from_any_accepts_dictconfig_and_rejects_unknown_keys():
    assert EvalConfig.from_any(OmegaConf.create({"tasks": ["local"], "batch_size": 4})).batch_size == 4
    assert EvalConfig.from_any(None) == EvalConfig()
    with pytest.raises(EvalError, match="colour"):
        EvalConfig.from_any({"colour": "blue"})


def test_a_local_task_on_an_unknown_corpus_is_one_sentence_before_training():
    """It used to pass validation and fail only when the evaluation ran, after the whole training."""
    cfg = EvalConfig(tasks=["local_cloze_nowhere", "local_cloze_python_docs", "local_ppl_mine"])
    problems = cfg.problems("mine", check_hub=False)
    assert problems == ["eval task 'local_cloze_nowhere' names the corpus 'nowhere', which is neither this "
                        "run's corpus nor in conf/data."]
