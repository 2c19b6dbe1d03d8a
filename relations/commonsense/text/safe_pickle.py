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

Allowed callables can still be asked for memory: `bytes(10**12)`,
`bytearray(n)`, `numpy.ndarray((10**6, 10**6))` or `_reconstruct(ndarray,
huge_shape, dtype)` allocate what a few bytes of pickle ask for. Each such
call is checked before it runs, and all of them together may allocate at most
`max(2 * len(pickle), 1 MiB)` bytes: a real data pickle never needs more than
it holds (numpy's own pickles reconstruct a 0-size array and fill it from the
file's bytes).
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
    raise UnsafePickleError(f'_codecs.encode only allowed for latin1 text, got {encoding!r}')
  return codecs.encode(obj, encoding, errors)


_BUILTINS = {
  name: getattr(builtins, name)
  for name in (
    'dict',
    'list',
    'tuple',
    'set',
    'frozenset',
    'str',
    'bytes',
    'bytearray',
    'int',
    'float',
    'complex',
    'bool',
  )
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


_MIN_BUDGET = 1 << 20


def _nbytes(shape, dtype) -> int:
  """Bytes an array of `shape` and `dtype` needs (shape may be an int or a sequence)."""
  dims = (shape,) if isinstance(shape, int) else tuple(shape)
  n = np.dtype(dtype).itemsize
  for d in dims:
    if not isinstance(d, (int, np.integer)) or d < 0:
      raise TypeError(f'bad array dimension {d!r}')
    n *= int(d)
  return n


class _Unpickler(pickle._Unpickler):  # pylint: disable=protected-access
  """The pure-Python unpickler (its opcodes can be checked) with an allocation budget."""

  dispatch = dict(pickle._Unpickler.dispatch)  # pylint: disable=protected-access

  def __init__(self, f: BinaryIO, source: str, budget: int):
    super().__init__(f)
    self._source = source
    self._budget = budget

  def _charge(self, func, args) -> None:
    """Counts the bytes `func(*args)` would allocate; refuses a call over the budget."""
    n = 0
    try:
      if func in (bytes, bytearray) and args:
        a = args[0]
        if isinstance(a, int) and not isinstance(a, bool):
          n = a
        elif isinstance(a, (bytes, bytearray, memoryview, str)):
          n = len(a)
      elif func is np.ndarray and args:
        buffer = args[2] if len(args) > 2 else None
        if buffer is None:
          n = _nbytes(args[0], args[1] if len(args) > 1 else float)
      elif func is _multiarray._reconstruct and len(args) >= 3:
        n = _nbytes(args[1], args[2])
    except (TypeError, ValueError, OverflowError) as e:
      raise UnsafePickleError(
        f'{self._source}: bad arguments to {getattr(func, "__name__", func)}: {e}'
      ) from None
    if n > self._budget:
      raise UnsafePickleError(
        f'{self._source}: {getattr(func, "__name__", func)}(...) would allocate '
        f'{n} bytes, more than this {self._budget}-byte budget allows (at most '
        'twice the pickle\'s size, 1 MiB for small files); refusing.'
      )
    self._budget -= n

  def load_reduce(self):
    self._charge(self.stack[-2], self.stack[-1])
    super().load_reduce()

  dispatch[pickle.REDUCE[0]] = load_reduce

  def load_newobj(self):
    self._charge(self.stack[-2], self.stack[-1])
    super().load_newobj()

  dispatch[pickle.NEWOBJ[0]] = load_newobj

  def load_newobj_ex(self):
    self._charge(self.stack[-3], self.stack[-2])
    super().load_newobj_ex()

  dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

  def find_class(self, module, name):
    fn = _ALLOWED.get((module, name))
    if fn is None:
      raise UnsafePickleError(
        f'{self._source}: refusing to load global {module}.{name}; only '
        'numpy arrays and builtin containers/scalars are allowed in data '
        'pickles.'
      )
    return fn

  def persistent_load(self, pid):
    raise UnsafePickleError(f'{self._source}: persistent ids are not allowed.')


def _check_values(obj: Any, source: str, depth: int = 0) -> None:
  if depth > 100:
    raise UnsafePickleError(f'{source}: nesting deeper than 100.')
  if isinstance(obj, np.ndarray):
    if obj.dtype.hasobject:
      raise UnsafePickleError(f'{source}: object-dtype numpy arrays are not allowed.')
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
    budget = max(2 * len(data), _MIN_BUDGET)
    obj = _Unpickler(io.BytesIO(data), source, budget).load()
  except UnsafePickleError:
    raise
  except (
    pickle.UnpicklingError,
    EOFError,
    ValueError,
    TypeError,
    IndexError,
    KeyError,
    AttributeError,
    RecursionError,
    MemoryError,
  ) as e:
    raise pickle.UnpicklingError(f'{source}: corrupt pickle: {e}') from e
  _check_values(obj, source)
  return obj


def load(path_or_file: Union[str, os.PathLike, BinaryIO]) -> Any:
  """Loads a pickle file with `loads` semantics (path or binary file object)."""
  if isinstance(path_or_file, (str, os.PathLike)):
    with open(path_or_file, 'rb') as f:
      return loads(f.read(), os.fspath(path_or_file))
  return loads(path_or_file.read(), getattr(path_or_file, 'name', '<file>'))
