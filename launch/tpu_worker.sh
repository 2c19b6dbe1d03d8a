#!/usr/bin/env bash
# Runs on each Cloud TPU VM worker; launch/tpu_pod.sh starts it over `gcloud ... ssh`.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: bash ~/relations/launch/tpu_worker.sh setup
       bash ~/relations/launch/tpu_worker.sh train|start --bucket URL --config CONFIG [-- ARGS...]
       bash ~/relations/launch/tpu_worker.sh finished
       bash ~/relations/launch/tpu_worker.sh verify --bucket URL

Runs on one Cloud TPU VM worker, from the checkout that launch/tpu_pod.sh unpacked in ~/relations.

setup  Make the Python the package needs and install this checkout into ~/.venvs/relations
       (RELATIONS_VENV overrides the place):
         1. the image's python3 when it is 3.11 or newer: `python3 -m venv`; otherwise (the
            tpu-ubuntu2204 images have 3.10, or python3 lacks venv/ensurepip) uv from PyPI
            (`python3 -m pip install --user uv==<pinned>`);
         2. with uv: `uv venv --managed-python --python 3.11 --seed`, uv's own CPython 3.11 build
            (python-build-standalone, from GitHub or UV_PYTHON_INSTALL_MIRROR);
         3. `pip install -c constraints.txt -e .[tpu,tf-cpu]`, pinned as scripts/demo.sh installs;
         4. checks: Python >= 3.11, `relations` imports from ~/relations, every installed package
            that constraints.txt pins has the pinned version, and (on a machine with TPU device
            files) libtpu is installed.
       Any failure stops with a message that names this worker and the step.
train  `python -m relations.train` with RELATIONS_JAX_INIT=1 (jax.distributed discovers the pod),
       --workdir URL/workdir and the TFDS data directory URL/tensorflow_datasets. ARGS go to the
       trainer unchanged.
start  `train` in the background, in its own session (it outlives the ssh that started it), its
       output appended to ~/relations-train.log, copied to URL/logs/HOSTNAME.log every
       RELATIONS_LOG_SYNC_S seconds (default 60) and when it ends; its exit status then goes to
       ~/relations-train.rc and its session id is in ~/relations-train.pid.
finished
       exit 0 (printing the exit status) once the run that `start` began has ended, else 10.
verify --bucket URL
       exit 0 only if URL/workdir/train_summary.json says the run ended unpreempted and the
       checkpoint of its final step is in URL/workdir/checkpoints (read through etils.epath).
EOF
}

# uv is pinned so that every worker (and every launch) gets the same CPython 3.11 build
# (uv 0.13.9 asks for cpython-3.11.18, python-build-standalone release 20261110) when the image's
# python3 is older than the package's requires-python (>= 3.11).
UV_VERSION=0.13.9
PYTHON_VERSION=3.11
EXTRAS="tpu,tf-cpu"
src="$HOME/relations"
venv="${RELATIONS_VENV:-$HOME/.venvs/relations}"
host=$(hostname 2>/dev/null || echo worker)

die() { echo "tpu_worker.sh on $host: $*" >&2; exit 1; }

new_enough() {  # PYTHON: is it >= 3.11?
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}

python_ok() {
  [[ -x "$venv/bin/python" ]] && new_enough "$venv/bin/python"
}

# Step 1 with uv: installs the pinned uv (once) and makes a CPython $PYTHON_VERSION venv.
uv_venv() {
  local uv
  uv="$(python3 -c 'import site; print(site.getuserbase())')/bin/uv"  # where pip --user puts it
  if [[ ! -x "$uv" || "$("$uv" --version 2>/dev/null)" != "uv $UV_VERSION"* ]]; then
    python3 -m pip --version >/dev/null 2>&1 ||
      die "python3 has no pip to install uv with (sudo apt-get install -y python3-pip)"
    python3 -m pip install --user -q "uv==$UV_VERSION" ||
      die "step 1: could not install uv==$UV_VERSION from PyPI"
    [[ -x "$uv" ]] || die "step 1: pip installed uv but $uv does not exist"
  fi
  "$uv" venv --clear --seed --managed-python --python "$PYTHON_VERSION" "$venv" ||
    die "step 2: uv could not create a Python $PYTHON_VERSION environment at $venv"
}

setup() {
  [[ -f "$src/pyproject.toml" && -f "$src/constraints.txt" ]] ||
    die "$src is not a relations checkout (no pyproject.toml or constraints.txt)"
  cd "$src"
  command -v python3 >/dev/null || die "no python3 on PATH"
  if ! python_ok; then
    # The image's own Python when it is new enough (no download, no build); uv's otherwise.
    if ! { new_enough python3 && python3 -m venv --clear "$venv" && python_ok; }; then
      uv_venv
    fi
  fi
  python_ok || die "step 2: $venv/bin/python is not Python >= 3.11" \
    "($("$venv/bin/python" -V 2>&1 || echo missing))"
  "$venv/bin/python" -m pip install -q -c constraints.txt -e ".[$EXTRAS]" ||
    die "step 3: pip install -c constraints.txt -e .[$EXTRAS] failed (see pip's message above)"
  # TPU VMs have /dev/accel* (v2-v4) or /dev/vfio/N (v5e and later); only there is libtpu needed.
  local tpu=0
  if compgen -G "/dev/accel*" >/dev/null || compgen -G "/dev/vfio/[0-9]*" >/dev/null; then tpu=1; fi
  # From / so that `relations` must come from the installed environment, not the current directory.
  (cd / && "$venv/bin/python" - "$src" "$tpu" <<'EOF') ||
import importlib.metadata as md
import importlib.util
import os
import sys

src, tpu = sys.argv[1], sys.argv[2] == "1"
bad = []
if sys.version_info < (3, 11):
  bad.append(f"Python is {sys.version.split()[0]}, the package needs >= 3.11")
spec = importlib.util.find_spec("relations")
where = os.path.realpath(spec.origin) if spec and spec.origin else None
if where is None or not where.startswith(os.path.realpath(src) + os.sep):
  bad.append(f"`import relations` finds {where}, not the checkout in {src}")
with open(os.path.join(src, "constraints.txt")) as f:
  for line in f:
    line = line.split("#", 1)[0].strip()
    if "==" not in line:
      continue
    name, want = (s.strip() for s in line.split("==", 1))
    try:
      have = md.version(name)
    except md.PackageNotFoundError:
      continue  # not part of this install (e.g. the test extra)
    if have != want:
      bad.append(f"{name} {have} is installed, constraints.txt pins {want}")
for name in ("jax", "jaxlib") + (("libtpu",) if tpu else ()):
  try:
    md.version(name)
  except md.PackageNotFoundError:
    bad.append(f"{name} is not installed")
for b in bad:
  print("  " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
    die "step 4: the environment at $venv does not match constraints.txt (see above)"
  (( tpu )) || echo "tpu_worker.sh on $host: no TPU device files here; libtpu was not checked"
  echo "tpu_worker.sh on $host: $("$venv/bin/python" -V) at $venv, installed with constraints.txt"
}

train() {
  local bucket="" config=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --bucket) bucket=$2; shift 2;;
      --config) config=$2; shift 2;;
      --) shift; break;;
      *) usage >&2; die "train: unknown argument $1";;
    esac
  done
  [[ -n "$bucket" && -n "$config" ]] || { usage >&2; die "train needs --bucket and --config"; }
  python_ok || die "no Python >= 3.11 environment at $venv; run setup first"
  cd "$src"
  export RELATIONS_JAX_INIT=1 TFDS_DATA_DIR="$bucket/tensorflow_datasets"
  # Persistent XLA cache: a restarted run loads its compiled steps instead of recompiling.
  export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$bucket/xla_cache}"
  exec "$venv/bin/python" -m relations.train --config "$config" --workdir "$bucket/workdir" \
    --config.data.data_dir="$bucket/tensorflow_datasets" "$@"
}

state="$HOME/relations-train"  # .log, .rc, .pid of the background run

bucket_of() {  # the value of --bucket in "$@"
  while [[ $# -gt 0 ]]; do
    [[ "$1" == --bucket ]] && { echo "$2"; return; }
    shift
  done
}

copy_log() {  # LOG DEST: one upload through io_util (gs:// or a local path), never fatal
  (cd "$src" && "$venv/bin/python" -c '
import sys
from relations import io_util
with open(sys.argv[1], "rb") as f:
  io_util.write_bytes_atomic(sys.argv[2], f.read())' "$1" "$2") ||
    echo "tpu_worker.sh on $host: could not copy $1 to $2" >>"$1"
}

start() {
  local bucket
  bucket=$(bucket_of "$@")
  [[ -n "$bucket" ]] || die "start needs --bucket"
  python_ok || die "no Python >= 3.11 environment at $venv; run setup first"
  rm -f "$state.rc" "$state.pid"
  # setsid: its own session, so the ssh session's end does not hang it up, and one signal to the
  # session (-pid) reaches the trainer and its input workers. No fd stays open to ssh.
  setsid bash "${BASH_SOURCE[0]}" _background "$@" </dev/null >/dev/null 2>&1 &
  echo "tpu_worker.sh on $host: training started in the background; log $state.log," \
    "copied to $bucket/logs/$host.log"
}

_background() {
  local bucket pid rc sync="${RELATIONS_LOG_SYNC_S:-60}"
  bucket=$(bucket_of "$@")
  echo $$ >"$state.pid"
  # A handler, not "ignore": the trainer (exec'd by `train`) gets SIGTERM's default disposition
  # back and installs its own; this shell only keeps waiting for it.
  trap 'true' TERM INT HUP
  # Appended: a restarted run's log follows the one it resumes (all of it goes to the bucket).
  echo "tpu_worker.sh on $host: starting at $(date -u +%FT%TZ)" >>"$state.log"
  bash "${BASH_SOURCE[0]}" train "$@" >>"$state.log" 2>&1 &
  pid=$!
  (
    while kill -0 "$pid" 2>/dev/null; do
      sleep "$sync"
      copy_log "$state.log" "$bucket/logs/$host.log"
    done
  ) &
  while :; do
    wait "$pid" && rc=0 || rc=$?
    kill -0 "$pid" 2>/dev/null || break  # else the wait was cut short by a signal
  done
  echo "tpu_worker.sh on $host: training exited with status $rc" >>"$state.log"
  copy_log "$state.log" "$bucket/logs/$host.log"
  echo "$rc" >"$state.rc.tmp" && mv "$state.rc.tmp" "$state.rc"
}

finished() {
  if [[ -f "$state.rc" ]]; then
    echo "tpu_worker.sh on $host: training ended with status $(cat "$state.rc")"
    return 0
  fi
  return 10
}

verify() {
  local bucket
  bucket=$(bucket_of "$@")
  [[ -n "$bucket" ]] || die "verify needs --bucket"
  (cd "$src" && "$venv/bin/python" - "$bucket/workdir" <<'EOF')
import json
import sys
from relations import io_util
workdir = sys.argv[1]
path = f"{workdir}/train_summary.json"
if not io_util.exists(path):
  sys.exit(f"not confirmed: no {path}")
summary = json.loads(io_util.read_bytes(path))
step = summary.get("final_step")
if summary.get("preempted", True):
  sys.exit(f"not confirmed: {path} says the run was preempted at step {step}")
ckpt = f"{workdir}/checkpoints/{step}"
if not io_util.isdir(ckpt):
  sys.exit(f"not confirmed: {path} says step {step}, but {ckpt} is missing")
print(f"confirmed: {path} (step {step}) and {ckpt}")
EOF
}

case "${1:-}" in
  setup) shift; setup "$@";;
  train) shift; train "$@";;
  start) shift; start "$@";;
  _background) shift; _background "$@";;
  finished) shift; finished "$@";;
  verify) shift; verify "$@";;
  -h|--help) usage;;
  *) usage >&2; exit 2;;
esac
