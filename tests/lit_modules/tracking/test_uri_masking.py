"""No URL's password reaches MLflow params or tags, config artifacts or messages; credentials in a
tracking-server URL still let the store check reach the server."""

import http.server
import os
import threading
from pathlib import Path

import pytest

from tests.helpers.runs import mlflow_client
from lit_modules.tracking.run_lifecycle import open_run, set_tags
from lit_modules.runs.store_check import check_store
from lit_modules.runs.uri_masking import mask_password, mask_tree


@pytest.mark.parametrize("text, masked", [
    ("postgresql+psycopg://alice:s3cret@db:5432/optuna", "postgresql+psycopg://alice:***@db:5432/optuna"),
    ("http://alice:pa/ss:wd@127.0.0.1:5000", "http://alice:***@127.0.0.1:5000"),  # '/' and ':' in a password
    ("storage mysql://a:b@h/db and http://u:p@s", "storage mysql://a:***@h/db and http://u:***@s"),
    ("'postgresql://u:pw@h/db'", "'postgresql://u:***@h/db'"),
])
def test_every_password_in_a_text_is_masked(text: str, masked: str) -> None:
    assert mask_password(text) == masked


@pytest.mark.parametrize("text", ["postgresql://alice@db/optuna", "http://127.0.0.1:5000/x", "sqlite:////a/b.db",
                                  "lr=3e-3", "user@example.org"])
def test_text_without_a_password_is_unchanged(text: str) -> None:
    assert mask_password(text) == text


def test_a_config_tree_is_masked_leaf_by_leaf() -> None:
    tree = {"logger": {"tracking_uri": "http://u:pw@h"}, "seeds": [1, "mysql://a:b@c/d"], "lr": 0.1, "off": None}
    assert mask_tree(tree) == {"logger": {"tracking_uri": "http://u:***@h"}, "seeds": [1, "mysql://a:***@c/d"],
                               "lr": 0.1, "off": None}


def test_params_and_tags_of_a_run_never_hold_a_password(runs_dir: Path) -> None:
    runs_dir.mkdir(parents=True)
    client = mlflow_client(runs_dir)
    experiment = client.create_experiment("masking")
    run_id = open_run(client, experiment, "r", {"note": "from postgresql://u:s3cret@db/x"},
                      {"sweep.storage": "postgresql+psycopg://u:s3cret@db/optuna", "lr": "0.1"})
    set_tags(client, run_id, {"end_reason": "OperationalError: could not reach mysql://u:s3cret@db/x"})
    run = client.get_run(run_id)
    recorded = [*run.data.params.values(), *run.data.tags.values()]
    assert not any("s3cret" in value for value in recorded)
    assert run.data.params["sweep.storage"] == "postgresql+psycopg://u:***@db/optuna"
    assert run.data.params["lr"] == "0.1"


class _Health(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.seen.append(self.headers.get("Authorization", ""))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_store_check_reaches_a_server_whose_url_carries_credentials() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        check_store(f"http://alice:s3cret@127.0.0.1:{server.server_port}")  # urllib alone takes 'alice:...' for a host
    finally:
        thread.join(timeout=10)
        server.server_close()
    assert _Health.seen == ["Basic YWxpY2U6czNjcmV0"]  # alice:s3cret, as a header rather than in the host


def test_mlflow_prints_no_run_link_built_from_a_url_with_a_password(monkeypatch) -> None:
    from lit_modules.tracking.store import resolve_tracking_uri
    from lit_modules.runs.uri_masking import SUPPRESS_URL_PRINTING

    monkeypatch.delenv(SUPPRESS_URL_PRINTING, raising=False)
    assert resolve_tracking_uri("http://127.0.0.1:5000", "runs") == "http://127.0.0.1:5000"
    assert SUPPRESS_URL_PRINTING not in os.environ  # links without secrets are still printed
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://alice:s3cret@127.0.0.1:5000")
    assert resolve_tracking_uri(None, "runs") == "http://alice:s3cret@127.0.0.1:5000"
    assert os.environ[SUPPRESS_URL_PRINTING] == "true"
