"""python -m lit_modules.export {hf,plain} <run id | checkpoint> <out> [--runs-dir runs]; see __init__.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from lit_modules.config.errors import ConfigError
from lit_modules.data import DataError


class _OneLineParser(argparse.ArgumentParser):
    """Bad arguments are one line (the house rule), not argparse's usage block followed by the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}; {' '.join(self.format_usage().split())}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog="python -m lit_modules.export",
                                     description="Export a run's merged model (every technique's inference form).")
    formats = parser.add_subparsers(dest="format", required=True)
    for name, out, what in (("hf", "folder", "a Hugging Face Llama folder (+ PEFT adapters for a LoRA run)"),
                            ("plain", "out", "{model_config, state_dict} for lit_modules.export.plain.load_merged")):
        verb = formats.add_parser(name, help=what)
        verb.add_argument("reference", help="an MLflow run id, a checkpoint file, or the folder holding last.ckpt")
        verb.add_argument(out, type=Path)
        verb.add_argument("--runs-dir", default="runs", help="the folder of the MLflow store a run id is looked up in")
    args = parser.parse_args(argv)
    try:
        if args.format == "hf":
            from lit_modules.export.hf_export import export_hf

            print(export_hf(args.reference, args.folder, args.runs_dir))
        else:
            from lit_modules.export.plain import export_plain

            print(export_plain(args.reference, args.out, args.runs_dir))
    except (ConfigError, DataError) as err:  # bad input, a damaged checkpoint, a model HF Llama cannot hold
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
