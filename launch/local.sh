#!/usr/bin/env bash
# Train a config on this machine with the project's virtual environment.
#
#   launch/local.sh configs/occlusion.py:tiny /tmp/run [--config.total_steps=100 ...]
#
# Extra arguments go to `python -m relations.train` unchanged.
set -euo pipefail
usage() {
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
}
if [[ $# -lt 2 || "$1" == "-h" || "$1" == "--help" ]]; then usage; exit $(( $# < 2 ? 2 : 0 )); fi
config=$1; workdir=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
py="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$py" ]] || py=python3
cd "$root"
exec "$py" -m relations.train --config "$config" --workdir "$workdir" "$@"
