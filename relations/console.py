"""What our command-line tools print besides results: stage lines, and no third-party noise.

`quiet_third_party()` (called by every entry point through `cli_errors.entry_point`) removes the
start-up noise a newcomer sees and that says nothing about their run:

* TensorFlow's C++ notices at import ("oneDNN custom operations are on ...", "All log messages
  before absl::InitializeLog() ..."). They are written to file descriptor 2 while the shared
  library loads, before `TF_CPP_MIN_LOG_LEVEL` is read, so the first `import tensorflow` runs
  with fd 2 pointed at /dev/null (an import hook; TF is imported only by the tools that need it).
  Nothing else changes: `TF_ENABLE_ONEDNN_OPTS` stays as it is, so no number changes.
* `TF_CPP_MIN_LOG_LEVEL=2` (if unset) for TF's later C++ INFO / WARNING lines.
* TFDS's absl warning "Variant folder ... has no dataset_info.json" (a dataset being built for
  the first time), absl INFO lines from other packages (orbax's checkpoint-manager settings,
  TFDS's shard lists, clu's work-unit notes; our own INFO lines stay), and NumPy / TFDS
  deprecation warnings about dtypes.

`stage(name)` prints `[task] name ...` when a stage starts and `[task] name: done in 3.2 s` when
it ends. `quiet_tfds_build()` replaces TFDS's progress bars and "Downloading and preparing
dataset Unknown size ..." lines during a build (the caller prints its own stage lines).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import io
import logging
import os
import sys
import time
import warnings

_installed = False

# absl-logged messages from TFDS that are expected on a first build.
_NOISE = (
  "has no dataset_info.json",
  # TFDS about its own feature connectors (builder code paths, not ours).
  "`FeatureConnector.dtype` is deprecated",
)


@contextlib.contextmanager
def _fd2_silenced():
  """Points file descriptor 2 at /dev/null (C++ writes bypass sys.stderr)."""
  try:
    sys.stderr.flush()
    saved = os.dup(2)
  except (OSError, ValueError, AttributeError):  # no real fd 2 (embedded, closed)
    yield
    return
  null = os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 2)
  try:
    yield
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(null)


class _QuietImport(importlib.abc.MetaPathFinder):
  """Runs the first `import tensorflow` with fd 2 silenced; then removes itself.

  Libraries probe for TensorFlow with `importlib.util.find_spec` without importing it, so the
  finder stays installed until the module is actually executed.
  """

  def find_spec(self, name, path=None, target=None):
    if name != "tensorflow":
      return None
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None:
      return spec
    inner, finder = spec.loader, self

    class _Loader(importlib.abc.Loader):
      def create_module(self, spec):
        return inner.create_module(spec)

      def exec_module(self, module):
        if finder in sys.meta_path:
          sys.meta_path.remove(finder)
        module.__loader__ = module.__spec__.loader = inner  # as if imported normally
        with _fd2_silenced():
          inner.exec_module(module)

    spec.loader = _Loader()
    return spec


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class _DropNoise(logging.Filter):
  """Drops third-party INFO chatter (orbax, TFDS, clu) and known noise; keeps ours."""

  def filter(self, record):
    if record.levelno < logging.WARNING and not record.pathname.startswith(_PACKAGE_DIR):
      return False
    try:
      msg = record.getMessage()
    except (TypeError, ValueError):  # a bad format string: let logging report it
      return True
    return not any(n in msg for n in _NOISE)


def quiet_third_party() -> None:
  """Silences known third-party start-up noise (see the module docstring); idempotent."""
  global _installed
  if _installed:
    return
  _installed = True
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  if "tensorflow" not in sys.modules:
    sys.meta_path.insert(0, _QuietImport())
  try:
    # absl's logger, not a plain one of the same name: absl must create it (its class finds the
    # real caller; a plain "absl" logger made first would hide every caller behind absl's file).
    from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top

    absl_logging.get_absl_logger().addFilter(_DropNoise())
  except ImportError:
    pass
  # NumPy / TFDS / TF dtype deprecations (DeprecationWarning or FutureWarning): about library
  # internals, not about anything the user passed.
  for pattern in (r"(?s).*(dtype|np\.bool8|np\.object).*deprecat", r"(?s).*deprecat.*dtype"):
    warnings.filterwarnings("ignore", message=pattern, category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=pattern, category=FutureWarning)


@contextlib.contextmanager
def quiet_tfds_build():
  """During a TFDS build: no progress bars, no TFDS stdout lines (the caller reports)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  tfds.disable_progress_bar()
  with contextlib.redirect_stdout(io.StringIO()):
    yield


@contextlib.contextmanager
def stage(name: str, prefix: str = ""):
  """Prints `prefix name ...` on entry and `prefix name: done in S s` (or failed) on exit."""
  head = f"{prefix} {name}".strip()
  print(f"{head} ...", flush=True)
  t0 = time.perf_counter()
  try:
    yield
  except BaseException:
    print(f"{head}: failed after {time.perf_counter() - t0:.1f} s", flush=True)
    raise
  print(f"{head}: done in {time.perf_counter() - t0:.1f} s", flush=True)
