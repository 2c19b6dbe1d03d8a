"""Block-at-a-time reader of trajectory arrays, the bulk of a VRD submission.

`fast_trajectory` reads a box list written the way `json.dump` and most writers
write it (``[[x1, y1, x2, y2], ...]``, ``, `` or ``,`` between items, numbers
``-?digits(.digits)?`` of at most 7 digits on each side of the point). It is the
`json_scan` box loop without its per-byte branches:
- each 64-byte block is classified by vector compares into exact bitmasks of
  its number bytes (digits, '-', '.'), points and minus signs; number starts
  are taken from them bit by bit, so the next number's position never waits on
  the parse of the current one (the parsed end of a number and the bytes
  between two numbers are only compared with it, by predictable branches);
- a number's end, point and sign come from the masks too, so its two 8-byte
  loads (integer and fraction digits) do not wait on each other; digit values
  by multiply-shift, then one correctly rounded division. A number that may go
  on past its block is parsed from the loads alone (digit runs by bit tricks).
Every byte of an accepted list is checked, by the masks or by the separator checks.
Anything else (other whitespace, exponents, longer numbers, NaN / Infinity, an
empty list, a malformed list, the end of the buffer near) is declined: the
caller then reads the list with the general code, from the same position, so
results, flags and errors are the general code's.
"""

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from relations import numba_cache  # noqa: F401  # caches stamped by their whole folder

_hot = numba.njit(cache=True, nogil=True, _nrt=False, inline="always", error_model="numpy")

_X30 = np.uint64(0x3030303030303030)  # '0' in every byte
_ADD = np.uint64(0x7676767676767676)  # byte + 0x76 sets bit 7 iff byte > 9
_HIGH = np.uint64(0x8080808080808080)
_LOW = np.uint64(0x000000FF000000FF)
_MUL1 = np.uint64(100 + (1000000 << 32))
_MUL2 = np.uint64(1 + (10000 << 32))
_POW10 = np.array([10.0**k for k in range(8)])
_POW10I = np.array([10**k for k in range(8)], np.int64)
# Bytes a block read may touch past the last token start it hands out (a
# number's two 8-byte loads and the bytes after it).
_SLACK = 32


def _flat(arr, dtype=types.uint8):
  """The intrinsics index the data pointer: 1-d C-contiguous arrays of dtype only (an
  intrinsic that returns None does not type)."""
  return isinstance(arr, types.Array) and arr.layout == "C" and arr.ndim == 1 and arr.dtype == dtype


@intrinsic
def _load8(typingctx, arr, idx):  # pylint: disable=unused-argument
  """arr[idx:idx + 8] (a uint8 array) as a little-endian uint64: one unaligned
  load, no bounds check (the caller keeps idx + 8 <= len(arr))."""
  if not _flat(arr):
    return None
  sig = types.uint64(arr, idx)

  def codegen(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    ptr = builder.gep(ary.data, [args[1]])
    return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

  return sig, codegen


@intrinsic
def _load1(typingctx, arr, idx):  # pylint: disable=unused-argument
  """arr[idx] (a uint8 array) as an int64, without numba's negative-index and bounds
  code (the caller keeps 0 <= idx < len(arr))."""
  if not _flat(arr):
    return None
  sig = types.int64(arr, idx)

  def codegen(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    return builder.zext(builder.load(builder.gep(ary.data, [args[1]])), ir.IntType(64))

  return sig, codegen


@intrinsic
def _store(typingctx, arr, idx, value):  # pylint: disable=unused-argument
  """arr[idx] = value (a float64 array) without the negative-index code (the caller
  keeps 0 <= idx < len(arr))."""
  if not _flat(arr, types.float64) or value != types.float64:
    return None
  sig = types.none(arr, idx, value)

  def codegen(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    builder.store(args[2], builder.gep(ary.data, [args[1]]))
    return context.get_dummy_value()

  return sig, codegen


@_hot
def _digit_run(t):
  """t: 8 bytes xor '0' (first byte lowest). How many leading bytes are digits (8: all)."""
  # A digit byte is 0-9 here: + 0x76 keeps bit 7 clear only for those (a carry
  # out of a non-digit byte can only reach bytes after the first non-digit).
  m = ((t + _ADD) | t) & _HIGH
  if m == np.uint64(0):
    return 8
  return np.int64(trailing_zeros(m)) >> 3


@_hot
def _value8(v):
  """v: 8 digit bytes (xor '0', first digit lowest; leading zero bytes allowed). Their value."""
  v = v * np.uint64(10) + (v >> np.uint64(8))  # pairs
  v = ((v & _LOW) * _MUL1 + ((v >> np.uint64(16)) & _LOW) * _MUL2) >> np.uint64(32)
  return np.int64(v)


@_hot
def _digits(t, k):
  """The value of the first k (1-7) digit bytes of t (bytes xor '0'), exactly."""
  return _value8(t << np.uint64(64 - 8 * k))  # the k digits into the top bytes


def _splat(vector_type, byte):
  return ir.Constant(vector_type, [byte] * vector_type.count)


@intrinsic
def _token_mask(typingctx, arr, idx):  # pylint: disable=unused-argument
  """Bit j set where arr[idx + j] (j < 64) is a digit, '-' or '.': one 64-byte vector
  load and three compares, which LLVM lowers to the widest vectors of the CPU (no
  bounds check: the caller keeps idx + 64 <= len(arr))."""
  if not _flat(arr):
    return None
  sig = types.uint64(arr, idx)

  def codegen(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    vt = ir.VectorType(ir.IntType(8), 64)
    ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), vt.as_pointer())
    v = builder.load(ptr, align=1)
    digit = builder.icmp_unsigned("<", builder.sub(v, _splat(vt, 48)), _splat(vt, 10))
    sign_or_point = builder.icmp_unsigned("<", builder.sub(v, _splat(vt, 45)), _splat(vt, 2))
    return builder.bitcast(builder.or_(digit, sign_or_point), ir.IntType(64))

  return sig, codegen


@intrinsic
def _byte_mask(typingctx, arr, idx, byte):  # pylint: disable=unused-argument
  """Bit j set where arr[idx + j] (j < 64) == byte (a vector load and compare, as
  `_token_mask`; the caller keeps idx + 64 <= len(arr))."""
  if not _flat(arr):
    return None
  sig = types.uint64(arr, idx, byte)

  def codegen(context, builder, sig, args):
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    vt = ir.VectorType(ir.IntType(8), 64)
    ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), vt.as_pointer())
    v = builder.load(ptr, align=1)
    b = builder.trunc(args[2], ir.IntType(8))
    splat = builder.shuffle_vector(
      builder.insert_element(ir.Constant(vt, ir.Undefined), b, ir.Constant(ir.IntType(32), 0)),
      ir.Constant(vt, ir.Undefined),
      ir.Constant(ir.VectorType(ir.IntType(32), 64), [0] * 64),
    )
    return builder.bitcast(builder.icmp_unsigned("==", v, splat), ir.IntType(64))

  return sig, codegen


@_hot
def _block(buf, base, carry):
  """The 64 bytes from base, as bitmasks (bit j for buf[base + j]): (number-like tokens
  (digits, '.', '-') starting there and not continuing one from the block before (`carry`),
  the token bit of the last byte, the token bytes, the '.' bytes, the '-' bytes)."""
  m = _token_mask(buf, base)
  starts = m & ~((m << np.uint64(1)) | carry)
  return starts, m >> np.uint64(63), m, _byte_mask(buf, base, 46), _byte_mask(buf, base, 45)


@_hot
def _integer(t, k, neg):
  """The integer of the first k (1-7) digit bytes of t (bytes xor '0'), negated when neg but
  for 0 (json.loads reads "-0" as the int 0)."""
  m = _digits(t, k)
  v = float(m)
  return -v if neg and m != 0 else v


@_hot
def _decimal(t, k, t2, f, neg):
  """k digits (first bytes of t) '.' f digits (first bytes of t2), 1-7 each (bytes xor '0'):
  the correctly rounded m / 10**f, negated when neg."""
  if k + f <= 8:  # both parts in one word: k digits, then f digits, then the value
    u = ((t << np.uint64(64 - 8 * k)) >> np.uint64(8 * f)) | (t2 << np.uint64(64 - 8 * f))
    m = _value8(u)
  else:
    m = _digits(t, k) * _POW10I[f] + _digits(t2, f)
  v = float(m) / _POW10[f]
  return -v if neg else v


@_hot
def _number(buf, s):
  """The number token at s: (value, end), end -1 if it is not -?digits(.digits)?
  with 1-7 digits on each side (no leading zero). As `json_scan._fast_number`:
  an integer "-0" is 0.0, a fraction the correctly rounded m / 10**f."""
  neg = _load1(buf, s) == 45
  j = s + 1 if neg else s
  w = _load8(buf, j)
  t = w ^ _X30
  k = _digit_run(t)
  if k == 0 or k == 8 or (k > 1 and (t & np.uint64(0xFF)) == np.uint64(0)):
    return 0.0, -1
  if (w >> np.uint64(8 * k)) & np.uint64(0xFF) != np.uint64(46):
    return _integer(t, k, neg), j + k
  t2 = _load8(buf, j + k + 1) ^ _X30
  f = _digit_run(t2)
  if f == 0 or f == 8:
    return 0.0, -1
  return _decimal(t, k, t2, f, neg), j + k + 1 + f


@_hot
def _block_number(buf, s, j, tokens, points, minus):
  """The number token at s = base + j, its bounds from the masks of its block (`_block`):
  (value, end) as `_number`, end -1 if it is not of that shape, -2 if it may go on past the
  block (then `_number` reads it). Its two loads do not wait on each other."""
  one = np.uint64(1)
  run = np.int64(trailing_zeros(~(tokens >> np.uint64(j))))  # the token's bytes
  if j + run >= 64:
    return 0.0, -2
  inside = (one << np.uint64(run)) - one
  sign = (minus >> np.uint64(j)) & inside
  point = (points >> np.uint64(j)) & inside
  if (sign >> one) != np.uint64(0) or (point & (point - one)) != np.uint64(0):
    return 0.0, -1  # a '-' after the first byte, or two '.'
  neg = np.int64(sign)
  d = np.int64(trailing_zeros(point)) if point != np.uint64(0) else run
  k = d - neg  # integer digits: the token's other bytes are digits
  if k < 1 or k > 7:
    return 0.0, -1
  t = _load8(buf, s + neg) ^ _X30
  if k > 1 and (t & np.uint64(0xFF)) == np.uint64(0):
    return 0.0, -1  # a leading zero
  if point == np.uint64(0):
    return _integer(t, k, neg), s + run
  f = run - d - 1
  if f < 1 or f > 7:
    return 0.0, -1
  t2 = _load8(buf, s + d + 1) ^ _X30
  return _decimal(t, k, t2, f, neg), s + run


@numba.njit(cache=True, nogil=True, _nrt=False, error_model="numpy")
def fast_trajectory(buf, i, boxes, nbox, cap):
  """The box list at i (buf[i] == '[') into boxes[4 * nbox:] (flat x1 y1 x2 y2).

  Returns:
    (end, nbox, inverted): the index after the list, the box count after it,
    and whether a box has x1 > x2 or y1 > y2; end -1 when declined (see the
    module docstring; also when boxes would pass `cap` boxes): boxes written
    so far are then garbage, to be overwritten by the caller's general read.
  """
  n = len(buf)
  cap = min(cap, len(boxes) // 4)  # the unchecked stores stay inside boxes
  if i + 2 + 64 + _SLACK > n or buf[i] != 91 or buf[i + 1] != 91:
    return -1, nbox, False
  base = i + 2
  st, carry, tokens, points, minus = _block(buf, base, np.uint64(0))
  expect = base  # where the next number must start
  inverted = False
  one = np.uint64(1)
  while True:
    if nbox == cap:
      return -1, nbox, False
    b = 4 * nbox
    for k in range(4):
      if st == np.uint64(0):  # next block (a number starts in it if the list goes on)
        base += 64
        if base + 64 + _SLACK > n:
          return -1, nbox, False
        st, carry, tokens, points, minus = _block(buf, base, carry)
        if st == np.uint64(0):
          return -1, nbox, False
      j = np.int64(trailing_zeros(st))
      s = base + j
      st &= st - one
      v, e = _block_number(buf, s, j, tokens, points, minus)
      if e == -2:
        v, e = _number(buf, s)
      if s != expect or e < 0:
        return -1, nbox, False
      _store(boxes, b + k, v)
      c = _load1(buf, e)
      if k < 3:
        if c != 44:
          return -1, nbox, False
        expect = e + 1 + (_load1(buf, e + 1) == 32)
    nbox += 1
    if boxes[b] > boxes[b + 2] or boxes[b + 1] > boxes[b + 3]:
      inverted = True
    # After the 4th number: "]" then "]" (the end) or ", [" / ",[".
    if c != 93:
      return -1, nbox, False
    c = buf[e + 1]
    if c == 93:
      return e + 2, nbox, inverted
    if c != 44:
      return -1, nbox, False
    e += 2 + (buf[e + 2] == 32)
    if buf[e] != 91:
      return -1, nbox, False
    expect = e + 1
