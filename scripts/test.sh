#!/usr/bin/env bash
# Create/refresh .venv, install the package with its test extra (pinned by constraints.txt) and run
# the whole test suite (`--all`: the slow tier too; plain `pytest` runs only the fast tier, see
# tests/conftest.py). This is the README's second command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -c constraints.txt -e ".[test]"
# pyEdgeEval (the boundary-matcher oracle) is an sdist that compiles against the installed numpy
# and Cython, so it must build without isolation, after them.
.venv/bin/python -m pip install -q -c constraints.txt --no-build-isolation pyedgeeval==0.2.8
exec .venv/bin/python -m pytest --all "$@"
