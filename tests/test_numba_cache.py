"""numba caches are stamped by their whole folder: editing a callee's module recompiles callers."""

import os
import subprocess
import sys
import textwrap

from relations import numba_cache
from relations.video_relations.metrics import json_scan

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_RUN = """
import sys
from relations import numba_cache
numba_cache._ROOT = sys.argv[1]  # the test's folder stands for relations/
sys.path.insert(0, sys.argv[1])
import caller
print(caller.f(), sum(caller.f.stats.cache_hits.values()))
"""


def _write(folder, name, text):
  with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
    f.write(textwrap.dedent(text))


def _run(folder, cache_dir=None):
  env = dict(os.environ, PYTHONPATH=_ROOT, RELATIONS_CACHE_DIR=os.path.join(folder, "home_cache"))
  env.pop("NUMBA_CACHE_DIR", None)
  if cache_dir:
    env["NUMBA_CACHE_DIR"] = cache_dir
  out = subprocess.run(
    [sys.executable, "-c", _RUN, folder], capture_output=True, text=True, check=True, env=env
  )
  value, hits = out.stdout.split()
  return int(value), int(hits)


def test_editing_a_callee_module_recompiles_its_cached_callers(tmp_path):
  folder = str(tmp_path)
  _write(folder, "callee.py", "import numba\n\n@numba.njit(cache=True)\ndef g():\n  return 1\n")
  _write(
    folder,
    "caller.py",
    """
    import numba
    from relations import numba_cache  # noqa: F401
    import callee

    @numba.njit(cache=True)
    def f():
      return callee.g() + 10
    """,
  )
  assert _run(folder) == (11, 0)  # compiled, written to the cache
  assert _run(folder) == (11, 1)  # read from the cache
  # Same size, other bytes: numba's own stamp of caller.py is unchanged.
  _write(folder, "callee.py", "import numba\n\n@numba.njit(cache=True)\ndef g():\n  return 2\n")
  assert _run(folder) == (12, 0)
  assert _run(folder) == (12, 1)
  cache_dir = str(tmp_path / "cache")
  assert _run(folder, cache_dir) == (12, 0)  # NUMBA_CACHE_DIR: the same rule
  _write(folder, "callee.py", "import numba\n\n@numba.njit(cache=True)\ndef g():\n  return 3\n")
  assert _run(folder, cache_dir) == (13, 0)
  assert _run(folder, cache_dir) == (13, 1)


def test_folder_stamp_covers_every_module_of_the_folder(tmp_path):
  _write(str(tmp_path), "a.py", "x = 1\n")
  _write(str(tmp_path), "b.txt", "not a module\n")
  first = numba_cache.folder_stamp.__wrapped__(str(tmp_path))
  _write(str(tmp_path), "b.txt", "still not a module\n")
  assert numba_cache.folder_stamp.__wrapped__(str(tmp_path)) == first
  _write(str(tmp_path), "c.py", "y = 2\n")
  assert numba_cache.folder_stamp.__wrapped__(str(tmp_path)) != first


def test_the_scanner_is_cached_with_the_folder_stamp():
  locator = json_scan.scan_window._cache._impl._locator  # pylint: disable=protected-access
  assert isinstance(
    locator, (numba_cache.RelationsCacheLocator, numba_cache.UserProvidedFolderLocator)
  )
  folder = os.path.dirname(json_scan.__file__)
  assert locator.get_source_stamp() == numba_cache.folder_stamp(folder)


def test_default_cache_is_the_user_cache_folder_and_first_compile_says_so(tmp_path):
  folder = str(tmp_path / "src")
  os.makedirs(folder)
  _write(folder, "callee.py", "x = 0\n")
  _write(
    folder,
    "caller.py",
    """
    import numba
    from relations import numba_cache  # noqa: F401

    @numba.njit(cache=True)
    def f():
      return 11
    """,
  )
  env = dict(os.environ, PYTHONPATH=_ROOT, RELATIONS_CACHE_DIR=str(tmp_path / "home"))
  env.pop("NUMBA_CACHE_DIR", None)
  runs = [
    subprocess.run(
      [sys.executable, "-c", _RUN, folder], capture_output=True, text=True, check=True, env=env
    )
    for _ in range(2)
  ]
  assert [r.stdout.split() for r in runs] == [["11", "0"], ["11", "1"]]
  where = os.path.join(str(tmp_path / "home"), "numba")
  assert runs[0].stderr.count("relations: compiling numba code once") == 1
  assert where in runs[0].stderr
  assert "compiling" not in runs[1].stderr
  in_tree = [n for _, _, names in os.walk(folder) for n in names if n.endswith((".nbi", ".nbc"))]
  assert in_tree == []  # nothing written next to the sources
  (entry,) = os.listdir(where)  # <folder name>_<hash of its path>
  assert entry.startswith("src_") and any(
    n.endswith(".nbi") for n in os.listdir(f"{where}/{entry}")
  )
