"""The config files module is the one place that knows where conf/ is."""

from __future__ import annotations

import re

from lit_modules.config import files
from lit_modules.data import DataConfig
from tests.helpers.runs import REPO


def test_options_paths_and_loading_on_a_schema():
    assert files.CONF_DIR == REPO / "conf"
    assert "shakespeare" in files.options("data") and files.has_option("experiment", "evidence/wisca")
    assert files.options("no_such_group") == [] and not files.is_group("no_such_group")
    data = files.load_option("data", "shakespeare", DataConfig)
    assert data.name == "shakespeare" and "seq_len" in data
    assert files.missing_option_sentence("finetune", "nope", "fine-tuning recipe") == (
        f"There is no fine-tuning recipe 'nope' in conf/finetune/ (known: {', '.join(files.options('finetune'))}).")


def test_no_other_module_computes_the_conf_path():
    spelled = re.compile(r"""["']\.\./conf["']|/\s*["']conf["']""")
    found = [str(p.relative_to(REPO)) for package in ("lit_modules", "sweeps", "analysis")
             for p in (REPO / package).rglob("*.py") if spelled.search(p.read_text())]
    assert found == ["lit_modules/config/files.py"]
