# Two commands for a newcomer: `make run` and `make test` (each sets everything up first).
# `make run` installs only what serving needs (requirements.txt); `make test` (and lint, typecheck)
# adds the development tools on top (requirements-dev.txt: pytest, mypy, playwright, moto...).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.installed-stamp

.PHONY: install install-runtime install-dev run test test-fast lint typecheck worker bench

# What serving needs: the web server, the worker, the model libraries (the Dockerfile installs the same).
$(RUNTIME_STAMP): requirements.txt Makefile
	@echo "==> Installing the workbench's packages into $(VENV) (first run: about 2 minutes and 2.2 GB of disk)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [1/4] pip itself"
	$(BIN)/pip install --progress-bar off --upgrade pip
	# torch first: 2.13.0 is a CPU build on local disk; an unpinned torch pulls a multi-GB CUDA build.
	@echo "==> [2/4] torch (CPU build, the largest download)"
	$(BIN)/pip install --progress-bar on torch==2.13.0
	@echo "==> [3/4] the workbench's requirements"
	$(BIN)/pip install --progress-bar off -r requirements.txt
	# RapidOCR without its deps, or it pulls the GUI OpenCV over the headless one.
	@echo "==> [4/4] RapidOCR"
	$(BIN)/pip install --progress-bar off --no-deps rapidocr-onnxruntime==1.4.4
	touch $(RUNTIME_STAMP)
	@echo "==> Packages installed"

# The development tools on top, resolved together with the runtime requirements as before.
$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	@echo "==> Adding the development tools: tests, linters, type checker, browser driver (first time: about 40 s, 0.75 GB)"
	$(BIN)/pip install --progress-bar off -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)
	@echo "==> Development tools installed"

install-runtime: $(RUNTIME_STAMP)

install-dev: $(STAMP)

install: $(STAMP)

run: install-runtime
	scripts/run.sh

test: install
	scripts/test.sh

# Everything but the real browser, the real Celery worker and the tests marked slow (diffusers pipelines).
test-fast: install
	scripts/test.sh -m "not browser and not celery_worker and not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

worker: install-runtime
	$(BIN)/celery -A workbench worker -Q celery,gpu --loglevel INFO
