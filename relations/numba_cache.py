"""numba's on-disk cache, kept only while the whole package folder of a function is unchanged.

numba stamps a cached function with its own source file. But compiled code embeds the code of
every function it calls, often from a sibling module (`annotation_scan` calls `json_scan`):
after an edit of the callee alone, the caller's cache would go on running the old callee, in
tests and benchmarks too. Importing this module (every
module here that caches numba functions does, before defining them) makes the stamp of a
function defined under `relations/` the hash of every .py file in its folder. An installed
package never changes, so users only pay one compile, as before.

Where: `NUMBA_CACHE_DIR` when set (numba's own rule); otherwise `$RELATIONS_CACHE_DIR/numba`
(default `~/.cache/relations/numba`), a folder the user can write to even when the package lies
in a read-only site-packages; then numba's usual fallbacks (the source's __pycache__, numba's
user-wide cache), and last the temp dir (numba refuses cached functions when no folder is
writable). The first compile of a process prints one line to stderr saying it happens once.
"""

import functools
import hashlib
import os
import sys
import tempfile

from numba.core import caching
from numba.core import event

_ROOT = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def folder_stamp(folder: str) -> str:
  """sha256 (hex) over the names and bytes of the .py files directly in `folder`."""
  digest = hashlib.sha256()
  for name in sorted(os.listdir(folder)):
    if name.endswith(".py"):
      with open(os.path.join(folder, name), "rb") as f:
        digest.update(name.encode() + b"\0" + f.read() + b"\0")
  return digest.hexdigest()


class _FolderStamp:
  """Locator mixin: the stamp of the function's folder, for files under relations/ only."""

  def get_source_stamp(self):
    return folder_stamp(os.path.dirname(os.path.abspath(self._py_file)))

  @classmethod
  def from_function(cls, py_func, py_file):
    if not os.path.abspath(py_file).startswith(_ROOT + os.sep):
      return None
    return super().from_function(py_func, py_file)


class UserProvidedFolderLocator(_FolderStamp, caching.UserProvidedCacheLocator):
  """numba's locator for NUMBA_CACHE_DIR, with the folder stamp."""


class InTreeFolderLocator(_FolderStamp, caching.InTreeCacheLocator):
  """numba's locator for the source's __pycache__, with the folder stamp."""


class UserWideFolderLocator(_FolderStamp, caching.UserWideCacheLocator):
  """numba's locator for a read-only source (the user's cache folder), with the folder stamp."""


def cache_root() -> str:
  """Our numba cache folder when NUMBA_CACHE_DIR is unset (the same base as other caches here)."""
  base = os.environ.get("RELATIONS_CACHE_DIR") or os.path.join(
    os.path.expanduser("~"), ".cache", "relations"
  )
  return os.path.join(base, "numba")


class RelationsCacheLocator(_FolderStamp, caching.UserWideCacheLocator):
  """`cache_root()`/<source folder name>_<hash of its path>, with the folder stamp."""

  def __init__(self, py_func, py_file):
    super().__init__(py_func, py_file)
    self._cache_path = os.path.join(cache_root(), self.get_suitable_cache_subpath(py_file))


class TempFolderLocator(_FolderStamp, caching.UserWideCacheLocator):
  """Last resort when nothing else is writable (read-only site-packages and home): the temp dir.

  Without it numba refuses to define a cached function ("no locator available") and the
  evaluator would fail at import.
  """

  def __init__(self, py_func, py_file):
    super().__init__(py_func, py_file)
    root = os.path.join(tempfile.gettempdir(), f"relations_numba_{os.getuid()}")
    self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))


class _CompileNotice(event.Listener):
  """Prints one line at the first compile of a cached function of ours in this process."""

  announced = False

  def on_start(self, ev):
    if _CompileNotice.announced:
      return
    dispatcher = ev.data["dispatcher"]
    impl = getattr(dispatcher._cache, "_impl", None)  # pylint: disable=protected-access
    if impl is None or not isinstance(impl.locator, _FolderStamp):
      return  # not cached, or not ours
    _CompileNotice.announced = True
    where = os.path.dirname(impl.locator.get_cache_path())
    print(
      f"relations: compiling numba code once (up to a minute or two); cached in {where}",
      file=sys.stderr,
      flush=True,
    )

  def on_end(self, ev):
    pass


# pylint: disable-next=protected-access
_LOCATORS = caching.CacheImpl._locator_classes
if UserProvidedFolderLocator not in _LOCATORS:
  # NUMBA_CACHE_DIR first, as numba does; then our user cache folder; then numba's __pycache__ and
  # user-wide fallbacks (a home that cannot be written).
  _LOCATORS[:0] = [
    UserProvidedFolderLocator,
    RelationsCacheLocator,
    InTreeFolderLocator,
    UserWideFolderLocator,
    TempFolderLocator,
  ]
  event.register("numba:compile", _CompileNotice())
