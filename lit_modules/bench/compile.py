"""Is `trainer.compile=true` worth it on this machine? Step time with and without torch.compile, the
compile time it costs, and whether a default preset run (the model's tpp20 budget) would earn it back.

The default stays eager whatever this says: compiled kernels round differently, so switching the default
would change every golden history and every committed result (a decision for people, not for a bench).
"""

from __future__ import annotations

from functools import partial

from lit_modules.bench.steps import lightning_step_timing
from lit_modules.bench.verdict import Ratio, alternate, per_repeat_ratios
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated

WORTH_IT_SPEEDUP = 1.2  # the bar for making compile a default


def compile_rows(models: list[str], steps: int, repeats: int) -> tuple[list[Ratio], list[dict]]:
    ratios, rows = [], []
    for model in models:
        base = [f"model={model}"]
        timings = alternate({"eager": partial(lightning_step_timing, base, steps),
                             "compiled": partial(lightning_step_timing, [*base, "trainer.compile=true"], steps)},
                            repeats)
        eager = [t for t, _ in timings["eager"]]
        compiled = [t for t, _ in timings["compiled"]]
        compile_s = [c - e for (_, c), (_, e) in zip(timings["compiled"], timings["eager"])]
        speedup = Ratio(f"compile_speedup_{model}", per_repeat_ratios(eager, compiled))
        ratios.append(speedup)
        default_steps = default_run_steps(model)
        saved = default_steps * (sorted(eager)[len(eager) // 2] - sorted(compiled)[len(compiled) // 2])
        # The first (cold) compile is what each cell pays: every cell is a fresh process. Later repeats in
        # this process reuse dynamo's and inductor's caches and cost ~0 s, so the median understated it.
        cost = max(compile_s)
        rows.append({"bench": "compile", "variant": model, "eager_s_per_step": eager, "compiled_s_per_step": compiled,
                     "compile_s": compile_s, "default_run_steps": default_steps, "saved_over_default_run_s": saved,
                     "worth_making_default": speedup.median >= WORTH_IT_SPEEDUP and cost < saved})
    return ratios, rows


def default_run_steps(model: str) -> int:
    """Optimizer steps of a default run of `model` (its preset budget), with the vocabulary filled in."""
    return validated(compose_run_config([f"model={model}"])).budget.steps
