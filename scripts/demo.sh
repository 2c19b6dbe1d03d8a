#!/usr/bin/env bash
# Create/refresh .venv, install the package (pinned by constraints.txt) and run the demo: every task
# end to end on synthetic data with its tiny config. This is the README's first command.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
# Quiet: no pip self-update notice or root-user warning among the demo's first lines.
.venv/bin/python -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -c constraints.txt -e ".[tf-cpu]"
exec .venv/bin/python -m relations.demo --workdir "${DEMO_DIR:-demo_out}" "$@"
