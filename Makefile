# kts — GPU time-slicing contention research kit.  `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY        ?= python3
VENV      ?= .venv
PYTHON    := $(VENV)/bin/python
STAMP     := $(VENV)/.kts-installed
# CPU machines get this CPU build of torch; a GPU host's own CUDA torch is reused (see README).
TORCH_CPU ?= torch==2.13.0
TORCH_CPU_INDEX ?=

PROFILE ?=
DEVICE  ?= auto
BACKEND ?= local
LABEL   ?=
RUN     ?=
SET     ?=
REPORT_DIR ?= report
IMAGE   ?= localhost/kts-worker:0.1
# Kubernetes settings reach the notebooks' kernel through the environment: with BACKEND=kubernetes, only
# those that are set (a local run uses none of them, so none is printed).
K8S_VARS := IMAGE K8S_CONTEXT K8S_NAMESPACE K8S_NODE_SELECTOR K8S_QUEUE K8S_RUNTIME_CLASS KTS_DCGM_URL \
            K8S_ALLOCATION_POLICY
K8S_ENV  = $(if $(filter kubernetes,$(BACKEND)),$(foreach v,$(K8S_VARS),$(if $($(v)),$(v)='$($(v))')))

RUN_ARGS    := $(if $(PROFILE),--profile $(PROFILE)) --device $(DEVICE) --backend $(BACKEND) \
               $(if $(LABEL),--label "$(LABEL)") $(foreach s,$(SET),--set '$(s)')
REPORT_ARGS := $(RUN_ARGS) $(if $(RUN),--run $(RUN)) --report-dir $(REPORT_DIR)
# The docs site (the report's Methods section links to its statistics page, built next to the report).
MKDOCS      := NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build -q -f mkdocs.yml
# JupyterLab refuses to run as root unless told; its kernels' sockets are CurveZMQ-encrypted.
LAB_ARGS    := $(if $(filter 0,$(shell id -u)),--allow-root) --KernelManager.transport_encryption=auto

.PHONY: help venv test test-all test-fast report run lab bench lint index image k8s-smoke probe teach docs plan summarize

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  \033[1m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo; echo "  variables: PROFILE=article|saturating|cpu-quick|probe|tiny DEVICE=auto|cpu|cuda RUN=<run dir>"
	@echo "             BACKEND=local|kubernetes LABEL=... SET='key=value ...' REPORT_DIR=$(REPORT_DIR) ARGS='...' (plan, summarize)"
	@echo "             IMAGE=$(IMAGE) K8S_CONTEXT K8S_NAMESPACE K8S_NODE_SELECTOR K8S_QUEUE K8S_RUNTIME_CLASS"
	@echo "             K8S_ALLOCATION_POLICY KTS_DCGM_URL (kubernetes); KTS_BROWSER=<chrome> (make test)"

# rfc3987-syntax (jupyter-events asks for jsonschema[format-nongpl]) is removed once installed: jsonschema imports it
# where present and it compiles a Lark grammar on import, 1.1 s of the 1.6 s every process that imports altair or
# nbformat spends (each report's kernels, papermill, nbconvert); the kit validates no "iri" format, pip check stays
# clean, and jsonschema skips that one format without it.
$(STAMP): pyproject.toml
	@set -e; \
	$(PY) -c 'import venv, ensurepip' 2>/dev/null || { \
	  echo "kts: $(PY) cannot create a virtual environment; install its venv module (Debian/Ubuntu: apt-get install python3-venv)" >&2; \
	  exit 1; }; \
	if [ ! -x $(PYTHON) ]; then \
	  if $(PY) -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then \
	    echo "kts: reusing this host's CUDA torch (venv with system site-packages)"; \
	    $(PY) -m venv --system-site-packages $(VENV); \
	  else $(PY) -m venv $(VENV); fi; \
	fi; \
	$(PYTHON) -m pip install -q --upgrade pip; \
	if ! $(PYTHON) -c 'import torch' 2>/dev/null; then \
	  echo "kts: installing $(TORCH_CPU) (CPU build)"; \
	  $(PYTHON) -m pip install -q $(TORCH_CPU) $(TORCH_CPU_INDEX); \
	fi; \
	$(PYTHON) -m pip install -q -e '.[dev,lab,docs]'; \
	$(PYTHON) -m pip uninstall -y -q rfc3987-syntax 2>/dev/null || true; \
	$(PYTHON) -m ipykernel install --sys-prefix --name kts --display-name "Python (kts)" >/dev/null; \
	touch $(STAMP)

venv: $(STAMP) ## create or update .venv from pyproject.toml (every target does this itself)

# pytest-xdist: TEST_WORKERS processes, each test file on one of them, so a module's fixture (a rendered report,
# an experiment run) is built once.
# PYTHONFAULTHANDLER: a crash, in a test or in the interpreter's exit after the last result (where pytest's own
# handler is off again), prints every thread's traceback.
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile
PYTEST := PYTHONFAULTHANDLER=1 $(PYTHON) -m pytest

test: $(STAMP) ## run the tests: unit, emulator, end-to-end notebooks, one full report per kind of reference run, offline browser and JupyterLab checks
	@KTS_BROWSER="$$($(PYTHON) tests/kts_browser.py --provision)" && export KTS_BROWSER && \
	  echo "kts: browser tests use $$KTS_BROWSER" && $(PYTEST) -q $(XDIST) --durations=25

test-all: $(STAMP) ## make test, every committed reference rendered in full and every validation run re-scored (run it when a reference is added)
	@KTS_BROWSER="$$($(PYTHON) tests/kts_browser.py --provision)" && export KTS_BROWSER && \
	  echo "kts: browser tests use $$KTS_BROWSER" && $(PYTEST) -q $(XDIST) --all-references

test-fast: $(STAMP) ## the tests without the slow end-to-end and browser ones
	$(PYTEST) -q $(XDIST) -m "not e2e and not browser"

report: $(STAMP) ## run setup -> baseline -> shared -> analysis with papermill and render report/<run>.html
	$(K8S_ENV) $(PYTHON) -m kts_helpers report $(REPORT_ARGS)
	@$(MKDOCS) -d $(abspath $(REPORT_DIR))/docs

docs: $(STAMP) ## regenerate the reference pages (parameters, CLI, modules) and build the documentation site into report/docs/: offline, search included
	$(PYTHON) -m kts_helpers.docref --write
	$(MKDOCS) -d $(abspath $(REPORT_DIR))/docs
	@echo "kts: open $(abspath $(REPORT_DIR))/docs/index.html"

run: $(STAMP) ## run the experiment without notebooks (data/runs/<run>/)
	$(K8S_ENV) $(PYTHON) -m kts_helpers run $(RUN_ARGS)

index: $(STAMP) ## rebuild report/index.html from the rendered reports
	$(PYTHON) -m kts_helpers index --report-dir $(REPORT_DIR)

lab: $(STAMP) ## start JupyterLab on notebooks/ with the project's kernel (charts draw offline)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_ARGS)

bench: $(STAMP) ## speed benchmarks (statistics vs scipy/arch, log parsing, kts plan), the intervals' coverage grid, the interim-looks design and the collided launches' test -> bench/results/
	@mkdir -p bench/results
	$(PYTHON) -m bench.bench_stats --out bench/results/stats.json
	$(PYTHON) -m bench.bench_timing --out bench/results/timing.json
	$(PYTHON) -m bench.bench_coverage --out bench/results/coverage.json
	$(PYTHON) -m bench.bench_plan --out bench/results/plan.json
	$(PYTHON) -m bench.bench_sequential --out bench/results/sequential.json
	$(PYTHON) -m bench.bench_collided --out bench/results/collided.json
	$(PYTHON) -m bench.bench_drift --out bench/results/drift.json

lint: $(STAMP) ## ruff
	$(VENV)/bin/ruff check kts_helpers workers tests bench

CONTAINER_ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)
image: ## build the worker image with podman or docker: make image IMAGE=registry/kts-worker:tag
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: neither podman nor docker found" >&2; exit 1; }
	$(CONTAINER_ENGINE) build -f workers/Containerfile -t $(IMAGE) $(IMAGE_BUILD_ARGS) workers/

k8s-smoke: $(STAMP) ## tiny experiment on the cluster of the current kubeconfig (IMAGE, K8S_CONTEXT, K8S_NAMESPACE, ...)
	IMAGE=$(IMAGE) $(PYTHON) -m kts_helpers.k8s_smoke $(if $(K8S_CONTEXT),--context $(K8S_CONTEXT)) \
	  $(if $(K8S_NAMESPACE),--namespace $(K8S_NAMESPACE)) $(if $(K8S_NODE_SELECTOR),--node-selector '$(K8S_NODE_SELECTOR)') \
	  $(if $(K8S_QUEUE),--queue $(K8S_QUEUE)) $(if $(K8S_RUNTIME_CLASS),--runtime-class $(K8S_RUNTIME_CLASS))

probe: $(STAMP) ## measure the GPU's time slice and switch cost (GPU only, ~3 min): make probe [RUN=<probe run> to re-read]
	$(PYTHON) -m kts_helpers probe $(if $(RUN),--run $(RUN)) $(if $(DEVICE),--device $(DEVICE))

# kts's other commands without activating .venv: make plan ARGS='--capacity --from-run <run> --slo fft=1.0'.
ARGS    ?=
plan: $(STAMP) ## kts plan with ARGS='...': predict sharing from alone runs, how many replicas meet every goal
	$(VENV)/bin/kts plan $(ARGS)

summarize: $(STAMP) ## kts summarize with ARGS='--baseline <logs> --shared <logs> [--ci]': any KTS_APP logs
	$(VENV)/bin/kts summarize $(ARGS)

teach: $(STAMP) ## render the teaching notebook (time-slicing, MPS, waiting; RUN=, PROBE=, SET=) -> report/teaching-timeslice.html
	$(PYTHON) -m kts_helpers teach $(if $(RUN),--run $(RUN)) $(if $(PROBE),--set 'probe_dir=$(PROBE)') \
	  $(foreach s,$(SET),--set '$(s)') --report-dir $(REPORT_DIR)
