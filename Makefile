# tidemq: `make test` and `make demo` set everything up on a fresh Debian machine with Python 3.11.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test check lint typecheck unit integration interop spark demo bench clean java-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,speed,spark]'
	touch $(STAMP)

venv: $(STAMP)

# Spark needs a JVM; say so clearly instead of failing deep inside py4j.
java-check:
	@command -v java >/dev/null 2>&1 || { echo "Java 17+ is required for the Spark connector tests: apt-get install -y openjdk-17-jre-headless"; exit 1; }
	@java -version 2>&1 | head -1

lint: venv
	$(VENV)/bin/ruff check tidemq tests bench

typecheck: venv
	$(VENV)/bin/mypy

check: lint typecheck

# No retries: a test that fails fails the run (a flaky test is fixed, not re-run).
test: venv java-check check
	$(VENV)/bin/pytest -q tests

unit: venv
	$(VENV)/bin/pytest -q tests/unit

integration: venv
	$(VENV)/bin/pytest -q tests/integration

interop: venv
	$(VENV)/bin/pytest -q tests/interop

demo: venv java-check
	$(VENV)/bin/tidemq pipeline flights

bench: venv
	$(PY) -m bench.broker_throughput

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
