# Slipstream developer entry points.
#   make serve   - create .venv on first use, install, run a broker on 127.0.0.1:9092
#   make test    - same set-up plus the test peers, then ruff, mypy and the whole pytest suite
# Every step is idempotent; stamp files make re-runs fast.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TOOLS  := .tools
JAVA_JARS := $(TOOLS)/java/kafka-clients.jar
PYTEST_ARGS ?=

.PHONY: serve test venv install install-test peers java-peer kcat lint typecheck pytest clean-tools

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

venv: $(BIN)/python

$(VENV)/.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[fast]'
	touch $@

$(VENV)/.stamp-install-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,fast,spark]'
	touch $@ $(VENV)/.stamp-install

install: $(VENV)/.stamp-install
install-test: $(VENV)/.stamp-install-test

serve: install
	$(BIN)/slipstream serve

# --- test peers -------------------------------------------------------------
$(JAVA_JARS): scripts/setup_java_peer.sh | $(BIN)/python
	scripts/setup_java_peer.sh $(BIN)/pip $(TOOLS)/java
	touch $@

java-peer: $(JAVA_JARS)

kcat:
	@scripts/setup_kcat.sh

peers: java-peer kcat

# --- checks -------------------------------------------------------------------
lint: install-test
	$(BIN)/ruff check src tests

typecheck: install-test
	$(BIN)/mypy src

pytest: install-test peers
	$(BIN)/pytest -q $(PYTEST_ARGS)

test: install-test peers
	$(BIN)/ruff check src tests
	$(BIN)/mypy src
	$(BIN)/pytest -q $(PYTEST_ARGS)

clean-tools:
	rm -rf $(TOOLS)
