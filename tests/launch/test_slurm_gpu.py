"""launch/slurm_gpu.sbatch under stand-in sbatch, srun and scontrol (tests/launch/standins.py).

The time-limit signal is delivered as slurmctld does for the script's own `#SBATCH --signal`
line; the trainer is the real one (`python -m relations.train` on the toy task, with
jax.distributed initialised from the SLURM environment the stand-ins set).
"""

import os
import random
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.launch import standins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = "launch/slurm_gpu.sbatch"
TOTAL = 24
OVERRIDES = [f"--config.total_steps={TOTAL}", "--config.checkpoint_every=4", "--config.log_every=4"]


def _free_job_id():
  """A job id whose jax.distributed SLURM port (61440 + id % 4096, JAX's rule) is free here."""
  for _ in range(200):
    job = random.randrange(10_000, 99_999)
    with socket.socket() as s:
      try:
        s.bind(("", 61440 + job % 4096))
      except OSError:
        continue
    return job
  raise RuntimeError("no free port in 61440-65535")


def _cluster(tmp_path, venv=sys.prefix):
  job = _free_job_id()
  log, state, bin_dir = (str(tmp_path / n) for n in ("log", "state", "bin"))
  standins.write(bin_dir, "sbatch", log_dir=log, state_dir=state, job_id=job)
  standins.write(bin_dir, "srun", log_dir=log, state_dir=state)
  standins.write(bin_dir, "scontrol", log_dir=log)
  env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", VENV=venv)
  return env, log, standins.job_dir(state, job), job


def _submit(env, tmp_path, *args):
  """`sbatch` from the repository root, as the usage says; the log goes to tmp_path."""
  out = subprocess.run(
    ["sbatch", f"--output={tmp_path}/slurm-%j.out", SCRIPT, *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
    check=True,
  )
  assert out.stdout.startswith("Submitted batch job "), out.stdout


def _argvs(log, name):
  return [c["argv"] for c in standins.calls(log, name)]


def _steps(workdir):
  d = os.path.join(workdir, "checkpoints")
  return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def _final_params(workdir):
  mngr = ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "meta"))
  step = mngr.latest_step()
  restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
  mngr.close()
  return step, restored["state"]["params"]


def _uninterrupted(tmp_path, overrides):
  """Workdir of the same job run to the end without a signal: exits 0, is not requeued."""
  env, log, job_dir, job = _cluster(tmp_path)
  workdir = str(tmp_path / "work")
  _submit(env, tmp_path, "tests/toy_task.py", workdir, *overrides)
  rc = standins.batch_rc(job_dir, timeout=300)
  assert rc == 0, (tmp_path / f"slurm-{job}.out").read_text()[-3000:]
  assert _argvs(log, "scontrol") == [] and _steps(workdir)[-1] == TOTAL
  return workdir


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  return _uninterrupted(tmp_path_factory.mktemp("uninterrupted"), OVERRIDES)


# Every paper config reads with grain input workers, children of the trainer in the step.
WORKER_OVERRIDES = [*OVERRIDES, "--config.input.num_workers=2"]


@pytest.fixture(scope="module")
def uninterrupted_with_workers(tmp_path_factory):
  return _uninterrupted(tmp_path_factory.mktemp("uninterrupted_workers"), WORKER_OVERRIDES)


def _time_limit_requeue_resume(tmp_path, reference, overrides):
  """Submits, sends the time-limit signal after the first checkpoint, checks save + exit 143 +
  requeue, restarts the job and checks that it ends bit-identical to `reference`.

  Returns:
    The pids the signal went to (the task first, then the processes it started).
  """
  env, log, job_dir, job = _cluster(tmp_path)
  work = str(tmp_path / "work")
  out_file = tmp_path / f"slurm-{job}.out"
  _submit(env, tmp_path, "tests/toy_task.py", work, *overrides)
  deadline = time.time() + 300
  while not _steps(work) and not os.path.exists(os.path.join(job_dir, "batch.rc")):
    assert time.time() < deadline, "no checkpoint after 300 s"
    time.sleep(0.05)
  # What slurmctld sends 600 s before the limit for this script's --signal line.
  sig, pids = standins.time_limit_warning(job_dir)
  tasks = standins.read_pids(job_dir, "tasks")
  assert sig == signal.SIGTERM and len(tasks) == 1 and pids[0] == tasks[0]
  t0 = time.time()
  rc = standins.batch_rc(job_dir, timeout=300)
  seconds = time.time() - t0
  text = out_file.read_text()
  assert rc == 143 and seconds < 60, (seconds, text[-3000:])
  # One srun step: the venv's Python from the submit directory with the config and workdir.
  assert _argvs(log, "srun") == [
    [
      "--kill-on-bad-exit=1",
      "--chdir",
      ROOT,
      os.path.join(sys.prefix, "bin", "python"),
      "-m",
      "relations.train",
      "--config",
      "tests/toy_task.py",
      "--workdir",
      work,
      *overrides,
    ]
  ]
  # The trainer itself saved and exited 143 (srun was not signalled, so it did not SIGKILL it).
  assert "srun: error: localhost: task 0: Exited with exit code 143" in text, text[-3000:]
  assert "forcing job termination" not in text
  saved = _steps(work)
  assert saved and saved[-1] < TOTAL, f"expected a stop mid-run, saw checkpoints {saved}"
  assert f"Preempted: checkpoint saved at step {saved[-1]}" in text
  assert _argvs(log, "scontrol") == [["requeue", str(job)]]

  # SLURM starts the requeued job again: same id, same submission, SLURM_RESTART_COUNT=1.
  standins.restart(job_dir)
  rc = standins.batch_rc(job_dir, timeout=300)
  text = out_file.read_text()
  assert rc == 0, text[-3000:]
  assert f"job {job}, restart 1," in text and f"Resumed from {work} at step {saved[-1]}" in text
  assert f"Preempted: checkpoint saved at step {saved[-1]}" in text  # --open-mode=append
  assert _argvs(log, "scontrol") == [["requeue", str(job)]]  # a finished run is not requeued
  step_a, a = _final_params(reference)
  step_b, b = _final_params(work)
  assert step_a == step_b == TOTAL
  for (path, x), (_, y) in zip(
    jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves_with_path(b)
  ):
    np.testing.assert_array_equal(x, y, err_msg=str(path))
  return pids


@pytest.mark.slow
def test_time_limit_signal_saves_exits_143_requeues_and_resumes_exactly(tmp_path, uninterrupted):
  pids = _time_limit_requeue_resume(tmp_path, uninterrupted, OVERRIDES)
  assert len(pids) == 1  # no input workers: the task alone


@pytest.mark.slow
def test_preemption_with_workers_slurm_time_limit(tmp_path, uninterrupted_with_workers):
  # The signal reaches the whole step, the two input workers included (they ignore it: the
  # trainer owns shutdown), and the job still saves, exits 143, requeues and resumes exactly.
  pids = _time_limit_requeue_resume(tmp_path, uninterrupted_with_workers, WORKER_OVERRIDES)
  assert len(pids) >= 3, pids


def _fake_venv(tmp_path, trainer_code):
  """A venv whose `python -m relations.train` runs `trainer_code` instead (everything else, such
  as the script's version check, runs the real interpreter)."""
  bin_dir = tmp_path / "venv" / "bin"
  bin_dir.mkdir(parents=True)
  (bin_dir / "python").write_text(
    "#!/usr/bin/env bash\n"
    f'if [[ "$1 $2" == "-m relations.train" ]]; then exec {sys.executable} -S -c "$CODE"; fi\n'
    f'exec {sys.executable} "$@"\n'.replace("$CODE", trainer_code.replace('"', '\\"'))
  )
  (bin_dir / "python").chmod(0o755)
  return str(tmp_path / "venv")


def test_job_end_signals_reach_the_batch_shell_which_exits_without_requeue(tmp_path):
  # scancel, preemption or the limit itself: SIGTERM to every process of the job, batch shell
  # included. The shell has no trap, so it ends at once and does not requeue.
  venv = _fake_venv(
    tmp_path,
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
    "time.sleep(300)",
  )
  env, log, job_dir, _ = _cluster(tmp_path, venv=venv)
  _submit(env, tmp_path, "configs/occlusion.py:tiny", str(tmp_path / "work"))
  deadline = time.time() + 60
  while not standins.read_pids(job_dir, "tasks"):
    assert time.time() < deadline
    time.sleep(0.05)
  (task,) = standins.read_pids(job_dir, "tasks")
  standins.terminate(job_dir)
  assert standins.batch_rc(job_dir, timeout=60) == 128 + signal.SIGTERM
  assert _argvs(log, "scontrol") == []
  deadline = time.time() + 60
  while os.path.exists(f"/proc/{task}") and time.time() < deadline:
    time.sleep(0.05)


def test_failed_training_passes_its_exit_code_and_is_not_requeued(tmp_path):
  venv = _fake_venv(tmp_path, "import sys; sys.exit(3)")
  env, log, job_dir, job = _cluster(tmp_path, venv=venv)
  _submit(env, tmp_path, "configs/occlusion.py:tiny", str(tmp_path / "work"))
  assert standins.batch_rc(job_dir, timeout=60) == 3
  assert len(_argvs(log, "srun")) == 1 and _argvs(log, "scontrol") == []
  assert "task 0: Exited with exit code 3" in (tmp_path / f"slurm-{job}.out").read_text()


def test_missing_environment_is_reported_before_any_step(tmp_path):
  env, log, job_dir, job = _cluster(tmp_path, venv=str(tmp_path / "no_venv"))
  _submit(env, tmp_path, "configs/occlusion.py:tiny", str(tmp_path / "work"))
  assert standins.batch_rc(job_dir, timeout=60) == 2
  text = (tmp_path / f"slurm-{job}.out").read_text()
  assert f"{tmp_path}/no_venv/bin/python is not a Python >= 3.11 environment" in text
  assert _argvs(log, "srun") == []


def test_header_asks_for_the_step_signal_requeue_and_append():
  directives = standins.sbatch_directives(os.path.join(ROOT, SCRIPT))
  assert "--signal=TERM@600" in directives  # no "B:": the steps' tasks, not the batch shell
  assert "--requeue" in directives and "--open-mode=append" in directives
