"""Restricted unpickler for data files (the released VisualCOMET features).

`pickle.load` runs whatever callables a file names, so a data file could run
arbitrary code. The released feature files are pickles of
`{"image_features": ndarray, "object_features": ndarray}`; this module loads
such files while allowing only:

* builtin containers and scalars (dict, list, tuple, set, frozenset, str,
  bytes, bytearray, int, float, complex, bool, None), and
* plain numpy arrays and numpy scalars of non-object dtypes, through the few
  numpy reconstruction functions that `ndarray.__reduce__` emits (both the
  numpy 1.x `numpy.core.*` and the numpy 2 `numpy._core.*` module names), plus
  `_codecs.encode(text, "latin1")`, which protocol-2 pickles written by
  Python 3 use for raw bytes.

Every other global (os.system, builtins.eval, copyreg._reconstructor, any
class) is rejected with `UnsafePickleError` naming the file and the global,
before anything is called. After loading, object-dtype arrays (whose items
could hide other objects) are rejected too.
"""

import builtins
import codecs
import io
import os
import pickle
from typing import Any, BinaryIO, Union

import numpy as np
from numpy._core import multiarray as _multiarray
from numpy._core import numeric as _numeric


class UnsafePickleError(pickle.UnpicklingError):
  """A pickle referenced something other than numpy arrays and builtins."""


def _latin1_encode(obj, encoding='latin1', errors='strict'):
  # Python 3 pickles bytes in protocol 2 as _codecs.encode(str, 'latin1').
  if encoding not in ('latin1', 'latin-1') or not isinstance(obj, str):
    raise UnsafePickleError(
        f'_codecs.encode only allowed for latin1 text, got {encoding!r}')
  return codecs.encode(obj, encoding, errors)


_BUILTINS = {
    name: getattr(builtins, name)
    for name in ('dict', 'list', 'tuple', 'set', 'frozenset', 'str', 'bytes',
                 'bytearray', 'int', 'float', 'complex', 'bool')
}

_ALLOWED = {}
for _mod in ('numpy.core.multiarray', 'numpy._core.multiarray'):
  _ALLOWED[(_mod, '_reconstruct')] = _multiarray._reconstruct
  _ALLOWED[(_mod, 'scalar')] = _multiarray.scalar
for _mod in ('numpy.core.numeric', 'numpy._core.numeric'):
  _ALLOWED[(_mod, '_frombuffer')] = _numeric._frombuffer
_ALLOWED[('numpy', 'ndarray')] = np.ndarray
_ALLOWED[('numpy', 'dtype')] = np.dtype
_ALLOWED[('_codecs', 'encode')] = _latin1_encode
for _name, _fn in _BUILTINS.items():
  _ALLOWED[('builtins', _name)] = _fn
  _ALLOWED[('__builtin__', _name)] = _fn  # Python 2 protocol names.


class _Unpickler(pickle.Unpickler):

  def __init__(self, f: BinaryIO, source: str):
    super().__init__(f)
    self._source = source

  def find_class(self, module, name):
    fn = _ALLOWED.get((module, name))
    if fn is None:
      raise UnsafePickleError(
          f'{self._source}: refusing to load global {module}.{name}; only '
          'numpy arrays and builtin containers/scalars are allowed in data '
          'pickles.')
    return fn

  def persistent_load(self, pid):
    raise UnsafePickleError(f'{self._source}: persistent ids are not allowed.')


def _check_values(obj: Any, source: str, depth: int = 0) -> None:
  if depth > 100:
    raise UnsafePickleError(f'{source}: nesting deeper than 100.')
  if isinstance(obj, np.ndarray):
    if obj.dtype.hasobject:
      raise UnsafePickleError(
          f'{source}: object-dtype numpy arrays are not allowed.')
  elif isinstance(obj, dict):
    for k, v in obj.items():
      _check_values(k, source, depth + 1)
      _check_values(v, source, depth + 1)
  elif isinstance(obj, (list, tuple, set, frozenset)):
    for v in obj:
      _check_values(v, source, depth + 1)


def loads(data: bytes, source: str = '<bytes>') -> Any:
  """Unpickles `data` allowing only numpy arrays and builtins.

  Args:
    data: pickle bytes (any protocol).
    source: name used in error messages (e.g. the file path).

  Returns:
    The unpickled object.

  Raises:
    UnsafePickleError: a disallowed global or an object-dtype array.
    pickle.UnpicklingError: a corrupt pickle.
  """
  try:
    obj = _Unpickler(io.BytesIO(data), source).load()
  except UnsafePickleError:
    raise
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
    raise pickle.UnpicklingError(f'{source}: corrupt pickle: {e}') from e
  _check_values(obj, source)
  return obj


def load(path_or_file: Union[str, os.PathLike, BinaryIO]) -> Any:
  """Loads a pickle file with `loads` semantics (path or binary file object)."""
  if isinstance(path_or_file, (str, os.PathLike)):
    with open(path_or_file, 'rb') as f:
      return loads(f.read(), os.fspath(path_or_file))
  return loads(path_or_file.read(), getattr(path_or_file, 'name', '<file>'))
