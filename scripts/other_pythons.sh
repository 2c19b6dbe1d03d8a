#!/usr/bin/env bash
# CI's second part (after scripts/test.sh): on Python 3.12 and 3.13, in fresh virtual environments,
# `pip install .[tf-cpu]` from pyproject.toml WITHOUT constraints.txt (the newest releases in our
# ranges) and the smoke set (scripts/smoke.py: every CLI's --help, each evaluator cold and warm,
# one tiny training step per task); then, on 3.12, `pip install .[tf-cpu]` into an environment
# that already has older in-range numpy, jax, jaxlib and flax must leave them in place (and the
# occlusion training step runs on them).
#
# Interpreters: $PYTHON312 / $PYTHON313 when set; else python3.12 / python3.13 on PATH (if it
# runs: pyenv's shims only run versions pyenv has selected); else pyenv's
# $(pyenv root)/versions/3.1X.*/bin/python3.1X; else `uv python find 3.1X`. A version that
# cannot be found fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/relations_pythons.XXXXXX")
trap 'rm -rf "$work"' EXIT

find_python() {  # VERSION -> path of a working interpreter, or nothing
  local v=$1 var="PYTHON${1//./}" p
  if [[ -n "${!var:-}" ]]; then echo "${!var}"; return; fi
  if p=$(command -v "python$v") && "$p" -c '' 2>/dev/null; then echo "$p"; return; fi
  if command -v pyenv >/dev/null; then
    for p in "$(pyenv root)"/versions/"$v".*/bin/"python$v"; do
      [[ -x "$p" ]] && { echo "$p"; return; }
    done
  fi
  if command -v uv >/dev/null && p=$(uv python find "$v" 2>/dev/null); then echo "$p"; return; fi
}

fresh_venv() {  # PYTHON DIR
  "$1" -m venv "$2"
  "$2/bin/python" -m pip install -q --upgrade pip
}

for v in 3.12 3.13; do
  py=$(find_python "$v")
  [[ -n "$py" ]] || { echo "other_pythons.sh: no Python $v found (set PYTHON${v//./})" >&2; exit 1; }
  echo "=== Python $v ($py): fresh venv, pip install .[tf-cpu] without constraints.txt"
  t0=$SECONDS
  fresh_venv "$py" "$work/$v"
  "$work/$v/bin/python" -m pip install -q "$repo[tf-cpu]"
  echo "install: $((SECONDS - t0)) s"
  "$work/$v/bin/python" -m pip freeze | grep -iE '^(numpy|jax|jaxlib|flax|tensorflow[-_a-z]*)==' | tr '\n' ' '
  echo
  "$work/$v/bin/python" scripts/smoke.py
done

echo "=== Python 3.12: pip install .[tf-cpu] keeps the in-range numpy/jax/jaxlib/flax already there"
py=$(find_python 3.12)
keep="numpy==2.3.5 jax==0.10.2 jaxlib==0.10.2 flax==0.12.8"  # in range; older than the newest
fresh_venv "$py" "$work/keep"
# shellcheck disable=SC2086
"$work/keep/bin/python" -m pip install -q $keep
"$work/keep/bin/python" -m pip install -q "$repo[tf-cpu]"
"$work/keep/bin/python" - $keep <<'PY'
import importlib.metadata as md
import sys

moved = [f"{n}: {v} -> {md.version(n)}" for n, v in (a.split("==") for a in sys.argv[1:])
         if md.version(n) != v]
print("kept: " + " ".join(sys.argv[1:]) if not moved else "REPLACED: " + "; ".join(moved))
sys.exit(1 if moved else 0)
PY
"$work/keep/bin/python" scripts/smoke.py --skip-eval --tasks occlusion
