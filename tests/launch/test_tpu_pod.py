"""launch/tpu_pod.sh with a stand-in gcloud whose `ssh` runs the worker command here, in a fake
worker home (see tests/launch/standins.py for what each stand-in does and does not do)."""

import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time

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
  out = _launch(env, *POD, "--bucket", str(bucket), "--poll", "1", *TINY)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]

  verbs = _verbs(log)
  polls = len(verbs) - 7
  assert polls >= 1 and verbs == [
    ("create", None),
    ("scp", "--worker=all"),
    ("ssh", "--worker=0"),  # setup, worker 0 first
    ("ssh", "--worker=all"),  # setup
    ("ssh", "--worker=all"),  # start, detached
    *[("ssh", "--worker=all")] * polls,  # finished?
    ("ssh", "--worker=0"),  # verify in the bucket
    ("delete", None),
  ]
  commands = [c["argv"][-1] for c in standins.calls(log, "gcloud") if c["argv"][3] == "ssh"]
  assert "tpu_worker.sh start --bucket" in commands[2] and commands[3].endswith(" finished")
  assert "tpu_worker.sh verify --bucket" in commands[-1]
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
  # The detached run's output is in the bucket (and not in the launcher's), then confirmed.
  (worker_log,) = os.listdir(bucket / "logs")
  text = (bucket / "logs" / worker_log).read_text()
  assert "finished at step 2" in text and "training exited with status 0" in text, text[-3000:]
  assert f"confirmed: {bucket}/workdir/train_summary.json (step 2)" in out.stdout


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
    "tpu_worker.sh\\ start\\ --bucket\\ gs://b/run",
    "--worker=all --command bash\\ ~/relations/launch/tpu_worker.sh\\ finished",
    "--worker=0 --command bash\\ ~/relations/launch/tpu_worker.sh\\ verify\\ --bucket\\ gs://b/run",
    "tpu-vm delete pod-a",
    "UV_PYTHON_INSTALL_MIRROR=https://mirror.example/pbs\\\\\\ dir\\ bash",
  ):
    assert part in text, (part, text)


@pytest.mark.parametrize(
  "tpu,image",
  [
    ("v4-32", "tpu-ubuntu2204-base"),
    ("v5litepod-16", "v2-alpha-tpuv5-lite"),
    ("v5p-8", "v2-alpha-tpuv5"),
    ("v6e-8", "v2-alpha-tpuv6e"),
  ],
)
def test_image_is_chosen_by_tpu_type(tmp_path, tpu, image):
  env, _, _ = _pod(tmp_path)
  pod = ["--name", "p", "--zone", "z", "--type", tpu, "--bucket", "gs://b/r", "--config", "c"]
  out = _launch(env, *pod, "--dry-run", timeout=60)
  assert out.returncode == 0, out.stderr
  assert f"--accelerator-type {tpu} --version {image} \n" in out.stdout, out.stdout
  # An explicit --version wins; an unknown generation needs one.
  out = _launch(env, *pod, "--version", "my-image", "--dry-run", timeout=60)
  assert f"--accelerator-type {tpu} --version my-image \n" in out.stdout, out.stdout
  pod[pod.index(tpu)] = "v9x-8"
  out = _launch(env, *pod, "--dry-run", timeout=60)
  assert out.returncode == 2 and "no default image for --type v9x-8; pass --version" in out.stderr


def test_missing_and_unknown_arguments_exit_2(tmp_path):
  env, log, _ = _pod(tmp_path)
  out = _launch(env, "--name", "x", timeout=60)
  assert out.returncode == 2 and "tpu_pod.sh: missing --zone" in out.stderr
  out = _launch(env, *POD, "--bucket", "b", "--config", "c", "--nope", timeout=60)
  assert out.returncode == 2 and "unknown argument --nope" in out.stderr
  out = _launch(env, *POD, "--bucket", "b", "--config", "c", "--max-restarts", "x", timeout=60)
  assert out.returncode == 2 and "--max-restarts needs a whole number" in out.stderr
  assert standins.calls(log, "gcloud") == []


@pytest.mark.slow
def test_preempted_run_is_restarted_and_the_pod_deleted_only_once_confirmed(tmp_path):
  """The detached run gets SIGTERM (a maintenance event) after its first checkpoint: it saves and
  exits 143, the bucket does not confirm it, so the launcher starts it again; the restart resumes
  from the bucket and finishes, and only then is the pod deleted."""
  env, log, home = _pod(tmp_path)
  bucket = tmp_path / "bucket"
  six = [a.replace("total_steps=2", "total_steps=6") for a in TINY]
  cmd = ["bash", SCRIPT, *POD, "--bucket", str(bucket), "--poll", "1", "--max-restarts", "2"]
  with open(tmp_path / "launcher.log", "w") as out:
    launcher = subprocess.Popen([*cmd, *six], cwd=ROOT, env=env, stdout=out, stderr=out)
  try:
    deadline = time.time() + 400
    first = bucket / "workdir" / "checkpoints" / "2"
    while not first.is_dir():
      assert launcher.poll() is None, (tmp_path / "launcher.log").read_text()[-3000:]
      assert time.time() < deadline, "no checkpoint in the bucket after 400 s"
      time.sleep(0.1)
    # The whole detached session: the trainer and its input workers, as a host shutdown does.
    os.killpg(int((home / "relations-train.pid").read_text()), signal.SIGTERM)
    rc = launcher.wait(timeout=600)
  finally:
    if launcher.poll() is None:
      launcher.kill()
  text = (tmp_path / "launcher.log").read_text()
  assert rc == 0, text[-5000:]
  assert "restart 1 of 2: resuming from the last checkpoint" in text
  assert "says the run was preempted at step" in text  # the first verify refused
  with open(bucket / "workdir" / "train_summary.json") as f:
    summary = json.load(f)
  assert summary["final_step"] == 6 and summary["preempted"] is False
  verbs = _verbs(log)
  assert verbs[-1] == ("delete", None) and verbs.count(("delete", None)) == 1
  assert verbs.count(("create", None)) == 1  # the pod answered: no new pod
  starts = [c for c in standins.calls(log, "gcloud") if " start --bucket" in c["argv"][-1]]
  assert len(starts) == 2
  (worker_log,) = os.listdir(bucket / "logs")
  worker_text = (bucket / "logs" / worker_log).read_text()
  assert "Resumed from" in worker_text and "finished at step 6" in worker_text, worker_text[-3000:]
