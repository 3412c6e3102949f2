"""A reproducibility record for every run: code version, packages, hardware, data fingerprint."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = ("torch", "lightning", "hydra-core", "optuna", "mlflow", "lm-eval", "pandas", "numpy", "tokenizers")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


# Outputs the platform itself writes into the tree: the evidence ledger's exported reports make a
# later run no less reproducible, so they do not count as uncommitted changes.
OUTPUT_PATHS = ("results",)


def git_state() -> dict:
    outputs = [f":(top,exclude){path}" for path in OUTPUT_PATHS]
    commit = _git("rev-parse", "HEAD")
    diff = _git("diff", "HEAD", "--", ":/", *outputs)
    status = _git("status", "--porcelain", "--", ":/", *outputs)  # untracked source files count too
    return {
        "commit": commit.strip() if commit else "unknown",
        "dirty": bool(status and status.strip()),
        "diff": (diff or "") + ("\n# git status --porcelain\n" + status if status else ""),
    }


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def hardware() -> dict[str, str]:
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_threads": str(torch.get_num_threads()),
        "cuda": torch.version.cuda or "none",
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = str(torch.cuda.device_count())
    return info


def config_hash(identity: dict) -> str:
    """Stable across key order: the run's identity for skipping finished ablation cells."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def write_record(path: Path, record: dict) -> Path:
    path.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
    return path
