"""MoLS learning rates follow peak x schedule x ramp exactly, and a run paused mid-ramp and again after
the ramp, then resumed, reproduces the uninterrupted run: same alphas (no second estimate), same
lr_scale at every step, same final weights."""

import pytest

from lit_modules.optim.schedules import warmup_cosine
from lit_modules.techniques.mols.scaling import ramp
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config
from tests.helpers.mols import AT, GROUPS, MOLS, STEPS, WARMUP, MoLSProbe, mols_run, overrides, same
from tests.helpers.runs import mlflow_client

EXTRA = ("techniques.mols.decay_follows_lr=false",)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("reference")
    result, probe = mols_run(runs_dir, *EXTRA)
    return runs_dir, result, probe


def test_learning_rates_follow_schedule_times_ramp(reference):
    runs_dir, result, probe = reference
    alpha = probe.mols.alpha
    assert set(alpha) == set(GROUPS) and alpha["vo"] == 1.0 and len(set(alpha.values())) > 1
    run_data = mlflow_client(runs_dir).get_run(result.run_id).data
    for g in GROUPS:
        assert run_data.metrics[f"mols/alpha/{g}"] == pytest.approx(alpha[g])
        assert run_data.metrics[f"mols/snr/{g}"] == pytest.approx(probe.mols.snr[g])
    assert run_data.tags["mols.estimator"] == "per_coord" and run_data.tags["fidelity.mols.ramp"] == "assumed"
    assert sorted(probe.lrs) == list(range(STEPS))
    for step, groups in probe.lrs.items():
        for name, (lr, scale, wd) in groups.items():
            family = name.split(".")[0]
            factor = ramp(step, AT, WARMUP, alpha[family], "linear") if family in alpha else 1.0
            assert scale == pytest.approx(factor, rel=1e-12)
            assert lr == pytest.approx(3e-3 * warmup_cosine(step, STEPS, WARMUP, 0.1) * factor, rel=1e-9)
            # decay_follows_lr=false: lr x wd is what it would be without MoLS
            assert wd * factor == pytest.approx(0.1 if "no_decay" not in name else 0.0)
    assert probe.lrs[AT]["qk"][1] == 1.0 and probe.lrs[STEPS - 1]["qk"][1] == pytest.approx(alpha["qk"])


def test_resume_mid_ramp_and_after_it_reproduces_the_run(reference, tmp_path):
    _, _, ref = reference
    parts, run_id = [], None
    for stop in (5, 11, None):  # 5: mid-ramp (2..8); 11: after the ramp; None: to the end
        extra = [*EXTRA, f"trainer.stop_after_steps={stop}" if stop else "trainer.stop_after_steps=null"]
        if run_id:
            extra.append(f"resume={run_id}")
        probe = MoLSProbe(estimate_step=AT)
        cfg = compose_run_config(overrides(tmp_path, *MOLS, *extra))
        result = run(cfg, extra_callbacks=[probe])
        assert result.status == ("KILLED" if stop else "FINISHED")
        run_id = run_id or result.run_id
        assert result.run_id == run_id
        parts.append(probe)
    first, second, last = parts
    assert first.mols.alpha == ref.mols.alpha  # estimated in part 1 on the same data and weights
    for later in (second, last):  # restored from the checkpoint, not re-estimated
        assert (
            later.mols.alpha == ref.mols.alpha and later.mols.estimate_seconds == first.mols.estimate_seconds
        )
    merged = {**first.lrs, **second.lrs, **last.lrs}
    assert sorted(merged) == list(range(STEPS))
    assert set(second.lrs) == set(range(5, 11)) and set(last.lrs) == set(range(11, STEPS))
    for step in range(STEPS):
        assert merged[step].keys() == ref.lrs[step].keys()
        for name, values in ref.lrs[step].items():
            assert merged[step][name] == pytest.approx(values, rel=1e-12), (step, name)
    assert same(last.final_weights, ref.final_weights)
