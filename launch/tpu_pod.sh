#!/usr/bin/env bash
# Train on a Cloud TPU VM pod: create it, copy this checkout, install and train on every worker.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: launch/tpu_pod.sh --name NAME --zone ZONE --type TYPE --bucket gs://BUCKET/PATH \
           --config CONFIG [--version IMAGE] [--keep] [--dry-run] [-- ARGS...]

Train CONFIG on a Cloud TPU VM pod: create the pod, copy this checkout to every worker, install
it, run `python -m relations.train` on all workers at once, then delete the pod.

  --name NAME      TPU VM name
  --zone ZONE      e.g. us-central2-b
  --type TYPE      accelerator type, e.g. v4-32
  --bucket URL     work directory URL/workdir; TFDS data directory URL/tensorflow_datasets
                   (prepare it once with `python -m relations.datasets.prepare`, see README)
  --config CONFIG  e.g. configs/video_relations.py:paper
  --version IMAGE  TPU VM software version (default tpu-ubuntu2204-base)
  --keep           leave the pod running afterwards (default: delete it, also on failure)
  --dry-run        print the commands instead of running them
  -- ARGS          passed to relations.train unchanged, e.g. --config.total_steps=100000

Install (launch/tpu_worker.sh setup, on every worker): an environment in ~/.venvs/relations made
with the image's python3 when it is >= 3.11, else (tpu-ubuntu2204 images have 3.10) with a CPython
3.11 that uv (pinned, from PyPI) downloads; `pip install -c constraints.txt -e .[tpu,tf-cpu]`
installs into it, as scripts/demo.sh does. Worker 0 is
set up first: if its Python or its install is wrong the launch stops there with that worker's
message, before anything runs on the other workers. Every worker then trains with
RELATIONS_JAX_INIT=1, so jax.distributed.initialize() discovers the pod itself.
uv downloads CPython from python-build-standalone (GitHub); where the workers cannot reach it,
set UV_PYTHON_INSTALL_MIRROR when running this script and it is passed on to them.
EOF
}

name="" zone="" type="" bucket="" config="" version="tpu-ubuntu2204-base" keep=0 dry=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name|--zone|--type|--bucket|--config|--version)
      [[ $# -ge 2 ]] || { echo "tpu_pod.sh: $1 needs a value" >&2; exit 2; }
      declare "${1#--}=$2"; shift 2;;
    --keep) keep=1; shift;;
    --dry-run) dry=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; extra=("$@"); break;;
    *) echo "tpu_pod.sh: unknown argument $1 (see --help)" >&2; exit 2;;
  esac
done
for v in name zone type bucket config; do
  [[ -n "${!v}" ]] || { echo "tpu_pod.sh: missing --$v (see --help)" >&2; exit 2; }
done

run() { if (( dry )); then echo "+ $(printf '%q ' "$@")"; else "$@"; fi; }
# `gcloud ... ssh --command` hands its string to the worker's login shell (bash).
on_workers() {
  local worker=$1; shift
  run gcloud compute tpus tpu-vm ssh "$name" --zone "$zone" --worker="$worker" --command "$*"
}
q() { printf '%q' "$1"; }

root=$(cd "$(dirname "$0")/.." && pwd)
tarball=$(mktemp -u "${TMPDIR:-/tmp}/relations-XXXXXX").tar.gz
trap 'rm -f "$tarball"' EXIT
cleanup() {
  rm -f "$tarball"
  (( keep )) || run gcloud compute tpus tpu-vm delete "$name" --zone "$zone" --quiet
}

run tar -C "$root" --exclude=.venv --exclude=.git --exclude=__pycache__ --exclude=.ruff_cache \
  --exclude=.pytest_cache --exclude='*.egg-info' --exclude=./demo_out -czf "$tarball" .
run gcloud compute tpus tpu-vm create "$name" --zone "$zone" --accelerator-type "$type" \
  --version "$version"
trap cleanup EXIT
run gcloud compute tpus tpu-vm scp "$tarball" "$name":relations.tar.gz --zone "$zone" --worker=all

# A fresh ~/relations each launch (no stale modules); the environment lives outside it and is
# reused when a kept pod is launched again.
# UV_PYTHON_INSTALL_MIRROR, when set here, tells uv on the workers where to get CPython from.
mirror=""
if [[ -n "${UV_PYTHON_INSTALL_MIRROR:-}" ]]; then
  mirror="UV_PYTHON_INSTALL_MIRROR=$(q "$UV_PYTHON_INSTALL_MIRROR") "
fi
setup="rm -rf ~/relations && mkdir -p ~/relations && tar -xzf ~/relations.tar.gz -C ~/relations \
&& ${mirror}bash ~/relations/launch/tpu_worker.sh setup"
if ! on_workers 0 "$setup"; then
  echo "tpu_pod.sh: setting up worker 0 failed (its message is above); nothing was started on" \
    "the other workers." >&2
  exit 1
fi
on_workers all "$setup"
args=""
for a in ${extra[@]+"${extra[@]}"}; do args+=" $(q "$a")"; done
on_workers all "bash ~/relations/launch/tpu_worker.sh train --bucket $(q "$bucket")" \
  "--config $(q "$config") --$args"
