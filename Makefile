# Two commands for a newcomer: `make run` and `make test` (each sets everything up first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-fast lint typecheck worker bench

$(STAMP): requirements.txt requirements-dev.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first: 2.13.0 is a CPU build on local disk; an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -r requirements.txt -r requirements-dev.txt
	# RapidOCR without its deps, or it pulls the GUI OpenCV over the headless one.
	$(BIN)/pip install -q --no-deps rapidocr-onnxruntime==1.4.4
	touch $(STAMP)

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
