# Two commands for a new user: `make demo` and `make test`. Both build .venv on their own.
VENV := .venv
PY := $(VENV)/bin/python
PIP_FLAGS := --disable-pip-version-check --quiet

.PHONY: demo test lint bench golden clean

$(PY):
	@interp=$$(scripts/find-python.sh) || exit 1; \
	echo "creating $(VENV) with $$interp"; \
	"$$interp" -m venv $(VENV)
	@$(PY) -m pip install $(PIP_FLAGS) --upgrade pip

# python-a2a (an independent A2A implementation the tests run) goes in without its declared dependencies: its A2A
# server and client import none of the LLM SDKs it lists (langchain, openai, anthropic...); what they do import is
# in the dev extra
$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install $(PIP_FLAGS) -e '.[dev]'
	$(PY) -m pip install $(PIP_FLAGS) --no-deps 'python-a2a>=0.5.10,<0.6'
	@touch $@

demo: $(VENV)/.installed-dev
	$(VENV)/bin/converse-tap demo

test: $(VENV)/.installed-dev
	$(PY) -m pytest -q

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check converse_tap tests benchmarks scripts
	$(VENV)/bin/ruff format --check converse_tap tests benchmarks scripts
	$(VENV)/bin/mypy

golden: $(VENV)/.installed-dev
	$(PY) -m tests.golden.regenerate

bench: $(VENV)/.installed-dev
	@echo "see docs/performance.md for the benchmark commands"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
