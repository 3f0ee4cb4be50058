"""Roundings of float64 arrays to narrower floating-point formats, and their range statistics.

The roundings work on the bits of the float64 values (a ``uint64`` view), so that what a format
does to a number is stated here and does not depend on a library's conversion routine:

* ``float32``: 8 exponent bits, 23 mantissa bits (IEEE binary32);
* ``tf32``: the float32 exponent range with a 10-bit mantissa (the format tensor cores read their
  GEMM inputs in), round to nearest, ties to even;
* ``bfloat16``: the float32 exponent range with a 7-bit mantissa.

Every rounding is to nearest with ties to even, gradual underflow (the format's subnormals) and
overflow to infinity (a value at or above the largest finite number plus half its spacing).  The
result is returned as float64 (the rounded value widened, exactly).  NaN and infinities pass
through; float64 subnormals are below every target's smallest subnormal and become signed zero.
"""

import numpy as np

__all__ = ["FORMATS", "FORMAT_BITS", "round_to", "max_finite", "min_normal", "RangeStats"]

# name -> (mantissa bits, smallest normal exponent, largest exponent)
FORMAT_BITS = {
    "float32": (23, -126, 127),
    "tf32": (10, -126, 127),
    "bfloat16": (7, -126, 127),
}
#: The formats the analysis rounds to, in the order they are reported.
FORMATS = ("float32", "tf32", "bfloat16")

_SIGN = np.uint64(1 << 63)
_EXP_MASK = np.uint64(0x7FF << 52)
_FRAC_MASK = np.uint64((1 << 52) - 1)
_IMPLICIT = np.uint64(1 << 52)
_ONE = np.uint64(1)


def max_finite(fmt):
    """The largest finite value of a format."""
    m, _, emax = FORMAT_BITS[fmt]
    return float(np.ldexp(2.0 - 2.0 ** -m, emax))


def min_normal(fmt):
    """The smallest positive normal value of a format."""
    return float(np.ldexp(1.0, FORMAT_BITS[fmt][1]))


def round_to(x, fmt):
    """``x`` (array or number) rounded to ``fmt`` (``float32``, ``tf32``, ``bfloat16``) and
    widened back to float64."""
    m, emin, emax = FORMAT_BITS[fmt]
    a = np.array(x, dtype=np.float64, copy=True)
    shape = a.shape
    a = a.reshape(-1)
    bits = a.view(np.uint64)
    sign = bits & _SIGN
    biased = ((bits & _EXP_MASK) >> np.uint64(52)).astype(np.int64)
    e = biased - 1023  # unbiased exponent of normal float64 values
    finite = biased != 0x7FF
    out = bits.copy()

    # Normal range of the target: drop 52 - m mantissa bits.  Adding (half - 1) plus the lowest
    # kept bit and masking rounds to nearest, ties to even; a carry out of the mantissa moves into
    # the exponent, which is the correct result (2^(e+1)).
    drop = 52 - m
    normal = finite & (e >= emin)
    nb = bits[normal]
    bias = np.uint64((1 << (drop - 1)) - 1) + ((nb >> np.uint64(drop)) & _ONE)
    nb = (nb + bias) & ~np.uint64((1 << drop) - 1)
    out[normal] = nb
    # Overflow: anything that rounded above the largest finite value is infinity.
    res = out.view(np.float64)
    over = normal & (np.abs(res) > max_finite(fmt))
    out[over] = sign[over] | _EXP_MASK

    # Below the target's smallest normal: a fixed quantum 2^(emin - m).  The float64 significand
    # (implicit bit included) is shifted right by the extra amount and rounded to nearest even on
    # the integer; the result q * 2^(emin - m) is an exact float64.
    sub = finite & (e < emin) & (biased != 0)
    if np.any(sub):
        sig = (bits[sub] & _FRAC_MASK) | _IMPLICIT
        shift = (drop + (emin - e[sub])).astype(np.int64)  # > drop
        big = shift > 54  # less than a quarter of the smallest subnormal: rounds to zero
        shift = np.minimum(shift, 54).astype(np.uint64)
        q = sig >> shift
        rem = sig & ((_ONE << shift) - _ONE)
        half = _ONE << (shift - _ONE)
        up = (rem > half) | ((rem == half) & ((q & _ONE) == _ONE))
        q = q + up.astype(np.uint64)
        q[big] = 0
        val = np.ldexp(q.astype(np.float64), emin - m)
        out[sub] = val.view(np.uint64) | sign[sub]
    # float64 zeros and subnormals: signed zero.
    tiny = biased == 0
    out[tiny] = sign[tiny]
    return out.view(np.float64).reshape(shape)


class RangeStats:
    """Running statistics of the values a stage produced: count, sum of squares (for the RMS),
    largest magnitude, how many are exactly zero, and how many nonzero values lie outside the
    normal range of float32 and of bfloat16 (overflow above the largest finite value, or below
    the smallest normal: subnormal or flushed).  TF32 has float32's range."""

    __slots__ = ("count", "sumsq", "maxabs", "zeros", "out_f32", "out_bf16")

    def __init__(self):
        self.count = 0
        self.sumsq = 0.0
        self.maxabs = 0.0
        self.zeros = 0
        self.out_f32 = 0
        self.out_bf16 = 0

    def add(self, values):
        a = np.abs(np.asarray(values, dtype=np.float64)).reshape(-1)
        if a.size == 0:
            return
        self.count += int(a.size)
        self.sumsq += float(np.sum(a * a))
        self.maxabs = max(self.maxabs, float(a.max()))
        nz = a != 0.0
        self.zeros += int(a.size - np.count_nonzero(nz))
        self.out_f32 += int(np.count_nonzero(nz & ((a < min_normal("float32"))
                                                  | (a > max_finite("float32")))))
        self.out_bf16 += int(np.count_nonzero(nz & ((a < min_normal("bfloat16"))
                                                   | (a > max_finite("bfloat16")))))

    def summary(self):
        n = max(self.count, 1)
        return {"count": self.count,
                "rms": (self.sumsq / n) ** 0.5,
                "max_abs": self.maxabs,
                "zero_fraction": self.zeros / n,
                "outside_float32_fraction": self.out_f32 / n,
                "outside_bfloat16_fraction": self.out_bf16 / n}
