"""numba's on-disk cache, kept only while the whole package folder of a function is unchanged.

numba stamps a cached function with its own source file. But compiled code embeds the code of
every function it calls, often from a sibling module (`json_scan` calls `traj_scan`, and
`annotation_scan` calls `json_scan`): after an edit of the callee alone, the caller's cache
would go on running the old callee, in tests and benchmarks too. Importing this module (every
module here that caches numba functions does, before defining them) makes the stamp of a
function defined under `relations/` the hash of every .py file in its folder. An installed
package never changes, so users only pay one compile, as before.
"""

import functools
import hashlib
import os

from numba.core import caching

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


# pylint: disable-next=protected-access
_LOCATORS = caching.CacheImpl._locator_classes
if UserProvidedFolderLocator not in _LOCATORS:
  # First, in numba's own order (NUMBA_CACHE_DIR, then __pycache__, then the user's cache).
  _LOCATORS[:0] = [UserProvidedFolderLocator, InTreeFolderLocator, UserWideFolderLocator]
