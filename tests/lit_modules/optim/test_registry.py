"""An optimizer is one module that registers itself (its class, its settings dataclass, its builder): the
shipped five are found, validated and built through the registry, a new one needs no other Python file, its
own settings are checked by their types, and a refusal found before the optimizer check never loads torch."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, fields
from typing import Annotated, Any

import pytest
import torch
from omegaconf import OmegaConf

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.files import CONF_DIR
from lit_modules.config.identity import identity_of
from lit_modules.config.schema import OPTIM_ADDED_DEFAULTS, OptimConfig
from lit_modules.config.validate import validated
from lit_modules.optim import registry
from lit_modules.optim.build import build_optimizer
from lit_modules.optim.param_groups import GroupSpec, torch_groups
from lit_modules.train import run
from lit_modules.typed_settings import Bound
from tests.helpers.runs import REPO, tiny_overrides
from tests.lit_modules.optim.test_build import model as small_model

SHIPPED = ["adam_mini", "adamw", "lamb", "muon", "nadam"]


def test_the_shipped_optimizers_register_themselves_one_module_each():
    specs = registry.optimizer_specs()
    assert list(specs) == SHIPPED
    assert sorted(p.stem for p in (CONF_DIR / "optim").glob("*.yaml")) == SHIPPED
    for name, spec in specs.items():
        assert spec.build.__module__ == f"lit_modules.optim.{name}"
        assert OmegaConf.load(CONF_DIR / "optim" / f"{name}.yaml").name == name


def test_the_shipped_optimizers_own_settings_stay_flat_fields_of_the_recorded_identity():
    """muon_* and lamb_trust_no_decay are in every recorded run's optim node: their settings dataclasses
    declare them at the schema's defaults, so the identity (and every config hash) is what it was."""
    schema = {f.name: f for f in fields(OptimConfig)}
    for spec in registry.optimizer_specs().values():
        for f in fields(spec.settings) if spec.settings is not None else ():
            assert f.name in schema and schema[f.name].default == f.default, f.name
    optim = identity_of(OmegaConf.to_container(validated(compose_run_config([])).config, resolve=True))["optim"]
    assert "settings" not in optim and OPTIM_ADDED_DEFAULTS["settings"] == {}


@pytest.mark.parametrize("override,sentence", [
    ("optim.name=sgd", "optim.name must be one of adam_mini, adamw, lamb, muon, nadam, not 'sgd'."),
    ("optim.lamb_trust_no_decay=true", "optim.lamb_trust_no_decay applies to optim=lamb only, and this run's "
                                       "optimizer is adamw."),
    ("++optim.settings.momentum=0.9", "optim.settings.momentum is not a setting of optim=adamw; its settings "
                                      "are none."),
])
def test_an_optimizer_problem_is_one_sentence(override, sentence):
    with pytest.raises(ConfigError) as err:
        validated(compose_run_config([override]))
    assert str(err.value) == sentence


@pytest.mark.parametrize("override,sentence", [
    ("optim.muon_lr=-1", "optim.muon_lr must be a positive number, not -1.0."),
    ("optim.muon_momentum=1", "optim.muon_momentum must be a finite number in [0, 1), not 1.0."),
])
def test_muons_own_settings_are_checked_by_their_types(override, sentence):
    with pytest.raises(ConfigError) as err:
        validated(compose_run_config(["optim=muon", override]))
    assert str(err.value) == sentence


# --- a new optimizer, written as a user would: one module's worth of code ----------------------------------

class Signum(torch.optim.Optimizer):
    """Sign descent with momentum (Bernstein et al. 2018): p <- p - lr sign(m), m <- b m + (1 - b) g."""

    def __init__(self, params: list[dict], lr: float, momentum: float):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:  # Lightning hands the forward and backward over as a closure
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    m = self.state[p].setdefault("m", torch.zeros_like(p))
                    m.mul_(group["momentum"]).add_(p.grad, alpha=1 - group["momentum"])
                    p.add_(m.sign(), alpha=-group["lr"])
        return loss


@dataclass
class SignumSettings:
    momentum: Annotated[float, Bound(ge=0, lt=1)] = 0.9


def build_signum(specs: list[GroupSpec], cfg: Any, model: torch.nn.Module) -> Signum:
    settings = SignumSettings(**(cfg.settings or {}))  # its own settings live under optim.settings
    return Signum(torch_groups(specs, cfg.lr, cfg.weight_decay), lr=cfg.lr, momentum=settings.momentum)


@pytest.fixture
def signum(monkeypatch):
    registry.optimizer_specs()  # the shipped ones first, then a registry of this test's own
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    registry.register_optimizer("signum", settings=SignumSettings)(build_signum)
    return "signum"


def test_a_registered_optimizer_validates_builds_and_steps_by_the_sign(signum):
    cfg = validated(compose_run_config([f"optim.name={signum}", "++optim.settings.momentum=0.5"])).config
    model = small_model()
    optimizer = build_optimizer(model, cfg.optim)
    assert isinstance(optimizer, Signum) and optimizer.param_groups[0]["momentum"] == 0.5
    before = [p.detach().clone() for p in model.parameters()]
    model(torch.randint(0, 50, (2, 8))).float().logsumexp(-1).mean().backward()
    optimizer.step()
    for p, b in zip(model.parameters(), before):  # the first step is lr * sign(g), whatever |g| (to p's rounding)
        assert torch.allclose(p.detach() - b, -cfg.optim.lr * p.grad.sign(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("override,sentence", [
    ("++optim.settings.momentum=1.5", "optim.settings.momentum must be a finite number in [0, 1), not 1.5."),
    ("++optim.settings.nesterov=true", "optim.settings.nesterov is not a setting of optim=signum; its settings are "
                                       "momentum."),
])
def test_a_registered_optimizers_settings_are_refused_in_one_sentence(signum, override, sentence):
    with pytest.raises(ConfigError) as err:
        validated(compose_run_config([f"optim.name={signum}", override]))
    assert str(err.value) == sentence


def test_a_registered_optimizer_trains_a_real_run(signum, tmp_path):
    result = run(compose_run_config([*tiny_overrides(tmp_path, steps=4), f"optim.name={signum}",
                                     "++optim.settings.momentum=0.5", "trainer.num_threads=1"]))
    assert result.status == "FINISHED"


def test_a_refusal_before_the_optimizer_check_never_loads_torch():
    code = ("import sys\nfrom lit_modules.config.composition import compose_run_config\n"
            "from lit_modules.config.validate import validated\n"
            "try:\n    validated(compose_run_config(['optim.lr=-1', 'optim.name=sgd']))\n"
            "except Exception as err:\n    print(repr(str(err)))\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["'The learning rate must be positive.'", "False"], done.stderr
