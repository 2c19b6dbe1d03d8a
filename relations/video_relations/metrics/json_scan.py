"""Compiled (numba) JSON scanner behind `fastjson` (see its docstring).

`scan(buf, ...)` validates a whole submission / GT document and writes the
relation fields into preallocated arrays. Numbers: Clinger's fast path,
then Eisel-Lemire (`_eisel_lemire`), else marked for the exact slow path.
"""

import math

import numba
import numpy as np

# Helpers called per token: compiled without the runtime's reference
# counting (they allocate nothing). With it, every call that passes the
# byte array costs an incref / decref pair, which made the scanner ~4x
# slower (inlining did not remove them).
_leaf = numba.njit(cache=True, nogil=True, _nrt=False)

# Error codes of the scanner (position in `MESSAGES`).
MESSAGES = (
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
SLOW_FULL = 12

# Number kinds.
_FLOAT, _INT, _SLOW, _BAD = 0, 1, 2, -1

POW10 = np.array([10.0 ** k for k in range(23)])

# Literals and keys the scanner compares against, as (offset, length) into
# one constant byte array (globals are compile-time constants in numba).
_LEX = np.frombuffer(b"truefalsenullNaNInfinity"
                     b"resultstripletscoredurationsub_trajobj_traj", np.uint8)
_TRUE_W, _FALSE_W, _NULL_W, _NAN_W, _INF_W = (0, 4), (4, 5), (9, 4), (13, 3), (
    16, 8)
_KEY_AT = np.array([24, 31, 38, 43, 51, 59], np.int64)
_KEY_LEN = np.array([7, 7, 5, 8, 8, 8], np.int64)


def _powers_of_five():
  """128-bit truncated 5**q for q in [-342, 308] (Eisel-Lemire table).

  [q + 342, 0] high and [q + 342, 1] low 64 bits, normalised so bit 127 is
  set (generated exactly with Python ints, as fast_float's table script).
  """
  out = np.zeros((651, 2), np.uint64)
  for q in range(-342, 309):
    if q < 0:
      p5 = 5 ** -q
      z = p5.bit_length()
      b = z + 127 if q >= -27 else 2 * z + 128
      c = 2 ** b // p5 + 1
      while c >= 1 << 128:
        c //= 2
    else:
      c = 5 ** q
      while c < 1 << 127:
        c *= 2
      while c >= 1 << 128:
        c //= 2
    out[q + 342] = (c >> 64, c & (2 ** 64 - 1))
  return out


_POW5 = _powers_of_five()
_M32 = np.uint64(0xFFFFFFFF)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _mul128(a, b):
  """Full 64 x 64 -> 128-bit product of uint64s: (high, low)."""
  s32 = np.uint64(32)
  a_lo, a_hi = a & _M32, a >> s32
  b_lo, b_hi = b & _M32, b >> s32
  p0 = a_lo * b_lo
  p1 = a_lo * b_hi
  p2 = a_hi * b_lo
  p3 = a_hi * b_hi
  mid = (p0 >> s32) + (p1 & _M32) + (p2 & _M32)
  low = (p0 & _M32) | (mid << s32)
  high = p3 + (p1 >> s32) + (p2 >> s32) + (mid >> s32)
  return high, low


@numba.njit(cache=True, nogil=True, _nrt=False)
def _eisel_lemire(w, q):
  """Correctly rounded w * 10**q (w < 2**64 exact, w > 0) as a double.

  The Eisel-Lemire algorithm as in fast_float (Lemire 2021; the 128-bit
  product is always sufficient, Mushtak & Lemire 2023). Returns (value,
  ok); ok False for subnormal results (left to the exact slow path).
  """
  if q < -342:
    return 0.0, True
  if q > 308:
    return np.inf, True
  lz = 0
  top = np.uint64(1) << np.uint64(63)
  while (w & top) == np.uint64(0):
    w = w << np.uint64(1)
    lz += 1
  idx = q + 342
  high, low = _mul128(w, _POW5[idx, 0])
  if (high & np.uint64(0x1FF)) == np.uint64(0x1FF):
    high2, _ = _mul128(w, _POW5[idx, 1])
    low = low + high2
    if high2 > low:
      high = high + np.uint64(1)
  upperbit = int(high >> np.uint64(63))
  shift = np.uint64(upperbit + 9)
  mantissa = high >> shift
  power2 = (((152170 + 65536) * q) >> 16) + 63 + upperbit - lz + 1023
  if power2 <= 0:
    return 0.0, False
  if (low <= np.uint64(1) and q >= -4 and q <= 23
      and (mantissa & np.uint64(3)) == np.uint64(1)
      and (mantissa << shift) == high):
    mantissa = mantissa & ~np.uint64(1)     # exactly halfway: to even
  mantissa = mantissa + (mantissa & np.uint64(1))
  mantissa = mantissa >> np.uint64(1)
  if mantissa >= (np.uint64(2) << np.uint64(52)):
    mantissa = np.uint64(1) << np.uint64(52)
    power2 += 1
  if power2 >= 0x7FF:
    return np.inf, True
  # mantissa has its hidden bit (2**52 <= mantissa < 2**53): the double is
  # mantissa * 2**(power2 - 1075), exact for a normal result.
  return math.ldexp(float(mantissa), power2 - 1075), True


@_leaf
def _ws(buf, i):
  n = len(buf)
  while i < n:
    c = buf[i]
    if c != 32 and c != 10 and c != 13 and c != 9:
      break
    i += 1
  return i


@_leaf
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


@_leaf
def _literal(buf, i, at, length):
  """buf[i:] starts with _LEX[at:at + length]: end index, else -1."""
  if i + length > len(buf):
    return -1
  for k in range(length):
    if buf[i + k] != _LEX[at + k]:
      return -1
  return i + length


@_leaf
def _number(buf, i):
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
    e = _literal(buf, j, _INF_W[0], _INF_W[1])
    if e < 0:
      return 0.0, _BAD, -1
    return (-np.inf if neg else np.inf), _FLOAT, e
  if not neg and j < n and buf[j] == 78:             # NaN
    e = _literal(buf, j, _NAN_W[0], _NAN_W[1])
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
  if dropped:
    return 0.0, _SLOW, j
  if sig > 15 or exp10 < -22 or exp10 > 22:
    if m == 0:
      return (-0.0 if neg else 0.0), _FLOAT, j
    v, ok = _eisel_lemire(m, exp10)
    if not ok:
      return 0.0, _SLOW, j
    return (-v if neg else v), _FLOAT, j
  v = float(m)
  if exp10 < 0:
    v = v / POW10[-exp10]
  else:
    v = v * POW10[exp10]
  return (-v if neg else v), _FLOAT, j


@_leaf
def _past_key(buf, i):
  """An object member's key and ':' at i: the index after the ':', -1 if
  either is missing or invalid."""
  n = len(buf)
  if i >= n or buf[i] != 34:
    return -1
  i = _string_end(buf, i)
  if i < 0:
    return -1
  i = _ws(buf, i)
  if i >= n or buf[i] != 58:
    return -1
  return i + 1


@numba.njit(cache=True, nogil=True)
def _skip_value(buf, i):
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
          i = _past_key(buf, i)
          if i < 0:
            return -_INVALID
        continue
    elif c == 34:
      i = _string_end(buf, i)
    elif c == 116:
      i = _literal(buf, i, _TRUE_W[0], _TRUE_W[1])
    elif c == 102:
      i = _literal(buf, i, _FALSE_W[0], _FALSE_W[1])
    elif c == 110:
      i = _literal(buf, i, _NULL_W[0], _NULL_W[1])
    else:
      _, kind, i = _number(buf, i)
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
          i = _past_key(buf, i)
          if i < 0:
            return -_INVALID
        break
      if c == (125 if stack[sp - 1] == 1 else 93):
        i += 1
        sp -= 1
        continue
      return -_INVALID


@_leaf
def _key_is(buf, s, e, key):
  """Raw key token buf[s:e] (with quotes) is key `key` of _KEY_AT quoted."""
  length = _KEY_LEN[key]
  if e - s != length + 2:
    return False
  at = _KEY_AT[key]
  for k in range(length):
    if buf[s + 1 + k] != _LEX[at + k]:
      return False
  return True


@_leaf
def _has_escape(buf, s, e):
  for k in range(s, e):
    if buf[k] == 92:
      return True
  return False


@_leaf
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


@_leaf
def _hash(buf, s, e):
  h = np.uint64(14695981039346656037)
  for k in range(s, e):
    h = (h ^ np.uint64(buf[k])) * np.uint64(1099511628211)
  return np.int64(h)



@_leaf
def _has_dot_or_exp(buf, s, e):
  for k in range(s, e):
    c = buf[k]
    if c == 46 or c == 101 or c == 69:
      return True
  return False


@numba.njit(cache=True, nogil=True)
def scan(buf, is_gt, boxes, name_tok, score, dur,
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
    err, i = _results(buf, i, is_gt, boxes, name_tok,
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
      if _key_is(buf, ks, ke, 0):
        if seen:
          return _DUPLICATE, ks     # json.load would keep the last one
        seen = True
        err, i = _results(buf, i, is_gt, boxes,
                          name_tok, score, dur, dur_flags, traj, video_tok,
                          video_bounds, slow, counts)
        if err:
          return err, i
      else:
        i = _skip_value(buf, i)
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


@_leaf
def _field_key(buf, i):
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
    if _key_is(buf, ks, ke, f):
      return f, i, ks
  return -1, i, ks


@numba.njit(cache=True, nogil=True)
def _results(buf, i, is_gt, boxes, name_tok, score, dur,
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
        field, i, ks = _field_key(buf, i)
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
          v, kind, e = _number(buf, i)
          if kind == _BAD:
            return _TYPE, i
          if kind == _INT:
            return _INT_SCORE, i
          if kind == _SLOW:
            if not _has_dot_or_exp(buf, i, e):
              return _INT_SCORE, i
            if nslow == len(slow):
              return SLOW_FULL, i
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
            v, kind, e = _number(buf, i)
            if kind == _BAD:
              return _DURATION, i
            if kind == _INT:
              flags |= 1 << k           # kernels.START_INT / END_INT
            elif kind == _SLOW:
              if not _has_dot_or_exp(buf, i, e):
                return _BIG_INT, i
              if nslow == len(slow):
                return SLOW_FULL, i
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
              v, kind, e = _number(buf, i)
              if kind == _BAD:
                return _BOX, i
              if kind == _SLOW:
                if not _has_dot_or_exp(buf, i, e):
                  return _BIG_INT, i
                if nslow == len(slow):
                  return SLOW_FULL, i
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
          i = _skip_value(buf, i)
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
def name_ids(buf, tok):
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
def slow_tokens(buf, starts):
  """Number tokens at `starts` as zero-padded byte rows [K, longest]."""
  lengths = np.zeros(len(starts), np.int64)
  for t in range(len(starts)):
    i = starts[t]
    while i < len(buf):
      c = buf[i]
      if not ((48 <= c <= 57) or c == 45 or c == 43 or c == 46 or c == 101
              or c == 69):
        break
      i += 1
    lengths[t] = i - starts[t]
  width = max(1, lengths.max()) if len(starts) else 1
  out = np.zeros((len(starts), width), np.uint8)
  for t in range(len(starts)):
    out[t, :lengths[t]] = buf[starts[t]:starts[t] + lengths[t]]
  return out


@numba.njit(cache=True, nogil=True)
def count_brackets(buf):
  """Number of '[' and '{' bytes: upper bounds for the output arrays."""
  n_open = n_obj = 0
  for c in buf:
    n_open += c == 91
    n_obj += c == 123
  return n_open, n_obj
