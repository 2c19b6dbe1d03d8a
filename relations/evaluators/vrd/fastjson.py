"""Reads a VRD submission / GT JSON file straight into a `RelationTable`.

`json.load` of a VidOR-sized submission builds hundreds of millions of
Python floats and lists (minutes, and ~13 GB for 69M boxes); the scorer
needs flat float64 arrays. `read_table(path)` parses the bytes with a
compiled scanner (numba) and writes the boxes directly into one [N, 4]
array, with the values `json.load` would give:

- Numbers: a decimal with <= 15 significant digits and a decimal exponent
  within +-22 is `m * 10**e` or `m / 10**-e` of two exactly representable
  doubles, one correctly rounded operation (Clinger's fast path), which is
  the correctly rounded value Python's `float()` returns. Every other float
  token is converted by numpy's string -> float64 cast (correctly rounded,
  checked against `float()` in the tests). `NaN` / `Infinity` /
  `-Infinity` are accepted as `json.load` does.
- Strings (video ids, names) are decoded with `json.loads` of their raw
  bytes, once per distinct byte string, so escapes decode exactly.
- The whole document is validated as JSON (grammar, nesting); values of
  keys the scorer does not read are validated and skipped.

Anything the table cannot represent exactly - integer scores (the official
integer-array behaviour), integers with more than 15 digits, a box that is
not 4 numbers, a field that is missing or of another type, duplicate keys or
video ids (`json.load` keeps the last) - raises `NotTabular`; callers then
use `json.load` and the dict path, which reproduce the official behaviour
on such input (and the validator explains it).
"""

import json
import lzma

import numba
import numpy as np

from relations.evaluators.vrd import columns
from relations.evaluators.vrd import kernels

# Error codes of the scanner (position in `_MESSAGES`).
_MESSAGES = (
    "ok", "invalid JSON", "nesting deeper than 512", "unexpected type or "
    "shape where the table needs an object / array / number / string",
    "a box is not 4 numbers", "an integer score (official integer-array "
    "semantics)", "an integer with more than 15 digits", "a required field "
    "is missing", "a key appears twice in one object", "a triplet is not 3 "
    "strings", "a duration is not 2 numbers", "no top-level 'results' object",
    "(internal: slow-number buffer full)",
)
_INVALID, _DEEP, _TYPE, _BOX, _INT_SCORE, _BIG_INT = 1, 2, 3, 4, 5, 6
_MISSING, _DUPLICATE, _TRIPLET, _DURATION, _NO_RESULTS = 7, 8, 9, 10, 11
_SLOW_FULL = 12

# Number kinds.
_FLOAT, _INT, _SLOW, _BAD = 0, 1, 2, -1

_POW10 = np.array([10.0 ** k for k in range(23)])


class NotTabular(ValueError):
  """The file is valid JSON the table reader does not take; use json.load."""


@numba.njit(cache=True, nogil=True, inline="always")
def _ws(buf, i):
  n = len(buf)
  while i < n:
    c = buf[i]
    if c != 32 and c != 10 and c != 13 and c != 9:
      break
    i += 1
  return i


@numba.njit(cache=True, nogil=True, inline="always")
def _string_end(buf, i):
  """buf[i] is '"': index after the closing quote, -1 if invalid."""
  n = len(buf)
  i += 1
  while i < n:
    c = buf[i]
    if c == 34:
      return i + 1
    if c == 92:
      if i + 1 >= n:
        return -1
      e = buf[i + 1]
      if e == 117:                                   # \uXXXX
        for j in range(i + 2, i + 6):
          if j >= n:
            return -1
          h = buf[j]
          if not ((48 <= h <= 57) or (65 <= h <= 70) or (97 <= h <= 102)):
            return -1
        i += 6
        continue
      if not (e == 34 or e == 92 or e == 47 or e == 98 or e == 102
              or e == 110 or e == 114 or e == 116):
        return -1
      i += 2
      continue
    if c < 32:
      return -1
    i += 1
  return -1


@numba.njit(cache=True, nogil=True, inline="always")
def _literal(buf, i, word):
  if i + len(word) > len(buf):
    return -1
  for k in range(len(word)):
    if buf[i + k] != word[k]:
      return -1
  return i + len(word)


_NAN = np.frombuffer(b"NaN", np.uint8)
_INF = np.frombuffer(b"Infinity", np.uint8)
_TRUE = np.frombuffer(b"true", np.uint8)
_FALSE = np.frombuffer(b"false", np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)


@numba.njit(cache=True, nogil=True, inline="always")
def _number(buf, i, pow10, nan_w, inf_w):
  """JSON number (or NaN / Infinity / -Infinity) at i.

  Returns (value, kind, end): kind _FLOAT / _INT with the exact value,
  _SLOW (valid; convert buf[i:end] exactly elsewhere), _BAD.
  """
  n = len(buf)
  neg = False
  j = i
  if j < n and buf[j] == 45:
    neg = True
    j += 1
  if j < n and buf[j] == 73:                         # Infinity
    e = _literal(buf, j, inf_w)
    if e < 0:
      return 0.0, _BAD, -1
    return (-np.inf if neg else np.inf), _FLOAT, e
  if not neg and j < n and buf[j] == 78:             # NaN
    e = _literal(buf, j, nan_w)
    if e < 0:
      return 0.0, _BAD, -1
    return np.nan, _FLOAT, e
  if j >= n or not (48 <= buf[j] <= 57):
    return 0.0, _BAD, -1
  m = np.uint64(0)
  sig = 0            # significant digits accumulated (leading zeros skipped)
  dropped = False    # a non-zero digit beyond 19 significant ones
  int_digits = 0
  if buf[j] == 48:
    j += 1
    int_digits = 1
  else:
    while j < n and 48 <= buf[j] <= 57:
      d = buf[j] - 48
      if sig < 19:
        m = m * np.uint64(10) + np.uint64(d)
        sig += 1
      else:
        dropped = True
      int_digits += 1
      j += 1
  exp10 = 0
  if int_digits > sig:            # integer digits beyond 19: shift
    exp10 += int_digits - sig if sig > 0 else 0
  is_int = True
  if j < n and buf[j] == 46:                         # fraction
    is_int = False
    j += 1
    if j >= n or not (48 <= buf[j] <= 57):
      return 0.0, _BAD, -1
    while j < n and 48 <= buf[j] <= 57:
      d = buf[j] - 48
      if sig < 19:
        if sig > 0 or d != 0:
          m = m * np.uint64(10) + np.uint64(d)
          sig += 1
        exp10 -= 1
      elif d != 0:
        dropped = True
      j += 1
  if j < n and (buf[j] == 101 or buf[j] == 69):      # exponent
    is_int = False
    j += 1
    eneg = False
    if j < n and (buf[j] == 43 or buf[j] == 45):
      eneg = buf[j] == 45
      j += 1
    if j >= n or not (48 <= buf[j] <= 57):
      return 0.0, _BAD, -1
    e = 0
    while j < n and 48 <= buf[j] <= 57:
      if e < 100000:
        e = e * 10 + (buf[j] - 48)
      j += 1
    exp10 += -e if eneg else e
  if is_int:
    if int_digits > 15:
      return 0.0, _SLOW, j
    v = float(m)                 # exact: < 10**15 < 2**53
    return (-v if neg and v != 0 else v), _INT, j   # "-0" is the int 0
  if dropped or sig > 15 or exp10 < -22 or exp10 > 22:
    return 0.0, _SLOW, j
  v = float(m)
  if exp10 < 0:
    v = v / pow10[-exp10]
  else:
    v = v * pow10[exp10]
  return (-v if neg else v), _FLOAT, j


@numba.njit(cache=True, nogil=True)
def _skip_value(buf, i, pow10, words):
  """Validates and skips one JSON value at i; end index or -(error)."""
  n = len(buf)
  stack = np.empty(512, np.uint8)
  sp = 0
  while True:
    i = _ws(buf, i)
    if i >= n:
      return -_INVALID
    c = buf[i]
    if c == 123 or c == 91:                          # { or [
      i = _ws(buf, i + 1)
      if i < n and buf[i] == (125 if c == 123 else 93):
        i += 1
      else:
        if sp == 512:
          return -_DEEP
        stack[sp] = 1 if c == 123 else 2
        sp += 1
        if c == 123:
          if i >= n or buf[i] != 34:
            return -_INVALID
          i = _string_end(buf, i)
          if i < 0:
            return -_INVALID
          i = _ws(buf, i)
          if i >= n or buf[i] != 58:
            return -_INVALID
          i += 1
        continue
    elif c == 34:
      i = _string_end(buf, i)
    elif c == 116:
      i = _literal(buf, i, words[0])
    elif c == 102:
      i = _literal(buf, i, words[1])
    elif c == 110:
      i = _literal(buf, i, words[2])
    else:
      _, kind, i = _number(buf, i, pow10, words[3], words[4])
      if kind == _BAD:
        i = -1
    if i < 0:
      return -_INVALID
    while True:                      # after a value: ',' or close
      if sp == 0:
        return i
      i = _ws(buf, i)
      if i >= n:
        return -_INVALID
      c = buf[i]
      if c == 44:
        i = _ws(buf, i + 1)
        if stack[sp - 1] == 1:
          if i >= n or buf[i] != 34:
            return -_INVALID
          i = _string_end(buf, i)
          if i < 0:
            return -_INVALID
          i = _ws(buf, i)
          if i >= n or buf[i] != 58:
            return -_INVALID
          i += 1
        break
      if c == (125 if stack[sp - 1] == 1 else 93):
        i += 1
        sp -= 1
        continue
      return -_INVALID


@numba.njit(cache=True, nogil=True, inline="always")
def _key_is(buf, s, e, word):
  """Raw key token buf[s:e] (with quotes) equals '"' + word + '"'."""
  if e - s != len(word) + 2:
    return False
  for k in range(len(word)):
    if buf[s + 1 + k] != word[k]:
      return False
  return True


@numba.njit(cache=True, nogil=True, inline="always")
def _has_escape(buf, s, e):
  for k in range(s, e):
    if buf[k] == 92:
      return True
  return False


@numba.njit(cache=True, nogil=True, inline="always")
def _after_item(buf, i, close):
  """After an array / object item: (index after ',' (more=1) or after the
  closing bracket (more=0)); index -1 if invalid."""
  i = _ws(buf, i)
  if i < len(buf):
    if buf[i] == 44:
      return _ws(buf, i + 1), 1
    if buf[i] == close:
      return i + 1, 0
  return -1, 0


@numba.njit(cache=True, nogil=True)
def _hash(buf, s, e):
  h = np.uint64(14695981039346656037)
  for k in range(s, e):
    h = (h ^ np.uint64(buf[k])) * np.uint64(1099511628211)
  return np.int64(h)



@numba.njit(cache=True, nogil=True, inline="always")
def _has_dot_or_exp(buf, s, e):
  for k in range(s, e):
    c = buf[k]
    if c == 46 or c == 101 or c == 69:
      return True
  return False


@numba.njit(cache=True, nogil=True)
def _scan(buf, is_gt, pow10, words, keys, boxes, name_tok, score, dur,
          dur_flags, traj, video_tok, video_bounds, slow, counts):
  """Parses the whole document; returns (error code, byte position).

  Submission: a top-level object whose "results" is parsed into the
  arrays and whose other members are validated and skipped. GT (is_gt):
  the top-level object is the {video_id: [...]} mapping itself.
  counts (out): [videos, predictions, boxes, slow numbers]; slow[k] =
  (start byte, 4 * target index + target kind: 0 box value, 1 score,
  2 duration bound).
  """
  n = len(buf)
  i = _ws(buf, 0)
  if is_gt:
    err, i = _results(buf, i, is_gt, pow10, words, keys, boxes, name_tok,
                      score, dur, dur_flags, traj, video_tok, video_bounds,
                      slow, counts)
    if err:
      return err, i
  else:
    if i >= n or buf[i] != 123:
      return _TYPE, i
    i = _ws(buf, i + 1)
    more = 1
    if i < n and buf[i] == 125:
      i += 1
      more = 0
    seen = False
    while more:
      if i >= n or buf[i] != 34:
        return _INVALID, i
      ks = i
      i = _string_end(buf, i)
      if i < 0:
        return _INVALID, ks
      ke = i
      i = _ws(buf, i)
      if i >= n or buf[i] != 58:
        return _INVALID, i
      i = _ws(buf, i + 1)
      if _has_escape(buf, ks, ke):
        return _TYPE, ks
      if _key_is(buf, ks, ke, keys[0]):
        if seen:
          return _DUPLICATE, ks     # json.load would keep the last one
        seen = True
        err, i = _results(buf, i, is_gt, pow10, words, keys, boxes,
                          name_tok, score, dur, dur_flags, traj, video_tok,
                          video_bounds, slow, counts)
        if err:
          return err, i
      else:
        i = _skip_value(buf, i, pow10, words)
        if i < 0:
          return -i, ks
      i, more = _after_item(buf, i, 125)
      if i < 0:
        return _INVALID, ks
    if not seen:
      return _NO_RESULTS, 0
  i = _ws(buf, i)
  if i != n:
    return _INVALID, i              # json.load: "Extra data"
  return 0, 0


@numba.njit(cache=True, nogil=True, inline="always")
def _field_key(buf, i, keys):
  """Key of an object member at i: (field 1-5 or -1, index after ':', key
  start); field -2 on invalid JSON, -3 on an escaped key."""
  n = len(buf)
  if i >= n or buf[i] != 34:
    return -2, i, i
  ks = i
  i = _string_end(buf, i)
  if i < 0:
    return -2, ks, ks
  ke = i
  i = _ws(buf, i)
  if i >= n or buf[i] != 58:
    return -2, i, ks
  i = _ws(buf, i + 1)
  if _has_escape(buf, ks, ke):
    return -3, i, ks
  for f in range(1, 6):
    if _key_is(buf, ks, ke, keys[f]):
      return f, i, ks
  return -1, i, ks


@numba.njit(cache=True, nogil=True)
def _results(buf, i, is_gt, pow10, words, keys, boxes, name_tok, score, dur,
             dur_flags, traj, video_tok, video_bounds, slow, counts):
  """The {video_id: [prediction, ...]} object at i; (error, end index)."""
  n = len(buf)
  nv = npred = nbox = nslow = 0
  if i >= n or buf[i] != 123:
    return _TYPE, i
  i = _ws(buf, i + 1)
  more = 1
  if i < n and buf[i] == 125:
    i += 1
    more = 0
  while more:
    if i >= n or buf[i] != 34:
      return _INVALID, i
    video_tok[nv, 0] = i
    i = _string_end(buf, i)
    if i < 0:
      return _INVALID, video_tok[nv, 0]
    video_tok[nv, 1] = i
    i = _ws(buf, i)
    if i >= n or buf[i] != 58:
      return _INVALID, i
    i = _ws(buf, i + 1)
    if i >= n or buf[i] != 91:
      return _TYPE, i
    i = _ws(buf, i + 1)
    pmore = 1
    if i < n and buf[i] == 93:
      i += 1
      pmore = 0
    while pmore:
      # One prediction object.
      if i >= n or buf[i] != 123:
        return _TYPE, i
      pstart = i
      p = npred
      seen = 0
      score[p] = 0.0
      i = _ws(buf, i + 1)
      fmore = 1
      if i < n and buf[i] == 125:
        i += 1
        fmore = 0
      while fmore:
        field, i, ks = _field_key(buf, i, keys)
        if field == -2:
          return _INVALID, i
        if field == -3:
          return _TYPE, ks
        if field > 0:
          if seen & (1 << field):
            return _DUPLICATE, ks    # json.load would keep the last one
          seen |= 1 << field
        if field == 1:                                   # triplet
          if i >= n or buf[i] != 91:
            return _TRIPLET, i
          i = _ws(buf, i + 1)
          for k in range(3):
            if i >= n or buf[i] != 34:
              return _TRIPLET, i
            name_tok[p, k, 0] = i
            i = _string_end(buf, i)
            if i < 0:
              return _INVALID, name_tok[p, k, 0]
            name_tok[p, k, 1] = i
            i, tmore = _after_item(buf, i, 93)
            if i < 0:
              return _INVALID, name_tok[p, k, 0]
            if tmore != (1 if k < 2 else 0):
              return _TRIPLET, i
        elif field == 2:                                 # score
          v, kind, e = _number(buf, i, pow10, words[3], words[4])
          if kind == _BAD:
            return _TYPE, i
          if kind == _INT:
            return _INT_SCORE, i
          if kind == _SLOW:
            if not _has_dot_or_exp(buf, i, e):
              return _INT_SCORE, i
            if nslow == len(slow):
              return _SLOW_FULL, i
            slow[nslow, 0], slow[nslow, 1] = i, 4 * p + 1
            nslow += 1
          score[p] = v
          i = e
        elif field == 3:                                 # duration
          if i >= n or buf[i] != 91:
            return _DURATION, i
          i = _ws(buf, i + 1)
          flags = 0
          for k in range(2):
            v, kind, e = _number(buf, i, pow10, words[3], words[4])
            if kind == _BAD:
              return _DURATION, i
            if kind == _INT:
              flags |= 1 << k           # kernels.START_INT / END_INT
            elif kind == _SLOW:
              if not _has_dot_or_exp(buf, i, e):
                return _BIG_INT, i
              if nslow == len(slow):
                return _SLOW_FULL, i
              slow[nslow, 0], slow[nslow, 1] = i, 4 * (2 * p + k) + 2
              nslow += 1
            dur[p, k] = v
            i, dmore = _after_item(buf, e, 93)
            if i < 0:
              return _INVALID, e
            if dmore != (1 if k == 0 else 0):
              return _DURATION, i
          dur_flags[p] = flags
        elif field == 4 or field == 5:                   # sub / obj traj
          side = field - 4
          if i >= n or buf[i] != 91:
            return _TYPE, i
          traj[p, side, 0] = nbox
          i = _ws(buf, i + 1)
          bmore = 1
          if i < n and buf[i] == 93:
            i += 1
            bmore = 0
          while bmore:
            if i >= n or buf[i] != 91:
              return _BOX, i
            i = _ws(buf, i + 1)
            for k in range(4):
              v, kind, e = _number(buf, i, pow10, words[3], words[4])
              if kind == _BAD:
                return _BOX, i
              if kind == _SLOW:
                if not _has_dot_or_exp(buf, i, e):
                  return _BIG_INT, i
                if nslow == len(slow):
                  return _SLOW_FULL, i
                slow[nslow, 0], slow[nslow, 1] = i, 4 * (4 * nbox + k)
                nslow += 1
              boxes[4 * nbox + k] = v
              i, cmore = _after_item(buf, e, 93)
              if i < 0:
                return _INVALID, e
              if cmore != (1 if k < 3 else 0):
                return _BOX, i
            nbox += 1
            i, bmore = _after_item(buf, i, 93)
            if i < 0:
              return _INVALID, i
          traj[p, side, 1] = nbox - traj[p, side, 0]
        else:
          i = _skip_value(buf, i, pow10, words)
          if i < 0:
            return -i, ks
        i, fmore = _after_item(buf, i, 125)
        if i < 0:
          return _INVALID, ks
      need = (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5)
      if not is_gt:
        need |= 1 << 2
      if seen & need != need:
        return _MISSING, pstart
      npred += 1
      i, pmore = _after_item(buf, i, 93)
      if i < 0:
        return _INVALID, pstart
    nv += 1
    video_bounds[nv] = npred
    i, more = _after_item(buf, i, 125)
    if i < 0:
      return _INVALID, video_tok[nv - 1, 0]
  counts[0], counts[1], counts[2], counts[3] = nv, npred, nbox, nslow
  return 0, i


@numba.njit(cache=True, nogil=True)
def _name_ids(buf, tok):
  """Ids of equal raw string tokens (first occurrence order).

  Returns (ids [K], representatives [U] token index, collision flag).
  """
  k = len(tok)
  ids = np.empty(k, np.int64)
  table = dict()
  reps = np.empty(k, np.int64)
  nrep = 0
  for t in range(k):
    s, e = tok[t, 0], tok[t, 1]
    h = _hash(buf, s, e)
    if h not in table:
      table[h] = nrep
      reps[nrep] = t
      ids[t] = nrep
      nrep += 1
    else:
      r = table[h]
      rs, re = tok[reps[r], 0], tok[reps[r], 1]
      if re - rs != e - s:
        return ids, reps[:nrep], True
      for j in range(e - s):
        if buf[s + j] != buf[rs + j]:
          return ids, reps[:nrep], True
      ids[t] = r
  return ids, reps[:nrep], False


@numba.njit(cache=True, nogil=True)
def _slow_tokens(buf, starts, width):
  """Number tokens at `starts` as fixed-width byte rows (zero padded)."""
  out = np.zeros((len(starts), width), np.uint8)
  for t in range(len(starts)):
    i = starts[t]
    j = 0
    while i < len(buf) and j < width:
      c = buf[i]
      if not ((48 <= c <= 57) or c == 45 or c == 43 or c == 46 or c == 101
              or c == 69):
        break
      out[t, j] = c
      i += 1
      j += 1
    if j == width:
      out[t, 0] = 0                 # too long for the buffer: flag it
  return out


_WORDS = (np.frombuffer(b"true", np.uint8), np.frombuffer(b"false", np.uint8),
          np.frombuffer(b"null", np.uint8), np.frombuffer(b"NaN", np.uint8),
          np.frombuffer(b"Infinity", np.uint8))
_KEYS = tuple(np.frombuffer(k.encode(), np.uint8) for k in (
    "results", "triplet", "score", "duration", "sub_traj", "obj_traj"))


def read_bytes(path: str) -> bytes:
  """The file's bytes, XZ-decompressed if it is a `.json.xz` (by content)."""
  with open(path, "rb") as f:
    data = f.read()
  if data.startswith(b"\xfd7zXZ\x00"):
    data = lzma.decompress(data)
  return data


def parse_table(data: bytes, groundtruth: bool = False,
                name: str = "<bytes>") -> columns.RelationTable:
  """A submission (or GT JSON) document -> `RelationTable`.

  Args:
    data: the JSON bytes (UTF-8).
    groundtruth: the document is the GT mapping `{video_id: [...]}` (no
      "results" wrapper, no scores) instead of a submission.
    name: used in error messages.

  Returns:
    The table, videos and rows in file order, `exact_ints` set (integers
    in the file are Python ints for the official code).

  Raises:
    NotTabular: invalid JSON or content the table does not represent
      exactly (see the module docstring); the message names the byte.
  """
  buf = np.frombuffer(data, np.uint8)
  if len(buf) and buf.max() >= 0x80:
    try:
      data.decode("utf-8")
    except UnicodeDecodeError as e:
      raise NotTabular(f"{name}: not UTF-8: {e}") from None
  n_open = int(np.count_nonzero(buf == 91)) + 1     # '[': >= boxes, videos
  n_obj = int(np.count_nonzero(buf == 123)) + 1     # '{': >= predictions
  boxes = np.empty(4 * n_open)
  name_tok = np.zeros((n_obj, 3, 2), np.int64)
  score = np.empty(n_obj)
  dur = np.zeros((n_obj, 2))
  dur_flags = np.zeros(n_obj, np.uint8)
  traj = np.zeros((n_obj, 2, 2), np.int64)
  video_tok = np.zeros((n_open, 2), np.int64)
  video_bounds = np.zeros(n_open + 1, np.int64)
  counts = np.zeros(4, np.int64)
  slow = np.empty((min(1 << 20, 4 * n_open + 3 * n_obj), 2), np.int64)
  while True:
    err, pos = _scan(buf, groundtruth, _POW10, _WORDS, _KEYS, boxes,
                     name_tok, score, dur, dur_flags, traj, video_tok,
                     video_bounds, slow, counts)
    if err != _SLOW_FULL:
      break
    slow = np.empty((4 * n_open + 3 * n_obj, 2), np.int64)
  if err:
    raise NotTabular(f"{name}: byte {pos}: {_MESSAGES[err]}")
  nv, npred, nbox, nslow = map(int, counts)
  boxes = boxes[:4 * nbox]
  if nslow:
    # Exact conversion of the tokens the fast path does not take.
    rows = _slow_tokens(buf, slow[:nslow, 0], 40)
    if not rows[:, 0].all():
      raise NotTabular(f"{name}: a number token longer than 40 bytes")
    values = rows.view("S40").reshape(-1).astype(np.float64)
    target, kind = slow[:nslow, 1] // 4, slow[:nslow, 1] % 4
    boxes[target[kind == 0]] = values[kind == 0]
    score[target[kind == 1]] = values[kind == 1]
    dur.reshape(-1)[target[kind == 2]] = values[kind == 2]
  # Names: one json.loads per distinct raw token, then one id per triplet.
  tok = name_tok[:npred].reshape(-1, 2)
  ids, reps, collision = _name_ids(buf, tok)
  if collision:
    raise NotTabular(f"{name}: name hash collision")
  names = [json.loads(data[tok[r, 0]:tok[r, 1]]) for r in reps]
  ids = ids.reshape(-1, 3)
  triplet = np.zeros(len(ids), np.int64)
  vocab = {}
  if len(ids):
    uniq, first, inverse = np.unique(ids, axis=0, return_index=True,
                                     return_inverse=True)
    # Ids in order of first occurrence (as `RelationTable.from_dicts`).
    order = np.argsort(first, kind="stable")
    remap = np.empty(len(uniq), np.int64)
    for u in order.tolist():
      remap[u] = vocab.setdefault(tuple(names[j] for j in uniq[u].tolist()),
                                  len(vocab))
    triplet = remap[inverse.reshape(-1)]
  video_ids = [json.loads(data[s:e]) for s, e in video_tok[:nv].tolist()]
  if len(set(video_ids)) != nv:
    raise NotTabular(f"{name}: a video id appears twice (json.load keeps "
                     "the last)")
  t = traj[:npred]
  return columns.RelationTable(
      video_ids=video_ids, bounds=video_bounds[:nv + 1].copy(),
      triplets=list(vocab), triplet=triplet, score=score[:npred].copy(),
      duration=dur[:npred].copy(), flags=dur_flags[:npred].copy(),
      boxes=boxes.reshape(-1, 4), offset=np.ascontiguousarray(t[:, :, 0]),
      length=np.ascontiguousarray(t[:, :, 1]), exact_ints=True)


def read_table(path: str, groundtruth: bool = False) -> columns.RelationTable:
  """`parse_table` of a `.json` / `.json.xz` file (see there)."""
  return parse_table(read_bytes(path), groundtruth, name=path)
