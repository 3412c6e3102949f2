"""Golden metric histories: a refactor guard in the spirit of a loss-comparison tool.

A few fixed-seed 30-step runs (the baseline and one per technique) are recorded once; a test then asks
today's code to reproduce every logged value exactly. Timing metrics are left out (they depend on load).

    python -m lit_modules.goldens record [--out tests/assets/goldens.json]   # what the code gives now
    python -m lit_modules.goldens check  [--against tests/assets/goldens.json]
    python -m lit_modules.goldens compare <commit A> <commit B>                # two commits, side by side

`compare` checks each commit out into a temporary git worktree, records there with this interpreter, and
prints the first step where any metric differs (or that the two commits train identically).
"""

from __future__ import annotations

import argparse
import json
import os
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
}
# Wall-clock metrics change with load; everything else a run logs is a function of the seed.
TIMING_SUFFIXES = ("_seconds",)


def _is_timing(key: str) -> bool:
    return metric_names.current_name(key) in metric_names.TIMING or key.endswith(TIMING_SUFFIXES)


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
    return {"overrides": [*COMMON, *CASES[name]], "metrics": metrics}


def record(names: list[str] | None = None) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    out = {}
    with tempfile.TemporaryDirectory(prefix="goldens-") as tmp:
        for name in names or list(CASES):
            out[name] = record_case(name, Path(tmp) / name)
    return out


def differences(expected: dict, actual: dict) -> list[str]:
    """One line per case and metric that differ: the first differing step and both values."""
    lines = []
    for case in sorted(set(expected) | set(actual)):
        if case not in actual or case not in expected:
            lines.append(f"{case}: only in {'the reference' if case in expected else 'the new record'}")
            continue
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
            step = min(s for s in steps_a if steps_a[s] != steps_b[s])
            lines.append(f"{case} {key}: first differs at step {step}: {steps_a[step]!r} vs {steps_b[step]!r}")
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
        lines = differences(json.loads(args.against.read_text()), record())
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
