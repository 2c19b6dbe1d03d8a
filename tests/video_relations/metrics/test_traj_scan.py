"""The block-at-a-time trajectory reader: what it accepts equals json.loads bit for bit;
everything else it declines (the general scanner then reads it)."""

import json
import random

import numba
import numpy as np
import pytest

from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import traj_scan

_FILL = b', "obj_traj": [], "x": "' + b"a" * 200 + b'"}'


def _number(rng):
  """A token of the accepted shape: -?digits(.digits)?, 1-7 digits a side."""
  k, f = rng.randrange(1, 8), rng.randrange(0, 8)
  head = str(rng.randrange(10 ** (k - 1) if k > 1 else 0, 10**k))
  sign = "-" if rng.random() < 0.3 else ""
  if f == 0:
    return sign + head
  return sign + head + "." + "".join(rng.choice("0123456789") for _ in range(f))


def _list(rng, boxes, sep=", "):
  return (
    "[" + sep.join("[" + sep.join(_number(rng) for _ in range(4)) + "]" for _ in range(boxes)) + "]"
  )


def _read(text, at=0, cap=1 << 16):
  buf = np.frombuffer(text + _FILL, np.uint8)
  boxes = np.full(4 * cap, np.nan)
  end, nbox, inverted = traj_scan.fast_trajectory(buf, at, boxes, 0, cap)
  return int(end), boxes[: 4 * nbox], bool(inverted)


def _bits(x):
  return np.asarray(x, np.float64).view(np.int64)


# pylint: disable=protected-access
@numba.njit
def _masks(buf, at, byte):
  return traj_scan._token_mask(buf, at), traj_scan._byte_mask(buf, at, byte)


def test_block_masks_classify_every_byte_value_at_every_offset():
  rng = np.random.default_rng(0)
  data = np.concatenate([np.arange(256, dtype=np.uint8), rng.integers(0, 256, 400, np.uint8)])
  for at in range(0, len(data) - 64, 7):
    byte = int(data[at + 5])
    token, same = (int(x) for x in _masks(data, at, byte))
    for j in range(64):
      c = int(data[at + j])
      assert (token >> j) & 1 == (chr(c) in "-.0123456789"), (at, j, c)
      assert (same >> j) & 1 == (c == byte), (at, j, c)


def test_unchecked_loads_and_stores_refuse_other_arrays():
  """They index the data pointer: a strided array or another dtype does not compile."""
  with pytest.raises(numba.core.errors.TypingError):
    _masks(np.zeros(256, np.uint8)[::2], 0, 1)
  with pytest.raises(numba.core.errors.TypingError):
    _masks(np.zeros(256, np.int16), 0, 1)
  buf = np.frombuffer(b"[[1, 2, 3, 4]]" + _FILL, np.uint8)
  with pytest.raises(numba.core.errors.TypingError):
    traj_scan.fast_trajectory(buf, 0, np.zeros(16, np.float32), 0, 4)


def test_common_lists_equal_json_loads_bit_for_bit():
  rng = random.Random(0)
  for trial in range(3000):
    pad = b" " * rng.randrange(0, 70)  # every offset against the 64-byte blocks
    text = _list(rng, rng.randrange(1, 40), rng.choice([", ", ","]))
    end, boxes, inverted = _read(pad + text.encode(), len(pad))
    assert end == len(pad) + len(text), (trial, text)
    want = [float(x) for b in json.loads(text) for x in b]
    assert np.array_equal(_bits(boxes), _bits(want)), text
    rows = np.reshape(want, (-1, 4))
    assert inverted == bool(((rows[:, 0] > rows[:, 2]) | (rows[:, 1] > rows[:, 3])).any())


def test_negative_zero_keeps_json_loads_sign():
  end, boxes, _ = _read(b"[[-0, -0.0, 0, 0.0]]")
  assert end == 20
  assert list(np.signbit(boxes)) == [False, True, False, False]


@pytest.mark.parametrize(
  "text",
  [
    b"[]",
    b"[ [1, 2, 3, 4]]",
    b"[[ 1, 2, 3, 4]]",
    b"[[1 , 2, 3, 4]]",
    b"[[1,  2, 3, 4]]",
    b"[[1, 2, 3, 4] ]",
    b"[[1, 2, 3, 4],\n [1, 2, 3, 4]]",
    b"[[1, 2, 3, 4],  [1, 2, 3, 4]]",
    b"[[1, 2, 3]]",
    b"[[1, 2, 3, 4, 5]]",
    b"[[1, 2, 3, 4], 5]",
    b"[[1e2, 2, 3, 4]]",
    b"[[1.5E2, 2, 3, 4]]",
    b"[[12345678, 2, 3, 4]]",
    b"[[1.12345678, 2, 3, 4]]",
    b"[[01, 2, 3, 4]]",
    b"[[-01.5, 2, 3, 4]]",
    b"[[1., 2, 3, 4]]",
    b"[[.5, 2, 3, 4]]",
    b"[[-, 2, 3, 4]]",
    b"[[--1, 2, 3, 4]]",
    b"[[+1, 2, 3, 4]]",
    b"[[1.2.3, 2, 3, 4]]",
    b"[[1-2, 2, 3, 4]]",
    b"[[NaN, 2, 3, 4]]",
    b"[[-Infinity, 2, 3, 4]]",
    b'[["1", 2, 3, 4]]',
    b"[[1, 2, 3, 4]",
    b"[[1, 2, 3, 4]}",
    b"[[1, 2, 3, 4],]",
    b"[[1, 2, 3, 4], 1]",
  ],
)
def test_other_forms_are_declined(text):
  assert _read(text)[0] == -1


_SHAPES_ACCEPTED = ["0", "-0", "7", "-0.0", "0.5", "10", "-12.25", "1234567.1234567", "-7654321.9"]
_SHAPES_DECLINED = [
  "00", "-00", "01.5", "1.", "-1.", ".5", "-.5", "-", ".", "--1", "1-2", "1.2.3", "1..2",
  "12345678", "1.12345678", "-12345678.5", "1e5", "1E-5", "5-", "0.5-", "-1.5.",
]  # fmt: skip


@pytest.mark.parametrize("number", _SHAPES_ACCEPTED + _SHAPES_DECLINED)
def test_each_number_shape_at_every_offset_to_the_blocks(number):
  """A number as the 1st..4th of a box, starting at every offset to the 64-byte blocks (so
  also running into the next block): read as json.loads reads it, or the list declined."""
  for place in range(4):
    row = ["1.5", "22", "-3.25", "400"]
    row[place] = number
    text = "[[9, 8, 7, 6], [" + ", ".join(row) + "], [1, 2, 3, 4]]"
    for pad in range(70):
      end, boxes, _ = _read(b" " * pad + text.encode(), pad)
      if number in _SHAPES_ACCEPTED:
        want = [float(x) for b in json.loads(text) for x in b]
        assert end == pad + len(text) and np.array_equal(_bits(boxes), _bits(want)), (text, pad)
      else:
        assert end == -1, (text, pad)


def test_lists_near_the_end_of_the_buffer_or_the_capacity_are_declined():
  text = b"[[1, 2, 3, 4], [5, 6, 7, 8]]"
  buf = np.frombuffer(text + b"}" * 40, np.uint8)  # fewer than 64 + 32 bytes after
  assert traj_scan.fast_trajectory(buf, 0, np.zeros(64), 0, 16)[0] == -1
  assert _read(text, cap=2)[0] == len(text)
  assert _read(text, cap=1)[0] == -1
  # A capacity beyond the array's own is the array's (its stores are unchecked).
  buf = np.frombuffer(text + _FILL, np.uint8)
  assert traj_scan.fast_trajectory(buf, 0, np.zeros(8), 0, 16)[0] == len(text)
  assert traj_scan.fast_trajectory(buf, 0, np.zeros(7), 0, 16)[0] == -1


def test_whatever_is_accepted_after_random_edits_is_what_json_loads_reads():
  """Byte edits of common lists: an accepted span is a list of 4-number lists
  that json.loads reads to the same doubles; the rest is declined."""
  rng = random.Random(1)
  alphabet = b"0123456789.-, []eE+\n\txa\xff"
  accepted = declined = 0
  for _ in range(6000):
    text = bytearray(_list(rng, rng.randrange(1, 6), rng.choice([", ", ","])).encode())
    for _ in range(rng.randrange(1, 3)):
      at = rng.randrange(len(text))
      op = rng.randrange(3)
      if op == 0:
        text[at] = rng.choice(alphabet)
      elif op == 1:
        text.insert(at, rng.choice(alphabet))
      elif len(text) > 2:
        del text[at]
    end, boxes, _ = _read(bytes(text))
    if end < 0:
      declined += 1
      continue
    accepted += 1
    value = json.loads(bytes(text[:end]))
    assert all(len(b) == 4 and all(type(x) in (int, float) for x in b) for b in value)
    want = [float(x) for b in value for x in b]
    assert np.array_equal(_bits(boxes), _bits(want)), bytes(text)
  assert accepted > 500 and declined > 500


def test_the_scanner_reads_accepted_and_declined_lists_alike():
  """A document mixing both: the table holds json.loads's boxes in order."""
  rng = random.Random(2)
  preds = []
  for p in range(60):
    common = _list(rng, rng.randrange(1, 30))
    other = (
      "[" + ", ".join(f"[{rng.random()!r}, 2e1, 3, 4]" for _ in range(rng.randrange(1, 5))) + "]"
    )
    subj, obj = (common, other) if p % 2 else (other, common)
    preds.append(
      '{"triplet": ["a", "b", "c"], "score": 0.5, "duration": [0, 1], '
      f'"sub_traj": {subj}, "obj_traj": {obj}}}'
    )
  text = '{"results": {"v": [' + ", ".join(preds) + "]}}"
  table = fastjson.parse_table(text.encode())
  want = [
    float(x)
    for p in json.loads(text)["results"]["v"]
    for side in ("sub_traj", "obj_traj")
    for b in p[side]
    for x in b
  ]
  assert np.array_equal(_bits(table.boxes.reshape(-1)), _bits(want))
