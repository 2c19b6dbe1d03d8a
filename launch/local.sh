#!/usr/bin/env bash
# Train a config on this machine with the project's virtual environment (see --help).
set -euo pipefail
usage() {
  cat <<'EOF'
Usage: launch/local.sh CONFIG WORKDIR [ARGS...]
  e.g. launch/local.sh configs/occlusion.py:tiny /tmp/run [--config.total_steps=100 ...]

Train CONFIG on this machine with the project's virtual environment (PYTHON overrides the
interpreter; default ./.venv/bin/python, else python3). ARGS go to `python -m relations.train`
unchanged.
EOF
}
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then usage; exit 0; fi
if [[ $# -lt 2 ]]; then usage >&2; exit 2; fi
config=$1; workdir=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
py="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$py" ]] || py=python3
cd "$root"
# Persistent XLA cache: a restart of the same config loads its compiled steps.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/relations/xla}"
exec "$py" -m relations.train --config "$config" --workdir "$workdir" "$@"
