/*
 * tensornet_cpu_impl.h - the body of tensornet_cpu.c, included once per compute precision with
 * REAL (double | float) and SUF (_f64 | _f32) defined.  No include guard on purpose.
 *
 * Layout.  Per atom and channel a 3x3 matrix is stored entry-major: X[(n * 9 + e) * F + f] with
 * e = 3 * row + col.  Its irreducible parts are kept in ten "components" per channel,
 * c[(n * 10 + k) * F + f]:
 *     k = 0        I = tr X / 3
 *     k = 1, 2, 3  A01, A02, A12 of A = (X - X^T) / 2
 *     k = 4, 5, 6  S00, S11, S22 of S = (X + X^T) / 2 - I 1   (their sum is zero)
 *     k = 7, 8, 9  S01, S02, S12
 * decomp() maps X to components, comp() components to X; decomp_T and comp_T are their adjoints
 * (used to carry gradients back).  A channel linear of an irreducible part commutes with taking
 * that part, so "lt0(I(X)) 1 + lt1(A(X)) + lt2(S(X))" is comp(lin3(decomp(X))) with lin3 applying
 * lt0 to component 0, lt1 to 1..3 and lt2 to 4..9.
 *
 * Forward, stored for the backward: the radial basis per edge, the embedding's raw X0 and gate
 * pre-activations per atom, and per interaction layer its input X, the components of Y and of the
 * message M, the product C, the update D, both norms per atom and the edge factors h per edge.
 * The readout is recomputed per atom in the backward; so are the edge MLPs' pre-activations.
 */

#define TN_CAT_(a, b) a##b
#define TN_CAT(a, b) TN_CAT_(a, b)
#define FN(name) TN_CAT(name, SUF)
#define WEIGHTS TN_CAT(nnpops__tn_weights, SUF)

/* ---- scalar pieces ------------------------------------------------------------------------- */

/* torch's softplus (beta 1, threshold 20). */
static REAL FN(tn_softplus)(REAL x) { return x > (REAL)20 ? x : (REAL)log1p(exp(x)); }

static REAL FN(tn_sigmoid)(REAL x) { return (REAL)1 / ((REAL)1 + (REAL)exp(-x)); }

/* act(x), and its derivative in *d when d is not NULL. */
static REAL FN(tn_act)(int kind, REAL x, REAL *d) {
    switch (kind) {
    case NNPOPS__TN_SSP: {
        /* ShiftedSoftplus: softplus(x) - log 2, with log 2 as the float32 torch.log(2.0) */
        if (d) *d = x > (REAL)20 ? (REAL)1 : FN(tn_sigmoid)(x);
        return FN(tn_softplus)(x) - (REAL)0.693147182464599609375;
    }
    case NNPOPS__TN_SILU: {
        REAL s = FN(tn_sigmoid)(x);
        if (d) *d = s * ((REAL)1 + x * ((REAL)1 - s));
        return x * s;
    }
    case NNPOPS__TN_TANH: {
        REAL t = (REAL)tanh(x);
        if (d) *d = (REAL)1 - t * t;
        return t;
    }
    case NNPOPS__TN_SIGMOID: {
        REAL s = FN(tn_sigmoid)(x);
        if (d) *d = s * ((REAL)1 - s);
        return s;
    }
    default: { /* NNPOPS__TN_MISH: x tanh(softplus(x)) */
        REAL t = (REAL)tanh(FN(tn_softplus)(x));
        if (d) *d = t + x * ((REAL)1 - t * t) * FN(tn_sigmoid)(x);
        return x * t;
    }
    }
}

/* The layers' cosine cutoff (both forms) and its derivative. */
static REAL FN(tn_fc)(double lo, double hi, REAL r, REAL *d) {
    const REAL pi = (REAL)3.14159265358979323846;
    if (lo > 0) {
        if (!(r < (REAL)hi) || !(r > (REAL)lo)) {
            *d = 0;
            return 0;
        }
        REAL arg = pi * ((REAL)2 * (r - (REAL)lo) / ((REAL)hi - (REAL)lo) + (REAL)1);
        *d = (REAL)-0.5 * (REAL)sin(arg) * (REAL)2 * pi / ((REAL)hi - (REAL)lo);
        return (REAL)0.5 * ((REAL)cos(arg) + (REAL)1);
    }
    if (!(r < (REAL)hi)) {
        *d = 0;
        return 0;
    }
    *d = (REAL)-0.5 * (REAL)sin(r * pi / (REAL)hi) * pi / (REAL)hi;
    return (REAL)0.5 * ((REAL)cos(r * pi / (REAL)hi) + (REAL)1);
}

/* The radial basis phi[0..R) at r and, when dphi is not NULL, its derivative. */
static void FN(tn_rbf)(const nnpops__tn_shape *s, const WEIGHTS *w, REAL r, REAL *phi,
                       REAL *dphi) {
    const int R = s->R;
    if (s->rbf == NNPOPS__TN_GAUSS) {
        const REAL c = w->rbf_b[0];
        for (int k = 0; k < R; k++) {
            REAL t = r - w->rbf_a[k];
            phi[k] = (REAL)exp(c * t * t);
            if (dphi) dphi[k] = phi[k] * (REAL)2 * c * t;
        }
        return;
    }
    /* expnorm: its own cosine cutoff at cutoff_upper (lower form 0), alpha = 5 / (hi - lo) */
    REAL dfc;
    REAL fc = FN(tn_fc)(0.0, s->cutoff_upper, r, &dfc);
    REAL alpha = (REAL)(5.0 / (s->cutoff_upper - s->cutoff_lower));
    REAL e = (REAL)exp(alpha * (-r + (REAL)s->cutoff_lower));
    for (int k = 0; k < R; k++) {
        REAL t = e - w->rbf_a[k];
        REAL g = (REAL)exp(-w->rbf_b[k] * t * t);
        phi[k] = fc * g;
        if (dphi) dphi[k] = dfc * g + fc * g * (REAL)2 * w->rbf_b[k] * alpha * e * t;
    }
}

/* y[o] = b[o] + sum_i W[o][i] x[i] (b may be NULL). */
static void FN(tn_linear)(const REAL *W, const REAL *b, int n_in, int n_out, const REAL *x,
                          REAL *y) {
    for (int o = 0; o < n_out; o++) {
        const REAL *row = W + (size_t)o * n_in;
        REAL acc = b ? b[o] : (REAL)0;
        for (int i = 0; i < n_in; i++) acc += row[i] * x[i];
        y[o] = acc;
    }
}

/* gx[i] (+)= sum_o W[o][i] gy[o]. */
static void FN(tn_linear_T)(const REAL *W, int n_in, int n_out, const REAL *gy, REAL *gx,
                            int accumulate) {
    if (!accumulate)
        for (int i = 0; i < n_in; i++) gx[i] = 0;
    for (int o = 0; o < n_out; o++) {
        const REAL *row = W + (size_t)o * n_in;
        REAL g = gy[o];
        if (g == 0) continue;
        for (int i = 0; i < n_in; i++) gx[i] += row[i] * g;
    }
}

/* LayerNorm over n values (eps 1e-5): y = (x - mu) rstd w + b; saves mu, rstd. */
static void FN(tn_layer_norm)(int n, const REAL *x, const REAL *w, const REAL *b, REAL *y,
                              REAL *mu_out, REAL *rstd_out) {
    REAL mu = 0, var = 0;
    for (int i = 0; i < n; i++) mu += x[i];
    mu /= (REAL)n;
    for (int i = 0; i < n; i++) var += (x[i] - mu) * (x[i] - mu);
    var /= (REAL)n;
    REAL rstd = (REAL)1 / (REAL)sqrt(var + (REAL)1e-5);
    for (int i = 0; i < n; i++) y[i] = (x[i] - mu) * rstd * w[i] + b[i];
    *mu_out = mu;
    *rstd_out = rstd;
}

/* The LayerNorm's backward: gx from gy (x, mu, rstd of the forward); scratch of n values. */
static void FN(tn_layer_norm_T)(int n, const REAL *x, const REAL *w, REAL mu, REAL rstd,
                                const REAL *gy, REAL *gx) {
    REAL m1 = 0, m2 = 0;
    for (int i = 0; i < n; i++) {
        REAL gh = gy[i] * w[i];
        REAL xh = (x[i] - mu) * rstd;
        m1 += gh;
        m2 += gh * xh;
    }
    m1 /= (REAL)n;
    m2 /= (REAL)n;
    for (int i = 0; i < n; i++) {
        REAL xh = (x[i] - mu) * rstd;
        gx[i] = rstd * (gy[i] * w[i] - m1 - xh * m2);
    }
}

/* ---- 3x3 per channel ----------------------------------------------------------------------- */

static void FN(tn_decomp)(int F, const REAL *X, REAL *c) {
    for (int f = 0; f < F; f++) {
        REAL x00 = X[0 * F + f], x01 = X[1 * F + f], x02 = X[2 * F + f];
        REAL x10 = X[3 * F + f], x11 = X[4 * F + f], x12 = X[5 * F + f];
        REAL x20 = X[6 * F + f], x21 = X[7 * F + f], x22 = X[8 * F + f];
        REAL i = (x00 + x11 + x22) / (REAL)3;
        c[0 * F + f] = i;
        c[1 * F + f] = (REAL)0.5 * (x01 - x10);
        c[2 * F + f] = (REAL)0.5 * (x02 - x20);
        c[3 * F + f] = (REAL)0.5 * (x12 - x21);
        c[4 * F + f] = x00 - i;
        c[5 * F + f] = x11 - i;
        c[6 * F + f] = x22 - i;
        c[7 * F + f] = (REAL)0.5 * (x01 + x10);
        c[8 * F + f] = (REAL)0.5 * (x02 + x20);
        c[9 * F + f] = (REAL)0.5 * (x12 + x21);
    }
}

/* gX (+)= decomp^T(gc). */
static void FN(tn_decomp_T)(int F, const REAL *gc, REAL *gX, int accumulate) {
    for (int f = 0; f < F; f++) {
        REAL t = (gc[0 * F + f] - gc[4 * F + f] - gc[5 * F + f] - gc[6 * F + f]) / (REAL)3;
        REAL v[9];
        v[0] = gc[4 * F + f] + t;
        v[4] = gc[5 * F + f] + t;
        v[8] = gc[6 * F + f] + t;
        v[1] = (REAL)0.5 * (gc[1 * F + f] + gc[7 * F + f]);
        v[3] = (REAL)0.5 * (-gc[1 * F + f] + gc[7 * F + f]);
        v[2] = (REAL)0.5 * (gc[2 * F + f] + gc[8 * F + f]);
        v[6] = (REAL)0.5 * (-gc[2 * F + f] + gc[8 * F + f]);
        v[5] = (REAL)0.5 * (gc[3 * F + f] + gc[9 * F + f]);
        v[7] = (REAL)0.5 * (-gc[3 * F + f] + gc[9 * F + f]);
        for (int e = 0; e < 9; e++) {
            if (accumulate)
                gX[e * F + f] += v[e];
            else
                gX[e * F + f] = v[e];
        }
    }
}

static void FN(tn_comp)(int F, const REAL *c, REAL *X) {
    for (int f = 0; f < F; f++) {
        REAL i = c[0 * F + f];
        X[0 * F + f] = i + c[4 * F + f];
        X[4 * F + f] = i + c[5 * F + f];
        X[8 * F + f] = i + c[6 * F + f];
        X[1 * F + f] = c[1 * F + f] + c[7 * F + f];
        X[3 * F + f] = -c[1 * F + f] + c[7 * F + f];
        X[2 * F + f] = c[2 * F + f] + c[8 * F + f];
        X[6 * F + f] = -c[2 * F + f] + c[8 * F + f];
        X[5 * F + f] = c[3 * F + f] + c[9 * F + f];
        X[7 * F + f] = -c[3 * F + f] + c[9 * F + f];
    }
}

static void FN(tn_comp_T)(int F, const REAL *gX, REAL *gc) {
    for (int f = 0; f < F; f++) {
        REAL g[9];
        for (int e = 0; e < 9; e++) g[e] = gX[e * F + f];
        gc[0 * F + f] = g[0] + g[4] + g[8];
        gc[1 * F + f] = g[1] - g[3];
        gc[2 * F + f] = g[2] - g[6];
        gc[3 * F + f] = g[5] - g[7];
        gc[4 * F + f] = g[0];
        gc[5 * F + f] = g[4];
        gc[6 * F + f] = g[8];
        gc[7 * F + f] = g[1] + g[3];
        gc[8 * F + f] = g[2] + g[6];
        gc[9 * F + f] = g[5] + g[7];
    }
}

/* Channel linears of the components: W0 on component 0, W1 on 1..3, W2 on 4..9 (bias-free). */
static void FN(tn_lin3)(int F, const REAL *const W[3], const REAL *c, REAL *out) {
    for (int k = 0; k < 10; k++) {
        const REAL *Wk = W[k == 0 ? 0 : (k < 4 ? 1 : 2)];
        FN(tn_linear)(Wk, NULL, F, F, c + (size_t)k * F, out + (size_t)k * F);
    }
}

static void FN(tn_lin3_T)(int F, const REAL *const W[3], const REAL *g, REAL *out) {
    for (int k = 0; k < 10; k++) {
        const REAL *Wk = W[k == 0 ? 0 : (k < 4 ? 1 : 2)];
        FN(tn_linear_T)(Wk, F, F, g + (size_t)k * F, out + (size_t)k * F, 0);
    }
}

/* out = A B per channel (alpha times), accumulating when acc. tA / tB: use A^T / B^T. */
static void FN(tn_mm)(int F, const REAL *A, int tA, const REAL *B, int tB, REAL alpha, REAL *out,
                      int acc) {
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            REAL *o = out + (size_t)(3 * r + c) * F;
            if (!acc)
                for (int f = 0; f < F; f++) o[f] = 0;
            for (int k = 0; k < 3; k++) {
                const REAL *a = A + (size_t)(tA ? 3 * k + r : 3 * r + k) * F;
                const REAL *b = B + (size_t)(tB ? 3 * c + k : 3 * k + c) * F;
                for (int f = 0; f < F; f++) o[f] += alpha * a[f] * b[f];
            }
        }
}

/* n[f] = sum of squares of the 9 entries of channel f. */
static void FN(tn_norm2)(int F, const REAL *X, REAL *n) {
    for (int f = 0; f < F; f++) {
        REAL s = 0;
        for (int e = 0; e < 9; e++) s += X[e * F + f] * X[e * F + f];
        n[f] = s;
    }
}

/* ---- per atom: the embedding's gates, an interaction layer's Y and update --------------------
 * The whole-model pass below and the ops of tn_ops_cpu_impl.h both use these, so that they give
 * the same bits.  Scratch (tmp) is the caller's, of the size each one names. */

/* out[k][f] += h[blk(k)][f] y[k][f] over the ten components (blk: 0 for k = 0, 1 for 1..3, 2 for
 * 4..9; h holds 3 F). */
static void FN(tn_hmul)(int F, const REAL *h, const REAL *y, REAL *out) {
    for (int k = 0; k < 10; k++) {
        const REAL *hk = h + (size_t)(k == 0 ? 0 : (k < 4 ? 1 : 2)) * F;
        for (int f = 0; f < F; f++) out[k * F + f] += hk[f] * y[k * F + f];
    }
}

/* u = v / r, or 0 at r = 0 (no direction). */
static void FN(tn_unit)(const REAL *v, REAL r, REAL *u) {
    u[0] = u[1] = u[2] = 0;
    if (r > 0)
        for (int k = 0; k < 3; k++) u[k] = v[k] / r;
}

/* The embedding's tensor of one edge for channel f added into X (9 entries, stride F):
 * cz (dk0 1 + dk1 [u]x + dk2 (u u^T - |u|^2 / 3 1)) with dk the edge's three projections (3 F). */
static void FN(tn_embed_add)(int F, int f, REAL cz, const REAL *dk, const REAL *u, REAL *X) {
    const REAL uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
    const REAL f1 = cz * dk[f], f2 = cz * dk[F + f], f3 = cz * dk[2 * F + f];
    X[0 * F + f] += f1 + f3 * (u[0] * u[0] - uu / (REAL)3);
    X[4 * F + f] += f1 + f3 * (u[1] * u[1] - uu / (REAL)3);
    X[8 * F + f] += f1 + f3 * (u[2] * u[2] - uu / (REAL)3);
    X[1 * F + f] += -f2 * u[2] + f3 * u[0] * u[1];
    X[3 * F + f] += f2 * u[2] + f3 * u[0] * u[1];
    X[2 * F + f] += f2 * u[1] + f3 * u[0] * u[2];
    X[6 * F + f] += -f2 * u[1] + f3 * u[0] * u[2];
    X[5 * F + f] += -f2 * u[0] + f3 * u[1] * u[2];
    X[7 * F + f] += f2 * u[0] + f3 * u[1] * u[2];
}

#define TN_EC FN(tn_embed_channel_T)
#define TN_EC_HD
#include "potentials/tensornet/tn_embed_channel.h"
#undef TN_EC
#undef TN_EC_HD

/* Back through tn_embed_add over the F channels of one edge, cz = fc (p1 + p2): from G = dE/dX
 * of its center, dE/du into gu[3], dE/d dk into gd (3 F; added to when accumulate); returns
 * dE/dfc. */
static REAL FN(tn_embed_edge_T)(int F, const REAL *G, const REAL *u, const REAL *p1,
                                const REAL *p2, REAL fc, const REAL *dk, REAL *gd, int accumulate,
                                REAL *gu) {
    const REAL uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
    REAL gfc = 0, g[3] = {0, 0, 0};
    for (int f = 0; f < F; f++) {
        const REAL zij = p1[f] + p2[f];
        const REAL k[3] = {dk[f], dk[F + f], dk[2 * F + f]};
        REAL t[3];
        FN(tn_embed_channel_T)(F, f, G, u, uu, zij, fc * zij, k, g, &gfc, t);
        for (int c = 0; c < 3; c++) gd[c * F + f] = accumulate ? gd[c * F + f] + t[c] : t[c];
    }
    gu[0] = g[0], gu[1] = g[1], gu[2] = g[2];
    return gfc;
}

/* nr = |X|^2 + 1 per channel, xn = X / nr. */
static void FN(tn_normalize)(int F, const REAL *X, REAL *nr, REAL *xn) {
    FN(tn_norm2)(F, X, nr);
    for (int f = 0; f < F; f++) nr[f] += 1;
    for (int e = 0; e < 9; e++)
        for (int f = 0; f < F; f++) xn[e * F + f] = X[e * F + f] / nr[f];
}

/* Back through tn_normalize: g holds dE/dxn and becomes dE/dX. */
static void FN(tn_normalize_T)(int F, const REAL *X, const REAL *nr, REAL *g) {
    for (int f = 0; f < F; f++) {
        REAL dot = 0;
        for (int e = 0; e < 9; e++) dot += g[e * F + f] * X[e * F + f];
        REAL inv = (REAL)1 / nr[f];
        for (int e = 0; e < 9; e++)
            g[e * F + f] = g[e * F + f] * inv - (REAL)2 * X[e * F + f] * dot * inv * inv;
    }
}

/* The embedding's gates of one atom: LayerNorm of |X|^2 (its mean and 1 / deviation in *mu,
 * *rstd), two linears with activations (pre-activations z1 [2F], z2 [3F]), and
 * X1 = comp(gates * lin3(lt, decomp(X))).  tmp: 27 F. */
static void FN(tn_embed_gate)(int F, int act, const REAL *norm_w, const REAL *norm_b,
                              const REAL *const ls_w[2], const REAL *const ls_b[2],
                              const REAL *const lt[3], const REAL *X, REAL *z1, REAL *z2,
                              REAL *mu, REAL *rstd, REAL *X1, REAL *tmp) {
    REAL *t = tmp, *a = t + F, *s1 = a + F, *g = s1 + 2 * F, *c = g + 3 * F, *cl = c + 10 * F;
    FN(tn_norm2)(F, X, t);
    FN(tn_layer_norm)(F, t, norm_w, norm_b, a, mu, rstd);
    FN(tn_linear)(ls_w[0], ls_b[0], F, 2 * F, a, z1);
    for (int k = 0; k < 2 * F; k++) s1[k] = FN(tn_act)(act, z1[k], NULL);
    FN(tn_linear)(ls_w[1], ls_b[1], 2 * F, 3 * F, s1, z2);
    for (int k = 0; k < 3 * F; k++) g[k] = FN(tn_act)(act, z2[k], NULL);
    FN(tn_decomp)(F, X, c);
    FN(tn_lin3)(F, lt, c, cl);
    for (int k = 0; k < 10; k++) {
        const REAL *gk = g + (size_t)(k == 0 ? 0 : (k < 4 ? 1 : 2)) * F;
        for (int f = 0; f < F; f++) cl[k * F + f] *= gk[f];
    }
    FN(tn_comp)(F, cl, X1);
}

/* Back through tn_embed_gate (mu, rstd, z1, z2 as it gave them): g holds dE/dX1 and becomes
 * dE/dX.  tmp: 51 F. */
static void FN(tn_embed_gate_T)(int F, int act, const REAL *norm_w, const REAL *const ls_w[2],
                                const REAL *const lt[3], const REAL *X, const REAL *z1,
                                const REAL *z2, REAL mu, REAL rstd, REAL *g, REAL *tmp) {
    const size_t F10 = 10 * (size_t)F;
    REAL *c = tmp, *cl = c + F10, *gc = cl + F10, *gcl = gc + F10, *gate = gcl + F10,
         *ggate = gate + 3 * F, *gs1 = ggate + 3 * F, *t = gs1 + 2 * F, *ga = t + F, *gt = ga + F;
    for (int k = 0; k < 3 * F; k++) gate[k] = FN(tn_act)(act, z2[k], NULL);
    FN(tn_decomp)(F, X, c);
    FN(tn_lin3)(F, lt, c, cl);
    FN(tn_comp_T)(F, g, gc); /* gradient of the gated components */
    for (int b = 0; b < 3 * F; b++) ggate[b] = 0;
    for (int k = 0; k < 10; k++) {
        int blk = k == 0 ? 0 : (k < 4 ? 1 : 2);
        for (int f = 0; f < F; f++) {
            ggate[blk * F + f] += gc[k * F + f] * cl[k * F + f];
            gc[k * F + f] *= gate[blk * F + f];
        }
    }
    FN(tn_lin3_T)(F, lt, gc, gcl);
    /* gate MLP backward */
    for (int k = 0; k < 3 * F; k++) {
        REAL d;
        FN(tn_act)(act, z2[k], &d);
        ggate[k] *= d;
    }
    FN(tn_linear_T)(ls_w[1], 2 * F, 3 * F, ggate, gs1, 0);
    for (int k = 0; k < 2 * F; k++) {
        REAL d;
        FN(tn_act)(act, z1[k], &d);
        gs1[k] *= d;
    }
    FN(tn_linear_T)(ls_w[0], F, 2 * F, gs1, ga, 0);
    FN(tn_norm2)(F, X, t);
    FN(tn_layer_norm_T)(F, t, norm_w, mu, rstd, ga, gt);
    FN(tn_decomp_T)(F, gcl, g, 0);
    for (size_t k = 0; k < 9 * (size_t)F; k++) g[k] += (REAL)2 * X[k] * gt[k % (size_t)F];
}

/* A layer's Y of one atom: nr = |X|^2 + 1 per channel, cy = lin3(lt, decomp(X / nr)).
 * tmp: 19 F. */
static void FN(tn_layer_y)(int F, const REAL *const lt[3], const REAL *X, REAL *nr, REAL *cy,
                           REAL *tmp) {
    REAL *xn = tmp, *c = xn + 9 * F;
    FN(tn_normalize)(F, X, nr, xn);
    FN(tn_decomp)(F, xn, c);
    FN(tn_lin3)(F, lt, c, cy);
}

/* Back through tn_layer_y: g (dE/dXn of the direct path, in) += decomp^T(lin3^T(gcy)), then
 * through the normalisation to dE/dX.  tmp: 10 F. */
static void FN(tn_layer_y_T)(int F, const REAL *const lt[3], const REAL *X, const REAL *nr,
                             const REAL *gcy, REAL *g, REAL *tmp) {
    FN(tn_lin3_T)(F, lt, gcy, tmp);
    FN(tn_decomp_T)(F, tmp, g, 1);
    FN(tn_normalize_T)(F, X, nr, g);
}

/* A layer's update of one atom from the components cy of Y and cm of M: Y and M composed, C =
 * qf (M Y + Y M) (O(3)) or 2 Y M (SO(3)), nn = |C|^2 + 1, D = comp(lin3(lt, decomp(C / nn))).
 * tmp: 29 F. */
static void FN(tn_layer_cd)(int F, int so3, REAL qf, const REAL *const lt[3], const REAL *cy,
                            const REAL *cm, REAL *Y, REAL *M, REAL *C, REAL *nn, REAL *D,
                            REAL *tmp) {
    REAL *c = tmp, *cl = c + 10 * F, *Cn = cl + 10 * F;
    FN(tn_comp)(F, cy, Y);
    FN(tn_comp)(F, cm, M);
    if (so3) {
        FN(tn_mm)(F, Y, 0, M, 0, (REAL)2, C, 0);
    } else {
        FN(tn_mm)(F, M, 0, Y, 0, qf, C, 0);
        FN(tn_mm)(F, Y, 0, M, 0, qf, C, 1);
    }
    FN(tn_normalize)(F, C, nn, Cn);
    FN(tn_decomp)(F, Cn, c);
    FN(tn_lin3)(F, lt, c, cl);
    FN(tn_comp)(F, cl, D);
}

/* The layer's output of one atom: Xo = X / nr + D + qf D D. */
static void FN(tn_layer_out)(int F, REAL qf, const REAL *X, const REAL *nr, const REAL *D,
                             REAL *Xo) {
    FN(tn_mm)(F, D, 0, D, 0, qf, Xo, 0);
    for (int e = 0; e < 9; e++)
        for (int f = 0; f < F; f++) Xo[e * F + f] += X[e * F + f] / nr[f] + D[e * F + f];
}

/* Back through tn_layer_out and tn_layer_cd (Y, M, C, nn, D as they gave them): from g = dE/dXo
 * the gradients gcy, gcm of the components of Y and M (the direct path X / nr is the caller's).
 * tmp: 56 F. */
static void FN(tn_layer_cd_T)(int F, int so3, REAL qf, const REAL *const lt[3], const REAL *g,
                              const REAL *Y, const REAL *M, const REAL *C, const REAL *nn,
                              const REAL *D, REAL *gcy, REAL *gcm, REAL *tmp) {
    const size_t F9 = 9 * (size_t)F, F10 = 10 * (size_t)F;
    REAL *gD = tmp, *gc = gD + F9, *gcl = gc + F10, *gC = gcl + F10, *gY = gC + F9, *gM = gY + F9;
    /* Xo = Xn + D + qf D D */
    for (size_t k = 0; k < F9; k++) gD[k] = g[k];
    FN(tn_mm)(F, g, 0, D, 1, qf, gD, 1); /* G D^T */
    FN(tn_mm)(F, D, 1, g, 0, qf, gD, 1); /* D^T G */
    /* D = comp(lin3(decomp(Cn))), Cn = C / nn */
    FN(tn_comp_T)(F, gD, gc);
    FN(tn_lin3_T)(F, lt, gc, gcl);
    FN(tn_decomp_T)(F, gcl, gC, 0); /* gCn */
    FN(tn_normalize_T)(F, C, nn, gC);
    if (so3) { /* C = 2 Y M */
        FN(tn_mm)(F, gC, 0, M, 1, (REAL)2, gY, 0);
        FN(tn_mm)(F, Y, 1, gC, 0, (REAL)2, gM, 0);
    } else {   /* C = qf (M Y + Y M) */
        FN(tn_mm)(F, M, 1, gC, 0, qf, gY, 0);
        FN(tn_mm)(F, gC, 0, M, 1, qf, gY, 1);
        FN(tn_mm)(F, gC, 0, Y, 1, qf, gM, 0);
        FN(tn_mm)(F, Y, 1, gC, 0, qf, gM, 1);
    }
    FN(tn_comp_T)(F, gY, gcy);
    FN(tn_comp_T)(F, gM, gcm);
}

/* ---- workspace ----------------------------------------------------------------------------- */

typedef struct {
    size_t P1, P2, X0, emb_mu, emb_rstd, emb_z1, emb_z2, Xl, cY, cM, C, D, nrm, n2, Xfin, h,
        phi, fcv, gX, gcY, gcM, gr, gu, blk, tmp, total;
} FN(tn_layout);

/* Edges per block of the edge MLPs, whose layers run as GEMMs over a block's edges (the dense
 * kernels' feature-major layout: [features][TN_BLOCK]). */
#define TN_BLOCK 64

static int FN(tn_out_sum)(const nnpops__tn_shape *s) {
    int t = 0;
    for (int k = 1; k <= s->n_out; k++) t += s->out_width[k];
    return t;
}

static FN(tn_layout) FN(tn_plan)(const nnpops__tn_shape *s, int64_t N, int64_t E) {
    FN(tn_layout) p;
    size_t F = (size_t)s->F, R = (size_t)s->R, L = (size_t)s->L, n = (size_t)N, e = (size_t)E;
    size_t o = 0;
#define TN_TAKE(field, count)                                                                  \
    do {                                                                                       \
        p.field = o;                                                                           \
        o += ((size_t)(count) + 7) & ~(size_t)7;                                               \
    } while (0)
    TN_TAKE(P1, n * F);
    TN_TAKE(P2, n * F);
    TN_TAKE(X0, n * 9 * F);
    TN_TAKE(emb_mu, n);
    TN_TAKE(emb_rstd, n);
    TN_TAKE(emb_z1, n * 2 * F);
    TN_TAKE(emb_z2, n * 3 * F);
    TN_TAKE(Xl, (L + 1) * n * 9 * F); /* input of layer l; entry L: the readout's input */
    TN_TAKE(cY, L * n * 10 * F);
    TN_TAKE(cM, L * n * 10 * F);
    TN_TAKE(C, L * n * 9 * F);
    TN_TAKE(D, L * n * 9 * F);
    TN_TAKE(nrm, L * n * F);
    TN_TAKE(n2, L * n * F);
    TN_TAKE(Xfin, 0);
    TN_TAKE(h, L * e * 3 * F);
    TN_TAKE(phi, e * R);
    TN_TAKE(fcv, e);
    TN_TAKE(gX, n * 9 * F);
    TN_TAKE(gcY, n * 10 * F);
    TN_TAKE(gcM, n * 10 * F);
    TN_TAKE(gr, e);
    TN_TAKE(gu, e * 3);
    TN_TAKE(blk, (2 * R + 16 * F) * TN_BLOCK);
    /* scratch of one atom or one edge (the readout, the embedding's gates, the per-atom layer
     * pieces, the edge MLPs; the per-atom layer backward is the largest, 74F) */
    size_t m = 80 * F + 2 * (size_t)FN(tn_out_sum)(s) + 4 * R + 64;
    TN_TAKE(tmp, m);
#undef TN_TAKE
    p.total = o;
    return p;
}

size_t FN(nnpops__tn_cpu_workspace)(const nnpops__tn_shape *s, int64_t n_atoms, int64_t n_edges) {
    return FN(tn_plan)(s, n_atoms, n_edges).total * sizeof(REAL) + 64;
}

/* ---- the edge MLP of a layer: h = fc act(ls2(act(ls1(act(ls0(phi)))))) --------------------- */

/* Block buffers, feature-major over TN_BLOCK edge columns. */
typedef struct {
    REAL *phiT, *Z1, *A1, *Z2, *A2, *Z3, *G3, *G2, *G1, *gphiT;
} FN(tn_blockbuf);

static FN(tn_blockbuf) FN(tn_blockbuf_at)(REAL *base, int F, int R) {
    FN(tn_blockbuf) b;
    const size_t B = TN_BLOCK;
    b.phiT = base;
    b.Z1 = b.phiT + (size_t)R * B;
    b.A1 = b.Z1 + (size_t)F * B;
    b.Z2 = b.A1 + (size_t)F * B;
    b.A2 = b.Z2 + (size_t)2 * F * B;
    b.Z3 = b.A2 + (size_t)2 * F * B;
    b.G3 = b.Z3 + (size_t)3 * F * B;
    b.G2 = b.G3 + (size_t)3 * F * B;
    b.G1 = b.G2 + (size_t)2 * F * B;
    b.gphiT = b.G1 + (size_t)F * B;
    return b;
}

/* The pre-activations Z1, Z2, Z3 (and A1, A2) of edges e0 .. e0+nb-1 (columns 0 .. nb-1; the
 * padding columns hold the biases' images of zero input, finite). */
static void FN(tn_edge_block)(const nnpops__tn_shape *s, const REAL *const *Wl,
                              const REAL *const *bl, const REAL *phi, int64_t e0, int nb,
                              FN(tn_blockbuf) * b) {
    const int F = s->F, R = s->R, B = TN_BLOCK;
    for (int k = 0; k < R; k++)
        for (int c = 0; c < B; c++)
            b->phiT[(size_t)k * B + c] = c < nb ? phi[(size_t)(e0 + c) * R + k] : (REAL)0;
    FN(nnpops__dense_forward_cpu)(B, R, F, Wl[0], bl[0], b->phiT, B, b->Z1, B);
    for (size_t k = 0; k < (size_t)F * B; k++) b->A1[k] = FN(tn_act)(s->activation, b->Z1[k], NULL);
    FN(nnpops__dense_forward_cpu)(B, F, 2 * F, Wl[1], bl[1], b->A1, B, b->Z2, B);
    for (size_t k = 0; k < (size_t)2 * F * B; k++)
        b->A2[k] = FN(tn_act)(s->activation, b->Z2[k], NULL);
    FN(nnpops__dense_forward_cpu)(B, 2 * F, 3 * F, Wl[2], bl[2], b->A2, B, b->Z3, B);
}

/* ---- the readout of one atom ------------------------------------------------------------------ */

/* Energy term of atom n before std (returned), and, when gX is not NULL, dterm/dX * seed into gX
 * (9F).  X: the atom's final features (9F). */
static REAL FN(tn_readout)(const nnpops__tn_shape *s, const WEIGHTS *w, const REAL *X, REAL seed,
                           REAL *gX, REAL *tmp) {
    const int F = s->F;
    REAL *c = tmp;              /* 10F */
    REAL *x = c + 10 * F;       /* 3F */
    REAL *y = x + 3 * F;        /* 3F */
    REAL *zl = y + 3 * F;       /* F */
    REAL *acts = zl + F;        /* per readout linear: pre-activations, then activations */
    int sum = FN(tn_out_sum)(s);
    REAL *pre = acts;           /* sum values */
    REAL *post = acts + sum;    /* sum values */
    REAL *g1 = post + sum;      /* max width */
    REAL *g2 = g1 + 3 * F + 8;  /* max width */
    REAL mu, rstd;
    FN(tn_decomp)(F, X, c);
    for (int f = 0; f < F; f++) {
        REAL i = c[f];
        REAL a = c[1 * F + f] * c[1 * F + f] + c[2 * F + f] * c[2 * F + f] +
                 c[3 * F + f] * c[3 * F + f];
        REAL sd = c[4 * F + f] * c[4 * F + f] + c[5 * F + f] * c[5 * F + f] +
                  c[6 * F + f] * c[6 * F + f];
        REAL so = c[7 * F + f] * c[7 * F + f] + c[8 * F + f] * c[8 * F + f] +
                  c[9 * F + f] * c[9 * F + f];
        x[f] = (REAL)3 * i * i;
        x[F + f] = (REAL)2 * a;
        x[2 * F + f] = sd + (REAL)2 * so;
    }
    FN(tn_layer_norm)(3 * F, x, w->out_norm_w, w->out_norm_b, y, &mu, &rstd);
    FN(tn_linear)(w->linear_w, w->linear_b, 3 * F, F, y, zl);
    REAL *ra = g2 + 3 * F + 8; /* act(zl), F values */
    for (int f = 0; f < F; f++) ra[f] = FN(tn_act)(s->activation, zl[f], NULL);
    const REAL *cur = ra;
    int off = 0;
    for (int k = 0; k < s->n_out; k++) {
        int ni = s->out_width[k], no = s->out_width[k + 1];
        FN(tn_linear)(w->out_w[k], w->out_b[k], ni, no, cur, pre + off);
        if (k < s->n_out - 1)
            for (int o = 0; o < no; o++)
                post[off + o] = FN(tn_act)(s->activation, pre[off + o], NULL);
        else
            for (int o = 0; o < no; o++) post[off + o] = pre[off + o];
        cur = post + off;
        off += no;
    }
    REAL out = cur[0];
    if (!gX) return out;

    /* backward: seed -> readout MLP -> act(zl) -> linear -> LayerNorm -> x -> X */
    int offs[NNPOPS__TN_MAX_OUT + 1];
    offs[0] = 0;
    for (int k = 0; k < s->n_out; k++) offs[k + 1] = offs[k] + s->out_width[k + 1];
    REAL *gcur = g1;
    gcur[0] = seed;
    for (int k = s->n_out - 1; k >= 0; k--) {
        int ni = s->out_width[k], no = s->out_width[k + 1];
        if (k < s->n_out - 1)
            for (int o = 0; o < no; o++) {
                REAL d;
                FN(tn_act)(s->activation, pre[offs[k] + o], &d);
                gcur[o] *= d;
            }
        REAL *gnext = gcur == g1 ? g2 : g1;
        FN(tn_linear_T)(w->out_w[k], ni, no, gcur, gnext, 0);
        gcur = gnext;
    }
    /* gcur: gradient of act(zl) (F) */
    for (int f = 0; f < F; f++) {
        REAL d;
        FN(tn_act)(s->activation, zl[f], &d);
        gcur[f] *= d;
    }
    REAL *gy = gcur == g1 ? g2 : g1;
    FN(tn_linear_T)(w->linear_w, 3 * F, F, gcur, gy, 0);
    REAL *gx = y; /* y is no longer needed */
    FN(tn_layer_norm_T)(3 * F, x, w->out_norm_w, mu, rstd, gy, gx);
    REAL *gc = c + 0; /* reuse: gradient of the components, built in place below */
    for (int f = 0; f < F; f++) {
        REAL g0 = gx[f], g1v = gx[F + f], g2v = gx[2 * F + f];
        REAL c0 = c[f];
        REAL cc[10];
        for (int k = 1; k < 10; k++) cc[k] = c[k * F + f];
        gc[0 * F + f] = (REAL)6 * c0 * g0;
        for (int k = 1; k < 4; k++) gc[k * F + f] = (REAL)4 * cc[k] * g1v;
        for (int k = 4; k < 7; k++) gc[k * F + f] = (REAL)2 * cc[k] * g2v;
        for (int k = 7; k < 10; k++) gc[k * F + f] = (REAL)4 * cc[k] * g2v;
    }
    FN(tn_decomp_T)(F, gc, gX, 0);
    return out;
}

/* ---- the whole model --------------------------------------------------------------------------- */

int FN(nnpops__tn_cpu)(const nnpops__tn_shape *s, const WEIGHTS *w, int64_t N, const int32_t *z,
                       const double *charge, int64_t E, const int32_t *center,
                       const int32_t *neighbor, const REAL *vec, const REAL *dist,
                       const double *atom_weight, double *atom_energy, REAL *edge_grad,
                       void *workspace, int64_t *bad_index) {
    const int F = s->F, R = s->R, L = s->L;
    const size_t F9 = 9 * (size_t)F, F10 = 10 * (size_t)F;
    for (int64_t n = 0; n < N; n++) {
        if (z[n] < 0 || z[n] >= s->max_z || (w->atomref && z[n] >= s->atomref_len)) {
            if (bad_index) *bad_index = n;
            return NNPOPS__TN_BAD_Z;
        }
    }
    for (int64_t e = 0; e < E; e++) {
        if (center[e] < 0 || center[e] >= N || neighbor[e] < 0 || neighbor[e] >= N) {
            if (bad_index) *bad_index = e;
            return NNPOPS__TN_BAD_EDGE;
        }
    }
    FN(tn_layout) p = FN(tn_plan)(s, N, E);
    REAL *ws = (REAL *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
    REAL *P1 = ws + p.P1, *P2 = ws + p.P2, *X0 = ws + p.X0;
    REAL *emb_mu = ws + p.emb_mu, *emb_rstd = ws + p.emb_rstd;
    REAL *emb_z1 = ws + p.emb_z1, *emb_z2 = ws + p.emb_z2;
    REAL *Xl = ws + p.Xl, *cYa = ws + p.cY, *cMa = ws + p.cM, *Ca = ws + p.C, *Da = ws + p.D;
    REAL *nrma = ws + p.nrm, *n2a = ws + p.n2, *ha = ws + p.h, *phia = ws + p.phi;
    REAL *fca = ws + p.fcv, *tmp = ws + p.tmp;
    FN(tn_blockbuf) bb = FN(tn_blockbuf_at)(ws + p.blk, F, R);
    const size_t NF9 = (size_t)N * F9, NF10 = (size_t)N * F10, NF = (size_t)N * F;

    /* ---- per atom: the two halves of emb2 applied to emb[z] ---- */
    for (int64_t n = 0; n < N; n++) {
        const REAL *em = w->emb + (size_t)z[n] * F;
        for (int o = 0; o < F; o++) {
            const REAL *row = w->emb2_w + (size_t)o * 2 * F;
            REAL a = w->emb2_b[o], b = 0;
            for (int i = 0; i < F; i++) {
                a += row[i] * em[i];
                b += row[F + i] * em[i];
            }
            P1[(size_t)n * F + o] = a;
            P2[(size_t)n * F + o] = b;
        }
    }
    /* ---- per edge: radial basis and cutoff ---- */
    for (int64_t e = 0; e < E; e++) {
        REAL d;
        FN(tn_rbf)(s, w, dist[e], phia + (size_t)e * R, NULL);
        fca[e] = FN(tn_fc)(s->cutoff_lower, s->cutoff_upper, dist[e], &d);
    }
    /* ---- embedding: X0 = sum over edges ---- */
    memset(X0, 0, NF9 * sizeof(REAL));
    for (int64_t e = 0; e < E; e++) {
        const int i = center[e], j = neighbor[e];
        REAL u[3];
        FN(tn_unit)(vec + 3 * e, dist[e], u);
        REAL *dk = tmp; /* 3F */
        const REAL *ph = phia + (size_t)e * R;
        for (int k = 0; k < 3; k++) FN(tn_linear)(w->dproj_w[k], w->dproj_b[k], R, F, ph, dk + k * F);
        REAL *Xi = X0 + (size_t)i * F9;
        const REAL *p1 = P1 + (size_t)i * F, *p2 = P2 + (size_t)j * F;
        for (int f = 0; f < F; f++) FN(tn_embed_add)(F, f, fca[e] * (p1[f] + p2[f]), dk, u, Xi);
    }
    /* ---- embedding: gates ---- */
    const REAL *emb_lt[3] = {w->emb_lt[0], w->emb_lt[1], w->emb_lt[2]};
    for (int64_t n = 0; n < N; n++)
        FN(tn_embed_gate)(F, s->activation, w->init_norm_w, w->init_norm_b, w->emb_ls_w,
                          w->emb_ls_b, emb_lt, X0 + (size_t)n * F9, emb_z1 + (size_t)n * 2 * F,
                          emb_z2 + (size_t)n * 3 * F, emb_mu + n, emb_rstd + n,
                          Xl + (size_t)n * F9, tmp);
    /* ---- interaction layers ---- */
    for (int l = 0; l < L; l++) {
        const REAL *const *Wls = w->layer_ls_w + 3 * l, *const *bls = w->layer_ls_b + 3 * l;
        const REAL *lt_a[3] = {w->layer_lt[6 * l], w->layer_lt[6 * l + 1], w->layer_lt[6 * l + 2]};
        const REAL *lt_b[3] = {w->layer_lt[6 * l + 3], w->layer_lt[6 * l + 4],
                               w->layer_lt[6 * l + 5]};
        REAL *Xin = Xl + l * NF9, *Xout = Xl + (l + 1) * NF9;
        REAL *cY = cYa + l * NF10, *cM = cMa + l * NF10, *Cl = Ca + l * NF9, *Dl = Da + l * NF9;
        REAL *nrm = nrma + l * NF, *n2 = n2a + l * NF;
        REAL *h = ha + (size_t)l * E * 3 * F;
        for (int64_t e0 = 0; e0 < E; e0 += TN_BLOCK) {
            const int nb = (int)(E - e0 < TN_BLOCK ? E - e0 : TN_BLOCK);
            FN(tn_edge_block)(s, Wls, bls, phia, e0, nb, &bb);
            for (int c = 0; c < nb; c++) {
                REAL *he = h + (size_t)(e0 + c) * 3 * F;
                for (int o = 0; o < 3 * F; o++)
                    he[o] = fca[e0 + c] *
                            FN(tn_act)(s->activation, bb.Z3[(size_t)o * TN_BLOCK + c], NULL);
            }
        }
        for (int64_t n = 0; n < N; n++)
            FN(tn_layer_y)(F, lt_a, Xin + (size_t)n * F9, nrm + (size_t)n * F,
                           cY + (size_t)n * F10, tmp);
        memset(cM, 0, NF10 * sizeof(REAL));
        for (int64_t e = 0; e < E; e++)
            FN(tn_hmul)(F, h + (size_t)e * 3 * F, cY + (size_t)neighbor[e] * F10,
                        cM + (size_t)center[e] * F10);
        for (int64_t n = 0; n < N; n++) {
            REAL qf = (REAL)(1.0 + 0.1 * (charge ? charge[n] : 0.0));
            REAL *Y = tmp, *M = Y + F9, *D = Dl + (size_t)n * F9;
            FN(tn_layer_cd)(F, s->so3, qf, lt_b, cY + (size_t)n * F10, cM + (size_t)n * F10, Y, M,
                            Cl + (size_t)n * F9, n2 + (size_t)n * F, D, M + F9);
            FN(tn_layer_out)(F, qf, Xin + (size_t)n * F9, nrm + (size_t)n * F, D,
                             Xout + (size_t)n * F9);
        }
    }
    /* ---- readout (and its backward into gX) ---- */
    REAL *gX = ws + p.gX;
    const REAL *Xfinal = Xl + (size_t)L * NF9;
    for (int64_t n = 0; n < N; n++) {
        REAL seed = (REAL)((atom_weight ? atom_weight[n] : 1.0) * s->std);
        REAL o = FN(tn_readout)(s, w, Xfinal + (size_t)n * F9, seed,
                                edge_grad ? gX + (size_t)n * F9 : NULL, tmp);
        if (atom_energy) {
            double en = (double)o * s->std;
            if (w->atomref) en += (double)w->atomref[z[n]];
            atom_energy[n] = en;
        }
    }
    if (!edge_grad) return NNPOPS__TN_OK;

    /* ==== backward ==== */
    REAL *gcY = ws + p.gcY, *gcM = ws + p.gcM, *gr = ws + p.gr, *gu = ws + p.gu;
    memset(gr, 0, (size_t)E * sizeof(REAL));
    memset(gu, 0, (size_t)E * 3 * sizeof(REAL));
    for (int l = L - 1; l >= 0; l--) {
        const REAL *const *Wls = w->layer_ls_w + 3 * l, *const *bls = w->layer_ls_b + 3 * l;
        const REAL *lt_a[3] = {w->layer_lt[6 * l], w->layer_lt[6 * l + 1], w->layer_lt[6 * l + 2]};
        const REAL *lt_b[3] = {w->layer_lt[6 * l + 3], w->layer_lt[6 * l + 4],
                               w->layer_lt[6 * l + 5]};
        REAL *Xin = Xl + l * NF9;
        REAL *cY = cYa + l * NF10, *cM = cMa + l * NF10, *Cl = Ca + l * NF9, *Dl = Da + l * NF9;
        REAL *nrm = nrma + l * NF, *n2 = n2a + l * NF;
        REAL *h = ha + (size_t)l * E * 3 * F;
        /* per atom: from gXout (in gX) to gM, gY (components), gXn */
        for (int64_t n = 0; n < N; n++) {
            REAL qf = (REAL)(1.0 + 0.1 * (charge ? charge[n] : 0.0));
            REAL *Y = tmp, *M = Y + F9;
            FN(tn_comp)(F, cY + (size_t)n * F10, Y);
            FN(tn_comp)(F, cM + (size_t)n * F10, M);
            FN(tn_layer_cd_T)(F, s->so3, qf, lt_b, gX + (size_t)n * F9, Y, M, Cl + (size_t)n * F9,
                              n2 + (size_t)n * F, Dl + (size_t)n * F9, gcY + (size_t)n * F10,
                              gcM + (size_t)n * F10, M + F9);
        }
        /* edges, a block at a time: messages M_i += h (x) Y_j, then back through the edge MLP */
        for (int64_t e0 = 0; e0 < E; e0 += TN_BLOCK) {
            const int nb = (int)(E - e0 < TN_BLOCK ? E - e0 : TN_BLOCK), B = TN_BLOCK;
            REAL *GH = bb.G3; /* dE/dh, [3F][B] */
            for (size_t k = 0; k < (size_t)3 * F * B; k++) GH[k] = 0;
            for (int c = 0; c < nb; c++) {
                const int64_t e = e0 + c;
                const int i = center[e], j = neighbor[e];
                const REAL *he = h + (size_t)e * 3 * F;
                const REAL *yj = cY + (size_t)j * F10;
                const REAL *gmi = gcM + (size_t)i * F10;
                REAL *gyj = gcY + (size_t)j * F10;
                for (int k = 0; k < 10; k++) {
                    int blk = k == 0 ? 0 : (k < 4 ? 1 : 2);
                    const REAL *hk = he + (size_t)blk * F;
                    for (int f = 0; f < F; f++) {
                        GH[(size_t)(blk * F + f) * B + c] += gmi[k * F + f] * yj[k * F + f];
                        gyj[k * F + f] += hk[f] * gmi[k * F + f];
                    }
                }
            }
            /* h = fc act(Z3): recompute the block's pre-activations, then back */
            FN(tn_edge_block)(s, Wls, bls, phia, e0, nb, &bb);
            REAL gfc[TN_BLOCK], fcv[TN_BLOCK], fcd[TN_BLOCK];
            for (int c = 0; c < B; c++) {
                gfc[c] = 0;
                fcv[c] = c < nb ? FN(tn_fc)(s->cutoff_lower, s->cutoff_upper, dist[e0 + c], &fcd[c])
                                : (REAL)0;
                if (c >= nb) fcd[c] = 0;
            }
            for (int o = 0; o < 3 * F; o++)
                for (int c = 0; c < B; c++) {
                    REAL d;
                    size_t k = (size_t)o * B + c;
                    REAL a3 = FN(tn_act)(s->activation, bb.Z3[k], &d);
                    gfc[c] += GH[k] * a3;
                    GH[k] *= fcv[c] * d; /* now dE/dZ3 */
                }
            FN(nnpops__dense_backward_cpu)(B, 2 * F, 3 * F, Wls[2], GH, B, bb.G2, B);
            for (size_t k = 0; k < (size_t)2 * F * B; k++) {
                REAL d;
                FN(tn_act)(s->activation, bb.Z2[k], &d);
                bb.G2[k] *= d;
            }
            FN(nnpops__dense_backward_cpu)(B, F, 2 * F, Wls[1], bb.G2, B, bb.G1, B);
            for (size_t k = 0; k < (size_t)F * B; k++) {
                REAL d;
                FN(tn_act)(s->activation, bb.Z1[k], &d);
                bb.G1[k] *= d;
            }
            FN(nnpops__dense_backward_cpu)(B, R, F, Wls[0], bb.G1, B, bb.gphiT, B);
            for (int c = 0; c < nb; c++) {
                REAL *dphi = tmp, *phv = tmp + R;
                FN(tn_rbf)(s, w, dist[e0 + c], phv, dphi);
                REAL g = gfc[c] * fcd[c];
                for (int k = 0; k < R; k++) g += bb.gphiT[(size_t)k * B + c] * dphi[k];
                gr[e0 + c] += g;
            }
        }
        /* per atom: Y = comp(lin3(decomp(Xn))), Xn = Xin / nrm; gXn = gXout + that */
        for (int64_t n = 0; n < N; n++)
            FN(tn_layer_y_T)(F, lt_a, Xin + (size_t)n * F9, nrm + (size_t)n * F,
                             gcY + (size_t)n * F10, gX + (size_t)n * F9, tmp);
    }
    /* ---- embedding backward: gX (of the embedding's output) -> gX0 per atom ---- */
    for (int64_t n = 0; n < N; n++)
        FN(tn_embed_gate_T)(F, s->activation, w->init_norm_w, w->emb_ls_w, emb_lt,
                            X0 + (size_t)n * F9, emb_z1 + (size_t)n * 2 * F,
                            emb_z2 + (size_t)n * 3 * F, emb_mu[n], emb_rstd[n],
                            gX + (size_t)n * F9, tmp);
    /* ---- embedding backward: edges ---- */
    for (int64_t e = 0; e < E; e++) {
        const int i = center[e], j = neighbor[e];
        REAL r = dist[e];
        REAL u[3], gue[3];
        FN(tn_unit)(vec + 3 * e, r, u);
        REAL *dk = tmp, *gd = dk + 3 * F, *gphi = gd + 3 * F, *dphi = gphi + R, *phv = dphi + R;
        const REAL *ph = phia + (size_t)e * R;
        for (int k = 0; k < 3; k++) FN(tn_linear)(w->dproj_w[k], w->dproj_b[k], R, F, ph, dk + k * F);
        const REAL *G = gX + (size_t)i * F9;
        const REAL *p1 = P1 + (size_t)i * F, *p2 = P2 + (size_t)j * F;
        REAL fcd;
        REAL fcv = FN(tn_fc)(s->cutoff_lower, s->cutoff_upper, r, &fcd);
        REAL gfc = FN(tn_embed_edge_T)(F, G, u, p1, p2, fcv, dk, gd, 0, gue);
        for (int k = 0; k < R; k++) gphi[k] = 0;
        for (int k = 0; k < 3; k++) {
            const REAL *W = w->dproj_w[k];
            for (int o = 0; o < F; o++) {
                REAL go = gd[k * F + o];
                const REAL *row = W + (size_t)o * R;
                for (int q = 0; q < R; q++) gphi[q] += row[q] * go;
            }
        }
        FN(tn_rbf)(s, w, r, phv, dphi);
        REAL g = gfc * fcd;
        for (int k = 0; k < R; k++) g += gphi[k] * dphi[k];
        gr[e] += g;
        gu[3 * e + 0] += gue[0];
        gu[3 * e + 1] += gue[1];
        gu[3 * e + 2] += gue[2];
    }
    /* ---- to the edge vectors: u = vec / r, r = |vec| ---- */
    for (int64_t e = 0; e < E; e++) {
        REAL r = dist[e];
        if (!(r > 0)) {
            edge_grad[3 * e] = edge_grad[3 * e + 1] = edge_grad[3 * e + 2] = 0;
            continue;
        }
        REAL u[3], gdotu = 0;
        for (int k = 0; k < 3; k++) {
            u[k] = vec[3 * e + k] / r;
            gdotu += gu[3 * e + k] * u[k];
        }
        for (int k = 0; k < 3; k++)
            edge_grad[3 * e + k] = (gu[3 * e + k] - u[k] * gdotu) / r + u[k] * gr[e];
    }
    return NNPOPS__TN_OK;
}

/* ---- ZBL ------------------------------------------------------------------------------------------ */

int FN(nnpops__tn_zbl_cpu)(const nnpops__tn_zbl *zbl, const int32_t *z, int64_t P,
                           const int32_t *center, const int32_t *neighbor, const REAL *vec,
                           const REAL *dist, const double *atom_weight, double *atom_energy,
                           REAL *pair_grad, int64_t *bad_index) {
    /* torchmd-net: a = 0.8854 a0 / (Zi^0.23 + Zj^0.23) in float32, as reciprocal(s) times the
     * constant; the powers correctly rounded to float32 here. */
    const float k_a = (float)(0.8854 * 5.29177210903e-11);
    const REAL pref = (REAL)(0.5 * 2.30707755e-28 / zbl->energy_scale / zbl->distance_scale);
    const REAL ds = (REAL)zbl->distance_scale;
    for (int64_t p = 0; p < P; p++) {
        const int i = center[p], j = neighbor[p];
        if (z[i] < 0 || z[i] >= zbl->map_len || z[j] < 0 || z[j] >= zbl->map_len) {
            if (bad_index) *bad_index = z[i] < 0 || z[i] >= zbl->map_len ? i : j;
            return NNPOPS__TN_BAD_Z;
        }
        const int32_t Zi = zbl->atomic_number[z[i]], Zj = zbl->atomic_number[z[j]];
        float sa = (float)pow((double)Zi, 0.23) + (float)pow((double)Zj, 0.23);
        float af = ((float)1 / sa) * k_a;
        REAL a = (REAL)af;
        REAL r = dist[p];
        REAL d = r * ds / a;
        REAL e1 = (REAL)exp((REAL)-3.2 * d), e2 = (REAL)exp((REAL)-0.9423 * d);
        REAL e3 = (REAL)exp((REAL)-0.4029 * d), e4 = (REAL)exp((REAL)-0.2016 * d);
        REAL phi = (REAL)0.1818 * e1 + (REAL)0.5099 * e2 + (REAL)0.2802 * e3 + (REAL)0.02817 * e4;
        REAL dphi = (REAL)-3.2 * (REAL)0.1818 * e1 - (REAL)0.9423 * (REAL)0.5099 * e2 -
                    (REAL)0.4029 * (REAL)0.2802 * e3 - (REAL)0.2016 * (REAL)0.02817 * e4;
        REAL fcd;
        REAL fc = FN(tn_fc)(0.0, zbl->cutoff, r, &fcd);
        REAL zz = (REAL)Zi * (REAL)Zj;
        REAL en = pref * phi * fc * zz / r;
        if (atom_energy) atom_energy[i] += (double)en;
        if (pair_grad) {
            REAL wgt = (REAL)(atom_weight ? atom_weight[i] : 1.0);
            REAL dE = pref * zz * (dphi * ds / a * fc / r + phi * fcd / r - phi * fc / (r * r));
            for (int k = 0; k < 3; k++) pair_grad[3 * p + k] = wgt * dE * vec[3 * p + k] / r;
        }
    }
    return NNPOPS__TN_OK;
}

#undef FN
#undef WEIGHTS
#undef TN_CAT
#undef TN_CAT_
