"""Restricted unpickler: numpy feature pickles load, anything else is refused."""

import os
import pickle

import numpy as np
import pytest

from relations.commonsense.text import safe_pickle


def _features():
  rng = np.random.default_rng(0)
  return {
    "image_features": rng.standard_normal(2048).astype(np.float32),
    "object_features": rng.standard_normal((3, 2048)).astype(np.float32),
    "meta": [1, 2.5, "x", (True, None), {"k": b"\x00\xff"}],
    "scalar": np.float32(1.5),
    "ints": np.arange(5, dtype=np.int64),
  }


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_round_trip_all_protocols(tmp_path, protocol):
  obj = _features()
  path = tmp_path / "x.pkl"
  path.write_bytes(pickle.dumps(obj, protocol=protocol))
  got = safe_pickle.load(str(path))
  np.testing.assert_array_equal(got["image_features"], obj["image_features"])
  np.testing.assert_array_equal(got["object_features"], obj["object_features"])
  assert got["object_features"].dtype == np.float32
  assert got["meta"] == obj["meta"] and got["scalar"] == np.float32(1.5)
  np.testing.assert_array_equal(got["ints"], obj["ints"])


def test_numpy1_module_names():
  # Pickles written by numpy 1.x name numpy.core.multiarray.
  data = pickle.dumps(np.eye(2, dtype=np.float32), protocol=2)
  old = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
  assert old != data
  np.testing.assert_array_equal(safe_pickle.loads(old), np.eye(2))


class _Evil:
  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return (os.system, (f"touch {self.path}",))


def test_malicious_pickle_rejected_without_running(tmp_path):
  marker = tmp_path / "pwned"
  data = pickle.dumps({"image_features": _Evil(str(marker))})
  with pytest.raises(
    safe_pickle.UnsafePickleError,
    match=r"feat\.pkl: refusing to load global "
    r"(posix|os)\.system",
  ):
    safe_pickle.loads(data, source="feat.pkl")
  assert not marker.exists()


def test_eval_and_classes_rejected():
  data = pickle.dumps(eval, protocol=2)  # builtins.eval
  with pytest.raises(safe_pickle.UnsafePickleError, match=r"(__builtin__|builtins)\.eval"):
    safe_pickle.loads(data)
  with pytest.raises(safe_pickle.UnsafePickleError, match="OrderedDict"):
    import collections  # pylint: disable=g-import-not-at-top

    safe_pickle.loads(pickle.dumps(collections.OrderedDict(a=1)))


def test_object_arrays_rejected():
  arr = np.array([1, "a"], dtype=object)
  with pytest.raises(safe_pickle.UnsafePickleError, match="object-dtype"):
    safe_pickle.loads(pickle.dumps(arr))


def test_codecs_only_latin1():
  import codecs  # pylint: disable=g-import-not-at-top

  data = pickle.dumps(codecs.encode, protocol=2)
  fn = safe_pickle.loads(data)
  assert fn("ab", "latin1") == b"ab"
  with pytest.raises(safe_pickle.UnsafePickleError, match="latin1"):
    fn("ab", "rot13")


def test_corrupt_pickle_message():
  with pytest.raises(pickle.UnpicklingError, match="f.pkl: corrupt pickle"):
    safe_pickle.loads(b"\x80\x04garbage", source="f.pkl")


class _Call:
  """Pickles as `func(*args)` (the unpickler would run the call)."""

  def __init__(self, func, args):
    self.func, self.args = func, args

  def __reduce__(self):
    return (self.func, self.args)


@pytest.mark.parametrize(
  "func,args,what",
  [
    (bytes, (10**12,), "bytes"),
    (bytearray, (10**12,), "bytearray"),
    (np.ndarray, ((10**6, 10**6), "f8"), "ndarray"),
    (np._core.multiarray._reconstruct, (np.ndarray, (10**6, 10**6), b"b"), "_reconstruct"),
  ],
)
def test_huge_allocations_refused_before_they_run(func, args, what):
  data = pickle.dumps({"image_features": _Call(func, args)}, protocol=2)
  assert len(data) < 300
  with pytest.raises(
    safe_pickle.UnsafePickleError,
    match=rf"feat\.pkl: {what}\(\.\.\.\) would allocate \d+ bytes, more than "
    r"this 1048576-byte budget",
  ):
    safe_pickle.loads(data, source="feat.pkl")


def test_many_small_allocations_share_one_budget():
  # Ten distinct 600 kB bytearrays: each fits in 1 MiB, together they do not.
  data = pickle.dumps([_Call(bytearray, (600_000,)) for _ in range(10)], protocol=2)
  with pytest.raises(
    safe_pickle.UnsafePickleError,
    match=r"bytearray\(\.\.\.\) would allocate "
    r"600000 bytes, more than this 448576-byte budget",
  ):
    safe_pickle.loads(data)
  # One fits.
  assert safe_pickle.loads(pickle.dumps([_Call(bytearray, (600_000,))])) == [bytearray(600_000)]


def test_large_real_arrays_still_load():
  # 8 MB of float64 (numpy's own pickles: a 0-size array filled from the file's bytes).
  big = np.arange(10**6, dtype=np.float64)
  for protocol in (2, 4, 5):
    np.testing.assert_array_equal(safe_pickle.loads(pickle.dumps(big, protocol=protocol)), big)
