"""`first_sentence_s_<case>`: wall seconds from starting a command to the first line it writes (stdout and
stderr together). The first four start `python -m lit_modules.train` (a composition refusal, a validation
refusal, `--help`, a dry run's first line; target about 2 s). The rest are refusals on the paths that used to
import the training stack first (Lightning alone is seconds of CPU), each within 3 s: resume of an unknown
run id, eval of an unknown task, an export of a run that is not there, a fine-tune whose base cannot be
found, and an HF folder whose weights file is cut short. Their inputs (a folder, a store that does not exist)
are made in a scratch folder, removed afterwards. Wall clock over repeats (a process start is what is
measured); the bench reports the median and its interval like every other row.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lit_modules.bench.verdict import Ratio, Target

REPO = Path(__file__).resolve().parents[2]
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]  # after the interpreter: "-m", the module, its words; {scratch} is the scratch folder
    target: Target

    def command(self, scratch: str = "<scratch>") -> list[str]:
        return [word.replace("{scratch}", scratch) for word in self.argv]


TRAIN_TARGET, REFUSAL_TARGET = Target("<=", 2.0), Target("<=", 3.0)
CASES = {
    "composition_refusal": Case(("-m", "lit_modules.train", "model=nonexistent"), TRAIN_TARGET),
    "validation_refusal": Case(("-m", "lit_modules.train", "optim.lr=-1"), TRAIN_TARGET),
    "help": Case(("-m", "lit_modules.train", "--help"), TRAIN_TARGET),
    "dry_run": Case(("-m", "lit_modules.train", "dry_run=true"), TRAIN_TARGET),
    "resume_unknown_id": Case(("-m", "lit_modules.train", f"resume={UNKNOWN_ID}", "runs_dir={scratch}/runs"),
                              REFUSAL_TARGET),
    "eval_unknown_task": Case(("-m", "lit_modules.evaluation.run_eval", f"run={UNKNOWN_ID}", "tasks=hellaswagg",
                               "runs_dir={scratch}/runs"), REFUSAL_TARGET),
    "export_unknown_run": Case(("-m", "lit_modules.export", "hf", UNKNOWN_ID, "{scratch}/export",
                                "--runs-dir", "{scratch}/runs"), REFUSAL_TARGET),
    "finetune_unknown_base": Case(("-m", "lit_modules.finetune", f"base_run={UNKNOWN_ID}", "runs_dir={scratch}/runs"),
                                  REFUSAL_TARGET),
    "hf_folder_cut_short": Case(("-m", "lit_modules.train", "init_from=hf:{scratch}/hf_cut_short",
                                 "runs_dir={scratch}/runs"), REFUSAL_TARGET),
}


def cut_short_hf_folder(folder: Path) -> Path:
    """A Hugging Face Llama folder whose model.safetensors header promises more bytes than the file has (a copy
    that stopped early): written byte by byte, no torch."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 259, "hidden_size": 32,
              "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4}
    (folder / "config.json").write_text(json.dumps(config))
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32", "shape": [259, 32],
                                                       "data_offsets": [0, 259 * 32 * 4]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(1000))
    return folder


def first_line_seconds(argv: list[str], cwd: Path = REPO) -> tuple[float, str]:
    """(seconds to the first line on stdout or stderr, that line) of one `python <argv>`."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    started = time.perf_counter()
    with subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        line = process.stdout.readline()
        seconds = time.perf_counter() - started
        process.stdout.read()  # drain, so the child never blocks on a full pipe
        process.wait()
    return seconds, line.rstrip("\n")


PROCESSES_PER_REPEAT = 3  # a process start is ~0.2-1.2 s: 10 of them gave a +-3-5% interval, 30 a narrower one


def first_sentence_rows(repeats: int, ratios: list[Ratio], rows: list[dict]) -> None:
    """One Ratio per case (`first_sentence_s_<case>`, wall seconds over PROCESSES_PER_REPEAT x `repeats`
    processes, the cases taking turns so a slow spell of the machine falls on all of them) and a row."""
    runs: dict[str, list[tuple[float, str]]] = {case: [] for case in CASES}
    scratch = Path(tempfile.mkdtemp(prefix="first-sentence-"))
    try:
        cut_short_hf_folder(scratch / "hf_cut_short")
        for _ in range(PROCESSES_PER_REPEAT * repeats):
            for case, spec in CASES.items():
                runs[case].append(first_line_seconds(spec.command(str(scratch))))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for case, spec in CASES.items():
        timed = runs[case]
        ratio = Ratio(f"first_sentence_s_{case}", tuple(s for s, _ in timed), clock="wall", target=spec.target)
        ratios.append(ratio)
        first_line = timed[0][1].replace(str(scratch), "<scratch>")
        rows.append({"bench": "first_sentence", "variant": case, "clock": "wall", "command":
                     " ".join(["python", *spec.command()]), "seconds": [s for s, _ in timed],
                     "first_line": first_line[:200], "median_s": ratio.median, "interval_95": ratio.interval})
