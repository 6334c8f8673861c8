# Every target sets itself up from a fresh clone: it creates .venv and installs
# the project (editable, with its dev tools) when they are missing or stale.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test lint typecheck pytest docs docs-serve demo bench bench-api bench-peers clean \
	system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples docs/gen
	$(BIN)/ruff format --check src tests bench examples docs/gen

typecheck: $(STAMP)
	$(BIN)/mypy

# Debian packages some tests drive, as command:package: libfaketime (a worker with a
# skewed clock), chromium (the dashboard test, through Playwright), strace (the SQLite
# durability test counts fsyncs), iproute2's ip and bridge (test hosts in network
# namespaces), patroni and etcd (the failover tests' highly available PostgreSQL) and
# pgbouncer (the store behind a transaction pooler), and graphviz's dot (make docs draws the
# state machine with it). Installed when missing and apt-get is usable; the tests fail with
# a message naming the package otherwise.
SYSTEM_DEPS := faketime:faketime chromium:chromium strace:strace bridge:iproute2 \
	patroni:patroni etcd:etcd-server pgbouncer:pgbouncer dot:graphviz

system-deps:
	@missing=""; \
	for pair in $(SYSTEM_DEPS); do \
		command -v $${pair%%:*} >/dev/null || [ -x /usr/sbin/$${pair%%:*} ] || \
			missing="$$missing $${pair#*:}"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "installing$$missing"; \
		apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	else \
		echo "warning: install$$missing for the full test suite"; \
	fi

# The suite on PYTEST_WORKERS processes (pytest-xdist); tests marked with one
# xdist_group (a shared cluster, namespaced hosts) run in turn on one of them. Three on
# two cores: a third of the time two processes leave the cores idle (waiting on
# subprocesses, servers and fsync), and the third fills it.
PYTEST_WORKERS ?= 3

pytest: $(STAMP) system-deps
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup

test: lint typecheck docs pytest

# The documentation site, into site/: strict (a broken link or reference fails), with its
# reference pages and pictures generated from the code, and nothing fetched from the
# network (open site/index.html from disk). NO_MKDOCS_2_WARNING quiets the theme's banner.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

docs: $(STAMP) system-deps
	$(MKDOCS) build --strict --clean --site-dir site

# The site at http://127.0.0.1:8000, rebuilt on every change.
docs-serve: $(STAMP) system-deps
	$(MKDOCS) serve --strict --dev-addr 127.0.0.1:8000

# The service with the example jobs and an every-minute schedule, until Ctrl-C.
# (examples/lease_timeline.py shows the lease timeline on the store alone.)
demo: $(STAMP)
	$(BIN)/python examples/service_demo.py

bench: $(STAMP)
	$(BIN)/python bench/store_throughput.py

bench-api: $(STAMP)
	$(BIN)/python bench/api_throughput.py

# fencepost beside PgQueuer (PostgreSQL) and Huey (SQLite), each at its defaults. The
# peers are benchmark-only: each gets its own virtualenv under bench/peers/.venvs,
# rebuilt when its pinned requirements file changes; fencepost runs from .venv.
PEERS      := bench/peers
PEER_VENVS := $(PEERS)/.venvs

$(PEER_VENVS)/%/.installed: $(PEERS)/requirements-%.txt
	rm -rf $(PEER_VENVS)/$*
	$(PYTHON) -m venv $(PEER_VENVS)/$*
	$(PEER_VENVS)/$*/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	touch $@

bench-peers: $(STAMP) $(PEER_VENVS)/pgqueuer/.installed $(PEER_VENVS)/huey/.installed
	$(BIN)/python $(PEERS)/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis site
