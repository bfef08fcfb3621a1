# Two commands do all the set-up: `make matrix` and `make test`.
#
# By default a virtual environment in .venv gets the project, its CUDA 12 dependencies, the
# test packages and matplotlib for the reports' charts (the reports extra). On a machine that already has them and no internet (the H200
# image: cupy-cuda13x + nvidia-cudnn-cu13), skip the venv with
#     make test VENV=        (or make matrix VENV=)
# which uses $(SYSTEM_PYTHON) as it is and installs nothing.

VENV ?= .venv
EXTRA ?= cuda12
SYSTEM_PYTHON ?= python3
PYTEST_ARGS ?=
PROBE_ARGS ?=
BENCH_ARGS ?=
OVERHEAD_ARGS ?= --processes 3
TRAIN_ARGS ?=
PRECISION_ARGS ?=

ifeq ($(strip $(VENV)),)
PY := $(SYSTEM_PYTHON)
STAMP :=
else
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(EXTRA)
endif

export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: install test test-gpu matrix report bench example model precision rerender clean

install: $(STAMP)

$(VENV)/.installed-$(EXTRA): setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[$(EXTRA),test,reports]'
	touch $@

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# The GPU suite; on a machine without a usable GPU it fails in one line (tests/conftest.py).
# GPU_WORKERS processes share the GPU (pytest-xdist, a test file per process: the files'
# tests share what they tune; tests/conftest.py's SPREAD splits the long files into smaller
# groups), then the tests that assert a wall time or a speed-up (marker
# timing) run alone. GPU_WORKERS=0 runs everything in one process. The slowest tests are
# listed (the suite is meant to fit one 600 s call on the H200 with GPU_WORKERS=6).
GPU_WORKERS ?= 4
test-gpu: $(STAMP)
	$(PY) -m pytest -m "gpu and not timing" -n $(GPU_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS)
	$(PY) -m pytest -m "gpu and timing" $(PYTEST_ARGS)

# The support matrix of this machine: probes/default.toml in this machine's run folder
# (runs/<gpu>-cudnn<version>-<key>/default-<key>/; an interrupted run continues, a run
# recorded elsewhere is left alone), then the report of that run, written beside it.
# PROBE_ARGS=--overwrite starts this machine's run again.
matrix: $(STAMP)
	$(PY) -m cudnn_rnn.probe $(PROBE_ARGS) --report

# The benchmark (bench.md + bench.json in this machine's run folder under runs/), then the
# overhead check, which adds overhead.json beside it and refreshes bench.md.
bench: $(STAMP)
	$(PY) -m cudnn_rnn.bench $(BENCH_ARGS)
	$(PY) -m cudnn_rnn.overhead --save $(OVERHEAD_ARGS)

# The shipped character models (cudnn_rnn/data/charlm/): an LSTM and a GRU trained on this
# interpreter's standard library with cuDNN's training calls, their logs and text slices.
model: $(STAMP)
	$(PY) -m cudnn_rnn.train --out cudnn_rnn/data/charlm $(TRAIN_ARGS)

# The precision table of both shipped models, written into results/<gpu>/<cudnn>/
# (precision*.md/.json/.html: the committed tables; `python -m cudnn_rnn.precision` alone
# writes into this machine's run folder under runs/).
precision: $(STAMP)
	$(PY) -m cudnn_rnn.precision --out results $(PRECISION_ARGS)
	$(PY) -m cudnn_rnn.precision --model gru --out results $(PRECISION_ARGS)

example: $(STAMP)
	$(PY) -m cudnn_rnn.example 20 2 512 64 2

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
	@echo "(runs/ and reports/ hold this machine's runs and reports; remove them by hand)"

# The report of a probe run: make report RESULTS=<run folder or .jsonl> (into a folder of
# reports/ named after the run: two runs' reports never share one).
report: $(STAMP)
	@test -n "$(RESULTS)" || { echo "make report: name the run, e.g. make report RESULTS=results/nvidia-h200/9.19.0" >&2; exit 2; }
	$(PY) -m cudnn_rnn.report $(RESULTS)

# The committed reports under results/, rendered again from their committed records by the
# report renderers (no GPU; records are read, never written): the matrix reports, the
# benchmark reports and the precision tables, each with its chart. The README's chart is
# results/nvidia-h200/9.19.0/persistent/bench.png. The diffs under results/diff/ compare
# the H200's cuDNN 9.19.0 run (DIFF_A) with each of DIFF_B. The full product's report keeps
# its matrix.md only (its html and json, 75 MB, are not committed).
MATRIX_RESULTS := results/nvidia-h200/9.19.0 results/nvidia-h200/9.14.0 results/no-gpu/9.28.0 \
	results/nvidia-h200/9.19.0/full
DIFF_A := results/nvidia-h200/9.19.0
DIFF_B := results/nvidia-h200/9.14.0 results/no-gpu/9.28.0
BENCH_RESULTS := results/nvidia-h200/9.19.0 results/nvidia-h200/9.19.0/lowbit \
	results/nvidia-h200/9.19.0/persistent results/nvidia-h100-80gb-hbm3/9.19.0 \
	results/nvidia-h100-80gb-hbm3/9.19.0/persistent
rerender: $(STAMP)
	for d in $(MATRIX_RESULTS); do $(PY) -m cudnn_rnn.report $$d --out $$d \
		$$([ -f $$d/persistent/bench.jsonl ] && echo --eight-bit $$d/persistent) || exit 1; done
	for d in $(BENCH_RESULTS); do $(PY) -m cudnn_rnn.bench_report $$d --out $$d || exit 1; done
	for f in results/*/*/precision*.json; do $(PY) -m cudnn_rnn.precision --render $$f --out results || exit 1; done
	for b in $(DIFF_B); do $(PY) -m cudnn_rnn.report --diff $(DIFF_A) $$b --out results/diff || exit 1; done
