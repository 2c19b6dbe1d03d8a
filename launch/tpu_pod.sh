#!/usr/bin/env bash
# Train on a Cloud TPU VM pod: create it, copy this checkout, install, run on every worker, tear down.
#
#   launch/tpu_pod.sh --name NAME --zone ZONE --type v4-32 --bucket gs://BUCKET/PATH \
#       --config configs/video_relations.py:paper [--version tpu-ubuntu2204-base] \
#       [--keep] [-- --config.total_steps=100000 ...]
#
# The work directory is BUCKET/PATH/workdir and the TFDS data directory BUCKET/PATH/tensorflow_datasets
# (prepare it once with `python -m relations.datasets.prepare`, see README). Every worker runs the
# same command with RELATIONS_JAX_INIT=1, so jax.distributed.initialize() discovers the pod itself.
# --keep leaves the pod running after training (default: delete it). --dry-run prints the commands.
set -euo pipefail
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
name="" zone="" type="" bucket="" config="" version="tpu-ubuntu2204-base" keep=0 dry=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) name=$2; shift 2;;
    --zone) zone=$2; shift 2;;
    --type) type=$2; shift 2;;
    --bucket) bucket=$2; shift 2;;
    --config) config=$2; shift 2;;
    --version) version=$2; shift 2;;
    --keep) keep=1; shift;;
    --dry-run) dry=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; extra=("$@"); break;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2;;
  esac
done
for v in name zone type bucket config; do
  [[ -n "${!v}" ]] || { echo "missing --$v" >&2; usage >&2; exit 2; }
done
run() { if (( dry )); then echo "+ $(printf '%q ' "$@")"; else "$@"; fi; }
root=$(cd "$(dirname "$0")/.." && pwd)
tarball=$(mktemp -u /tmp/relations-XXXX).tar.gz
run tar -C "$root" --exclude=.venv --exclude=.git -czf "$tarball" .
run gcloud compute tpus tpu-vm create "$name" --zone "$zone" --accelerator-type "$type" \
  --version "$version"
cleanup() { (( keep )) || run gcloud compute tpus tpu-vm delete "$name" --zone "$zone" --quiet; }
trap cleanup EXIT
run gcloud compute tpus tpu-vm scp "$tarball" "$name":~/relations.tar.gz --zone "$zone" --worker=all
remote="set -e; mkdir -p ~/relations && tar -xzf ~/relations.tar.gz -C ~/relations && cd ~/relations \
 && python3 -m venv .venv && .venv/bin/pip install -q -e '.[tpu]' \
 && RELATIONS_JAX_INIT=1 TFDS_DATA_DIR=$bucket/tensorflow_datasets .venv/bin/python -m relations.train \
 --config $config --workdir $bucket/workdir --config.data.data_dir=$bucket/tensorflow_datasets ${extra[*]:-}"
run gcloud compute tpus tpu-vm ssh "$name" --zone "$zone" --worker=all --command "$remote"
