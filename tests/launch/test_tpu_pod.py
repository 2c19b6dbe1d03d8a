"""launch/tpu_pod.sh with a stand-in gcloud whose `ssh` runs the worker command here, in a fake
worker home (see tests/launch/standins.py for what each stand-in does and does not do)."""

import json
import os
import re
import subprocess
import sys
import sysconfig

import portpicker
import pytest

from tests.launch import standins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "launch", "tpu_pod.sh")
POD = ["--name", "pod-a", "--zone", "zone-b", "--type", "v4-8"]
# What tpu_pod.sh's users pass after `--`: a few steps of the tiny occlusion config on the dummy
# data shipped in the checkout, no evaluation; "(32, 32)" checks quoting through ssh.
TINY = [
  "--config",
  "configs/occlusion.py:tiny",
  "--",
  "--config.total_steps=2",
  "--config.checkpoint_every=2",
  "--config.log_every=1",
  "--config.data.manual_dir=relations/occlusion/data/occlusion_boundaries/dummy_data",
  "--config.input.crop_size=(32, 32)",
  "--config.input.batch_size=8",
  "--config.evals={}",
]


def _pinned(path, pattern):
  with open(os.path.join(ROOT, path)) as f:
    return re.search(pattern, f.read(), re.MULTILINE).group(1)


UV_VERSION = _pinned("launch/tpu_worker.sh", r"^UV_VERSION=(\S+)$")
NUMPY = _pinned("constraints.txt", r"^numpy==(\S+)$")


def _pod(tmp_path, uv_mode="", pip_mode="", image_version="3.10"):
  """Stand-in gcloud on PATH; one fake worker (home, PATH with a stand-in python3, runtime env)."""
  log, home = str(tmp_path / "log"), tmp_path / "worker0"
  home.mkdir()
  worker_bin = str(tmp_path / "worker_bin")
  # On a pod jax.distributed finds the coordinator from the TPU metadata; the fake worker is told
  # it explicitly (one process) and has no TPU, so JAX runs on the CPU.
  worker_env = {
    "RELATIONS_COORDINATOR": f"127.0.0.1:{portpicker.pick_unused_port()}",
    "RELATIONS_NUM_PROCESSES": "1",
    "RELATIONS_PROCESS_ID": "0",
    "JAX_PLATFORMS": "cpu",
    "CUDA_VISIBLE_DEVICES": "",
    "TF_CPP_MIN_LOG_LEVEL": "2",
  }
  standins.write(
    str(tmp_path / "bin"),
    "gcloud",
    log_dir=log,
    worker_home=str(home),
    worker_path=f"{worker_bin}:/usr/bin:/bin",
    worker_env=worker_env,
  )
  # "Installing" links the test runner's environment, which scripts/test.sh installed with the
  # same constraints.txt (checked by the worker's step 4 like a real install).
  # The image's python3 stands in as this machine's base interpreter (not a venv).
  base = getattr(sys, "_base_executable", sys.executable)
  standins.write(
    worker_bin,
    "python3",
    log_dir=log,
    real_python=base,
    link_site_packages=sysconfig.get_paths()["purelib"],
    uv_mode=uv_mode,
    pip_mode=pip_mode,
    image_version=image_version,  # tpu-ubuntu2204-base's python3; "" = this machine's
  )
  env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
  return env, log, home


def _launch(env, *args, timeout=600):
  return subprocess.run(
    ["bash", SCRIPT, *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
    check=False,
  )


def _verbs(log):
  return [
    (c["argv"][3], next((a for a in c["argv"] if a.startswith("--worker")), None))
    for c in standins.calls(log, "gcloud")
  ]


@pytest.mark.slow
def test_worker_gets_python_311_installed_with_constraints_and_trains(tmp_path):
  env, log, home = _pod(tmp_path)
  bucket = tmp_path / "bucket"
  out = _launch(env, *POD, "--bucket", str(bucket), *TINY)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]

  assert _verbs(log) == [
    ("create", None),
    ("scp", "--worker=all"),
    ("ssh", "--worker=0"),
    ("ssh", "--worker=all"),
    ("ssh", "--worker=all"),
    ("delete", None),
  ]
  create = standins.calls(log, "gcloud")[0]["argv"]
  assert create[4] == "pod-a" and create[create.index("--version") + 1] == "tpu-ubuntu2204-base"
  assert create[create.index("--accelerator-type") + 1] == "v4-8"
  # The checkout arrived without .git/.venv and was unpacked fresh.
  src = home / "relations"
  assert (src / "launch" / "tpu_worker.sh").is_file() and (src / "constraints.txt").is_file()
  assert not (src / ".git").exists() and not (src / ".venv").exists()

  # 1. uv, pinned, from PyPI with the image's python3 (3.10, too old to make the environment
  # itself; once: the second setup finds the environment).
  assert [c["argv"] for c in standins.calls(log, "python3")] == [
    ["-m", "pip", "--version"],
    ["-m", "pip", "install", "--user", "-q", f"uv=={UV_VERSION}"],
  ]
  # 2. A 3.11 environment made once by uv.
  venv = home / ".venvs" / "relations"
  assert [c["argv"] for c in standins.calls(log, "uv") if c["argv"][0] == "venv"] == [
    ["venv", "--clear", "--seed", "--managed-python", "--python", "3.11", str(venv)]
  ]
  version = subprocess.run(
    [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version)"],
    capture_output=True,
    text=True,
    check=True,
  ).stdout
  assert version.startswith("3.11."), version
  # 3. pip with the constraints, exactly as scripts/demo.sh, from the checkout, on both setups.
  pips = standins.calls(log, "pip")
  assert [c["argv"] for c in pips] == [
    ["install", "-q", "-c", "constraints.txt", "-e", ".[tpu,tf-cpu]"]
  ] * 2
  assert all(c["cwd"] == str(src) and c["prefix"] == str(venv) for c in pips)
  # 4. and the checks passed, on each setup.
  assert out.stdout.count("Python 3.11.") == 2 and "installed with constraints.txt" in out.stdout

  # Training ran from the checkout on the worker with the bucket's workdir and data directory.
  with open(bucket / "workdir" / "train_summary.json") as f:
    summary = json.load(f)
  assert summary["final_step"] == 2 and summary["preempted"] is False
  assert sorted(os.listdir(bucket / "workdir" / "checkpoints")) == ["2"]
  assert os.listdir(bucket / "tensorflow_datasets")  # the TFDS build went to the bucket
  assert "finished at step 2" in out.stdout


def test_worker_setup_uses_the_image_python_when_it_is_new_enough(tmp_path):
  _, log, home = _pod(tmp_path, image_version="")  # python3 is this machine's (>= 3.11)
  os.symlink(ROOT, home / "relations")  # the unpacked checkout
  worker_env = {"HOME": str(home), "PATH": f"{tmp_path / 'worker_bin'}:/usr/bin:/bin"}
  out = subprocess.run(
    ["bash", str(home / "relations" / "launch" / "tpu_worker.sh"), "setup"],
    env=worker_env,
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  venv = home / ".venvs" / "relations"
  assert [c["argv"] for c in standins.calls(log, "python3")] == [
    ["-m", "venv", "--clear", str(venv)]
  ]
  assert standins.calls(log, "uv") == []  # nothing downloaded or built
  assert [c["argv"] for c in standins.calls(log, "pip")] == [
    ["install", "-q", "-c", "constraints.txt", "-e", ".[tpu,tf-cpu]"]
  ]
  assert f"Python {sys.version.split()[0]} at {venv}" in out.stdout


@pytest.mark.parametrize(
  "uv_mode,pip_mode,message",
  [
    ("no_python", "", "step 2: uv could not create a Python 3.11 environment at"),
    ("", "wrong_numpy", f"numpy 2.3.0 is installed, constraints.txt pins {NUMPY}"),
  ],
)
def test_wrong_python_or_install_stops_at_worker_0_and_deletes_the_pod(
  tmp_path, uv_mode, pip_mode, message
):
  env, log, _ = _pod(tmp_path, uv_mode=uv_mode, pip_mode=pip_mode)
  out = _launch(env, *POD, "--bucket", str(tmp_path / "bucket"), *TINY, timeout=300)
  assert out.returncode == 1, out.stderr[-3000:]
  assert message in out.stderr, out.stderr[-3000:]
  assert "tpu_worker.sh on " in out.stderr
  assert "setting up worker 0 failed" in out.stderr
  # Nothing ran on --worker=all, and the pod was deleted.
  assert _verbs(log) == [
    ("create", None),
    ("scp", "--worker=all"),
    ("ssh", "--worker=0"),
    ("delete", None),
  ]
  assert not (tmp_path / "bucket").exists()


def test_dry_run_prints_the_commands_and_runs_none(tmp_path):
  env, log, _ = _pod(tmp_path)
  env["UV_PYTHON_INSTALL_MIRROR"] = "https://mirror.example/pbs dir"
  out = _launch(env, *POD, "--bucket", "gs://b/run", "--dry-run", *TINY, timeout=60)
  assert out.returncode == 0, out.stderr
  assert standins.calls(log, "gcloud") == []
  lines = out.stdout.splitlines()
  assert all(line.startswith("+ ") for line in lines), lines
  text = "\n".join(lines)
  for part in (
    (
      "gcloud compute tpus tpu-vm create pod-a --zone zone-b --accelerator-type v4-8 "
      "--version tpu-ubuntu2204-base"
    ),
    "--worker=0",
    "tpu_worker.sh\\ setup",
    "tpu_worker.sh\\ train\\ --bucket\\ gs://b/run",
    "tpu-vm delete pod-a",
    "UV_PYTHON_INSTALL_MIRROR=https://mirror.example/pbs\\\\\\ dir\\ bash",
  ):
    assert part in text, (part, text)


def test_missing_and_unknown_arguments_exit_2(tmp_path):
  env, log, _ = _pod(tmp_path)
  out = _launch(env, "--name", "x", timeout=60)
  assert out.returncode == 2 and "tpu_pod.sh: missing --zone" in out.stderr
  out = _launch(env, *POD, "--bucket", "b", "--config", "c", "--nope", timeout=60)
  assert out.returncode == 2 and "unknown argument --nope" in out.stderr
  assert standins.calls(log, "gcloud") == []
