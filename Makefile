# queuelog — `make serve` and `make test` do all the set-up on a fresh machine.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: serve test suite test-newest lint typecheck bench bench-smoke schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,otel]'
	touch $@

serve: $(STAMP)
	$(BIN)/queuelog serve

lint: $(STAMP)
	$(BIN)/ruff check queuelog tests bench
	$(BIN)/ruff format --check queuelog tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP)
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-chromium.sh
	$(MAKE) lint
	$(MAKE) -j2 typecheck suite

# The tests in two processes (pytest-xdist); `make test` type-checks meanwhile, as the
# suite mostly waits on its servers.
suite: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadgroup

# The fences and the fast path against the newest releases of what they bypass: when this
# fails or they switch off, their TESTED ranges need a look before users upgrade.
NEWEST = .venv-newest
test-newest:
	$(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install -q --upgrade pip
	$(NEWEST)/bin/python -m pip install -q -e '.[test]'
	$(NEWEST)/bin/python -m pip install -q --upgrade strawberry-graphql graphql-core uvicorn httptools
	bash scripts/ensure-postgres.sh
	$(NEWEST)/bin/pytest -q tests/security/test_unfenced.py tests/security/test_slow_clients.py \
		tests/security/test_websocket.py tests/prepared/test_switch.py tests/prepared/test_compat_fallbacks.py

bench: $(STAMP)
	bash scripts/ensure-postgres.sh
	$(BIN)/python -m bench

schema: $(STAMP)
	$(BIN)/queuelog export-schema > schema.graphql

clean:
	rm -rf $(VENV) $(NEWEST) .pytest_cache .mypy_cache .ruff_cache
