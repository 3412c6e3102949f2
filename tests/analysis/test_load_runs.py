"""Loading a real (tiny, hand-made) MLflow store into frames, name resolution, and the history cache."""

import time

import pandas as pd
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from analysis.load_runs import RunNotFound, RunStore, load_curves, load_runs
from lit_modules.tracking.run_lifecycle import open_run
from lit_modules.tracking.store import get_or_create_experiment, tracking_uri


class CountingClient:
    """An MlflowClient that counts metric-history queries (what the cache must avoid)."""

    def __init__(self, client: MlflowClient):
        self._client = client
        self.history_calls = 0

    def get_metric_history(self, run_id, key):
        self.history_calls += 1
        return self._client.get_metric_history(run_id, key)

    def __getattr__(self, name):
        return getattr(self._client, name)


def log(client, run_id, key, points):
    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[Metric(key, float(v), now, int(s)) for s, v in points], synchronous=True)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("store")
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    exp = get_or_create_experiment(client, "default", str(runs_dir))
    old = open_run(client, exp, "ablate:toy", {"ablation.name": "toy", "ablation.role": "parent"}, {"arms": "a,b"})
    client.set_terminated(old, "FINISHED")
    time.sleep(0.01)
    parent = open_run(client, exp, "ablate:toy", {"ablation.name": "toy", "ablation.role": "parent"}, {"arms": "a,b"})
    sweep = open_run(client, exp, "sweep:st", {"sweep.study": "st", "sweep.role": "parent"}, {"sweep.metric": "val/loss"})
    ids = {}
    for arm, seed, status in (("a", "0", "FINISHED"), ("b", "0", "FINISHED"), ("b", "1", "RUNNING")):
        run_id = open_run(
            client, exp, None,
            {"seed": seed, "ablation.name": "toy", "ablation.arm": arm},
            {"budget.tokens_per_step": "100", "optim.lr": "0.01", "seed": seed},
            parent_run_id=parent,
        )
        log(client, run_id, "val/loss", [(9, 3.0), (19, 2.5), (29, 2.2 if arm == "a" else 2.1)])
        log(client, run_id, "diag/gmcn/all", [(0, 50.0), (29, 40.0)])
        log(client, run_id, "init/std/tok_emb.weight", [(0, 0.02)])
        if status != "RUNNING":
            client.set_terminated(run_id, status)
        ids[(arm, seed)] = run_id
    client.set_terminated(parent, "FINISHED")
    return runs_dir, {"parent": parent, "old": old, "sweep": sweep, **{f"{a}{s}": i for (a, s), i in ids.items()}}


def test_runs_frame_has_params_tags_and_final_metrics(store_dir):
    runs_dir, ids = store_dir
    store = RunStore(runs_dir, cache=False)
    frame = store.runs_frame(store.children(ids["parent"]))
    assert len(frame) == 3
    row = frame.set_index("run_id").loc[ids["a0"]]
    assert row["status"] == "FINISHED" and row["parent_run_id"] == ids["parent"]
    assert row["params.optim.lr"] == "0.01" and row["tags.seed"] == "0" and row["params.seed"] == "0"
    assert row["tags.ablation.arm"] == "a"
    assert row["metrics.val/loss"] == pytest.approx(2.2)  # the final (latest-step) value
    assert row["metrics.init/std/tok_emb.weight"] == pytest.approx(0.02)
    assert isinstance(row["start_time"], pd.Timestamp)


def test_curves_are_indexed_by_step_and_tokens_seen(store_dir):
    runs_dir, ids = store_dir
    store = RunStore(runs_dir, cache=False)
    frame = store.runs_frame(store.children(ids["parent"]))
    curves = store.curves(frame, keys=["val/loss"], prefixes=["diag/"])
    assert set(curves["key"]) == {"val/loss", "diag/gmcn/all"}
    a = curves[(curves["run_id"] == ids["a0"]) & (curves["key"] == "val/loss")].sort_values("step")
    assert a["step"].tolist() == [9, 19, 29]
    assert a["tokens_seen"].tolist() == [1000.0, 2000.0, 3000.0]  # (step + 1) x tokens per step
    assert a["value"].tolist() == pytest.approx([3.0, 2.5, 2.2])


def test_names_resolve_to_the_newest_parent(store_dir):
    runs_dir, ids = store_dir
    store = RunStore(runs_dir, cache=False)
    assert store.resolve("toy").info.run_id == ids["parent"]
    assert store.resolve("st").info.run_id == ids["sweep"]
    assert store.resolve(ids["old"]).info.run_id == ids["old"]
    with pytest.raises(RunNotFound):
        store.resolve("nothing_called_this")


def test_cache_hit_avoids_requerying_finished_runs_but_not_running_ones(store_dir):
    runs_dir, ids = store_dir
    first = CountingClient(MlflowClient(tracking_uri(None, str(runs_dir))))
    store = RunStore(runs_dir, client=first)
    frame = store.runs_frame(store.children(ids["parent"]))
    store.curves(frame, keys=["val/loss"], prefixes=["diag/"])
    assert first.history_calls == 6  # 3 runs x 2 metrics
    assert (runs_dir / "analysis_cache" / f"{ids['a0']}.pkl").is_file()

    again = CountingClient(MlflowClient(tracking_uri(None, str(runs_dir))))
    store = RunStore(runs_dir, client=again)  # a new process: only the files on disk
    frame = store.runs_frame(store.children(ids["parent"]))
    curves = store.curves(frame, keys=["val/loss"], prefixes=["diag/"])
    assert again.history_calls == 2  # only the RUNNING run is asked again
    assert len(curves) == 3 * 5


def test_a_value_logged_into_a_finished_run_later_is_noticed(store_dir):
    runs_dir, ids = store_dir
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    warm = RunStore(runs_dir, client=client)
    warm.curves(warm.runs_frame([client.get_run(ids["b0"])]), keys=["val/loss"])
    log(client, ids["b0"], "val/loss", [(39, 1.9)])  # e.g. an evaluation appended after the run ended
    counting = CountingClient(client)
    store = RunStore(runs_dir, client=counting)
    curves = store.curves(store.runs_frame([client.get_run(ids["b0"])]), keys=["val/loss"])
    assert counting.history_calls == 1
    assert curves.sort_values("step")["value"].iloc[-1] == pytest.approx(1.9)


def test_an_empty_selection_gives_empty_frames(store_dir):
    runs_dir, _ = store_dir
    store = RunStore(runs_dir, cache=False)
    frame = store.runs_frame([])
    assert frame.empty and "run_id" in frame.columns
    assert store.curves(frame, keys=["val/loss"]).empty


def test_module_level_loaders(store_dir):
    runs_dir, ids = store_dir
    children = load_runs("toy", runs_dir=runs_dir)
    assert set(children["run_id"]) == {ids["a0"], ids["b0"], ids["b1"]}
    everything = load_runs(experiment="default", runs_dir=runs_dir)
    assert {ids["parent"], ids["old"], ids["sweep"], ids["a0"]} <= set(everything["run_id"])
    curves = load_curves(children, keys=["val/loss"], runs_dir=runs_dir)
    assert set(curves["run_id"]) == set(children["run_id"])
    with pytest.raises(RunNotFound):
        load_runs(experiment="no_such_experiment", runs_dir=runs_dir)
