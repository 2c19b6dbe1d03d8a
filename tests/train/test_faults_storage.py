"""Fault cases of issue 36 about storage: a disk that fills during a checkpoint save, a damaged
checkpoint metadata file.

Each test first causes the fault, then checks the message and the exit status.
"""

import logging
import os
import shutil
import subprocess
import sys
import uuid

import jax
import orbax.checkpoint as ocp
import pytest

from relations import predict
from relations.train import __main__ as train_main
from relations.train import checkpoint_integrity, disk_full, trainer
from tests import toy_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARGS = ["--config", "tests/toy_task.py", "--config.async_checkpoints=true"]


def _config(total_steps):
  c = toy_task.get_config()
  c.total_steps = total_steps
  c.async_checkpoints = True  # the default of real runs: the failure surfaces a save later
  return c


def _mount_tmpfs(path, size_kib) -> bool:
  """Mounts a tmpfs of `size_kib` KiB on `path`; False where this user may not mount."""
  os.makedirs(path, exist_ok=True)
  if shutil.which("mount") is None:
    return False
  r = subprocess.run(
    ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", path],
    capture_output=True,
    check=False,
  )
  return r.returncode == 0


def _used_kib(path) -> int:
  st = os.statvfs(path)
  return (st.f_blocks - st.f_bfree) * st.f_frsize // 1024


def _check_disk_full_outcome(workdir, status, err):
  """One line naming a file of the step-6 save, exit 2, step 3 intact, nothing partial left."""
  # (INFO lines are the trainer's own log: "Resumed from ... at step 3".)
  lines = [ln for ln in err.strip().splitlines() if not ln.startswith("INFO:")]
  assert len(lines) == 1, err  # not ~300 lines of orbax / TensorStore / asyncio tracebacks
  partial = f"{workdir}/checkpoints/6.orbax-checkpoint-tmp"
  assert lines[0].startswith(f"error: {partial}"), lines[0]
  assert ": No space left on device while saving the checkpoint of step 6; " in lines[0]
  assert lines[0].endswith(
    "the checkpoints saved before are intact. Free some space and rerun the same command to "
    "resume from the last one"
  )
  assert status == 2
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["3"]  # no *-tmp* folder
  assert checkpoint_integrity.verify(os.path.join(workdir, "checkpoints", "3"), 3) is True


@pytest.mark.slow
def test_fault_disk_full(tmp_path, monkeypatch, capsys):
  """A disk that fills during the step-6 checkpoint save (a real tmpfs when this user may mount
  one, as root does; otherwise orbax's save fails in-process the way TensorStore reports it)."""
  # A full disk leaves the guard's log filter and hooks installed (the process is ending): undo.
  monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
  monkeypatch.setattr(sys, "excepthook", sys.excepthook)
  for name in ("absl", "asyncio"):
    monkeypatch.setattr(logging.getLogger(name), "filters", list(logging.getLogger(name).filters))
  mnt = str(tmp_path / "disk")
  real = _mount_tmpfs(mnt, 8 * 1024)
  print(f"disk full: {'a real tmpfs' if real else 'simulated in-process (mount not permitted)'}")
  workdir = os.path.join(mnt, "w")
  try:
    trainer.train(_config(3), workdir)  # the checkpoint of step 3, saved while there is room
    capsys.readouterr()
    if real:
      # The fault: room for the events and a few files, not for a second checkpoint (~700 KiB).
      used = _used_kib(mnt)
      subprocess.run(["mount", "-o", f"remount,size={used + 200}k", mnt], check=True)
      proc = subprocess.run(
        [sys.executable, "-m", "relations.train", *ARGS, "--workdir", workdir],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
      )
      status, err = proc.returncode, proc.stderr
      subprocess.run(["mount", "-o", "remount,size=8192k", mnt], check=True)  # space freed
    else:
      real_save = ocp.CheckpointManager.save

      def full_save(self, step, *args, **kwargs):
        if step != 6:
          return real_save(self, step, *args, **kwargs)
        # What TensorStore raises (no errno; the file in the text), after writing a part.
        part = os.path.join(str(self.directory), "6.orbax-checkpoint-tmp", "state", "d", "ab12")
        os.makedirs(os.path.dirname(part))
        with open(part, "wb") as f:
          f.write(b"\0" * 1000)
        raise ValueError(
          f'RESOURCE_EXHAUSTED: Failed writing: "{part}": Failed to write 12139 bytes to file '
          "15: No space left on device [os_error_code='28']"
        )

      monkeypatch.setattr(ocp.CheckpointManager, "save", full_save)
      cwd = os.getcwd()
      os.chdir(ROOT)
      try:
        status = train_main.main([*ARGS, "--workdir", workdir])
      finally:
        os.chdir(cwd)
      err = capsys.readouterr().err
      monkeypatch.setattr(ocp.CheckpointManager, "save", real_save)
    _check_disk_full_outcome(workdir, status, err)

    # After space is freed, the same command resumes from step 3 and finishes.
    res = trainer.train(_config(6), workdir)
    assert res.step == 6 and sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["3", "6"]
  finally:
    if real:
      subprocess.run(["umount", "-l", mnt], check=False)


def test_fault_disk_full_error_names_the_file_tensorstore_reports(tmp_path, monkeypatch):
  """The mapping alone, on the three shapes a full disk takes (TensorStore text, OSError, none)."""
  part = tmp_path / "checkpoints" / "6.orbax-checkpoint-tmp" / "state"
  part.mkdir(parents=True)
  f = f"{part}/ocdbt.process_0/manifest.ocdbt.__lock"
  nested = ValueError(
    f'RESOURCE_EXHAUSTED: Error opening "zarr" driver: Error writing "a/.zarray" in OCDBT '
    f'database at local file "{part}/ocdbt.process_0/": Error writing local file '
    f'"{part}/ocdbt.process_0/manifest.ocdbt": Failed writing: "{f}": Failed to write 400 bytes '
    "to file 5: No space left on device [os_error_code='28']"
  )
  assert disk_full.cause(nested) == (True, f)
  try:
    try:
      raise nested
    except ValueError as e:
      raise RuntimeError("Save Finalize thread failed") from e  # orbax's wrapper
  except RuntimeError as wrapped:
    assert disk_full.cause(wrapped) == (True, f)
  assert disk_full.cause(OSError(28, "No space left on device")) == (True, None)
  assert disk_full.cause(ValueError("RESOURCE_EXHAUSTED: out of memory")) == (False, None)

  monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
  monkeypatch.setattr(sys, "excepthook", sys.excepthook)
  for name in ("absl", "asyncio"):
    monkeypatch.setattr(logging.getLogger(name), "filters", list(logging.getLogger(name).filters))
  with pytest.raises(disk_full.DiskFullError) as e, disk_full.guard(str(tmp_path)):
    raise OSError(28, "No space left on device")  # a Python write: no file named
  assert e.value.filename == str(tmp_path / "checkpoints" / "6.orbax-checkpoint-tmp")
  assert e.value.strerror.startswith(
    "No space left on device while saving the checkpoint of step 6; removed this partial save; "
  )
  assert not part.exists()
  key = uuid.uuid4().hex
  with pytest.raises(KeyError, match=key), disk_full.guard(str(tmp_path)):
    raise KeyError(key)  # anything else passes through unchanged


@pytest.mark.slow
def test_fault_corrupt_checkpoint_metadata(tmp_path, capsys):
  """A damaged `state/_METADATA`: predict named the folder and called it "not a train-state
  checkpoint"; now the file is named, with and without recorded checksums."""
  workdir = str(tmp_path / "w")
  trainer.train(_config(3), workdir, devices=jax.devices()[:1])
  metadata = os.path.join(workdir, "checkpoints", "3", "state", "_METADATA")
  with open(metadata, "r+b") as f:
    f.write(b"\0garbage")  # the fault
  # Orbax alone reads it as "no metadata": nothing names the file.
  meta = ocp.PyTreeCheckpointer().metadata(os.path.dirname(metadata))
  assert getattr(getattr(meta, "item_metadata", meta), "tree", None) in (None, {})
  capsys.readouterr()

  def predict_err():
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
      status = predict.main(["--config", "tests/toy_task.py", "--workdir", workdir])
    finally:
      os.chdir(cwd)
    return status, capsys.readouterr().err.strip().splitlines()[-1]

  status, last = predict_err()
  assert status == 2
  assert last == (
    f"error: {metadata}: checkpoint of step 3 is damaged: content differs from the checksum "
    "recorded at save (corrupted on disk)"
  )
  # A checkpoint saved without checksums (older runs): the unreadable file is still named.
  os.remove(os.path.join(workdir, "checkpoints", "3", checkpoint_integrity.MANIFEST))
  status, last = predict_err()
  assert status == 2
  assert last == (
    f"error: {metadata}: checkpoint of step 3 is damaged: unreadable metadata file (not JSON: "
    "Expecting value: line 1 column 1 (char 0))"
  )
  assert not any(n.startswith("predict_step") for n in os.listdir(workdir))
