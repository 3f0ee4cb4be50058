/*
 * vmath.h - element-wise exponential and logarithm in vectors, for the CPU kernels (mlp.c: CELU;
 * aev.c: the AEV's radial and angular factors).  Included inside a kernel file's per-precision,
 * per-instruction-set level, with REAL, REAL_SIZE (4 or 8), VB (vector bytes), NM(name) (the
 * variant's name), TARGET (its target attribute) and the types NM(vec) (VB bytes of REAL) and
 * NM(ivec) (integers of REAL's size) defined; it defines NM(uivec), NM(blend), NM(exp_neg),
 * NM(exp_flush) and NM(log_pos), and may be included once per variant (no include guard; its
 * macros are undefined at the end).
 */
/*
 * exp_neg: for each element y <= 0, e^y - 1 (em1) or e^y: y = k ln2 + r with k = round(y / ln2)
 * (by adding 1.5 2^52, resp. 1.5 2^23: the sum's low bits are k) and |r| <= ln2 / 2 + a little
 * (ln2 in two parts, the first with trailing zeros so that k ln2_hi is exact); e^r - 1 = p(r) by
 * its Taylor series to r^13 (double) or r^8 (float), whose remainder is below a quarter of a unit
 * in the last place; then e^y - 1 = 2^k p + (2^k - 1) (both exact for k = 0, where the result is
 * p) and e^y = ((1 + p) 2^k1) 2^k2, k1 + k2 = k, so that 2^k need not be a normal number (e^y
 * down to the smallest subnormal).  y is first clamped to [lo, 0] (lanes with y > 0 are never
 * used; below lo e^y - 1 rounds to -1, resp. e^y to 0); a NaN stays NaN.  Accuracy against libm:
 * within 2 units in the last place (kernel.celu_cpu.*).  Only element-wise IEEE operations (no
 * fused multiply-add: -ffp-contract=off), so every vector width gives the same bits. */
#if REAL_SIZE == 4
typedef uint32_t NM(uivec) __attribute__((vector_size(VB)));
#define EXP_LO_EM1 (-20.0f)
#define EXP_LO (-105.0f)
#define EXP_MAGIC 12582912.0f /* 1.5 2^23 */
#define EXP_LOG2E 1.44269502f
#define EXP_LN2_HI 0.693145751953125f
#define EXP_LN2_LO 1.42860677e-06f
#define EXP_MANT 23
#define EXP_BIAS 127
#else
typedef uint64_t NM(uivec) __attribute__((vector_size(VB)));
#define EXP_LO_EM1 (-40.0)
#define EXP_LO (-750.0)
#define EXP_MAGIC 6755399441055744.0 /* 1.5 2^52 */
#define EXP_LOG2E 1.4426950408889634
#define EXP_LN2_HI 0.6931471803691238
#define EXP_LN2_LO 1.9082149292705877e-10
#define EXP_MANT 52
#define EXP_BIAS 1023
#endif

static inline __attribute__((always_inline)) TARGET NM(vec) NM(blend)(NM(ivec) m, NM(vec) a,
                                                                      NM(vec) b) {
    return (NM(vec))(((NM(ivec))a & m) | ((NM(ivec))b & ~m));
}

static inline __attribute__((always_inline)) TARGET NM(vec) NM(exp_neg)(NM(vec) y, const int em1) {
    const NM(vec) zero = {0}, lo = zero + (REAL)(em1 ? EXP_LO_EM1 : EXP_LO);
    const NM(vec) magic = zero + (REAL)EXP_MAGIC;
    y = NM(blend)(y > zero, zero, y);
    y = NM(blend)(y < lo, lo, y);
    const NM(vec) t = y * (REAL)EXP_LOG2E + magic;
    const NM(vec) kf = t - magic;
    const NM(vec) r = (y - kf * (REAL)EXP_LN2_HI) - kf * (REAL)EXP_LN2_LO;
#if REAL_SIZE == 4
    NM(vec) q = zero + 2.48015873015873e-05f;
    q = q * r + 0.0001984126984126984f;
#else
    NM(vec) q = zero + 1.6059043836821613e-10;
    q = q * r + 2.08767569878681e-09;
    q = q * r + 2.505210838544172e-08;
    q = q * r + 2.755731922398589e-07;
    q = q * r + 2.7557319223985893e-06;
    q = q * r + 2.48015873015873e-05;
    q = q * r + 0.0001984126984126984;
#endif
    q = q * r + (REAL)0.001388888888888889;
    q = q * r + (REAL)0.008333333333333333;
    q = q * r + (REAL)0.041666666666666664;
    q = q * r + (REAL)0.16666666666666666;
    q = q * r + (REAL)0.5;
    const NM(vec) p = r + (r * r) * q;
    /* -k >= 0 from the sum's low bits (unsigned: wraps, never overflows, also for a NaN) */
    const NM(uivec) nk = -((NM(uivec))t - (NM(uivec))magic);
    const NM(uivec) bias = (NM(uivec)){0} + EXP_BIAS;
    if (em1) {
        const NM(vec) s2k = (NM(vec))((bias - nk) << EXP_MANT);
        return s2k * p + (s2k - (REAL)1);
    }
    const NM(uivec) nk1 = nk >> 1, nk2 = nk - nk1;
    const NM(vec) s1 = (NM(vec))((bias - nk1) << EXP_MANT);
    const NM(vec) s2 = (NM(vec))((bias - nk2) << EXP_MANT);
    return ((p + (REAL)1) * s1) * s2;
}

/* exp_flush: e^y for y <= 0 as exp_neg, but 0 where e^y < e^lo_flush (about 2e-19 in float,
 * 1e-148 in double): no result is subnormal, nor the product of two results, whose arithmetic
 * takes microcode assists on some processors (many times the normal cost).  For sums of terms
 * of order 1, such as the AEV's, the terms flushed are far below a unit in the last place. */
#if REAL_SIZE == 4
#define EXP_LO_FLUSH (-43.0f)
#else
#define EXP_LO_FLUSH (-340.0)
#endif
static inline __attribute__((always_inline)) TARGET NM(vec) NM(exp_flush)(NM(vec) y) {
    const NM(vec) zero = {0};
    const NM(ivec) small = y < (REAL)EXP_LO_FLUSH;
    return NM(blend)(small, zero, NM(exp_neg)(NM(blend)(small, zero, y), 0));
}

/* log_pos: the natural logarithm of each element x, for x a positive normal finite number (other
 * lanes give meaningless values: the caller clamps).  x = 2^e m with m in [sqrt(1/2), sqrt(2))
 * (the exponent's bits read as an integer and turned into REAL exactly by the 1.5 2^52 (2^23)
 * addition of exp_neg in reverse), ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...) with
 * s = (m - 1) / (m + 1), |s| <= 0.1716, to s^19 (double) or s^9 (float), whose remainder is below a
 * quarter of a unit in the last place; ln x = e ln2_hi + (e ln2_lo + ln m), e ln2_hi exact.
 * Accuracy against libm: within a few units in the last place (kernel.aev_cpu.*).  Element-wise
 * IEEE operations only, as exp_neg. */
static inline __attribute__((always_inline)) TARGET NM(vec) NM(log_pos)(NM(vec) x) {
    const NM(uivec) one_bits = ((NM(uivec)){0} + EXP_BIAS) << EXP_MANT;
#if REAL_SIZE == 4
    const NM(uivec) mant_mask = (NM(uivec)){0} + 0x007fffffu;
#else
    const NM(uivec) mant_mask = (NM(uivec)){0} + 0x000fffffffffffffull;
#endif
    const NM(uivec) bits = (NM(uivec))x;
    NM(vec) m = (NM(vec))((bits & mant_mask) | one_bits); /* [1, 2) */
    const NM(ivec) big = m > (REAL)1.4142135623730951;
    m = NM(blend)(big, m * (REAL)0.5, m);
    /* the biased exponent, plus 1 where m was halved (big: all ones, i.e. -1), as REAL, unbiased */
    const NM(vec) magic = (NM(vec)){0} + (REAL)EXP_MAGIC;
    const NM(uivec) eb = (bits >> EXP_MANT) - (NM(uivec))big;
    const NM(vec) e = ((NM(vec))((NM(uivec))magic + eb) - magic) - (REAL)EXP_BIAS;
    const NM(vec) s = (m - (REAL)1) / (m + (REAL)1);
    const NM(vec) s2 = s * s;
#if REAL_SIZE == 4
    NM(vec) q = (NM(vec)){0} + (REAL)(1.0 / 9);
    q = q * s2 + (REAL)(1.0 / 7);
#else
    NM(vec) q = (NM(vec)){0} + (REAL)(1.0 / 19);
    q = q * s2 + (REAL)(1.0 / 17);
    q = q * s2 + (REAL)(1.0 / 15);
    q = q * s2 + (REAL)(1.0 / 13);
    q = q * s2 + (REAL)(1.0 / 11);
    q = q * s2 + (REAL)(1.0 / 9);
    q = q * s2 + (REAL)(1.0 / 7);
#endif
    q = q * s2 + (REAL)(1.0 / 5);
    q = q * s2 + (REAL)(1.0 / 3);
    const NM(vec) s_2 = s + s;
    const NM(vec) lnm = s_2 + (s_2 * s2) * q;
    return e * (REAL)EXP_LN2_HI + (e * (REAL)EXP_LN2_LO + lnm);
}

#undef EXP_LO_EM1
#undef EXP_LO
#undef EXP_LO_FLUSH
#undef EXP_MAGIC
#undef EXP_LOG2E
#undef EXP_LN2_HI
#undef EXP_LN2_LO
#undef EXP_MANT
#undef EXP_BIAS
