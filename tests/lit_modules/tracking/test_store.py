"""Two sweep processes started together on a fresh store: both work, sharing one study and one parent."""

import subprocess
import sys
from pathlib import Path

import optuna

from tests.helpers.runs import REPO, all_runs

FAST = ["trainer.max_steps=10", "trainer.val_every_n_steps=5", "data.seq_len=64", "data.batch_size=8",
        "data.val_batches=2"]

# Each process imports everything first and then waits at a barrier for the other, so both open the fresh
# MLflow and Optuna stores at the same moment (otherwise import-time jitter could serialize them by luck).
STARTER = """
import sys, time
from pathlib import Path
from sweeps.optuna_sweep import main
barrier, me, argv = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
(barrier / me).touch()
deadline = time.monotonic() + 300
while len(list(barrier.iterdir())) < 2 and time.monotonic() < deadline:
    time.sleep(0.002)
sys.exit(main(argv))
"""


def test_two_sweeps_started_together_on_a_fresh_store_both_work(runs_dir: Path, tmp_path: Path) -> None:
    args = ["sweep=lr_wd", f"sweep.runs_dir={runs_dir}", "sweep.study_name=t", "sweep.n_trials=2",
            "sweep.pruner.name=none", *FAST]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    logs = [tmp_path / f"sweep{i}.log" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, str(barrier), str(i), *args], cwd=REPO,
                              stdout=open(log, "w"), stderr=subprocess.STDOUT) for i, log in enumerate(logs)]
    codes = [proc.wait(timeout=600) for proc in procs]
    outputs = [log.read_text() for log in logs]
    assert codes == [0, 0], "\n---\n".join(out[-3000:] for out in outputs)
    assert not any("duplicate column" in out or "already exists" in out for out in outputs)
    study = optuna.load_study(study_name="t", storage=f"sqlite:///{runs_dir.resolve() / 'optuna.db'}")
    assert [t.state.name for t in study.trials].count("COMPLETE") >= 2
    parents = [r for r in all_runs(runs_dir) if r.data.tags.get("sweep.role") == "parent"]
    assert len(parents) == 1  # the second driver found the first one's parent
