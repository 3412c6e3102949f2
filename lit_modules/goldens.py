"""Golden metric histories: a refactor guard in the spirit of a loss-comparison tool.

A few fixed-seed 30-step runs (the baseline and one per technique) are recorded once; a test then asks
today's code to reproduce every logged value exactly. Timing metrics are left out (they depend on load).

Exactness holds on one kind of CPU: the float32 and bfloat16 kernels torch picks (AVX2, AVX-512, AMX) sum
in different orders, so each record names the machine it was made on. On that machine the check is exact;
on another it is a tolerance check (FOREIGN_RTOL), and a case whose history is chaotic in those last bits
(FOREIGN_STEPS) is compared only over its first steps there.

    python -m lit_modules.goldens record [--out tests/assets/goldens.json]   # what the code gives now
    python -m lit_modules.goldens check  [--against tests/assets/goldens.json]
    python -m lit_modules.goldens compare <commit A> <commit B>                # two commits, side by side

`compare` checks each commit out into a temporary git worktree, records there with this interpreter, and
prints the first step where any metric differs (or that the two commits train identically).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from lit_modules.runs import metric_names

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILE = REPO / "tests" / "assets" / "goldens.json"

# One thread: the histories must not depend on how many cores the machine has.
COMMON = [
    "regime=steps", "trainer.max_steps=30", "trainer.val_every_n_steps=10", "trainer.log_every_n_steps=1",
    "data.seq_len=64", "data.batch_size=8", "data.val_batches=4", "trainer.num_threads=1", "seed=7",
]
CASES: dict[str, list[str]] = {
    "baseline": [],
    "pc_level4": ["pc_layer=level4"],
    "pc_level2_muon": ["pc_layer=level2", "optim=muon"],
    "wisca_qk_vo_tensor": ["wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=10"],
    "wisca_channel_rescale": ["wisca=qk_channel_vo_tensor", "techniques.wisca.every_n_steps=10",
                              "techniques.wisca.opt_state=rescale"],
    "mols_snr": ["mols=snr", "techniques.mols.estimate_step=2", "schedule.warmup_steps=6"],
    "small_init_eps_gate": ["init=small", "model.norm_eps=1e-12", "model.attn_gate=elementwise"],
    # Two micro-batches per step and a clip that engages on every step (the pre-clip norm is ~0.5-3).
    "accumulate_clip": ["trainer.accumulate_grad_batches=2", "optim.grad_clip=0.05"],
}
# On a CPU other than the recording one: float32 reordering drifts <= 5.3e-6 relative over the 30 steps
# (measured: AVX2-era record vs an AVX-512/AMX machine), so 1e-4 still catches any change of the math.
FOREIGN_RTOL = 1e-4
# torch's Muon runs Newton-Schulz in bfloat16, whose kernels differ by CPU: its history departs by 9.4e-5 at
# step 1 and by percents after step 8 on another CPU, so there its first two steps are compared, within 1e-3.
FOREIGN_STEPS = {"pc_level2_muon": (2, 1e-3)}
# CPU flags that choose torch's kernels; a record made under the same set is reproduced bit for bit.
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "asimd", "sve")

# Wall-clock metrics change with load; everything else a run logs is a function of the seed.
TIMING_SUFFIXES = ("_seconds",)


def _is_timing(key: str) -> bool:
    return metric_names.current_name(key) in metric_names.TIMING or key.endswith(TIMING_SUFFIXES)


def machine() -> str:
    """The torch build and CPU features that decide the kernels, e.g. '2.13.0+cpu AVX512 x86_64 amx_bf16+...'."""
    import torch

    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                break
    kernel_flags = "+".join(f for f in KERNEL_FLAGS if f in flags) or "unknown-flags"
    return f"{torch.__version__} {torch.backends.cpu.get_cpu_capability()} {platform.machine()} {kernel_flags}"


def record_case(name: str, runs_dir: Path) -> dict:
    from mlflow.tracking import MlflowClient

    from lit_modules.train import run
    from lit_modules.config.composition import compose_run_config

    overrides = [*COMMON, *CASES[name], f"runs_dir={runs_dir}"]
    result = run(compose_run_config(overrides))
    if result.status != "FINISHED":
        raise RuntimeError(f"golden case {name} ended {result.status}")
    client = MlflowClient(f"sqlite:///{runs_dir.resolve() / 'mlflow.db'}")
    keys = sorted(k for k in client.get_run(result.run_id).data.metrics if not _is_timing(k))
    metrics = {k: sorted([m.step, m.value] for m in client.get_metric_history(result.run_id, k)) for k in keys}
    return {"overrides": [*COMMON, *CASES[name]], "machine": machine(), "metrics": metrics}


def record(names: list[str] | None = None) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    out = {}
    with tempfile.TemporaryDirectory(prefix="goldens-") as tmp:
        for name in names or list(CASES):
            out[name] = record_case(name, Path(tmp) / name)
    return out


def _same(a: float, b: float, rtol: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= rtol * max(abs(a), abs(b))


def differences(expected: dict, actual: dict) -> list[str]:
    """One line per case and metric that differ: the first differing step and both values.

    Exact where both records name the same machine; otherwise within FOREIGN_RTOL, over FOREIGN_STEPS."""
    lines = []
    for case in sorted(set(expected) | set(actual)):
        if case not in actual or case not in expected:
            lines.append(f"{case}: only in {'the reference' if case in expected else 'the new record'}")
            continue
        same_machine = expected[case].get("machine") == actual[case].get("machine")
        steps, rtol = (math.inf, 0.0) if same_machine else FOREIGN_STEPS.get(case, (math.inf, FOREIGN_RTOL))
        # A commit from before a metric was renamed is compared under today's name.
        a, b = ({metric_names.current_name(k): v for k, v in record[case]["metrics"].items()}
                for record in (expected, actual))
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                lines.append(f"{case} {key}: only in {'the reference' if key in a else 'the new record'}")
                continue
            if a[key] == b[key]:
                continue
            steps_a, steps_b = dict(map(tuple, a[key])), dict(map(tuple, b[key]))
            if steps_a.keys() != steps_b.keys():
                lines.append(f"{case} {key}: logged at different steps")
                continue
            differing = [s for s in steps_a if s < steps and not _same(steps_a[s], steps_b[s], rtol)]
            if differing:
                step = min(differing)
                where = "" if same_machine else f" (beyond {rtol:g} relative; recorded on another machine)"
                lines.append(f"{case} {key}: first differs at step {step}: {steps_a[step]!r} vs {steps_b[step]!r}"
                             f"{where}")
    return lines


def _record_at_commit(commit: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="goldens-wt-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), commit], check=True,
                       capture_output=True)
        try:
            # The worktree's own code (cwd first on sys.path) with this environment's packages and data cache.
            env = {**os.environ, "PYTHONPATH": str(tree)}
            data_cache = REPO / "data" / "cache"
            if data_cache.is_dir():
                (tree / "data").mkdir(exist_ok=True)
                (tree / "data" / "cache").symlink_to(data_cache)
            subprocess.run([sys.executable, "-m", "lit_modules.goldens", "record", "--out", str(out)],
                           cwd=tree, env=env, check=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_modules.goldens", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    rec = sub.add_parser("record", help="run the golden cases and write their histories")
    rec.add_argument("--out", type=Path, default=DEFAULT_FILE)
    chk = sub.add_parser("check", help="run the golden cases and compare with the recorded histories")
    chk.add_argument("--against", type=Path, default=DEFAULT_FILE)
    cmp_ = sub.add_parser("compare", help="record at two commits and compare")
    cmp_.add_argument("a")
    cmp_.add_argument("b")
    args = parser.parse_args(argv)
    from lit_modules.quiet import quiet_libraries

    quiet_libraries()  # seven fits' banners would bury the one line of the answer

    if args.verb == "record":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(CASES)} golden cases in {args.out}")
        return 0
    if args.verb == "check":
        if not args.against.is_file():
            print(f"error: no golden record at {args.against}; make one with 'record'.", file=sys.stderr)
            return 2
        reference = json.loads(args.against.read_text())
        lines = differences(reference, record())
        recorded_on = {case.get("machine") for case in reference.values()}
        if not lines and recorded_on != {machine()}:
            print(f"within {FOREIGN_RTOL:g} relative: recorded on {', '.join(map(str, recorded_on))}, "
                  f"this machine is {machine()}")
            return 0
    else:
        with tempfile.TemporaryDirectory(prefix="goldens-cmp-") as tmp:
            paths = [Path(tmp) / "a.json", Path(tmp) / "b.json"]
            for commit, path in zip((args.a, args.b), paths):
                _record_at_commit(commit, path)
            lines = differences(*(json.loads(p.read_text()) for p in paths))
    print("\n".join(lines) if lines else "identical: every golden metric history matches exactly")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
