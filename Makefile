# Two commands for a newcomer: `make run` and `make test` (each sets everything up first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-fast lint typecheck worker bench

$(STAMP): requirements.txt requirements-dev.txt Makefile
	@echo "==> Installing Python packages into $(VENV) (first run: about 5 minutes and 2.5 GB of disk)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [1/4] pip itself"
	$(BIN)/pip install --progress-bar off --upgrade pip
	# torch first: 2.13.0 is a CPU build on local disk; an unpinned torch pulls a multi-GB CUDA build.
	@echo "==> [2/4] torch (CPU build, the largest download)"
	$(BIN)/pip install --progress-bar on torch==2.13.0
	@echo "==> [3/4] the workbench's requirements"
	$(BIN)/pip install --progress-bar off -r requirements.txt -r requirements-dev.txt
	# RapidOCR without its deps, or it pulls the GUI OpenCV over the headless one.
	@echo "==> [4/4] RapidOCR"
	$(BIN)/pip install --progress-bar off --no-deps rapidocr-onnxruntime==1.4.4
	touch $(STAMP)
	@echo "==> Packages installed"

install: $(STAMP)

run: install
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

worker: install
	$(BIN)/celery -A workbench worker -Q celery,gpu --loglevel INFO
