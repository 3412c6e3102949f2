"""The one export module: a run's checkpoint -> its trained model -> every technique's `prepare_for_inference`
(PC merged, LoRA merged, ...) -> plain Linears, written in one of two formats.

    python -m lit_modules.export hf <run id | checkpoint> <folder> [--runs-dir runs]    # Hugging Face folder
    python -m lit_modules.export plain <run id | checkpoint> <out.pt> [--runs-dir runs] # {model_config, state_dict}

    source.py          which run a reference names, its recorded config and MLflow tags; the models it builds
    plain.py           the {model_config, state_dict} file and `load_merged`
    hf_model.py        config.json + model.safetensors that transformers loads as the same network
    tokenizer_files.py the run's tokenizer as tokenizer.json + tokenizer_config.json
    byte_tokenizer.py  the byte tokenizer (lit_modules.data.tokenization.ByteTokenizer) as a tokenizer.json
    peft_adapters.py   a LoRA / rsLoRA / PiSSA run's adapters in PEFT's format, with the base they apply to
    model_card.py      README.md: run, commit, data, techniques
    staging.py         write into a temporary folder, rename when complete

It sits above lit_modules.runs and lit_modules.build; techniques never import it.
"""
