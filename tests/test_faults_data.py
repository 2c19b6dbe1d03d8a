"""Fault cases of issue 36 about prepared data: a read-only, already-prepared `data_dir`."""

import os
import shutil
import stat
import subprocess

from relations.datasets import prepare
from relations.occlusion.data.occlusion_boundaries import make_dummy_data

DATASET = "occlusion_boundaries/realoob"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _snapshot(root):
  """{relative path: (mtime_ns, size)} of everything under `root` (folders included)."""
  out = {}
  for r, ds, fs in os.walk(root):
    for n in ds + fs:
      p = os.path.join(r, n)
      st = os.lstat(p)
      out[os.path.relpath(p, root)] = (st.st_mtime_ns, st.st_size)
  return out


def _chmod_tree(root, writable):
  for r, ds, fs in os.walk(root):
    for n in [*ds, *fs, ""]:
      p = os.path.join(r, n) if n else r
      mode = os.stat(p).st_mode
      w = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
      os.chmod(p, (mode | stat.S_IWUSR) if writable else (mode & ~w))


def _read_only_view(src, dst) -> bool:
  """A read-only bind mount of `src` at `dst` (read-only even for root); False where this user
  may not mount."""
  os.makedirs(dst)
  if os.geteuid() != 0 or shutil.which("mount") is None:
    return False
  if subprocess.run(["mount", "--bind", src, dst], check=False, capture_output=True).returncode:
    return False
  if subprocess.run(
    ["mount", "-o", "remount,bind,ro", dst], check=False, capture_output=True
  ).returncode:
    subprocess.run(["umount", dst], check=False, capture_output=True)
    return False
  return True


def test_fault_readonly_prepared_data_dir(tmp_path, capsys):
  prepared = str(tmp_path / "tfds")
  argv = [DATASET, "--manual_dir", make_dummy_data.HERE, "--data_dir"]
  assert prepare.main([*argv, prepared]) == 0  # prepared once, elsewhere
  capsys.readouterr()
  # The fault: the copy is read-only. `chmod -R a-w` for a user; root ignores permissions, so as
  # root a read-only bind mount (writes fail with EROFS, os.access says not writable).
  _chmod_tree(prepared, writable=False)
  data_dir = str(tmp_path / "ro")
  mounted = _read_only_view(prepared, data_dir)
  if not mounted:
    os.rmdir(data_dir)
    data_dir = prepared
  before = _snapshot(data_dir)
  try:
    assert not os.access(data_dir, os.W_OK)  # what the old up-front check refused
    assert prepare.main([*argv, data_dir]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"is already prepared in {data_dir}; nothing to do" in out
    assert "training pool:" in out  # the builder's summary, as after a build
    # Without --manual_dir too: nothing to build from is needed.
    assert prepare.main([DATASET, "--data_dir", data_dir]) == 0
    assert f"is already prepared in {data_dir}; nothing to do" in capsys.readouterr().out
    assert _snapshot(data_dir) == before  # nothing written, created or touched
  finally:
    if mounted:
      subprocess.run(["umount", data_dir], check=False)
    _chmod_tree(prepared, writable=True)


def test_fault_unprepared_data_dir_without_manual_dir_is_refused(tmp_path, capsys):
  data_dir = str(tmp_path / "tfds")
  assert prepare.main([DATASET, "--data_dir", data_dir]) == 2
  err = capsys.readouterr().err
  assert err == (
    f"error: --manual_dir is required: occlusion_boundaries is not prepared in {data_dir} yet "
    "(see python -m relations.datasets.prepare --help)\n"
  )
  assert not os.path.exists(data_dir) or os.listdir(data_dir) in ([], ["downloads"])
