"""Fixtures of the sweep drivers' tests."""

from pathlib import Path

import pytest

from tests.helpers.protocols import protocol_writer


@pytest.fixture
def protocol(tmp_path: Path, monkeypatch):
    """`protocol(text)`: conf/evidence/odd.yaml (in a folder of the test's own) from its text -> 'odd'."""
    return protocol_writer(tmp_path, monkeypatch)
