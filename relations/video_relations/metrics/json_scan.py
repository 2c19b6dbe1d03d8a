"""Compiled (numba) JSON scanner behind `fastjson` (see its docstring).

`scan_window(...)` validates a submission / GT document window by window
(resumable at video boundaries) and writes the relation fields of each
prediction into preallocated arrays. Numbers: Clinger's fast path, then
Eisel-Lemire (`_eisel_lemire`); anything else makes the prediction
"irregular" (decoded by `json.loads` of its bytes instead).
"""

import math

import numba
import numpy as np

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder

# Helpers called per token: compiled without the runtime's reference
# counting (they allocate nothing). With it, every call that passes the
# byte array costs an incref / decref pair, which made the scanner ~4x
# slower (inlining did not remove them).
# error_model="numpy": no zero-divisor branch before each division (every
# divisor is a power of ten; ~3% of a sequential VidOR-size scan).
_leaf = numba.njit(cache=True, nogil=True, _nrt=False, error_model="numpy")
# The per-byte / per-number helpers, inlined by numba into their callers
# (LLVM alone did not inline them across numba's function boundaries).
_hot = numba.njit(cache=True, nogil=True, _nrt=False, inline="always", error_model="numpy")

# Return codes of `scan_window`.
DONE = 0  # the document is complete (final window only)
MORE = 1  # the window ends inside a video / member: resume at pos
FULL = 2  # the output arrays are full: take them, resume at pos
RESULTS_AGAIN = 3  # another top-level "results" starts at pos (last wins)
NOT_OBJECT = 4  # valid JSON whose top-level value is not an object
TRAJECTORIES = 5  # GT mode: a top-level key of one annotation file
INVALID = 6  # not JSON (pos: where it was detected)
TOO_DEEP = 7  # nesting deeper than MAX_DEPTH
HUGE_INT = 8  # an integer json.loads refuses (> MAX_INT_DIGITS digits)
TOP_KEY = 9  # a top-level key at pos, its token ends at state[3]
MAX_DEPTH = 4096
# Python's default limit on the digits of int(str) (json.loads raises
# ValueError beyond it; sys.int_info.default_max_str_digits).
MAX_INT_DIGITS = 4300

# Prediction flags (`pflag`).
IRREGULAR = 1  # not a plain record: decode its bytes with json.loads
WARN = 2  # plain, but the validator has something to say on it

# Number kinds.
_FLOAT, _INT, _SLOW, _BAD = 0, 1, 2, -1

POW10 = np.array([10.0**k for k in range(23)])

# Literals and keys the scanner compares against, as (offset, length) into
# one constant byte array (globals are compile-time constants in numba).
_WORDS = (
  b"true",
  b"false",
  b"null",
  b"NaN",
  b"Infinity",
  b"results",
  b"triplet",
  b"score",
  b"duration",
  b"sub_traj",
  b"obj_traj",
  b"subject_tid",
  b"object_tid",
  b"version",
  b"trajectories",
  b"subject/objects",
  b"relation_instances",
  b"video_id",
  b"frame_count",
)
_LEX = np.frombuffer(b"".join(_WORDS), np.uint8)
_AT = [sum(map(len, _WORDS[:k])) for k in range(len(_WORDS))]
_TRUE_W, _FALSE_W, _NULL_W, _NAN_W, _INF_W = ((_AT[k], len(_WORDS[k])) for k in range(5))
# Keys: 0 results, 1 triplet, 2 score, 3 duration, 4 sub_traj, 5 obj_traj,
# 6 subject_tid, 7 object_tid, 8 version, 9 trajectories; 9-13: the keys
# of one annotation file (`annotations._ANNOTATION_KEYS`).
_KEY_AT = np.array(_AT[5:], np.int64)
_KEY_LEN = np.array([len(w) for w in _WORDS[5:]], np.int64)
_K_RESULTS, _K_VERSION, _K_TRAJECTORIES = 0, 8, 9
_K_ANNOTATION_LAST = 13


def _powers_of_five():
  """128-bit truncated 5**q for q in [-342, 308] (Eisel-Lemire table).

  [q + 342, 0] high and [q + 342, 1] low 64 bits, normalised so bit 127 is
  set (generated exactly with Python ints, as fast_float's table script).
  """
  out = np.zeros((651, 2), np.uint64)
  for q in range(-342, 309):
    if q < 0:
      p5 = 5**-q
      z = p5.bit_length()
      b = z + 127 if q >= -27 else 2 * z + 128
      c = 2**b // p5 + 1
    else:
      c = 5**q
      c <<= max(0, 128 - c.bit_length())  # bit 127 set (shifts, not a loop: import time)
    c >>= max(0, c.bit_length() - 128)  # truncated to 128 bits
    out[q + 342] = (c >> 64, c & (2**64 - 1))
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
  if (
    low <= np.uint64(1)
    and q >= -4
    and q <= 23
    and (mantissa & np.uint64(3)) == np.uint64(1)
    and (mantissa << shift) == high
  ):
    mantissa = mantissa & ~np.uint64(1)  # exactly halfway: to even
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


@_hot
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
      if e == 117:  # \uXXXX
        for j in range(i + 2, i + 6):
          if j >= n:
            return -1
          h = buf[j]
          if not ((48 <= h <= 57) or (65 <= h <= 70) or (97 <= h <= 102)):
            return -1
        i += 6
        continue
      if not (
        e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116
      ):
        return -1
      i += 2
      continue
    if c < 32:
      return -1
    if c >= 0x80:
      k = _utf8_length(buf, i)
      if k < 0:
        return -1
      i += k
      continue
    i += 1
  return -1


@_leaf
def _utf8_length(buf, i):
  """Length of the valid UTF-8 sequence of a non-ASCII byte at i (Python's
  strict decoder: no overlong forms, surrogates or code points above
  U+10FFFF), -1 if invalid or cut by the end of buf.

  Strings are the only place JSON allows non-ASCII bytes, so with this
  check a scanned document is valid UTF-8 (no separate pass over it).
  """
  n = len(buf)
  c = buf[i]
  if 0xC2 <= c <= 0xDF:
    k, lo, hi = 1, 0x80, 0xBF
  elif c == 0xE0:
    k, lo, hi = 2, 0xA0, 0xBF
  elif 0xE1 <= c <= 0xEC or c == 0xEE or c == 0xEF:
    k, lo, hi = 2, 0x80, 0xBF
  elif c == 0xED:
    k, lo, hi = 2, 0x80, 0x9F
  elif c == 0xF0:
    k, lo, hi = 3, 0x90, 0xBF
  elif 0xF1 <= c <= 0xF3:
    k, lo, hi = 3, 0x80, 0xBF
  elif c == 0xF4:
    k, lo, hi = 3, 0x80, 0x8F
  else:
    return -1
  if i + k >= n:
    return -1
  if not (lo <= buf[i + 1] <= hi):
    return -1
  for j in range(i + 2, i + k + 1):
    if not (0x80 <= buf[j] <= 0xBF):
      return -1
  return k + 1


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
  if j < n and buf[j] == 73:  # Infinity
    e = _literal(buf, j, _INF_W[0], _INF_W[1])
    if e < 0:
      return 0.0, _BAD, -1
    return (-np.inf if neg else np.inf), _FLOAT, e
  if not neg and j < n and buf[j] == 78:  # NaN
    e = _literal(buf, j, _NAN_W[0], _NAN_W[1])
    if e < 0:
      return 0.0, _BAD, -1
    return np.nan, _FLOAT, e
  if j >= n or not (48 <= buf[j] <= 57):
    return 0.0, _BAD, -1
  m = np.uint64(0)
  sig = 0  # significant digits accumulated (leading zeros skipped)
  dropped = False  # a non-zero digit beyond 19 significant ones
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
  if int_digits > sig:  # integer digits beyond 19: shift
    exp10 += int_digits - sig if sig > 0 else 0
  is_int = True
  if j < n and buf[j] == 46:  # fraction
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
  if j < n and (buf[j] == 101 or buf[j] == 69):  # exponent
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
    v = float(m)  # exact: < 10**15 < 2**53
    return (-v if neg and v != 0 else v), _INT, j  # "-0" is the int 0
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


@_hot
def _fast_number(buf, i):
  """`_number` for the common token: [-]digits[.digits], <= 15 digits.

  Such a token is m / 10**f with m < 10**15 < 2**53 and f <= 15, one
  correctly rounded division of two exact doubles (signed 64-bit
  arithmetic, no per-digit bookkeeping). Anything else goes to `_number`.
  """
  n = len(buf)
  j = i
  neg = False
  if j < n and buf[j] == 45:
    neg = True
    j += 1
  if j >= n or not (48 <= buf[j] <= 57):
    return _number(buf, i)
  if buf[j] == 48 and j + 1 < n and 48 <= buf[j + 1] <= 57:
    return _number(buf, i)  # "01": invalid, as _number says
  m = 0
  nd = 0
  while j < n and 48 <= buf[j] <= 57:
    m = m * 10 + np.int64(buf[j] - 48)
    nd += 1
    j += 1
  frac = 0
  if j < n and buf[j] == 46:
    j += 1
    while j < n and 48 <= buf[j] <= 57:
      m = m * 10 + np.int64(buf[j] - 48)
      frac += 1
      j += 1
    if frac == 0:
      return _number(buf, i)
  if nd + frac > 15 or (j < n and (buf[j] == 101 or buf[j] == 69)):
    return _number(buf, i)
  v = float(m)
  if frac == 0:
    return (-v if neg and v != 0 else v), _INT, j
  v = v / POW10[frac]
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
def _skip(buf, i):
  """Validates and skips the JSON value at i.

  Returns:
    (end, status, pos): status 0 and the index after the value, or status
    INVALID / TOO_DEEP and the byte where that was detected.
  """
  n = len(buf)
  stack = np.empty(0, np.uint8)
  sp = 0
  while True:
    i = _ws(buf, i)
    if i >= n:
      return -1, INVALID, i
    c = buf[i]
    if c == 123 or c == 91:  # { or [
      j = _ws(buf, i + 1)
      if j < n and buf[j] == (125 if c == 123 else 93):
        i = j + 1
      else:
        if sp == MAX_DEPTH:
          return -1, TOO_DEEP, i
        if sp == len(stack):
          grown = np.empty(max(16, 4 * sp), np.uint8)
          grown[:sp] = stack[:sp]
          stack = grown
        stack[sp] = 1 if c == 123 else 2
        sp += 1
        if c == 123:
          k = _past_key(buf, j)
          if k < 0:
            return -1, INVALID, j
          i = k
        else:
          i = j
        continue
    elif c == 34:
      e = _string_end(buf, i)
      if e < 0:
        return -1, INVALID, i
      i = e
    elif c == 116 or c == 102 or c == 110:  # true false null
      w = _TRUE_W if c == 116 else (_FALSE_W if c == 102 else _NULL_W)
      e = _literal(buf, i, w[0], w[1])
      if e < 0:
        return -1, INVALID, i
      i = e
    else:
      _, kind, e = _number(buf, i)
      if kind == _BAD:
        return -1, INVALID, i
      if kind == _SLOW and _int_too_long(buf, i, e):
        return -1, HUGE_INT, i
      i = e
    while True:  # after a value: ',' or close
      if sp == 0:
        return i, 0, i
      j = _ws(buf, i)
      if j >= n:
        return -1, INVALID, j
      c = buf[j]
      if c == 44:
        k = _ws(buf, j + 1)
        if stack[sp - 1] == 1:
          k2 = _past_key(buf, k)
          if k2 < 0:
            return -1, INVALID, k
          k = k2
        i = k
        break
      if c == (125 if stack[sp - 1] == 1 else 93):
        i = j + 1
        sp -= 1
        continue
      return -1, INVALID, j


@_leaf
def _int_too_long(buf, s, e):
  """The number token buf[s:e] is an integer of more digits than
  `int(str)` (hence json.loads) accepts."""
  digits = e - s - (1 if buf[s] == 45 else 0)
  return digits > MAX_INT_DIGITS and not _has_dot_or_exp(buf, s, e)


@_leaf
def _key_is(buf, s, e, key):
  """The key token buf[s:e] (with quotes) decodes to key number `key`."""
  length = _KEY_LEN[key]
  at = _KEY_AT[key]
  escaped = False
  for k in range(s + 1, e - 1):
    if buf[k] == 92:
      escaped = True
      break
  if not escaped:
    if e - s != length + 2:
      return False
    for k in range(length):
      if buf[s + 1 + k] != _LEX[at + k]:
        return False
    return True
  # An escaped spelling ("sc\u006fre"): compare decoded code units.
  j = s + 1
  k = 0
  while j < e - 1:
    c = np.int64(buf[j])
    if c == 92:
      d = np.int64(buf[j + 1])
      if d == 117:  # \uXXXX
        c = 0
        for h in range(j + 2, j + 6):
          x = np.int64(buf[h])
          c = c * 16 + (x - 48 if x <= 57 else (x - 55 if x <= 70 else x - 87))
        j += 6
      else:
        c = (
          8
          if d == 98
          else 12
          if d == 102
          else 10
          if d == 110
          else 13
          if d == 114
          else 9
          if d == 116
          else d
        )
        j += 2
    else:
      j += 1
    if k >= length or c != _LEX[at + k]:
      return False
    k += 1
  return k == length


@_hot
def _after_item(buf, i, close):
  """After an array / object item: (index after ',' (more=1) or after the
  closing bracket (more=0)); index -1 if neither follows."""
  i = _ws(buf, i)
  if i < len(buf):
    if buf[i] == 44:
      return _ws(buf, i + 1), 1
    if buf[i] == close:
      return i + 1, 0
  return -1, 0


@_leaf
def _has_dot_or_exp(buf, s, e):
  for k in range(s, e):
    c = buf[k]
    if c == 46 or c == 101 or c == 69:
      return True
  return False


@_leaf
def _reaches_end(buf, i):
  """From i (a member or value), the window ends before the member does.

  The member ends at a ',' or a closing bracket at depth 0 outside
  strings. Used only after an error, to tell a window cut inside a value
  (read more) from invalid JSON.
  """
  n = len(buf)
  depth = 0
  while i < n:
    c = buf[i]
    if c == 34:
      i += 1
      while i < n and buf[i] != 34:
        if buf[i] == 92:
          i += 1
        i += 1
      if i >= n:
        return True
    elif c == 123 or c == 91:
      depth += 1
    elif c == 125 or c == 93:
      if depth == 0:
        return False
      depth -= 1
    elif c == 44 and depth == 0:
      return False
    i += 1
  return True


@_leaf
def _pred(buf, i, is_gt, p, nbox, name_tok, score, dur, dflags, traj, boxes):
  """The relation record at i into row p, its boxes from nbox on.

  Returns (kind, end, nbox): kind 0 or WARN for a plain record (WARN: a
  non-finite score / coordinate, an inverted box, an empty duration or a
  negative start), IRREGULAR for anything else (missing, repeated or
  unexpected fields or types; the caller validates and skips the value),
  -1 when `boxes` is full.
  """
  n = len(buf)
  cap = len(boxes) // 4
  if i >= n or buf[i] != 123:
    return IRREGULAR, i, nbox
  warn = 0
  seen = 0
  score[p] = 0.0
  dflags[p] = 0
  traj[p, 0, 1] = traj[p, 1, 1] = 0
  i = _ws(buf, i + 1)
  fmore = 1
  if i < n and buf[i] == 125:
    i += 1
    fmore = 0
  while fmore:
    if i >= n or buf[i] != 34:
      return IRREGULAR, i, nbox
    ks = i
    ke = _string_end(buf, i)
    if ke < 0:
      return IRREGULAR, i, nbox
    i = _ws(buf, ke)
    if i >= n or buf[i] != 58:
      return IRREGULAR, i, nbox
    i = _ws(buf, i + 1)
    field = -1
    for f in range(1, 8):
      if _key_is(buf, ks, ke, f):
        field = f
        break
    if (field == 2 and is_gt) or (field >= 6 and not is_gt):
      field = -1  # GT: no score; predictions: no tids
    if field > 0:
      if seen & (1 << field):
        return IRREGULAR, i, nbox  # json.load keeps the last one
      seen |= 1 << field
    if field == 1:  # triplet
      if i >= n or buf[i] != 91:
        return IRREGULAR, i, nbox
      i = _ws(buf, i + 1)
      for k in range(3):
        if i >= n or buf[i] != 34:
          return IRREGULAR, i, nbox
        name_tok[p, k, 0] = i
        e = _string_end(buf, i)
        if e < 0:
          return IRREGULAR, i, nbox
        name_tok[p, k, 1] = e
        i, more = _after_item(buf, e, 93)
        if i < 0 or more != (1 if k < 2 else 0):
          return IRREGULAR, i, nbox
    elif field == 2:  # score
      v, kind, e = _fast_number(buf, i)
      if kind != _FLOAT:
        return IRREGULAR, i, nbox  # integer (official int semantics) etc.
      if not math.isfinite(v):
        warn = WARN
      score[p] = v
      i = e
    elif field == 3:  # duration
      if i >= n or buf[i] != 91:
        return IRREGULAR, i, nbox
      i = _ws(buf, i + 1)
      for k in range(2):
        v, kind, e = _fast_number(buf, i)
        if kind != _INT:
          return IRREGULAR, i, nbox
        dur[p, k] = v
        i, more = _after_item(buf, e, 93)
        if i < 0 or more != (1 if k == 0 else 0):
          return IRREGULAR, i, nbox
      dflags[p] = 3  # kernels.START_INT | kernels.END_INT
      if dur[p, 1] - dur[p, 0] <= 0 or dur[p, 0] < 0:
        warn = WARN
    elif field == 4 or field == 5:  # sub / obj traj
      side = field - 4
      if i >= n or buf[i] != 91:
        return IRREGULAR, i, nbox
      first = nbox
      i = _ws(buf, i + 1)
      bmore = 1
      if i < n and buf[i] == 93:
        i += 1
        bmore = 0
      while bmore:
        if nbox == cap:
          return -1, i, nbox
        if i >= n or buf[i] != 91:
          return IRREGULAR, i, nbox
        i = _ws(buf, i + 1)
        b = 4 * nbox
        for k in range(4):
          v, kind, e = _fast_number(buf, i)
          if kind != _FLOAT and kind != _INT:
            return IRREGULAR, i, nbox
          boxes[b + k] = v
          i, more = _after_item(buf, e, 93)
          if i < 0 or more != (1 if k < 3 else 0):
            return IRREGULAR, i, nbox
        x1, y1, x2, y2 = boxes[b], boxes[b + 1], boxes[b + 2], boxes[b + 3]
        if (
          x1 > x2
          or y1 > y2
          or not (
            math.isfinite(x1) and math.isfinite(y1) and math.isfinite(x2) and math.isfinite(y2)
          )
        ):
          warn = WARN
        nbox += 1
        i, bmore = _after_item(buf, i, 93)
        if i < 0:
          return IRREGULAR, i, nbox
      traj[p, side, 0] = first
      traj[p, side, 1] = nbox - first
    elif field == 6 or field == 7:  # GT subject / object tid
      v, kind, e = _fast_number(buf, i)
      if not (
        kind == _INT
        or (kind == _SLOW and not _has_dot_or_exp(buf, i, e) and not _int_too_long(buf, i, e))
      ):
        return IRREGULAR, i, nbox
      i = e
    else:
      e, status, _ = _skip(buf, i)
      if status != 0:
        return IRREGULAR, i, nbox
      i = e
    i, fmore = _after_item(buf, i, 125)
    if i < 0:
      return IRREGULAR, i, nbox
  need = (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5)
  need |= ((1 << 6) | (1 << 7)) if is_gt else (1 << 2)
  if seen & need != need:
    return IRREGULAR, i, nbox
  return warn, i, nbox


@numba.njit(cache=True, nogil=True)
def _video(buf, i, is_gt, p, nbox, pspan, pflag, name_tok, score, dur, dflags, traj, boxes):
  """The records of the array at i (buf[i] == '[') from row p on.

  Returns (status, end, p, nbox): status 0, FULL (rows or boxes full),
  INVALID / TOO_DEEP (end: where).
  """
  n = len(buf)
  i = _ws(buf, i + 1)
  more = 1
  if i < n and buf[i] == 93:
    i += 1
    more = 0
  while more:
    if p == len(score):
      return FULL, i, p, nbox
    s = i
    kind, e, nb = _pred(buf, s, is_gt, p, nbox, name_tok, score, dur, dflags, traj, boxes)
    if kind < 0:
      return FULL, i, p, nbox
    if kind == IRREGULAR:
      e, status, pos = _skip(buf, s)
      if status != 0:
        return status, pos, p, nbox
    else:
      nbox = nb
    pflag[p] = kind
    pspan[p, 0] = s
    pspan[p, 1] = e
    p += 1
    i, more = _after_item(buf, e, 93)
    if i < 0:
      return INVALID, _ws(buf, e), p, nbox
  return 0, i, p, nbox


# Phases of `scan_window` (state[0]): where the next call resumes.
_P_START = 0  # before the document's value
_P_TOP_FIRST = 1  # after the top-level '{': a key or '}'
_P_TOP_KEY = 2  # a top-level member
_P_TOP_NEXT = 3  # after a top-level member: ',' or '}'
_P_RES_FIRST = 4  # after the '{' of results (GT: of the document)
_P_RES_KEY = 5  # a video member
_P_RES_NEXT = 6  # after a video member: ',' or '}'
_P_END = 7  # after the document: whitespace only
_P_RES_VALUE = 8  # at the value of a "results" member
_P_TOP_SEEN = 9  # a top-level member whose key was reported (TOP_KEY)
# The phases `fastjson` looks at to scan a window in two threads.
P_START, P_RES_FIRST, P_RES_KEY, P_RES_NEXT = _P_START, _P_RES_FIRST, _P_RES_KEY, _P_RES_NEXT
P_TOP_SEEN = _P_TOP_SEEN


@numba.njit(cache=True, nogil=True)
def scan_window(
  buf,
  final,
  is_gt,
  state,
  pos,
  vid_tok,
  vid_val,
  vid_list,
  vid_rows,
  pspan,
  pflag,
  name_tok,
  score,
  dur,
  dflags,
  traj,
  boxes,
  counts,
):
  """Scans whole videos of a window of the document, from pos.

  Args:
    buf: uint8 window (its end is the end of the data read so far).
    final: the window reaches the end of the document.
    is_gt: GT mode: the document is the {video_id: [instance]} mapping
      (instances need subject_tid / object_tid, have no score); else a
      submission whose top-level "results" is that mapping.
    state: int64 [5] kept between calls (zeros at the start): [0] phase,
      [1:3] (out) span of a top-level "version" value seen in this call
      (-1 if none), [3] (out, with TOP_KEY) end of the key token, [4]
      kind of the last "results" value (0 none, 1 object, 2 other).
    pos: where to resume (the previous call's returned position, moved with
      the window).
    vid_*, pspan ... boxes: output arrays, rows from 0 (their lengths are
      the capacities): vid_tok [V, 2] video key token, vid_val [V, 2] value
      span, vid_list [V] the value is an array, vid_rows [V + 1] row bounds;
      per row: pspan [P, 2] byte span, pflag [P] (0 / WARN / IRREGULAR),
      name_tok [P, 3, 2] triplet name tokens, score [P], dur [P, 2],
      dflags [P], traj [P, 2, 2] (first box, count) per side; boxes [4 N].
    counts: (out) [videos, rows, boxes] written.

  Returns:
    (code, pos): DONE; MORE / FULL / RESULTS_AGAIN (resume at pos);
    TOP_KEY (a submission's top-level key token at buf[pos:state[3]];
    resume at pos); NOT_OBJECT, TRAJECTORIES (GT mode: a key of one
    annotation file); INVALID / TOO_DEEP / HUGE_INT (pos: where).
  """
  n = len(buf)
  nv = 0
  p = 0
  nbox = 0
  vid_rows[0] = 0
  state[1] = -1
  state[2] = -1
  phase = state[0]
  i = pos
  code = DONE
  while True:
    if phase == _P_START:
      i = _ws(buf, i)
      if i >= n:
        code = MORE if not final else INVALID
        break
      if buf[i] == 123:
        if is_gt:
          state[4] = 1
          phase = _P_RES_FIRST
        else:
          phase = _P_TOP_FIRST
        i += 1
        continue
      e, status, where = _skip(buf, i)
      if status == 0:
        e = _ws(buf, e)
        if e < n:
          code, i = INVALID, e
        else:
          code = MORE if not final else NOT_OBJECT
        break
      if not final and _reaches_end(buf, i):
        code = MORE
      else:
        code, i = status, where
      break
    elif phase == _P_TOP_FIRST or phase == _P_RES_FIRST:
      i = _ws(buf, i)
      if i >= n:
        code = MORE if not final else INVALID
        break
      if buf[i] == 125:
        i += 1
        if phase == _P_TOP_FIRST or is_gt:
          phase = _P_END
        else:
          phase = _P_TOP_NEXT
        continue
      phase = _P_TOP_KEY if phase == _P_TOP_FIRST else _P_RES_KEY
    elif phase == _P_TOP_KEY or phase == _P_RES_KEY or phase == _P_TOP_SEEN:
      i = _ws(buf, i)
      ks = i
      if i >= n:
        code = MORE if not final else INVALID
        break
      if buf[i] != 34:
        code = INVALID
        break
      ke = _string_end(buf, i)
      vs = -1
      if ke >= 0:
        j = _ws(buf, ke)
        if j < n and buf[j] == 58:
          vs = _ws(buf, j + 1)
          if vs >= n:
            vs = -1
      if vs < 0:
        if not final and _reaches_end(buf, ks):
          code = MORE
        else:
          code, i = INVALID, (ks if ke < 0 else _ws(buf, ke))
        break
      if phase == _P_TOP_KEY:  # report the key (duplicate check)
        state[3] = ke
        code, i = TOP_KEY, ks
        phase = _P_TOP_SEEN
        break
      if phase == _P_TOP_SEEN:
        if _key_is(buf, ks, ke, _K_RESULTS):
          if state[4] != 0:
            code, i = RESULTS_AGAIN, vs
            phase = _P_RES_VALUE
            break
          i = vs
          phase = _P_RES_VALUE
          continue
        e, status, where = _skip(buf, vs)
        if status != 0:
          if not final and _reaches_end(buf, ks):
            code = MORE
          else:
            code, i = status, where
          break
        if _key_is(buf, ks, ke, _K_VERSION):
          state[1] = vs
          state[2] = e
        i = e
        phase = _P_TOP_NEXT
        continue
      # A video.
      if is_gt:
        annotation = False
        for key in range(_K_TRAJECTORIES, _K_ANNOTATION_LAST + 1):
          if _key_is(buf, ks, ke, key):
            annotation = True
            break
        if annotation:
          code = TRAJECTORIES
          break
      if nv == len(vid_list):
        code = FULL
        break
      if buf[vs] == 91:
        status, e, p2, nb2 = _video(
          buf, vs, is_gt, p, nbox, pspan, pflag, name_tok, score, dur, dflags, traj, boxes
        )
        is_list = True
      else:
        e, status, where = _skip(buf, vs)
        if status != 0:
          e = where
        p2, nb2 = p, nbox
        is_list = False
      if status == FULL:
        code = FULL
        break
      if status != 0:
        if not final and _reaches_end(buf, ks):
          code = MORE
        else:
          code, i = status, e
        break
      vid_tok[nv, 0] = ks
      vid_tok[nv, 1] = ke
      vid_val[nv, 0] = vs
      vid_val[nv, 1] = e
      vid_list[nv] = is_list
      p, nbox = p2, nb2
      nv += 1
      vid_rows[nv] = p
      i = e
      phase = _P_RES_NEXT
    elif phase == _P_RES_VALUE:
      if buf[i] == 123:
        state[4] = 1
        i += 1
        phase = _P_RES_FIRST
        continue
      e, status, where = _skip(buf, i)
      if status != 0:
        if not final and _reaches_end(buf, i):
          code = MORE
        else:
          code, i = status, where
        break
      state[4] = 2
      i = e
      phase = _P_TOP_NEXT
    elif phase == _P_TOP_NEXT or phase == _P_RES_NEXT:
      i = _ws(buf, i)
      if i >= n:
        code = MORE if not final else INVALID
        break
      c = buf[i]
      if c == 44:
        i += 1
        phase = _P_TOP_KEY if phase == _P_TOP_NEXT else _P_RES_KEY
      elif c == 125:
        i += 1
        if phase == _P_TOP_NEXT or is_gt:
          phase = _P_END
        else:
          phase = _P_TOP_NEXT
      else:
        code = INVALID
        break
    else:  # _P_END
      i = _ws(buf, i)
      if i < n:
        code = INVALID
      elif not final:
        code = MORE
      break
  state[0] = phase
  counts[0], counts[1], counts[2] = nv, p, nbox
  return code, i


@numba.njit(cache=True, nogil=True)
def split_point(buf, lo):
  """A likely start of a video member at or after lo, to scan from in parallel.

  Returns the index just after a ',' that follows '}' ']' and precedes a
  string, ':' and '[' (whitespace allowed between), -1 if there is none: how
  one video's list of records ends and the next video's list begins. Only a
  guess (the bytes may sit in a string, or in a record): the caller keeps it
  only when the scan of what comes before stops there between two videos.
  """
  n = len(buf)
  i = max(lo, 1)
  while i < n:
    if buf[i] == 93:  # ']'
      j = i - 1
      while j > 0 and (buf[j] == 32 or buf[j] == 10 or buf[j] == 13 or buf[j] == 9):
        j -= 1
      if buf[j] == 125:  # '}'
        k = _ws(buf, i + 1)
        if k < n and buf[k] == 44:  # ','
          m = _ws(buf, k + 1)
          if m < n and buf[m] == 34:  # '"'
            q = _string_end(buf, m)
            q = _ws(buf, q) if q > 0 else n
            if q < n and buf[q] == 58:  # ':'
              q = _ws(buf, q + 1)
              if q < n and buf[q] == 91:  # '['
                return k + 1
    i += 1
  return -1


@_leaf
def _hash(buf, s, e):
  h = np.uint64(14695981039346656037)
  for k in range(s, e):
    h = (h ^ np.uint64(buf[k])) * np.uint64(1099511628211)
  return np.int64(h)


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
def utf8_check(buf):
  """UTF-8 validity as Python's strict decoder (no overlong forms,
  surrogates or code points above U+10FFFF).

  Returns (status, index): 0 valid; 1 invalid from index; 2 valid up to
  an incomplete sequence that starts at index and runs to the end.
  """
  n = len(buf)
  i = 0
  while i < n:
    c = buf[i]
    if c < 0x80:
      i += 1
      continue
    if 0xC2 <= c <= 0xDF:
      k, lo, hi = 1, 0x80, 0xBF
    elif c == 0xE0:
      k, lo, hi = 2, 0xA0, 0xBF
    elif 0xE1 <= c <= 0xEC or c == 0xEE or c == 0xEF:
      k, lo, hi = 2, 0x80, 0xBF
    elif c == 0xED:
      k, lo, hi = 2, 0x80, 0x9F
    elif c == 0xF0:
      k, lo, hi = 3, 0x90, 0xBF
    elif 0xF1 <= c <= 0xF3:
      k, lo, hi = 3, 0x80, 0xBF
    elif c == 0xF4:
      k, lo, hi = 3, 0x80, 0x8F
    else:
      return 1, i
    for j in range(i + 1, i + k + 1):
      if j >= n:
        return 2, i
      if not ((lo if j == i + 1 else 0x80) <= buf[j] <= (hi if j == i + 1 else 0xBF)):
        return 1, i
    i += k + 1
  return 0, n
