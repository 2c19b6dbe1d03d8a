"""Test setup: 8 fake CPU devices, set before JAX initialises its backend."""

import os

# Must happen before `import jax` anywhere in the test process; subprocesses inherit it.
_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow must not grab an accelerator on a dev box; tests are CPU-only.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import tempfile  # noqa: E402  (after the environment above)

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _temp_files_in_pytest_dir(tmp_path_factory):
  """Temporary files of the suite (and of its subprocesses) go under pytest's own directory.

  TFDS leaves one empty `tmp*tfds` directory in the temp directory per builder of a dataset that
  is not prepared yet (`DatasetInfo.initialize_from_bucket`); this machine's /tmp held 2,798.
  pytest keeps only its last few base directories.
  """
  tmp = str(tmp_path_factory.mktemp("tmp"))
  saved = tempfile.tempdir, os.environ.get("TMPDIR")
  tempfile.tempdir = tmp
  os.environ["TMPDIR"] = tmp
  yield
  tempfile.tempdir = saved[0]
  if saved[1] is None:
    os.environ.pop("TMPDIR", None)
  else:
    os.environ["TMPDIR"] = saved[1]


def pytest_addoption(parser):
  parser.addoption(
    "--all",
    action="store_true",
    default=False,
    help="run the slow tests too (CI: scripts/test.sh); without it and without -m, plain "
    "`pytest` runs only the fast tier",
  )


def pytest_collection_modifyitems(config, items):
  """Plain `pytest` deselects `slow` tests; `--all` keeps them, and so does any `-m` expression
  (`pytest -m slow` runs only the slow tier)."""
  if config.getoption("--all") or config.option.markexpr:
    return
  slow = [item for item in items if item.get_closest_marker("slow")]
  if slow:
    config.hook.pytest_deselected(items=slow)
    items[:] = [item for item in items if not item.get_closest_marker("slow")]
