"""README.md of an exported folder: which run, at which commit, on which data, with which techniques."""

from __future__ import annotations

from lit_modules.export.source import ExportSource
from lit_modules.model.counting import count_parameters


def _technique_lines(recorded: dict) -> list[str]:
    lines = []
    for name, node in sorted((recorded.get("techniques") or {}).items()):
        if node is None:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in node.items() if not k.startswith("_"))
        lines.append(f"- `{name}`: {settings}" if settings else f"- `{name}`")
    return lines or ["- none (the baseline)"]


def model_card(source: ExportSource, model, step: int, tokenizer_note: str, with_adapters: bool) -> str:
    recorded, tags = source.recorded, source.tags
    data, m = recorded.get("data", {}), recorded.get("model", {})
    commit = tags.get("git_commit")
    commit = (f"`{commit}`" + (" (with uncommitted changes)" if tags.get("git_dirty") == "true" else "")
              if commit else "unknown (the run's MLflow record was not found)")
    corpus = data.get("hf_path") or data.get("name")
    names = [n for n, v in (recorded.get("techniques") or {}).items() if v is not None]
    total = count_parameters(model)["total"]
    lines = [
        "---",
        "library_name: transformers",
        "tags: [" + ", ".join(["llm-ablate", "llama", *names, *(["peft", "lora"] if with_adapters else [])]) + "]",
        "---",
        "",
        f"# {tags.get('mlflow.runName') or source.run_id}",
        "",
        "Exported by llm-ablate (`python -m lit_modules.export hf`) from a training run; every technique's "
        "inference form is merged into plain Llama weights, so `transformers.AutoModelForCausalLM` loads it as is.",
        "",
        "| | |",
        "| --- | --- |",
        f"| run | `{source.run_id}` ({source.checkpoint.path}) |",
        f"| commit | {commit} |",
        f"| data | {corpus} (source {data.get('source')}; fingerprint {tags.get('data_fingerprint', 'unknown')}) |",
        f"| tokenizer | {tokenizer_note} |",
        f"| model | {m.get('n_layers')} layers, d_model {m.get('d_model')}, {m.get('n_heads')} heads "
        f"({m.get('n_kv_heads') or m.get('n_heads')} key/value), d_ff {m.get('d_ff')}, vocab {m.get('vocab_size')}, "
        f"{total:,} parameters |",
        f"| trained | {step} optimizer steps, seed {recorded.get('seed')} |",
        "",
        "## Techniques",
        "",
        *_technique_lines(recorded),
        "",
    ]
    if with_adapters:
        lines += [
            "## Adapters (PEFT)",
            "",
            "`adapter/` holds the LoRA adapters alone and `adapter_base/` the frozen weights they apply to "
            "(for PiSSA the residual base); together they compute what this folder's merged model computes:",
            "",
            "```python",
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM",
            "base = AutoModelForCausalLM.from_pretrained('<this folder>/adapter_base')",
            "model = PeftModel.from_pretrained(base, '<this folder>/adapter')",
            "```",
            "",
        ]
    return "\n".join(lines)
