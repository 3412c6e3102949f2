"""repro: the config hash (a run's identity), package versions, hardware and the written record (git_state: test_git_state.py)."""

import json
import platform
from importlib import metadata
from pathlib import Path

import torch

from lit_modules.tracking import repro


def test_config_hash_is_a_known_16_hex_digest_whatever_the_key_order() -> None:
    # sha256 of '{"a": 1, "b": {"c": [1, 2], "d": null}}', first 16 hex digits: a changed encoding would rename
    # every recorded run's identity, and finished ablation cells would be rerun instead of skipped.
    assert repro.config_hash({"a": 1, "b": {"c": [1, 2], "d": None}}) == "e8c0ad1b2625f221"
    assert repro.config_hash({"b": {"d": None, "c": [1, 2]}, "a": 1}) == "e8c0ad1b2625f221"
    assert repro.config_hash({"a": 2, "b": {"c": [1, 2], "d": None}}) != "e8c0ad1b2625f221"


def test_config_hash_reads_a_value_json_lacks_as_its_string() -> None:
    assert repro.config_hash({"data": Path("/data/x")}) == repro.config_hash({"data": "/data/x"})


def test_package_versions_name_every_package_and_absent_for_a_missing_one(monkeypatch) -> None:
    assert list(repro.package_versions()) == list(repro.PACKAGES)
    monkeypatch.setattr(repro, "PACKAGES", ("torch", "no-such-package-for-this-test"))
    assert repro.package_versions() == {"torch": metadata.version("torch"), "no-such-package-for-this-test": "absent"}


def test_hardware_on_a_cpu_machine_has_no_gpu_fields(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 5)
    assert repro.hardware() == {"platform": platform.platform(), "python": platform.python_version(),
                                "cpu_threads": "5", "cuda": "none"}


def test_hardware_on_a_gpu_machine_names_the_first_gpu_and_the_count(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"GPU {index}")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    info = repro.hardware()
    assert (info["cuda"], info["gpu"], info["gpu_count"]) == ("12.4", "GPU 0", "2")


def test_write_record_writes_sorted_indented_json_and_returns_the_path(tmp_path) -> None:
    path = tmp_path / "reproducibility.json"
    assert repro.write_record(path, {"b": 1, "a": {"where": Path("/x")}}) == path
    assert path.read_text() == '{\n  "a": {\n    "where": "/x"\n  },\n  "b": 1\n}'
    assert json.loads(path.read_text()) == {"a": {"where": "/x"}, "b": 1}
