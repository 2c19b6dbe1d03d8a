"""Fault cases (issue 36): each test first causes the fault, then checks what the code does about it.

Damaged checkpoints (a flipped byte, an empty step folder), two trainers in one workdir, a SIGKILL
of a trainer with input workers, restarted finished runs, a stop request during the final
evaluation, disk full, another batch size on resume, output file modes. One tiny run trained in
this process is shared (copied per test); one trainer subprocess with workers serves the
second-trainer, SIGKILL and stale-lock cases.
"""

import errno
import io
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from relations import cli_errors
from relations import io_util
from relations import predict
from relations import tfds_util
from relations.train import checkpoint as ckpt_lib
from relations.train import checkpoint_integrity
from relations.train import trainer
from relations.train import workdir_lock
from tests import toy_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOTAL = 6


def _config(**kw):
  c = toy_task.get_config()
  c.total_steps = TOTAL
  c.checkpoint_every = 3
  c.async_checkpoints = True  # the recording path of real runs (orbax's finalization callback)
  for k, v in kw.items():
    c[k] = v
  return c


class Evaluator:
  """An evaluator for `config.evals` (type `tests.train.test_faults`): a constant score; with
  `sigterm=True` it sends this process SIGTERM while it runs (a stop during the final eval)."""

  def __init__(self, model, config, eval_config, workdir):
    del model, config
    self.sigterm, self.workdir = bool(eval_config.get("sigterm", False)), workdir

  def run(self, params, step):
    if self.sigterm:
      os.kill(os.getpid(), signal.SIGTERM)
    return {"score": float(step) + float(np.asarray(jax.device_get(params["head"]["bias"]))[0])}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A finished TOTAL-step run (checkpoints at 3 and 6, async saves)."""
  workdir = str(tmp_path_factory.mktemp("faults") / "trained")
  # One device, as a laptop run: its array chunks lie in files that OCDBT reads unverified.
  trainer.train(_config(), workdir, devices=jax.devices()[:1])
  return workdir


def _copy(trained, tmp_path, name="w"):
  dst = str(tmp_path / name)
  shutil.copytree(trained, dst)
  return dst


def _flip_bytes(step_dir):
  """Inverts 4 bytes at a quarter, half and three quarters of each array data file (over 4 KiB).

  Array chunks live in `state/ocdbt.process_*/d/` (the b-tree nodes in `state/d/` carry OCDBT's own
  CRC). Async saves pack the chunks into those files in no fixed order, so one spot can fall in
  bytes no array reads (a file's tail); with three spots per file, missing every array is unlikely.
  Returns the damaged files.
  """
  d = os.path.join(step_dir, "state", "ocdbt.process_0", "d")
  targets = [os.path.join(d, n) for n in sorted(os.listdir(d))]
  targets = [t for t in targets if os.path.getsize(t) > 4096]
  for target in targets:
    with open(target, "r+b") as f:
      data = bytearray(f.read())
      for at in (len(data) // 4, len(data) // 2, 3 * len(data) // 4):
        data[at : at + 4] = bytes(b ^ 0xFF for b in data[at : at + 4])
      f.seek(0)
      f.write(data)
  return targets


def _damaged_file(text, step):
  """The file named in the first `<file>: checkpoint of step <step> is damaged` of `text`."""
  line = next(ln for ln in text.splitlines() if f": checkpoint of step {step} is damaged" in ln)
  return line.split(f": checkpoint of step {step} is damaged")[0].split(" ")[-1]


def _orbax_state(workdir, step):
  """The train state orbax itself restores (no checksum check)."""
  mngr = ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "meta"))
  restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
  mngr.close()
  return jax.device_get(restored["state"])


def _tree_equal(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_fault_every_checkpoint_records_checksums_of_all_its_files(trained):
  for step in (3, 6):
    step_dir = os.path.join(trained, "checkpoints", str(step))
    with open(os.path.join(step_dir, checkpoint_integrity.MANIFEST)) as f:
      recorded = json.load(f)["sha256"]
    on_disk = {
      os.path.relpath(os.path.join(r, n), step_dir)
      for r, _, ns in os.walk(step_dir)
      for n in ns
      if r != step_dir and n != "commit_success.txt"
    }
    assert set(recorded) == on_disk and any(p.startswith("state/") for p in recorded)
    for rel, digest in recorded.items():
      with open(os.path.join(step_dir, rel), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest, rel
    assert checkpoint_integrity.verify(step_dir, step) is True


def test_fault_flipped_byte_in_checkpoint_is_refused_by_predict(trained, tmp_path, capsys):
  workdir = _copy(trained, tmp_path)
  clean = _orbax_state(trained, TOTAL)  # (tensorstore caches reads by path: read another copy)
  bad_files = _flip_bytes(os.path.join(workdir, "checkpoints", str(TOTAL)))
  # The fault: orbax alone restores the damaged checkpoint without complaint, with other values.
  assert not _tree_equal(_orbax_state(workdir, TOTAL), clean)

  cwd = os.getcwd()
  os.chdir(ROOT)
  try:
    status = predict.main(["--config", "tests/toy_task.py", "--workdir", workdir])
  finally:
    os.chdir(cwd)
  err = capsys.readouterr().err.strip().splitlines()
  assert status == 2
  bad_file = _damaged_file(err[-1], TOTAL)
  assert bad_file in bad_files
  assert err[-1] == (
    f"error: {bad_file}: checkpoint of step {TOTAL} is damaged: content differs from the "
    "checksum recorded at save (corrupted on disk)"
  )
  assert not any(n.startswith("predict_step") for n in os.listdir(workdir))


def test_fault_predict_output_leaves_a_read_only_run_untouched(trained, tmp_path, capsys):
  workdir, out = _copy(trained, tmp_path), str(tmp_path / "out")
  before = _snapshot(workdir)
  cwd = os.getcwd()
  os.chdir(ROOT)
  try:
    status = predict.main(["--config", "tests/toy_task.py", "--workdir", workdir, "--output", out])
  finally:
    os.chdir(cwd)
  assert status == 0, capsys.readouterr().err
  assert os.listdir(out) == [f"predict_step{TOTAL}.json"]
  assert _snapshot(workdir) == before


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_fault_flipped_byte_resume_falls_back_to_newest_intact(trained, tmp_path, capsys):
  one = jax.devices()[:1]
  damaged, clean = _copy(trained, tmp_path, "damaged"), _copy(trained, tmp_path, "clean")
  bad_files = _flip_bytes(os.path.join(damaged, "checkpoints", str(TOTAL)))
  # Reference: a run that resumes from its intact step-3 checkpoint (steps 4.. are recomputed).
  shutil.rmtree(os.path.join(clean, "checkpoints", str(TOTAL)))
  os.remove(os.path.join(clean, "train_summary.json"))
  os.remove(os.path.join(damaged, "train_summary.json"))
  ref = trainer.train(_config(total_steps=9), clean, devices=one)
  capsys.readouterr()

  res = trainer.train(_config(total_steps=9), damaged, devices=one)
  err = capsys.readouterr().err
  assert _damaged_file(err, TOTAL) in bad_files
  assert "resumed from step 3, the newest intact checkpoint" in err
  assert res.step == 9 and _tree_equal(
    jax.device_get(res.state["params"]), jax.device_get(ref.state["params"])
  )
  assert os.path.isdir(os.path.join(damaged, "damaged_checkpoints", str(TOTAL)))
  assert checkpoint_integrity.verify(os.path.join(damaged, "checkpoints", "9"), 9)


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_fault_empty_step_folder_and_corrupt_latest_do_not_block_resume(trained, tmp_path, capsys):
  workdir = _copy(trained, tmp_path)
  os.remove(os.path.join(workdir, "train_summary.json"))
  os.makedirs(os.path.join(workdir, "checkpoints", "8"))  # a save that wrote nothing
  with open(os.path.join(workdir, "checkpoints", "6", "state", "_METADATA"), "r+b") as f:
    f.write(b"\0garbage")  # corrupt metadata of the previous one
  # The fault: orbax lists the empty folder as the latest step and cannot restore it.
  mngr = ckpt_lib.make_manager(workdir, keep=3, async_save=False)
  assert mngr.latest_step() == 8
  with pytest.raises(KeyError):
    mngr.restore(
      8, args=ocp.args.Composite(state=ocp.args.StandardRestore(), meta=ocp.args.JsonRestore())
    )
  mngr.close()

  res = trainer.train(_config(total_steps=9), workdir)
  err = capsys.readouterr().err
  assert f"{workdir}/checkpoints/8: checkpoint of step 8 is damaged: empty folder" in err
  assert f"{workdir}/checkpoints/6/state/_METADATA: checkpoint of step 6 is damaged" in err
  assert "resumed from step 3" in err and res.step == 9
  assert sorted(os.listdir(os.path.join(workdir, "damaged_checkpoints"))) == ["6", "8"]


def test_fault_every_checkpoint_damaged_is_one_error_naming_them(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  os.remove(os.path.join(workdir, "train_summary.json"))
  for step in (3, 6):
    _flip_bytes(os.path.join(workdir, "checkpoints", str(step)))
  with pytest.raises(checkpoint_integrity.CheckpointDamagedError) as e:
    trainer.train(_config(total_steps=9), workdir)
  msg = cli_errors.InputError(str(e.value)).message
  assert "checkpoint of step 6 is damaged" in msg and "step 3 too" in msg
  assert "no intact checkpoint to resume from" in msg
  assert not os.path.exists(os.path.join(workdir, "damaged_checkpoints"))  # nothing moved


def _snapshot(workdir):
  out = {}
  for r, _, ns in os.walk(workdir):
    for n in ns:
      p = os.path.join(r, n)
      with open(p, "rb") as f:
        out[os.path.relpath(p, workdir)] = (f.read(), os.stat(p).st_mtime_ns)
  return out


def test_fault_restarted_finished_run_leaves_outputs_as_they_were(trained, tmp_path, capsys):
  workdir = _copy(trained, tmp_path)
  before = _snapshot(workdir)
  res = trainer.train(_config(), workdir)  # the fault: run the finished command again
  out = capsys.readouterr().out
  assert f"[train] {workdir}: this run is complete (step {TOTAL} of {TOTAL}" in out
  assert res.step == TOTAL and not res.preempted
  assert _snapshot(workdir) == before  # train_summary.json, config.json, events, checkpoints
  assert not os.path.exists(os.path.join(workdir, workdir_lock.LOCK_NAME))


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_fault_stop_during_final_eval_completes_the_run(tmp_path, capsys):
  evals = {"e": dict(type="tests.train.test_faults", sigterm=True)}
  workdir = str(tmp_path / "w")
  # The fault: SIGTERM arrives while the final evaluation runs (after the last step).
  res = trainer.train(_config(evals=evals), workdir)
  assert not res.preempted and res.step == TOTAL
  with open(os.path.join(workdir, "train_summary.json")) as f:
    summary = json.load(f)
  assert summary["preempted"] is False and summary["final_step"] == TOTAL
  assert summary["e/score"] == res.eval_metrics["e/score"]

  # Killed during the final evaluation (no summary yet): the restart runs it, trains nothing.
  os.remove(os.path.join(workdir, "train_summary.json"))
  capsys.readouterr()
  evals["e"]["sigterm"] = False
  again = trainer.train(_config(evals=evals), workdir)
  assert again.step == TOTAL and again.eval_metrics["e/score"] == summary["e/score"]
  with open(os.path.join(workdir, "train_summary.json")) as f:
    assert json.load(f)["e/score"] == summary["e/score"]


def test_fault_resume_with_another_batch_size_is_refused(trained, tmp_path):
  workdir = _copy(trained, tmp_path)
  os.remove(os.path.join(workdir, "train_summary.json"))
  c = _config(total_steps=9)
  c.input.batch_size = 8
  with pytest.raises(ValueError, match=r"input.batch_size 16 but the config has 8"):
    trainer.train(c, workdir)


# ----------------------------------------------------------------- a trainer subprocess with workers

_WORKER_CONFIG = """
from tests import toy_task


def get_config(arg=None):
  c = toy_task.get_config()
  c.input.num_workers = 2
  c.input.size = 32
  c.total_steps = 100000
  c.checkpoint_every = 100000
  c.seed = 7
  return c
"""


def _children(pid):
  """Pids whose parent is `pid` (from /proc)."""
  out = []
  for d in os.listdir("/proc"):
    if d.isdigit():
      try:
        with open(f"/proc/{d}/stat") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid:
        out.append(int(d))
  return out


def _shm_mapped(pids):
  """/dev/shm names mapped by `pids` (segments and semaphores of the run)."""
  names = set()
  for pid in pids:
    try:
      with open(f"/proc/{pid}/maps") as f:
        for line in f:
          if "/dev/shm/" in line:
            names.add(line.split("/dev/shm/", 1)[1].split()[0])
    except OSError:
      pass
  return names


def _alive(pid):
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
  """A trainer subprocess with 2 input workers: a second trainer is tried while it runs, then it
  is SIGKILLed. Returns what was seen."""
  base = tmp_path_factory.mktemp("killed")
  config = str(base / "workers_config.py")
  with open(config, "w") as f:
    f.write(_WORKER_CONFIG)
  workdir = str(base / "w")
  proc = subprocess.Popen(
    [sys.executable, "-m", "relations.train", "--config", config, "--workdir", workdir],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  seen = {"pid": proc.pid, "workdir": workdir}
  try:
    deadline = time.time() + 240
    for line in proc.stdout:
      if line.startswith("[train] step 1/") or time.time() > deadline:
        break
    assert proc.poll() is None, "the trainer ended early"
    children = _children(proc.pid)
    seen["children"] = children
    seen["shm"] = _shm_mapped([proc.pid, *children])
    with open(os.path.join(workdir, "config.json")) as f:
      seen["config_before"] = f.read()
    # The second trainer, in this process, on the same workdir.
    second = _config(total_steps=2)
    try:
      trainer.train(second, workdir)
      seen["second"] = None
    except workdir_lock.WorkdirLockedError as e:
      seen["second"] = str(e)
    with open(os.path.join(workdir, "config.json")) as f:
      seen["config_after"] = f.read()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.time() + 20
    while time.time() < deadline and (
      any(_alive(p) for p in children) or any(os.path.exists(f"/dev/shm/{n}") for n in seen["shm"])
    ):
      time.sleep(0.1)
    seen["alive_after"] = [p for p in children if _alive(p)]
    seen["shm_after"] = [n for n in seen["shm"] if os.path.exists(f"/dev/shm/{n}")]
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
    for p in seen.get("children", []):  # never leave a leak behind the test
      if _alive(p):
        os.kill(p, signal.SIGKILL)
  return seen


def test_fault_second_trainer_in_workdir_is_refused(killed_run):
  host = socket.gethostname()
  assert killed_run["second"] == (
    f"{killed_run['workdir']}: another training run is using this workdir (this host, pid "
    f"{killed_run['pid']}, started {_lock_started(killed_run)}); wait for it or stop it, or "
    "pass another --workdir"
  ), host
  assert killed_run["config_after"] == killed_run["config_before"]  # the first run's, untouched
  assert '"seed": 7' in killed_run["config_after"]


def _lock_started(killed_run):
  with open(os.path.join(killed_run["workdir"], workdir_lock.LOCK_NAME)) as f:
    return json.load(f)["started"]


def test_fault_sigkill_with_workers_leaves_no_process_or_shared_memory(killed_run):
  # Two grain workers and multiprocessing's resource tracker ran, with shared memory mapped.
  assert len(killed_run["children"]) >= 3
  assert any(n.startswith("psm_") for n in killed_run["shm"])
  assert killed_run["alive_after"] == []
  assert killed_run["shm_after"] == []


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_fault_stale_lock_of_killed_run_is_taken_over(killed_run, capsys):
  lock = os.path.join(killed_run["workdir"], workdir_lock.LOCK_NAME)
  with open(lock) as f:
    assert json.load(f)["pid"] == killed_run["pid"]  # left behind by the SIGKILL
  c = _config(total_steps=2, seed=7)
  c.input.size = 32
  res = trainer.train(c, killed_run["workdir"])
  assert res.step == 2
  assert f"note: {lock}: taking over the lock of a run that is gone (pid {killed_run['pid']}" in (
    capsys.readouterr().err
  )
  assert not os.path.exists(lock)


def test_fault_lock_released_when_training_fails(tmp_path):
  c = _config(total_steps=2)
  c.input.batch_size = 15  # not divisible by the 8 devices: fails after the lock is taken
  workdir = str(tmp_path / "w")
  with pytest.raises(ValueError, match="input.batch_size=15 does not divide over the 8 devices"):
    trainer.train(c, workdir)
  assert not os.path.exists(os.path.join(workdir, workdir_lock.LOCK_NAME))


# ----------------------------------------------------------------- output files


def test_fault_disk_full_names_the_file(tmp_path, monkeypatch, capsys):
  path = str(tmp_path / "metrics.json")

  class Full(io.BytesIO):
    def write(self, data):
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what a full disk raises

  def full_open(file, mode="r", *args, **kwargs):
    return Full() if "w" in mode else open(file, mode, *args, **kwargs)

  monkeypatch.setattr(io_util, "open", full_open, raising=False)
  with pytest.raises(OSError) as e:
    io_util.write_json_atomic(path, {"a": 1})
  assert e.value.errno == errno.ENOSPC and e.value.filename == path
  assert cli_errors.report(e.value) == 2
  assert capsys.readouterr().err == f"error: {path}: No space left on device\n"
  assert os.listdir(tmp_path) == []  # no temporary file left


def test_fault_outputs_honour_the_umask(tmp_path):
  old = os.umask(0o022)
  try:
    io_util.write_json_atomic(str(tmp_path / "a.json"), {"a": 1})
    os.umask(0o002)
    io_util.write_text_atomic(str(tmp_path / "b.txt"), "b")
  finally:
    os.umask(old)
  assert os.stat(tmp_path / "a.json").st_mode & 0o777 == 0o644
  assert os.stat(tmp_path / "b.txt").st_mode & 0o777 == 0o664


# ----------------------------------------------------------------- dataset preparation


def test_fault_prepare_killed_build_leftovers_removed_on_next_run(tmp_path, capsys):
  config_dir = tmp_path / "dataset" / "cfg"
  killed = config_dir / "incomplete.AB12CD_1.0.0"  # what a SIGKILLed TFDS build leaves
  (killed / "dataset-train.array_record-00000-of-00001").parent.mkdir(parents=True)
  (killed / "dataset-train.array_record-00000-of-00001").write_bytes(b"x")
  live = config_dir / "incomplete.EF34GH_1.0.0"  # a build still running elsewhere
  live.mkdir()
  other_version = config_dir / "incomplete.IJ56KL_2.0.0"
  other_version.mkdir()
  old = time.time() - 2 * tfds_util.STALE_INCOMPLETE_SECONDS
  for p in (killed, killed / "dataset-train.array_record-00000-of-00001", other_version):
    os.utime(p, (old, old))
  removed = tfds_util.remove_stale_incomplete(str(config_dir / "1.0.0"))
  assert removed == [str(killed)] and not killed.exists()
  assert live.exists() and other_version.exists()
  assert f"[data] removing {killed}: left by a build that was killed" in capsys.readouterr().err


def test_fault_prepare_sigterm_runs_the_builds_cleanup(tmp_path, capsys):
  incomplete = tmp_path / "incomplete.XY12AB_1.0.0"
  handler = signal.getsignal(signal.SIGTERM)
  with pytest.raises(KeyboardInterrupt):
    with tfds_util._sigterm_interrupts("the build of x"):  # pylint: disable=protected-access
      try:
        incomplete.mkdir()
        os.kill(os.getpid(), signal.SIGTERM)  # the fault: SIGTERM mid-build
        time.sleep(5)
      finally:
        shutil.rmtree(incomplete)  # as TFDS's incomplete_dir does
  assert not incomplete.exists()
  assert signal.getsignal(signal.SIGTERM) is handler
  assert "[data] SIGTERM: stopping the build of x" in capsys.readouterr().err
