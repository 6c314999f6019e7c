# Slipstream developer entry points.
#   make serve   - create .venv on first use, install, run a broker on 127.0.0.1:9092
#   make test    - same set-up plus the test peers, then ruff, mypy and the whole pytest suite
#   make bench-quick - every benchmark at smoke size (installs the bench extra)
# Every step is idempotent; stamp files make re-runs fast.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
TOOLS  := .tools
JAVA_JARS := $(TOOLS)/java/kafka-clients.jar
PYTEST_ARGS ?=

.PHONY: serve test venv install install-test install-bench peers java-peer kcat postgres chromium lint typecheck pytest bench-quick clean-tools

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

venv: $(BIN)/python

$(VENV)/.stamp-install: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[fast]'
	touch $@

$(VENV)/.stamp-install-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,fast,spark,postgres]'
	touch $@ $(VENV)/.stamp-install

$(VENV)/.stamp-install-bench: pyproject.toml $(VENV)/.stamp-install-test
	$(BIN)/pip install -q -e '.[test,fast,spark,postgres,bench]'
	touch $@

install: $(VENV)/.stamp-install
install-test: $(VENV)/.stamp-install-test
install-bench: $(VENV)/.stamp-install-bench

serve: install
	$(BIN)/slipstream serve

# --- test peers -------------------------------------------------------------
$(JAVA_JARS): scripts/setup_java_peer.sh | $(BIN)/python
	scripts/setup_java_peer.sh $(BIN)/pip $(TOOLS)/java
	touch $@

java-peer: $(JAVA_JARS)

kcat:
	@scripts/setup_kcat.sh

postgres:
	@scripts/setup_postgres.sh

# Debian's chromium for the web console's browser tests (Playwright drives it; no browser download).
chromium:
	@scripts/setup_chromium.sh

peers: java-peer kcat postgres chromium

# --- checks -------------------------------------------------------------------
lint: install-test
	$(BIN)/ruff check src tests bench

typecheck: install-test
	$(BIN)/mypy src bench

pytest: install-test peers
	$(BIN)/pytest -q $(PYTEST_ARGS)

test: install-test peers
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src bench
	$(BIN)/pytest -q $(PYTEST_ARGS)

# Every benchmark in its smoke size (a few minutes on 2 cores): the scripts run, the
# tables print. The figures in the README come from full runs (see each table's command).
bench-quick: install-bench
	$(BIN)/python bench/broker_throughput.py --quick
	$(BIN)/python bench/request_path.py --quick
	$(BIN)/python bench/request_latency.py --quick
	$(BIN)/python bench/startup.py --quick
	$(BIN)/python bench/client_throughput.py --quick
	$(BIN)/python bench/group_coordinator.py --quick
	$(BIN)/python bench/consumer_protocol.py --quick
	$(BIN)/python bench/spark_source.py --quick
	$(BIN)/python bench/simulate_groups.py --quick
	$(BIN)/python bench/metrics_overhead.py --quick
	$(BIN)/python bench/txn_consume.py --quick
	$(BIN)/python bench/txn_produce.py --quick
	$(BIN)/python bench/postgres_storage.py --quick
	$(BIN)/python bench/cluster.py --quick
	$(BIN)/python bench/security_throughput.py --quick
	$(BIN)/python bench/tls_receive.py --quick

clean-tools:
	rm -rf $(TOOLS)
