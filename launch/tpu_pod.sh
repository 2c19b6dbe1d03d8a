#!/usr/bin/env bash
# Train on a Cloud TPU VM pod: create it, copy this checkout, install and train on every worker.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: launch/tpu_pod.sh --name NAME --zone ZONE --type TYPE --bucket gs://BUCKET/PATH \
           --config CONFIG [--version IMAGE] [--max-restarts N] [--poll SECONDS] [--keep]
           [--dry-run] [-- ARGS...]

Train CONFIG on a Cloud TPU VM pod: create the pod, copy this checkout to every worker, install
it, start `python -m relations.train` detached on all workers at once (worker logs are copied to
URL/logs/), wait for it, and delete the pod once URL/workdir/train_summary.json and the final
step's checkpoint are confirmed in the bucket. A run that ends without that (preempted, killed,
crashed) is started again and resumes from the bucket's last checkpoint, up to N times; a pod
that stops answering (a preempted TPU VM) is deleted and created again first. If the run still
is not confirmed, the pod is kept (nothing to lose in it, but its logs help) and the exit is 1.

  --name NAME      TPU VM name
  --zone ZONE      e.g. us-central2-b
  --type TYPE      accelerator type, e.g. v4-32
  --bucket URL     work directory URL/workdir; TFDS data directory URL/tensorflow_datasets
                   (prepare it once with `python -m relations.datasets.prepare`, see README)
  --config CONFIG  e.g. configs/video_relations.py:paper
  --version IMAGE  TPU VM software version (default by TPU generation: v2/v3/v4
                   tpu-ubuntu2204-base, v5e (v5litepod-N) v2-alpha-tpuv5-lite, v5p
                   v2-alpha-tpuv5, v6e v2-alpha-tpuv6e)
  --max-restarts N restarts after a run that ended unconfirmed (default 3)
  --poll SECONDS   how often to ask the workers whether training ended (default 60)
  --keep           leave the pod running afterwards (default: delete it once the run is
                   confirmed, or when setup fails before training started)
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

name="" zone="" type="" bucket="" config="" version="" keep=0 dry=0
max_restarts=3 poll=60
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-restarts|--poll)
      [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] ||
        { echo "tpu_pod.sh: $1 needs a whole number" >&2; exit 2; }
      if [[ "$1" == --poll ]]; then poll=$2; else max_restarts=$2; fi
      shift 2;;
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
# Each TPU generation boots its own runtime image (Cloud TPU docs, "TPU software versions").
if [[ -z "$version" ]]; then
  case "$type" in
    v2-*|v3-*|v4-*) version=tpu-ubuntu2204-base;;
    v5litepod-*|v5e-*) version=v2-alpha-tpuv5-lite;;
    v5p-*) version=v2-alpha-tpuv5;;
    v6e-*) version=v2-alpha-tpuv6e;;
    *) echo "tpu_pod.sh: no default image for --type $type; pass --version" >&2; exit 2;;
  esac
fi

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

# UV_PYTHON_INSTALL_MIRROR, when set here, tells uv on the workers where to get CPython from.
mirror=""
if [[ -n "${UV_PYTHON_INSTALL_MIRROR:-}" ]]; then
  mirror="UV_PYTHON_INSTALL_MIRROR=$(q "$UV_PYTHON_INSTALL_MIRROR") "
fi
# A fresh ~/relations each launch (no stale modules); the environment lives outside it and is
# reused when a kept pod is launched again.
setup="rm -rf ~/relations && mkdir -p ~/relations && tar -xzf ~/relations.tar.gz -C ~/relations \
&& ${mirror}bash ~/relations/launch/tpu_worker.sh setup"
provision() {
  run gcloud compute tpus tpu-vm create "$name" --zone "$zone" --accelerator-type "$type" \
    --version "$version"
  trap cleanup EXIT  # until training starts, a failure deletes the pod
  run gcloud compute tpus tpu-vm scp "$tarball" "$name":relations.tar.gz --zone "$zone" \
    --worker=all
  if ! on_workers 0 "$setup"; then
    echo "tpu_pod.sh: setting up worker 0 failed (its message is above); nothing was started on" \
      "the other workers." >&2
    return 1
  fi
  on_workers all "$setup"
}

provision || exit 1  # the EXIT trap deletes the pod: nothing ran on it yet
args=""
for a in ${extra[@]+"${extra[@]}"}; do args+=" $(q "$a")"; done
worker="bash ~/relations/launch/tpu_worker.sh"
start="$worker start --bucket $(q "$bucket") --config $(q "$config") --$args"
# From here the pod is deleted only once the bucket holds the finished run.
trap 'rm -f "$tarball"' EXIT
restarts=0
while :; do
  # Detached: the training outlives this ssh (and this machine's connection).
  on_workers all "$start"
  (( dry )) && break
  lost=0
  while :; do
    rc=0
    on_workers all "$worker finished" || rc=$?
    (( rc == 0 )) && break
    (( rc == 10 )) || { lost=1; break; }  # ssh failed: the pod is gone or not answering
    sleep "$poll"
  done
  if (( ! lost )) && on_workers 0 "$worker verify --bucket $(q "$bucket")"; then
    (( keep )) || run gcloud compute tpus tpu-vm delete "$name" --zone "$zone" --quiet
    echo "tpu_pod.sh: training confirmed in $bucket/workdir; worker logs in $bucket/logs/"
    exit 0
  fi
  if (( restarts >= max_restarts )); then
    echo "tpu_pod.sh: the run is not confirmed in $bucket after $restarts restart(s); the pod" \
      "$name is kept (worker logs in $bucket/logs/ and ~/relations-train.log)" >&2
    exit 1
  fi
  restarts=$((restarts + 1))
  echo "tpu_pod.sh: restart $restarts of $max_restarts: resuming from the last checkpoint in" \
    "$bucket/workdir" >&2
  if (( lost )); then
    run gcloud compute tpus tpu-vm delete "$name" --zone "$zone" --quiet || true
    provision || exit 1
    trap 'rm -f "$tarball"' EXIT
  fi
done
# --dry-run: the commands after the start.
run gcloud compute tpus tpu-vm ssh "$name" --zone "$zone" --worker=all --command "$worker finished"
run gcloud compute tpus tpu-vm ssh "$name" --zone "$zone" --worker=0 \
  --command "$worker verify --bucket $(q "$bucket")"
(( keep )) || run gcloud compute tpus tpu-vm delete "$name" --zone "$zone" --quiet
