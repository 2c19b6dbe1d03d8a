#!/usr/bin/env bash
# Create/refresh .venv, install the package with its test extra (pinned by constraints.txt) and run
# the whole test suite: the fast tier (plain `pytest`, see tests/conftest.py), then the slow tier
# (`pytest -m slow`); with arguments, `pytest --all ARGS`. This is the README's second command and
# what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -c constraints.txt -e ".[test]"
# pyEdgeEval (the boundary-matcher oracle) is an sdist that compiles against the installed numpy
# and Cython, so it must build without isolation, after them.
.venv/bin/python -m pip install -q -c constraints.txt --no-build-isolation pyedgeeval==0.2.8
if [[ $# -gt 0 ]]; then exec .venv/bin/python -m pytest --all "$@"; fi
# Both tiers, each timed, so every CI log gives the fast tier's and the full suite's wall time.
t0=$SECONDS
.venv/bin/python -m pytest
t1=$SECONDS
.venv/bin/python -m pytest -m slow
t2=$SECONDS
echo "test tiers: fast $((t1 - t0)) s, slow $((t2 - t1)) s, full suite $((t2 - t0)) s"
