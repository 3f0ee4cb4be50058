/*
 * tn_ops.cu - the CUDA twins of TensorNet's ops (potentials/tensornet/tn_ops.h gives each op's
 * definition; cpu/tn_ops_cpu_impl.h the CPU twins).
 *
 * Kernels by shape of work:
 *   per atom (the 3x3 algebra over F channels, the gates, the readout): one block per atom, its
 *     threads over the channels; the channel linears read the atom's components from shared
 *     memory and keep a channel's ten outputs in registers; LayerNorms reduce in a fixed tree;
 *   per center (the embedding's sum, the messages and their gradients, dE/dh of the pairs a
 *     center holds): one block per center, its threads over the channels, the center's entries in
 *     list order (no atomics); the pairs' numbering: a warp per center, 32 entries a round;
 *   per entry or pair (distances, radial basis and its gradient, the embedding's gradients): a
 *     thread, or a warp whose lanes split the channels or basis functions (fixed-order warp sums);
 *   the linears over pairs (edge networks, the embedding's distance projections): cuBLAS GEMMs
 *     (nnpops__gemm_cuda, FP32 / FP64 compute); their biases and activations are added by the
 *     elementwise kernels and the messages as they read the GEMMs' outputs.
 * Nothing here allocates, synchronizes or reads device data on the host.
 */
#include <math.h>
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

extern "C" {
#include "potentials/tensornet/tn_ops.h"
}

using namespace nnpops_cuda;

namespace {

/* ---- math in the kernel's precision ---- */
__host__ __device__ inline float t_exp(float x) { return expf(x); }
__host__ __device__ inline double t_exp(double x) { return exp(x); }
__host__ __device__ inline float t_log1p(float x) { return log1pf(x); }
__host__ __device__ inline double t_log1p(double x) { return log1p(x); }
__host__ __device__ inline float t_tanh(float x) { return tanhf(x); }
__host__ __device__ inline double t_tanh(double x) { return tanh(x); }
__host__ __device__ inline float t_sin(float x) { return sinf(x); }
__host__ __device__ inline double t_sin(double x) { return sin(x); }
__host__ __device__ inline float t_cos(float x) { return cosf(x); }
__host__ __device__ inline double t_cos(double x) { return cos(x); }
__host__ __device__ inline float t_sqrt(float x) { return sqrtf(x); }
__host__ __device__ inline double t_sqrt(double x) { return sqrt(x); }

template <typename T> __device__ inline T t_softplus(T x) {
    return x > (T)20 ? x : t_log1p(t_exp(x));
}
template <typename T> __device__ inline T t_sigmoid(T x) { return (T)1 / ((T)1 + t_exp(-x)); }

/* act(x) and, when d is not NULL, act'(x) (tensornet_cpu_impl.h's tn_act). */
template <typename T> __device__ inline T t_act(int kind, T x, T *d) {
    switch (kind) {
    case NNPOPS__TN_SSP:
        if (d) *d = x > (T)20 ? (T)1 : t_sigmoid(x);
        return t_softplus(x) - (T)0.693147182464599609375;
    case NNPOPS__TN_SILU: {
        T s = t_sigmoid(x);
        if (d) *d = s * ((T)1 + x * ((T)1 - s));
        return x * s;
    }
    case NNPOPS__TN_TANH: {
        T t = t_tanh(x);
        if (d) *d = (T)1 - t * t;
        return t;
    }
    case NNPOPS__TN_SIGMOID: {
        T s = t_sigmoid(x);
        if (d) *d = s * ((T)1 - s);
        return s;
    }
    default: {
        T t = t_tanh(t_softplus(x));
        if (d) *d = t + x * ((T)1 - t * t) * t_sigmoid(x);
        return x * t;
    }
    }
}

/* The layers' cosine cutoff and its derivative (tn_fc). */
template <typename T> __device__ inline T t_fc(double lo, double hi, T r, T *d) {
    const T pi = (T)3.14159265358979323846;
    if (lo > 0) {
        if (!(r < (T)hi) || !(r > (T)lo)) {
            *d = 0;
            return 0;
        }
        T arg = pi * ((T)2 * (r - (T)lo) / ((T)hi - (T)lo) + (T)1);
        *d = (T)-0.5 * t_sin(arg) * (T)2 * pi / ((T)hi - (T)lo);
        return (T)0.5 * (t_cos(arg) + (T)1);
    }
    if (!(r < (T)hi)) {
        *d = 0;
        return 0;
    }
    *d = (T)-0.5 * t_sin(r * pi / (T)hi) * pi / (T)hi;
    return (T)0.5 * (t_cos(r * pi / (T)hi) + (T)1);
}

/* Radial basis k at r and its derivative (tn_rbf). */
template <typename T>
__device__ inline T t_rbf(const nnpops__tn_dims &d, const T *a, const T *b, T r, int k, T *dphi) {
    if (d.rbf == NNPOPS__TN_GAUSS) {
        const T c = b[0];
        T t = r - a[k];
        T p = t_exp(c * t * t);
        if (dphi) *dphi = p * (T)2 * c * t;
        return p;
    }
    T dfc;
    T fc = t_fc<T>(0.0, d.hi, r, &dfc);
    T alpha = (T)(5.0 / (d.hi - d.lo));
    T e = t_exp(alpha * (-r + (T)d.lo));
    T t = e - a[k];
    T g = t_exp(-b[k] * t * t);
    if (dphi) *dphi = dfc * g + fc * g * (T)2 * b[k] * alpha * e * t;
    return fc * g;
}

__device__ inline int blk_of(int k) { return k == 0 ? 0 : (k < 4 ? 1 : 2); }

/* A block-wide sum in a fixed tree (every thread of the block calls it; red: 32 values). */
template <typename T> __device__ T block_sum(T v, T *red) {
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    T s = 0;
    for (int k = 0; k < nw; k++) s += red[k];
    return s;
}

/* ---- per channel: the 3x3 pieces (tensornet_cpu_impl.h names them) ---- */
template <typename T> __device__ inline void t_decomp(const T *x, T *c) {
    T i = (x[0] + x[4] + x[8]) / (T)3;
    c[0] = i;
    c[1] = (T)0.5 * (x[1] - x[3]);
    c[2] = (T)0.5 * (x[2] - x[6]);
    c[3] = (T)0.5 * (x[5] - x[7]);
    c[4] = x[0] - i;
    c[5] = x[4] - i;
    c[6] = x[8] - i;
    c[7] = (T)0.5 * (x[1] + x[3]);
    c[8] = (T)0.5 * (x[2] + x[6]);
    c[9] = (T)0.5 * (x[5] + x[7]);
}
template <typename T> __device__ inline void t_decomp_T(const T *gc, T *v) {
    T t = (gc[0] - gc[4] - gc[5] - gc[6]) / (T)3;
    v[0] = gc[4] + t;
    v[4] = gc[5] + t;
    v[8] = gc[6] + t;
    v[1] = (T)0.5 * (gc[1] + gc[7]);
    v[3] = (T)0.5 * (-gc[1] + gc[7]);
    v[2] = (T)0.5 * (gc[2] + gc[8]);
    v[6] = (T)0.5 * (-gc[2] + gc[8]);
    v[5] = (T)0.5 * (gc[3] + gc[9]);
    v[7] = (T)0.5 * (-gc[3] + gc[9]);
}
template <typename T> __device__ inline void t_comp(const T *c, T *x) {
    T i = c[0];
    x[0] = i + c[4];
    x[4] = i + c[5];
    x[8] = i + c[6];
    x[1] = c[1] + c[7];
    x[3] = -c[1] + c[7];
    x[2] = c[2] + c[8];
    x[6] = -c[2] + c[8];
    x[5] = c[3] + c[9];
    x[7] = -c[3] + c[9];
}
template <typename T> __device__ inline void t_comp_T(const T *g, T *gc) {
    gc[0] = g[0] + g[4] + g[8];
    gc[1] = g[1] - g[3];
    gc[2] = g[2] - g[6];
    gc[3] = g[5] - g[7];
    gc[4] = g[0];
    gc[5] = g[4];
    gc[6] = g[8];
    gc[7] = g[1] + g[3];
    gc[8] = g[2] + g[6];
    gc[9] = g[5] + g[7];
}
/* out (+)= alpha op(A) op(B) (3x3; tA / tB transpose), the CPU's tn_mm for one channel. */
template <typename T>
__device__ inline void t_mm(const T *A, int tA, const T *B, int tB, T alpha, T *out, int acc) {
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            T o = acc ? out[3 * r + c] : (T)0;
            for (int k = 0; k < 3; k++) {
                T a = A[tA ? 3 * k + r : 3 * r + k];
                T b = B[tB ? 3 * c + k : 3 * k + c];
                o += alpha * a * b;
            }
            out[3 * r + c] = o;
        }
}

/* Channel o of lin3 (W0 on component 0, W1 on 1..3, W2 on 4..9) of components c (shared, 10F). */
template <typename T>
__device__ inline void t_lin3(int F, const T *W0, const T *W1, const T *W2, const T *c, int o,
                              T *out) {
    T acc[10];
    for (int k = 0; k < 10; k++) acc[k] = 0;
    const T *r0 = W0 + (size_t)o * F, *r1 = W1 + (size_t)o * F, *r2 = W2 + (size_t)o * F;
    for (int i = 0; i < F; i++) {
        const T w0 = r0[i], w1 = r1[i], w2 = r2[i];
        acc[0] += w0 * c[i];
        for (int k = 1; k < 4; k++) acc[k] += w1 * c[k * F + i];
        for (int k = 4; k < 10; k++) acc[k] += w2 * c[k * F + i];
    }
    for (int k = 0; k < 10; k++) out[k] = acc[k];
}
/* Channel i of lin3^T of g (shared, 10F). */
template <typename T>
__device__ inline void t_lin3_T(int F, const T *W0, const T *W1, const T *W2, const T *g, int i,
                                T *out) {
    T acc[10];
    for (int k = 0; k < 10; k++) acc[k] = 0;
    for (int o = 0; o < F; o++) {
        const T w0 = W0[(size_t)o * F + i], w1 = W1[(size_t)o * F + i], w2 = W2[(size_t)o * F + i];
        acc[0] += w0 * g[o];
        for (int k = 1; k < 4; k++) acc[k] += w1 * g[k * F + o];
        for (int k = 4; k < 10; k++) acc[k] += w2 * g[k * F + o];
    }
    for (int k = 0; k < 10; k++) out[k] = acc[k];
}

/* Threads of a per-atom block: the channels, rounded up to warps, at most 256. */
inline int atom_threads(int F) {
    int t = (F + 31) / 32 * 32;
    return t > 256 ? 256 : t;
}

template <typename T> __device__ inline int64_t entries_of(int64_t n_centers, const int64_t *start,
                                                           int64_t capacity) {
    const int64_t n = start[n_centers];
    return n < capacity ? n : capacity;
}

/* ==== tn_edges ==== */
template <typename T>
__global__ void edges_kernel(nnpops__tn_dims d, const T *rbf_a, const T *rbf_b, int64_t n_centers,
                             const int64_t *start, int64_t capacity, const double *vec, T *ev,
                             T *er, uint8_t *mask, T *fc, T *phi) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= capacity) return;
    const int64_t ne = entries_of<T>(n_centers, start, capacity);
    T *ph = phi ? phi + (size_t)e * d.R : NULL;
    uint8_t m = 0;
    T rr = 0;
    if (e < ne) {
        const double *v = vec + 3 * e;
        const double r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        for (int k = 0; k < 3; k++) ev[3 * e + k] = (T)(v[k] * d.inv_ell);
        rr = (T)(r * d.inv_ell);
        if (r >= d.lo_A && r < d.hi_A) m |= NNPOPS__TN_EDGE;
        if (r < d.zcut_A) m |= NNPOPS__TN_ZBLP;
    } else {
        ev[3 * e] = ev[3 * e + 1] = ev[3 * e + 2] = 0;
    }
    er[e] = rr;
    mask[e] = m;
    if (m & NNPOPS__TN_EDGE) {
        T dd;
        fc[e] = t_fc<T>(d.lo, d.hi, rr, &dd);
        if (phi)
            for (int k = 0; k < d.R; k++) ph[k] = t_rbf<T>(d, rbf_a, rbf_b, rr, k, NULL);
    } else {
        fc[e] = 0;
        if (phi)
            for (int k = 0; k < d.R; k++) ph[k] = 0;
    }
}

/* ==== tn_linear (bias rows, then a GEMM) ==== */
template <typename T>
__global__ void bias_rows_kernel(int64_t n, int out, const T *b, int accumulate, T *Y) {
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n * out) return;
    const T v = b[k % out];
    Y[k] = accumulate ? Y[k] + v : v;
}

template <typename T> constexpr int prec_of() {
    return sizeof(T) == 4 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
}

template <typename T>
nnpops_status linear(int64_t n, int in, int out, int trans, const T *W, const T *b, const T *X,
                     double beta, T *Y, void *blas, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    if (!trans) {
        if (b) {
            bias_rows_kernel<T><<<grid_for(n * out, 256), 256, 0, as_stream(stream)>>>(
                n, out, b, beta != 0, Y);
            NNPOPS__LAUNCH_CHECK("tensornet linear (bias)");
            beta = 1.0;
        }
        if (in == 0) return NNPOPS_OK;
        /* Y (out x n, column-major) = W (row-major [out][in] = column-major in x out)^T X */
        return nnpops__gemm_cuda(blas, stream, prec_of<T>(), 1, 0, out, n, in, W, in, 0, X, in, 0,
                                 beta, Y, out, 0, 1);
    }
    return nnpops__gemm_cuda(blas, stream, prec_of<T>(), 0, 0, in, n, out, W, in, 0, X, out, 0,
                             beta, Y, in, 0, 1);
}

/* ==== tn_act, tn_act_back ==== */
/* ACT_ROWS rows per block, its threads over the columns (no index division) */
#define ACT_ROWS 8
template <typename T>
__global__ void act_kernel(int act, int64_t n, int width, const T *bias, const T *Z,
                           const T *scale, T *A) {
    const int64_t c0 = (int64_t)blockIdx.x * ACT_ROWS;
    for (int r = 0; r < ACT_ROWS && c0 + r < n; r++) {
        const int64_t c = c0 + r;
        const T s = scale ? scale[c] : (T)1;
        const T *z = Z + (size_t)c * width;
        T *a = A + (size_t)c * width;
        for (int o = threadIdx.x; o < width; o += blockDim.x)
            a[o] = t_act<T>(act, bias ? z[o] + bias[o] : z[o], NULL) * s;
    }
}

/* a warp per row: gscale is a sum over the row */
template <typename T>
__global__ void act_back_kernel(int act, int64_t n, int width, const T *Z, const T *bias,
                                const T *scale, T *G, T *gscale) {
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (c >= n) return; /* whole warps leave together */
    const T s = scale ? scale[c] : (T)1;
    T gs = 0;
    for (int o = lane; o < width; o += 32) {
        const size_t k = (size_t)c * width + o;
        T dv;
        const T a = t_act<T>(act, bias ? Z[k] + bias[o] : Z[k], &dv);
        gs += G[k] * a;
        G[k] *= dv * s;
    }
    gs = warp_sum(gs);
    if (gscale && lane == 0) gscale[c] = gs;
}

/* ==== tn_embed: a block per center ==== */
template <typename T>
__device__ inline void embed_add(T cz, T d1, T d2, T d3, const T *u, T *X) {
    const T uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
    const T f1 = cz * d1, f2 = cz * d2, f3 = cz * d3;
    X[0] += f1 + f3 * (u[0] * u[0] - uu / (T)3);
    X[4] += f1 + f3 * (u[1] * u[1] - uu / (T)3);
    X[8] += f1 + f3 * (u[2] * u[2] - uu / (T)3);
    X[1] += -f2 * u[2] + f3 * u[0] * u[1];
    X[3] += f2 * u[2] + f3 * u[0] * u[1];
    X[2] += f2 * u[1] + f3 * u[0] * u[2];
    X[6] += -f2 * u[1] + f3 * u[0] * u[2];
    X[5] += -f2 * u[0] + f3 * u[1] * u[2];
    X[7] += f2 * u[0] + f3 * u[1] * u[2];
}

template <typename T> __device__ inline void unit_of(const T *v, T r, T *u) {
    u[0] = u[1] = u[2] = 0;
    if (r > 0)
        for (int k = 0; k < 3; k++) u[k] = v[k] / r;
}

template <typename T>
__global__ void embed_kernel(nnpops__tn_dims d, const int64_t *start, const int32_t *pairs,
                             int64_t capacity, const int32_t *species, const T *ptab1,
                             const T *ptab2, T self_fc, const T *self_dk, const T *ev, const T *er,
                             const uint8_t *mask, const int32_t *slot, const T *fc, const T *dk,
                             const T *dk_b, T *X0) {
    const int64_t c = blockIdx.x;
    const int F = d.F;
    const int64_t e0 = start[c], e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    const T *p1 = ptab1 + (size_t)species[c] * F;
    const T *ps = ptab2 + (size_t)species[c] * F;
    const T zero[3] = {0, 0, 0};
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T X[9];
        for (int k = 0; k < 9; k++) X[k] = 0;
        const T b0 = dk_b ? dk_b[f] : (T)0, b1 = dk_b ? dk_b[F + f] : (T)0,
                b2 = dk_b ? dk_b[2 * F + f] : (T)0;
        embed_add<T>(self_fc * (p1[f] + ps[f]), self_dk[f], self_dk[F + f], self_dk[2 * F + f],
                     zero, X);
        for (int64_t e = e0; e < e1; e++) {
            if (!(mask[e] & NNPOPS__TN_EDGE)) continue;
            const int64_t q = slot ? slot[e] : e;
            if (q < 0) continue;
            const T *p2 = ptab2 + (size_t)species[pairs[2 * e + 1]] * F;
            T u[3];
            unit_of<T>(ev + 3 * e, er[e], u);
            const T *dke = dk + (size_t)q * 3 * F;
            embed_add<T>(fc[e] * (p1[f] + p2[f]), dke[f] + b0, dke[F + f] + b1,
                         dke[2 * F + f] + b2, u, X);
        }
        T *out = X0 + (size_t)c * 9 * F;
        for (int k = 0; k < 9; k++) out[k * F + f] = X[k];
    }
}

/* ==== per-atom LayerNorm pieces (a block) ==== */
/* mean and 1/sqrt(var + 1e-5) of x[0..n) (shared), the CPU's two passes */
template <typename T> __device__ void ln_stats(int n, const T *x, T *red, T *mu, T *rstd) {
    T s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    const T m = block_sum(s, red) / (T)n;
    T v = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += (x[i] - m) * (x[i] - m);
    const T var = block_sum(v, red) / (T)n;
    *mu = m;
    *rstd = (T)1 / t_sqrt(var + (T)1e-5);
}

/* y = W x + b over a block: x in shared (n_in), y (n_out) to shared or global */
template <typename T>
__device__ inline void block_linear(const T *W, const T *b, int n_in, int n_out, const T *x,
                                    T *y) {
    for (int o = threadIdx.x; o < n_out; o += blockDim.x) {
        const T *row = W + (size_t)o * n_in;
        T acc = b ? b[o] : (T)0;
        for (int i = 0; i < n_in; i++) acc += row[i] * x[i];
        y[o] = acc;
    }
}
/* gx[i] = sum_o W[o][i] gy[o] over a block */
template <typename T>
__device__ inline void block_linear_T(const T *W, int n_in, int n_out, const T *gy, T *gx) {
    for (int i = threadIdx.x; i < n_in; i += blockDim.x) {
        T acc = 0;
        for (int o = 0; o < n_out; o++) acc += W[(size_t)o * n_in + i] * gy[o];
        gx[i] = acc;
    }
}

/* ==== tn_atom_embed ==== */
template <typename T>
__global__ void atom_embed_kernel(nnpops__tn_dims d, const T *X0, const T *norm_w,
                                  const T *norm_b, const T *ls_w0, const T *ls_b0, const T *ls_w1,
                                  const T *ls_b1, const T *lt0, const T *lt1, const T *lt2, T *z1a,
                                  T *z2a, T *X1) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sm = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    T *t = sm, *av = t + F, *s1 = av + F, *gate = s1 + 2 * F, *c = gate + 3 * F,
      *red = c + 10 * F;
    const T *X = X0 + (size_t)a * 9 * F;
    T *z1 = z1a + (size_t)a * 2 * F, *z2 = z2a + (size_t)a * 3 * F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T x[9], s = 0, cc[10];
        for (int k = 0; k < 9; k++) x[k] = X[k * F + f];
        for (int k = 0; k < 9; k++) s += x[k] * x[k];
        t[f] = s;
        t_decomp(x, cc);
        for (int k = 0; k < 10; k++) c[k * F + f] = cc[k];
    }
    __syncthreads();
    T mu, rstd;
    ln_stats(F, t, red, &mu, &rstd);
    for (int f = threadIdx.x; f < F; f += blockDim.x)
        av[f] = (t[f] - mu) * rstd * norm_w[f] + norm_b[f];
    __syncthreads();
    for (int o = threadIdx.x; o < 2 * F; o += blockDim.x) {
        const T *row = ls_w0 + (size_t)o * F;
        T z = ls_b0[o];
        for (int i = 0; i < F; i++) z += row[i] * av[i];
        z1[o] = z;
        s1[o] = t_act<T>(d.activation, z, NULL);
    }
    __syncthreads();
    for (int o = threadIdx.x; o < 3 * F; o += blockDim.x) {
        const T *row = ls_w1 + (size_t)o * 2 * F;
        T z = ls_b1[o];
        for (int i = 0; i < 2 * F; i++) z += row[i] * s1[i];
        z2[o] = z;
        gate[o] = t_act<T>(d.activation, z, NULL);
    }
    __syncthreads();
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T cl[10], x[9];
        t_lin3(F, lt0, lt1, lt2, c, f, cl);
        for (int k = 0; k < 10; k++) cl[k] *= gate[blk_of(k) * F + f];
        t_comp(cl, x);
        T *out = X1 + (size_t)a * 9 * F;
        for (int k = 0; k < 9; k++) out[k * F + f] = x[k];
    }
}

/* ==== tn_atom_embed_back ==== */
template <typename T>
__global__ void atom_embed_back_kernel(nnpops__tn_dims d, const T *X0, const T *norm_w,
                                       const T *norm_b, const T *ls_w0, const T *ls_w1,
                                       const T *lt0, const T *lt1, const T *lt2, const T *z1a,
                                       const T *z2a, T *gall) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sm = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    T *c = sm, *ggate = c + 10 * F, *gs1 = ggate + 3 * F, *ga = gs1 + 2 * F, *t = ga + F,
      *red = t + F;
    const T *X = X0 + (size_t)a * 9 * F;
    T *g = gall + (size_t)a * 9 * F;
    const T *z1 = z1a + (size_t)a * 2 * F, *z2 = z2a + (size_t)a * 3 * F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T x[9], cc[10], s = 0;
        for (int k = 0; k < 9; k++) x[k] = X[k * F + f];
        for (int k = 0; k < 9; k++) s += x[k] * x[k];
        t[f] = s;
        t_decomp(x, cc);
        for (int k = 0; k < 10; k++) c[k * F + f] = cc[k];
    }
    __syncthreads();
    /* per channel: the gated components' gradient (kept in registers until c is free) */
    const int per = (F + blockDim.x - 1) / blockDim.x; /* channels per thread, at most 4 */
    T gcs[4][10];
    for (int q = 0; q < per; q++) {
        const int f = threadIdx.x + q * blockDim.x;
        if (f >= F) break;
        T cl[10], gx[9], gc[10], gate[3], gg[3] = {0, 0, 0};
        t_lin3(F, lt0, lt1, lt2, c, f, cl);
        for (int k = 0; k < 9; k++) gx[k] = g[k * F + f];
        t_comp_T(gx, gc);
        for (int b = 0; b < 3; b++) gate[b] = t_act<T>(d.activation, z2[b * F + f], NULL);
        for (int k = 0; k < 10; k++) {
            gg[blk_of(k)] += gc[k] * cl[k];
            gc[k] *= gate[blk_of(k)];
        }
        for (int b = 0; b < 3; b++) {
            T dv;
            t_act<T>(d.activation, z2[b * F + f], &dv);
            ggate[b * F + f] = gg[b] * dv;
        }
        for (int k = 0; k < 10; k++) gcs[q][k] = gc[k];
    }
    __syncthreads();
    for (int q = 0; q < per; q++) {
        const int f = threadIdx.x + q * blockDim.x;
        if (f >= F) break;
        for (int k = 0; k < 10; k++) c[k * F + f] = gcs[q][k];
    }
    /* the gate network backward */
    block_linear_T(ls_w1, 2 * F, 3 * F, ggate, gs1);
    __syncthreads();
    for (int k = threadIdx.x; k < 2 * F; k += blockDim.x) {
        T dv;
        t_act<T>(d.activation, z1[k], &dv);
        gs1[k] *= dv;
    }
    __syncthreads();
    block_linear_T(ls_w0, F, 2 * F, gs1, ga);
    __syncthreads();
    T mu, rstd;
    ln_stats(F, t, red, &mu, &rstd);
    T m1 = 0, m2 = 0;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T gh = ga[f] * norm_w[f], xh = (t[f] - mu) * rstd;
        m1 += gh;
        m2 += gh * xh;
    }
    m1 = block_sum(m1, red) / (T)F;
    m2 = block_sum(m2, red) / (T)F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        const T xh = (t[f] - mu) * rstd;
        const T gt = rstd * (ga[f] * norm_w[f] - m1 - xh * m2);
        T gcl[10], v[9];
        t_lin3_T(F, lt0, lt1, lt2, c, f, gcl);
        t_decomp_T(gcl, v);
        for (int k = 0; k < 9; k++) g[k * F + f] = v[k] + (T)2 * X[k * F + f] * gt;
    }
}

/* ==== tn_layer_pre ==== */
template <typename T>
__global__ void layer_pre_kernel(nnpops__tn_dims d, const T *Xa, const T *lt0, const T *lt1,
                                 const T *lt2, T *nrma, T *cYa) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *c = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    const T *X = Xa + (size_t)a * 9 * F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T x[9], s = 0, cc[10];
        for (int k = 0; k < 9; k++) x[k] = X[k * F + f];
        for (int k = 0; k < 9; k++) s += x[k] * x[k];
        s += 1;
        nrma[(size_t)a * F + f] = s;
        for (int k = 0; k < 9; k++) x[k] = x[k] / s;
        t_decomp(x, cc);
        for (int k = 0; k < 10; k++) c[k * F + f] = cc[k];
    }
    __syncthreads();
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T cl[10];
        t_lin3(F, lt0, lt1, lt2, c, f, cl);
        for (int k = 0; k < 10; k++) cYa[((size_t)a * 10 + k) * F + f] = cl[k];
    }
}

/* ==== tn_layer_pre_back ==== */
template <typename T>
__global__ void layer_pre_back_kernel(nnpops__tn_dims d, const T *Xa, const T *nrma, const T *lt0,
                                      const T *lt1, const T *lt2, const T *gcY, T *gall) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *gs = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    for (int k = threadIdx.x; k < 10 * F; k += blockDim.x) gs[k] = gcY[(size_t)a * 10 * F + k];
    __syncthreads();
    const T *X = Xa + (size_t)a * 9 * F;
    T *g = gall + (size_t)a * 9 * F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T gcl[10], v[9], gg[9], x[9];
        t_lin3_T(F, lt0, lt1, lt2, gs, f, gcl);
        t_decomp_T(gcl, v);
        T dot = 0;
        for (int k = 0; k < 9; k++) {
            gg[k] = g[k * F + f] + v[k];
            x[k] = X[k * F + f];
        }
        for (int k = 0; k < 9; k++) dot += gg[k] * x[k];
        const T inv = (T)1 / nrma[(size_t)a * F + f];
        for (int k = 0; k < 9; k++) g[k * F + f] = gg[k] * inv - (T)2 * x[k] * dot * inv * inv;
    }
}

/* ==== tn_message: a block per center ==== */
/* The edge factors of pair q for channel f: h = act(Z + bias) fc (bias[f + {0, F, 2F}] in b). */
template <typename T>
__device__ inline void edge_h(int act, int F, int f, const T *Z, const T *b, const T *fcP,
                              int32_t q, T *h) {
    const T *z = Z + (size_t)q * 3 * F;
    const T fq = fcP[q];
    for (int k = 0; k < 3; k++) h[k] = t_act<T>(act, z[k * F + f] + b[k], NULL) * fq;
}

template <typename T>
__global__ void message_kernel(nnpops__tn_dims d, const int64_t *start, const int32_t *pairs,
                               int64_t capacity, const uint8_t *mask, const int32_t *slot,
                               const T *Z, const T *bias, const T *fcP, const T *self_h,
                               const T *cY, T *cM) {
    const int64_t c = blockIdx.x;
    const int F = d.F;
    const int64_t e0 = start[c], e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T m[10];
        const T *y = cY + (size_t)c * 10 * F;
        const T b[3] = {bias[f], bias[F + f], bias[2 * F + f]};
        for (int k = 0; k < 10; k++) m[k] = (T)0 + self_h[blk_of(k) * F + f] * y[k * F + f];
        for (int64_t e = e0; e < e1; e++) {
            if (!(mask[e] & NNPOPS__TN_EDGE) || slot[e] < 0) continue;
            T h[3];
            edge_h<T>(d.activation, F, f, Z, b, fcP, slot[e], h);
            const T *yj = cY + (size_t)pairs[2 * e + 1] * 10 * F;
            m[0] += h[0] * yj[f];
            for (int k = 1; k < 4; k++) m[k] += h[1] * yj[k * F + f];
            for (int k = 4; k < 10; k++) m[k] += h[2] * yj[k * F + f];
        }
        for (int k = 0; k < 10; k++) cM[((size_t)c * 10 + k) * F + f] = m[k];
    }
}

/* ==== tn_message_back ==== */
/* dE/dZ and dE/dfc per pair (both directions) through h = act(Z + bias) fc: blocks (c, s) over
 * the pairs center c holds, block s of gridDim.y taking every gridDim.y-th entry of c's list (the
 * center's gcM and cY rows read by few blocks, from cache; a few pairs per block, so that a small
 * molecule still fills the GPU), its threads over the channels, dE/dfc a block sum; then blocks
 * (x >= n_centers, 0) of GH_PAD_PAIRS pairs each for the pairs without an entry (zeros). */
#define GH_PAD_PAIRS 64
#define GH_ENTRIES_PER_BLOCK 8
template <typename T>
__global__ void message_gh_kernel(nnpops__tn_dims d, int64_t n_centers, const int64_t *start,
                                  const int32_t *pairs, int64_t capacity, const uint8_t *mask,
                                  const int32_t *slot, int64_t n_pairs, const int32_t *pentry,
                                  const T *cY, const T *gcM, const T *Z, const T *bias,
                                  const T *fcP, T *GH, int accumulate, T *gfc) {
    __shared__ T red[32];
    const int F = d.F;
    if ((int64_t)blockIdx.x >= n_centers) {
        if (blockIdx.y > 0) return;
        const int64_t p0 = ((int64_t)blockIdx.x - n_centers) * GH_PAD_PAIRS;
        for (int64_t p = p0; p < p0 + GH_PAD_PAIRS && p < n_pairs; p++) {
            if (pentry[p] >= 0) continue;
            for (int k = threadIdx.x; k < 3 * F; k += blockDim.x) GH[(size_t)p * 3 * F + k] = 0;
            if (threadIdx.x == 0 && !accumulate) gfc[p] = 0;
        }
        return;
    }
    const int64_t c = blockIdx.x;
    const int64_t e0 = start[c], e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    const T *gc = gcM + (size_t)c * 10 * F, *yc = cY + (size_t)c * 10 * F;
    for (int64_t e = e0 + blockIdx.y; e < e1; e += gridDim.y) {
        /* (the same for every thread of the block: each reaches the block sum or none does) */
        if (!(mask[e] & NNPOPS__TN_EDGE)) continue;
        const int32_t p = slot[e];
        if (p < 0 || pentry[p] != e) continue; /* a mirror: its pair's holder does it */
        const int32_t j = pairs[2 * e + 1];
        const T *gj = gcM + (size_t)j * 10 * F, *yj = cY + (size_t)j * 10 * F;
        const T *z = Z + (size_t)p * 3 * F;
        T *gh = GH + (size_t)p * 3 * F;
        const T fq = fcP[p];
        T gs = 0;
        for (int f = threadIdx.x; f < F; f += blockDim.x) {
            T sb[3] = {0, 0, 0};
            for (int k = 0; k < 10; k++)
                sb[blk_of(k)] += gc[k * F + f] * yj[k * F + f] + gj[k * F + f] * yc[k * F + f];
            for (int b = 0; b < 3; b++) {
                T dv;
                const T a = t_act<T>(d.activation, z[b * F + f] + bias[b * F + f], &dv);
                gs += sb[b] * a;
                gh[b * F + f] = sb[b] * (dv * fq);
            }
        }
        gs = block_sum(gs, red);
        if (threadIdx.x == 0) gfc[p] = accumulate ? gfc[p] + gs : gs;
    }
}

template <typename T>
__global__ void message_gy_kernel(nnpops__tn_dims d, const int64_t *start, const int32_t *pairs,
                                  int64_t capacity, const uint8_t *mask, const int32_t *slot,
                                  const T *Z, const T *bias, const T *fcP, const T *self_h,
                                  const T *gcM, T *gcY) {
    const int64_t c = blockIdx.x;
    const int F = d.F;
    const int64_t e0 = start[c], e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T m[10];
        T *gy = gcY + (size_t)c * 10 * F;
        const T *gm = gcM + (size_t)c * 10 * F;
        const T b[3] = {bias[f], bias[F + f], bias[2 * F + f]};
        for (int k = 0; k < 10; k++)
            m[k] = gy[k * F + f] + self_h[blk_of(k) * F + f] * gm[k * F + f];
        for (int64_t e = e0; e < e1; e++) {
            if (!(mask[e] & NNPOPS__TN_EDGE) || slot[e] < 0) continue;
            T h[3];
            edge_h<T>(d.activation, F, f, Z, b, fcP, slot[e], h);
            const T *gj = gcM + (size_t)pairs[2 * e + 1] * 10 * F;
            m[0] += h[0] * gj[f];
            for (int k = 1; k < 4; k++) m[k] += h[1] * gj[k * F + f];
            for (int k = 4; k < 10; k++) m[k] += h[2] * gj[k * F + f];
        }
        for (int k = 0; k < 10; k++) gy[k * F + f] = m[k];
    }
}

/* ==== tn_layer_post ==== */
template <typename T>
__device__ inline T qf_of(const double *charges, const int32_t *batch, int64_t a) {
    return (T)(1.0 + 0.1 * (charges ? charges[batch[a]] : 0.0));
}

/* C of one channel from its Y and M components, and the normalised Cn, nn = |C|^2 + 1 */
template <typename T>
__device__ inline void post_c(int so3, T qf, const T *Y, const T *M, T *C, T *Cn, T *nn) {
    if (so3) {
        t_mm(Y, 0, M, 0, (T)2, C, 0);
    } else {
        t_mm(M, 0, Y, 0, qf, C, 0);
        t_mm(Y, 0, M, 0, qf, C, 1);
    }
    T s = 0;
    for (int k = 0; k < 9; k++) s += C[k] * C[k];
    s += 1;
    *nn = s;
    for (int k = 0; k < 9; k++) Cn[k] = C[k] / s;
}

template <typename T>
__global__ void layer_post_kernel(nnpops__tn_dims d, const double *charges, const int32_t *batch,
                                  const T *Xa, const T *nrma, const T *cYa, const T *cMa,
                                  const T *lt0, const T *lt1, const T *lt2, T *Xouta) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *c = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    const T qf = qf_of<T>(charges, batch, a);
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T cy[10], cm[10], Y[9], M[9], C[9], Cn[9], nn, cc[10];
        for (int k = 0; k < 10; k++) {
            cy[k] = cYa[((size_t)a * 10 + k) * F + f];
            cm[k] = cMa[((size_t)a * 10 + k) * F + f];
        }
        t_comp(cy, Y);
        t_comp(cm, M);
        post_c(d.so3, qf, Y, M, C, Cn, &nn);
        t_decomp(Cn, cc);
        for (int k = 0; k < 10; k++) c[k * F + f] = cc[k];
    }
    __syncthreads();
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T cl[10], D[9], Xo[9];
        t_lin3(F, lt0, lt1, lt2, c, f, cl);
        t_comp(cl, D);
        t_mm(D, 0, D, 0, qf, Xo, 0);
        const T nr = nrma[(size_t)a * F + f];
        for (int k = 0; k < 9; k++)
            Xouta[((size_t)a * 9 + k) * F + f] = Xo[k] + (Xa[((size_t)a * 9 + k) * F + f] / nr + D[k]);
    }
}

/* ==== tn_layer_post_back ==== */
template <typename T>
__global__ void layer_post_back_kernel(nnpops__tn_dims d, const double *charges,
                                       const int32_t *batch, const T *cYa, const T *cMa,
                                       const T *lt0, const T *lt1, const T *lt2, const T *gall,
                                       T *gcYa, T *gcMa) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *c = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    const T qf = qf_of<T>(charges, batch, a);
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T cy[10], cm[10], Y[9], M[9], C[9], Cn[9], nn, cc[10];
        for (int k = 0; k < 10; k++) {
            cy[k] = cYa[((size_t)a * 10 + k) * F + f];
            cm[k] = cMa[((size_t)a * 10 + k) * F + f];
        }
        t_comp(cy, Y);
        t_comp(cm, M);
        post_c(d.so3, qf, Y, M, C, Cn, &nn);
        t_decomp(Cn, cc);
        for (int k = 0; k < 10; k++) c[k * F + f] = cc[k];
    }
    __syncthreads();
    /* gD = g + qf (g D^T + D^T g), then its components (into registers, c is still read) */
    const int per = (F + blockDim.x - 1) / blockDim.x;
    T gcs[4][10];
    for (int q = 0; q < per; q++) {
        const int f = threadIdx.x + q * blockDim.x;
        if (f >= F) break;
        T cl[10], D[9], g[9], gD[9];
        t_lin3(F, lt0, lt1, lt2, c, f, cl);
        t_comp(cl, D);
        for (int k = 0; k < 9; k++) g[k] = gD[k] = gall[((size_t)a * 9 + k) * F + f];
        t_mm(g, 0, D, 1, qf, gD, 1);
        t_mm(D, 1, g, 0, qf, gD, 1);
        t_comp_T(gD, gcs[q]);
    }
    __syncthreads();
    for (int q = 0; q < per; q++) {
        const int f = threadIdx.x + q * blockDim.x;
        if (f >= F) break;
        for (int k = 0; k < 10; k++) c[k * F + f] = gcs[q][k];
    }
    __syncthreads();
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T gcl[10], gC[9], cy[10], cm[10], Y[9], M[9], C[9], Cn[9], nn, gY[9], gM[9], o[10];
        t_lin3_T(F, lt0, lt1, lt2, c, f, gcl);
        t_decomp_T(gcl, gC);
        for (int k = 0; k < 10; k++) {
            cy[k] = cYa[((size_t)a * 10 + k) * F + f];
            cm[k] = cMa[((size_t)a * 10 + k) * F + f];
        }
        t_comp(cy, Y);
        t_comp(cm, M);
        post_c(d.so3, qf, Y, M, C, Cn, &nn);
        T dot = 0;
        for (int k = 0; k < 9; k++) dot += gC[k] * C[k];
        const T inv = (T)1 / nn;
        for (int k = 0; k < 9; k++) gC[k] = gC[k] * inv - (T)2 * C[k] * dot * inv * inv;
        if (d.so3) {
            t_mm(gC, 0, M, 1, (T)2, gY, 0);
            t_mm(Y, 1, gC, 0, (T)2, gM, 0);
        } else {
            t_mm(M, 1, gC, 0, qf, gY, 0);
            t_mm(gC, 0, M, 1, qf, gY, 1);
            t_mm(gC, 0, Y, 1, qf, gM, 0);
            t_mm(Y, 1, gC, 0, qf, gM, 1);
        }
        t_comp_T(gY, o);
        for (int k = 0; k < 10; k++) gcYa[((size_t)a * 10 + k) * F + f] = o[k];
        t_comp_T(gM, o);
        for (int k = 0; k < 10; k++) gcMa[((size_t)a * 10 + k) * F + f] = o[k];
    }
}

/* ==== tn_readout: a block per atom ==== */
struct readout_w {
    const void *norm_w, *norm_b, *lin_w, *lin_b;
    const void *out_w[16], *out_b[16];
};

template <typename T>
__global__ void readout_kernel(nnpops__tn_dims d, int64_t n_local, const T *Xa, readout_w rw,
                               const int32_t *species, const T *atomref, double *atom_energy,
                               T *gall) {
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sm = (T *)tn_smem;
    const int F = d.F;
    const int64_t a = blockIdx.x;
    int sum = 0, wmax = 3 * F;
    for (int k = 1; k <= d.n_out; k++) {
        sum += d.out_width[k];
        if (d.out_width[k] > wmax) wmax = d.out_width[k];
    }
    T *c = sm, *x = c + 10 * F, *y = x + 3 * F, *zl = y + 3 * F, *ra = zl + F, *pre = ra + F,
      *post = pre + sum, *g1 = post + sum, *g2 = g1 + wmax, *red = g2 + wmax;
    const T *norm_w = (const T *)rw.norm_w, *norm_b = (const T *)rw.norm_b;
    const T *lin_w = (const T *)rw.lin_w, *lin_b = (const T *)rw.lin_b;
    const T *X = Xa + (size_t)a * 9 * F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T xx[9], cc[10];
        for (int k = 0; k < 9; k++) xx[k] = X[k * F + f];
        t_decomp(xx, cc);
        for (int k = 0; k < 10; k++) c[k * F + f] = cc[k];
        T i = cc[0];
        T av = cc[1] * cc[1] + cc[2] * cc[2] + cc[3] * cc[3];
        T sd = cc[4] * cc[4] + cc[5] * cc[5] + cc[6] * cc[6];
        T so = cc[7] * cc[7] + cc[8] * cc[8] + cc[9] * cc[9];
        x[f] = (T)3 * i * i;
        x[F + f] = (T)2 * av;
        x[2 * F + f] = sd + (T)2 * so;
    }
    __syncthreads();
    T mu, rstd;
    ln_stats(3 * F, x, red, &mu, &rstd);
    for (int k = threadIdx.x; k < 3 * F; k += blockDim.x)
        y[k] = (x[k] - mu) * rstd * norm_w[k] + norm_b[k];
    __syncthreads();
    block_linear(lin_w, lin_b, 3 * F, F, y, zl);
    __syncthreads();
    for (int f = threadIdx.x; f < F; f += blockDim.x) ra[f] = t_act<T>(d.activation, zl[f], NULL);
    __syncthreads();
    const T *cur = ra;
    int off = 0;
    for (int k = 0; k < d.n_out; k++) {
        const int ni = d.out_width[k], no = d.out_width[k + 1];
        block_linear((const T *)rw.out_w[k], (const T *)rw.out_b[k], ni, no, cur, pre + off);
        __syncthreads();
        for (int o = threadIdx.x; o < no; o += blockDim.x)
            post[off + o] = k < d.n_out - 1 ? t_act<T>(d.activation, pre[off + o], NULL)
                                            : pre[off + o];
        __syncthreads();
        cur = post + off;
        off += no;
    }
    const bool local = a < n_local;
    if (threadIdx.x == 0) {
        double en = (double)cur[0] * d.std;
        if (atomref) en += (double)atomref[species[a]];
        atom_energy[a] = local ? en : 0.0;
    }
    if (!gall) return;
    /* backward: seed -> readout MLP -> act(zl) -> linear -> LayerNorm -> x -> X */
    int offs[17];
    offs[0] = 0;
    for (int k = 0; k < d.n_out; k++) offs[k + 1] = offs[k] + d.out_width[k + 1];
    T *gcur = g1;
    if (threadIdx.x == 0) gcur[0] = (T)((local ? 1.0 : 0.0) * d.std);
    __syncthreads();
    for (int k = d.n_out - 1; k >= 0; k--) {
        const int ni = d.out_width[k], no = d.out_width[k + 1];
        if (k < d.n_out - 1) {
            for (int o = threadIdx.x; o < no; o += blockDim.x) {
                T dv;
                t_act<T>(d.activation, pre[offs[k] + o], &dv);
                gcur[o] *= dv;
            }
            __syncthreads();
        }
        T *gnext = gcur == g1 ? g2 : g1;
        block_linear_T((const T *)rw.out_w[k], ni, no, gcur, gnext);
        __syncthreads();
        gcur = gnext;
    }
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T dv;
        t_act<T>(d.activation, zl[f], &dv);
        gcur[f] *= dv;
    }
    __syncthreads();
    T *gy = gcur == g1 ? g2 : g1;
    block_linear_T(lin_w, 3 * F, F, gcur, gy);
    __syncthreads();
    T m1 = 0, m2 = 0;
    for (int k = threadIdx.x; k < 3 * F; k += blockDim.x) {
        T gh = gy[k] * norm_w[k], xh = (x[k] - mu) * rstd;
        m1 += gh;
        m2 += gh * xh;
    }
    m1 = block_sum(m1, red) / (T)(3 * F);
    m2 = block_sum(m2, red) / (T)(3 * F);
    T *g = gall + (size_t)a * 9 * F;
    for (int f = threadIdx.x; f < F; f += blockDim.x) {
        T gx[3];
        for (int b = 0; b < 3; b++) {
            const int k = b * F + f;
            const T xh = (x[k] - mu) * rstd;
            gx[b] = rstd * (gy[k] * norm_w[k] - m1 - xh * m2);
        }
        T gc[10], v[9];
        gc[0] = (T)6 * c[f] * gx[0];
        for (int k = 1; k < 4; k++) gc[k] = (T)4 * c[k * F + f] * gx[1];
        for (int k = 4; k < 7; k++) gc[k] = (T)2 * c[k * F + f] * gx[2];
        for (int k = 7; k < 10; k++) gc[k] = (T)4 * c[k * F + f] * gx[2];
        t_decomp_T(gc, v);
        for (int k = 0; k < 9; k++) g[k * F + f] = v[k];
    }
}

/* ==== tn_embed_back: a warp per pair, its lanes over the channels, both entries at once ==== */
/* One entry (direction) of a pair: its unit vector, its center's dE/dX0 and its species' tables,
 * and its sums so far (dE/du, dE/dfc) over the lane's channels. */
template <typename T> struct eb_entry {
    T u[3], uu, gu[3], gfc;
    const T *G, *p1, *p2;
};

template <typename T>
__device__ inline void eb_setup(int F, int64_t e, const int32_t *pairs, const int32_t *species,
                                const T *ptab1, const T *ptab2, const T *ev, const T *er,
                                const T *g0, eb_entry<T> &s) {
    const int i = pairs[2 * e], j = pairs[2 * e + 1];
    unit_of<T>(ev + 3 * e, er[e], s.u);
    s.uu = s.u[0] * s.u[0] + s.u[1] * s.u[1] + s.u[2] * s.u[2];
    s.G = g0 + (size_t)i * 9 * F;
    s.p1 = ptab1 + (size_t)species[i] * F, s.p2 = ptab2 + (size_t)species[j] * F;
    s.gu[0] = s.gu[1] = s.gu[2] = s.gfc = 0;
}

/* Channel f of one entry: its dE/du and dE/dfc terms into s, its dE/d dk terms added to gd[3]
 * (k: the pair's projections of channel f with their bias). */
template <typename T>
__device__ inline void eb_channel(int F, int f, T fce, const T *k, eb_entry<T> &s, T *gd) {
    const T *G = s.G;
    const T *u = s.u;
    T g00 = G[0 * F + f], g01 = G[1 * F + f], g02 = G[2 * F + f];
    T g10 = G[3 * F + f], g11 = G[4 * F + f], g12 = G[5 * F + f];
    T g20 = G[6 * F + f], g21 = G[7 * F + f], g22 = G[8 * F + f];
    T tr = g00 + g11 + g22;
    T s0 = g21 - g12, s1 = g02 - g20, s2 = g10 - g01;
    T ug0 = (g00 + g00) * u[0] + (g01 + g10) * u[1] + (g02 + g20) * u[2];
    T ug1 = (g10 + g01) * u[0] + (g11 + g11) * u[1] + (g12 + g21) * u[2];
    T ug2 = (g20 + g02) * u[0] + (g21 + g12) * u[1] + (g22 + g22) * u[2];
    T gf1 = tr;
    T gf2 = s0 * u[0] + s1 * u[1] + s2 * u[2];
    T gf3 = (T)0.5 * (ug0 * u[0] + ug1 * u[1] + ug2 * u[2]) - s.uu * tr / (T)3;
    T zij = s.p1[f] + s.p2[f];
    T cz = fce * zij;
    T f2 = cz * k[1], f3 = cz * k[2];
    s.gu[0] += f2 * s0 + f3 * (ug0 - (T)2 * tr * u[0] / (T)3);
    s.gu[1] += f2 * s1 + f3 * (ug1 - (T)2 * tr * u[1] / (T)3);
    s.gu[2] += f2 * s2 + f3 * (ug2 - (T)2 * tr * u[2] / (T)3);
    s.gfc += zij * (gf1 * k[0] + gf2 * k[1] + gf3 * k[2]);
    gd[0] += gf1 * cz;
    gd[1] += gf2 * cz;
    gd[2] += gf3 * cz;
}

/* An entry's sums over the warp: dE/du to gu[e] (lane 0), dE/dfc returned (every lane). */
template <typename T> __device__ inline T eb_finish(int64_t e, eb_entry<T> &s, T *gu) {
    const T g0 = warp_sum(s.gu[0]), g1 = warp_sum(s.gu[1]), g2 = warp_sum(s.gu[2]);
    if ((threadIdx.x & 31) == 0) gu[3 * e] = g0, gu[3 * e + 1] = g1, gu[3 * e + 2] = g2;
    return warp_sum(s.gfc);
}

template <typename T>
__global__ void embed_back_kernel(nnpops__tn_dims d, int64_t n_pairs, const int32_t *pentry,
                                  const int32_t *pmirror, const int32_t *pairs,
                                  const int32_t *species, const T *ptab1, const T *ptab2,
                                  const T *ev, const T *er, const T *fcP, const T *dk,
                                  const T *dk_b, const T *g0, T *gd, T *gu, int accumulate,
                                  T *gfcv) {
    const int64_t p = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (p >= n_pairs) return; /* whole warps leave together */
    const int F = d.F;
    const int64_t ea = pentry[p], eb = pmirror[p];
    const T fce = fcP[p];
    eb_entry<T> A, B;
    if (ea >= 0) eb_setup<T>(F, ea, pairs, species, ptab1, ptab2, ev, er, g0, A);
    if (eb >= 0) eb_setup<T>(F, eb, pairs, species, ptab1, ptab2, ev, er, g0, B);
    T *gdp = gd + (size_t)p * 3 * F;
    const T *dkp = dk + (size_t)p * 3 * F;
    for (int f = lane; f < F; f += 32) {
        T k[3], g[3] = {0, 0, 0};
        for (int b = 0; b < 3; b++) k[b] = dkp[b * F + f] + (dk_b ? dk_b[b * F + f] : (T)0);
        if (ea >= 0) eb_channel<T>(F, f, fce, k, A, g);
        if (eb >= 0) eb_channel<T>(F, f, fce, k, B, g);
        for (int b = 0; b < 3; b++) gdp[b * F + f] = g[b];
    }
    T gfc = 0;
    if (ea >= 0) gfc += eb_finish<T>(ea, A, gu);
    if (eb >= 0) gfc += eb_finish<T>(eb, B, gu);
    if (lane == 0) gfcv[p] = accumulate ? gfcv[p] + gfc : gfc;
}

/* ==== tn_radial_back: a warp per entry (or pair), its lanes over the basis functions ==== */
template <typename T>
__global__ void radial_back_kernel(nnpops__tn_dims d, const T *rbf_a, const T *rbf_b,
                                   int64_t n_centers, const int64_t *start, int64_t capacity,
                                   const T *er, const uint8_t *mask, const int32_t *pentry,
                                   const T *gphi, const T *gfc, int accumulate, T *gr) {
    const int64_t e = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (e >= capacity) return; /* whole warps leave together */
    const int64_t ne = pentry ? capacity : entries_of<T>(n_centers, start, capacity);
    if (pentry ? pentry[e] < 0 : e >= ne || !(mask[e] & NNPOPS__TN_EDGE)) {
        if (!accumulate && lane == 0) gr[e] = 0;
        return;
    }
    const T r = er[e];
    T g = 0;
    for (int k = lane; k < d.R; k += 32) {
        T dphi;
        t_rbf<T>(d, rbf_a, rbf_b, r, k, &dphi);
        g += gphi[(size_t)e * d.R + k] * dphi;
    }
    g = warp_sum(g);
    if (lane == 0) {
        T fcd;
        t_fc<T>(d.lo, d.hi, r, &fcd);
        g += gfc[e] * fcd;
        gr[e] = accumulate ? gr[e] + g : g;
    }
}

/* ==== tn_finish: a thread per center ==== */
template <typename T>
__global__ void finish_kernel(nnpops__tn_dims d, nnpops__tn_zbl_dev zbl, const int32_t *zbl_z,
                              int64_t n_centers, int64_t n_local, const int64_t *start,
                              const int32_t *pairs, int64_t capacity, const int32_t *species,
                              const T *ev, const T *er, const uint8_t *mask, const T *gu,
                              const T *gr, const int32_t *slot, const int32_t *pentry,
                              const T *grP, double mean, const int32_t *batch,
                              const int32_t *sys_count, double *atom_energy, double *pair_grad) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_centers) return;
    const bool local = c < n_local;
    double en = local ? atom_energy[c] : 0.0;
    const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    for (int64_t e = start[c]; e < e1; e++) {
        T g[3] = {0, 0, 0};
        const T r = er[e];
        if ((mask[e] & NNPOPS__TN_EDGE) && r > 0 && pair_grad && (!slot || slot[e] >= 0)) {
            T u[3], gdotu = 0;
            for (int k = 0; k < 3; k++) {
                u[k] = ev[3 * e + k] / r;
                gdotu += gu[3 * e + k] * u[k];
            }
            T grv = gr ? gr[e] : (T)0;
            if (grP && slot[e] >= 0 && pentry[slot[e]] == e) grv += grP[slot[e]];
            for (int k = 0; k < 3; k++) g[k] = (gu[3 * e + k] - u[k] * gdotu) / r + u[k] * grv;
        }
        double gz[3] = {0, 0, 0};
        if (mask[e] & NNPOPS__TN_ZBLP) {
            const int32_t Zi = zbl_z[species[c]], Zj = zbl_z[species[pairs[2 * e + 1]]];
            const float sa = (float)pow((double)Zi, 0.23) + (float)pow((double)Zj, 0.23);
            const float af = (1.0f / sa) * zbl.k_a;
            const T aa = (T)af, ds = (T)zbl.ds, pref = (T)zbl.pref;
            const T dd = r * ds / aa;
            const T x1 = t_exp((T)-3.2 * dd), x2 = t_exp((T)-0.9423 * dd);
            const T x3 = t_exp((T)-0.4029 * dd), x4 = t_exp((T)-0.2016 * dd);
            const T phi = (T)0.1818 * x1 + (T)0.5099 * x2 + (T)0.2802 * x3 + (T)0.02817 * x4;
            const T dphi = (T)-3.2 * (T)0.1818 * x1 - (T)0.9423 * (T)0.5099 * x2 -
                           (T)0.4029 * (T)0.2802 * x3 - (T)0.2016 * (T)0.02817 * x4;
            T fcd;
            const T fcz = t_fc<T>(0.0, d.zcut, r, &fcd);
            const T zz = (T)Zi * (T)Zj;
            if (local) {
                en += (double)(pref * phi * fcz * zz / r);
                const T dE = pref * zz * (dphi * ds / aa * fcz / r + phi * fcd / r - phi * fcz / (r * r));
                for (int k = 0; k < 3; k++) gz[k] = (double)(dE * ev[3 * e + k] / r);
            }
        }
        if (pair_grad)
            for (int k = 0; k < 3; k++) pair_grad[3 * e + k] = d.inv_ell * ((double)g[k] + gz[k]);
    }
    if (local) atom_energy[c] = en + mean / (double)sys_count[batch[c]];
}

/* ==== tn_count: one block (zero, barrier, count; integer atomics: any order gives the same) ==== */
__global__ void count_kernel(int64_t n, int64_t n_systems, const int32_t *batch,
                             int32_t *sys_count) {
    for (int64_t s = threadIdx.x; s < n_systems; s += blockDim.x) sys_count[s] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(&sys_count[batch[i]], 1);
}

/* ==== tn_pair_radial ==== */
/* a thread per (pair, basis function): the pair's distance and cutoff by its k == 0 thread */
template <typename T>
__global__ void pair_radial_kernel(nnpops__tn_dims d, const T *rbf_a, const T *rbf_b,
                                   int64_t n_pairs, const int32_t *pentry, const T *er,
                                   const T *fc, T *erP, T *fcP, T *phiP) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_pairs * d.R) return;
    const int64_t p = t / d.R;
    const int k = (int)(t - p * d.R);
    const int32_t e = pentry[p];
    phiP[t] = e >= 0 ? t_rbf<T>(d, rbf_a, rbf_b, er[e], k, NULL) : (T)0;
    if (k == 0) {
        erP[p] = e >= 0 ? er[e] : (T)0;
        fcP[p] = e >= 0 ? fc[e] : (T)0;
    }
}

/* ==== tn_pairs ==== */
__device__ inline bool holds_pair(int32_t c, int32_t j, const double *v) {
    if (j != c) return j > c;
    return v[0] > 0 || (v[0] == 0 && (v[1] > 0 || (v[1] == 0 && v[2] > 0)));
}

/* Whether entry q of center c holds a pair. */
__device__ inline bool holds_entry(int64_t c, int64_t q, const int32_t *pairs, const double *vec,
                                   const uint8_t *mask) {
    return (mask[q] & NNPOPS__TN_EDGE) && holds_pair((int32_t)c, pairs[2 * q + 1], vec + 3 * q);
}

/* The pairs center c holds (a warp: its lanes over the entries, 32 at a time; every lane gets
 * the count). */
__device__ inline int32_t warp_count_pairs(int64_t c, const int64_t *start, const int32_t *pairs,
                                           int64_t capacity, const double *vec,
                                           const uint8_t *mask) {
    const int lane = threadIdx.x & 31;
    const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    int32_t k = 0;
    for (int64_t q0 = start[c]; q0 < e1; q0 += 32) {
        const int64_t q = q0 + lane;
        const bool held = q < e1 && holds_entry(c, q, pairs, vec, mask);
        k += __popc(__ballot_sync(NNPOPS__FULL_MASK, held));
    }
    return k;
}

/* Numbers p, p + 1, ... for the pairs center c holds, in entry order (a warp: a lane's rank among
 * the holding lanes of its round of 32 entries); returns the number after the last. */
__device__ inline int64_t warp_assign_pairs(int64_t c, int64_t p, const int64_t *start,
                                            const int32_t *pairs, int64_t capacity,
                                            const double *vec, const uint8_t *mask,
                                            int64_t n_pairs, int32_t *slot, int32_t *pentry,
                                            int32_t *pmirror) {
    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    for (int64_t q0 = start[c]; q0 < e1; q0 += 32) {
        const int64_t q = q0 + lane;
        const bool held = q < e1 && holds_entry(c, q, pairs, vec, mask);
        const unsigned b = __ballot_sync(NNPOPS__FULL_MASK, held);
        if (held) {
            const int64_t mine = p + __popc(b & below);
            if (mine < n_pairs) {
                slot[q] = (int32_t)mine;
                pentry[mine] = (int32_t)q;
                pmirror[mine] = -1;
            } else {
                slot[q] = -1;
            }
        }
        p += __popc(b);
    }
    return p;
}

/* pairs held per center (a warp per center) */
__global__ void pairs_count_kernel(int64_t n_centers, const int64_t *start, const int32_t *pairs,
                                   int64_t capacity, const double *vec, const uint8_t *mask,
                                   int32_t *count) {
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (c >= n_centers) return; /* whole warps leave together */
    const int32_t k = warp_count_pairs(c, start, pairs, capacity, vec, mask);
    if ((threadIdx.x & 31) == 0) count[c] = k;
}

/* exclusive prefix sums of count[0 .. n) in place, count[n] = the total: one block of 1024
 * threads, each summing a contiguous chunk */
__global__ void pairs_scan_kernel(int64_t n, int32_t *count) {
    __shared__ int32_t part[1024];
    const int64_t chunk = (n + 1023) / 1024;
    const int64_t b = threadIdx.x * chunk, e = b + chunk < n ? b + chunk : n;
    int32_t s = 0;
    for (int64_t i = b; i < e; i++) s += count[i];
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t run = 0;
        for (int t = 0; t < 1024; t++) {
            const int32_t v = part[t];
            part[t] = run;
            run += v;
        }
        count[n] = run;
    }
    __syncthreads();
    s = part[threadIdx.x];
    for (int64_t i = b; i < e; i++) {
        const int32_t v = count[i];
        count[i] = s;
        s += v;
    }
}

/* the pairs each center holds get their numbers (a warp per center) */
__global__ void pairs_assign_kernel(int64_t n_centers, const int64_t *start, const int32_t *pairs,
                                    int64_t capacity, const double *vec, const uint8_t *mask,
                                    int64_t n_pairs, const int32_t *base, int32_t *slot,
                                    int32_t *pentry, int32_t *pmirror) {
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (c >= n_centers) return; /* whole warps leave together */
    warp_assign_pairs(c, base[c], start, pairs, capacity, vec, mask, n_pairs, slot, pentry,
                      pmirror);
}

/* count, scan and numbering in one block of PAIRS_WARPS warps, each over a contiguous chunk of
 * centers (the same numbers as the three kernels).  A step takes it for small lists only: its
 * warps walk their chunks twice (count, numbers), 32 entries a round, where the three kernels give
 * every center its own warp for two more launches; up to PAIRS_ONE_BLOCK_CENTERS centers and
 * PAIRS_ONE_BLOCK_ENTRIES entries a warp has at most 8 centers and about 8 rounds a pass. */
#define PAIRS_WARPS 32
#define PAIRS_ONE_BLOCK_CENTERS 256
#define PAIRS_ONE_BLOCK_ENTRIES 8192
__global__ void pairs_one_block_kernel(int64_t n_centers, const int64_t *start,
                                       const int32_t *pairs, int64_t capacity, const double *vec,
                                       const uint8_t *mask, int64_t n_pairs, int32_t *base,
                                       int32_t *slot, int32_t *pentry, int32_t *pmirror) {
    __shared__ int32_t part[PAIRS_WARPS];
    const int w = threadIdx.x >> 5;
    const int64_t chunk = (n_centers + PAIRS_WARPS - 1) / PAIRS_WARPS;
    const int64_t b = w * chunk, e = b + chunk < n_centers ? b + chunk : n_centers;
    int32_t k = 0;
    for (int64_t c = b; c < e; c++) k += warp_count_pairs(c, start, pairs, capacity, vec, mask);
    if ((threadIdx.x & 31) == 0) part[w] = k;
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t run = 0;
        for (int t = 0; t < PAIRS_WARPS; t++) {
            const int32_t v = part[t];
            part[t] = run;
            run += v;
        }
        base[n_centers] = run;
    }
    __syncthreads();
    int64_t p = part[w];
    for (int64_t c = b; c < e; c++)
        p = warp_assign_pairs(c, p, start, pairs, capacity, vec, mask, n_pairs, slot, pentry,
                              pmirror);
}

/* every other entry: its mirror's pair, or -1; pairs past the count: no entry (a thread per
 * entry or pair) */
__global__ void pairs_mirror_kernel(int64_t n_centers, const int64_t *start, const int32_t *pairs,
                                    int64_t capacity, const double *vec, const uint8_t *mask,
                                    int64_t n_pairs, const int32_t *base, int32_t *slot,
                                    int32_t *pentry, int32_t *pmirror) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n_pairs && e >= base[n_centers]) pentry[e] = pmirror[e] = -1;
    if (e >= capacity) return;
    const int64_t ne = start[n_centers] < capacity ? start[n_centers] : capacity;
    if (e >= ne || !(mask[e] & NNPOPS__TN_EDGE)) {
        slot[e] = -1;
        return;
    }
    const int32_t c = pairs[2 * e], j = pairs[2 * e + 1];
    const double *v = vec + 3 * e;
    if (holds_pair(c, j, v)) return; /* (numbered by pairs_assign_kernel) */
    int32_t s = -1;
    double best = INFINITY;
    const int64_t f1 = start[j + 1] < capacity ? start[j + 1] : capacity;
    for (int64_t f = start[j]; f < f1; f++) {
        if (pairs[2 * f + 1] != c || !(mask[f] & NNPOPS__TN_EDGE)) continue;
        const double *w = vec + 3 * f;
        const double dx = v[0] + w[0], dy = v[1] + w[1], dz = v[2] + w[2];
        const double d2 = dx * dx + dy * dy + dz * dz;
        if (d2 < best) {
            best = d2;
            s = slot[f];
        }
    }
    slot[e] = s;
    if (s >= 0) pmirror[s] = (int32_t)e;
}

/* dynamic shared memory of the per-atom kernels (values of T) */
inline size_t smem_atom_embed(int F) { return (size_t)(17 * F + 32); }
inline size_t smem_atom_embed_back(int F) { return (size_t)(17 * F + 32); }
inline size_t smem_readout(const nnpops__tn_dims *d) {
    int sum = 0, wmax = 3 * d->F;
    for (int k = 1; k <= d->n_out; k++) {
        sum += d->out_width[k];
        if (d->out_width[k] > wmax) wmax = d->out_width[k];
    }
    return (size_t)(18 * d->F + 2 * sum + 2 * wmax + 32);
}

/* A per-atom kernel's shared memory: above 48 KiB an opt-in, above 227 KiB (the most a block of
 * sm_90 takes) a named error. */
template <typename T>
nnpops_status smem_check(const void *kernel, size_t values, const char *what) {
    if (values * sizeof(T) > 227 * 1024)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "tensornet on the GPU: the %s needs %zu bytes of shared memory per "
                            "block (at most 232448: a smaller embedding_dimension)",
                            what, values * sizeof(T));
    return set_dynamic_smem(kernel, values * sizeof(T));
}

/* channels per thread of the kernels that keep a channel's values across a barrier (gcs[4]) */
inline nnpops_status per_thread_check(int F) {
    if ((F + atom_threads(F) - 1) / atom_threads(F) > 4)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "tensornet on the GPU: embedding_dimension %d is above 1024", F);
    return NNPOPS_OK;
}

} /* namespace */

#define TN_CU_TWINS(SUF, T)                                                                        \
    extern "C" nnpops_status nnpops__tn_edges_cuda##SUF(                                          \
        const nnpops__tn_dims *d, const T *rbf_a, const T *rbf_b, int64_t n_centers,              \
        const int64_t *start, int64_t capacity, const double *vec, T *ev, T *er, uint8_t *mask,   \
        T *fc, T *phi, void *stream) {                                                            \
        if (capacity <= 0) return NNPOPS_OK;                                                      \
        edges_kernel<T><<<grid_for(capacity, 128), 128, 0, as_stream(stream)>>>(                  \
            *d, rbf_a, rbf_b, n_centers, start, capacity, vec, ev, er, mask, fc, phi);            \
        NNPOPS__LAUNCH_CHECK("tensornet edges");                                                  \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_linear_cuda##SUF(int64_t n, int in, int out, int trans,   \
                                                         const T *W, const T *b, const T *X,      \
                                                         double beta, T *Y, void *blas,           \
                                                         void *stream) {                          \
        return linear<T>(n, in, out, trans, W, b, X, beta, Y, blas, stream);                      \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_act_cuda##SUF(int act, int64_t n, int width,              \
                                                      const T *bias, const T *Z, const T *scale,  \
                                                      T *A, void *stream) {                       \
        if (n <= 0 || width <= 0) return NNPOPS_OK;                                               \
        act_kernel<T><<<(unsigned)((n + ACT_ROWS - 1) / ACT_ROWS), 128, 0, as_stream(stream)>>>(  \
            act, n, width, bias, Z, scale, A);                                                    \
        NNPOPS__LAUNCH_CHECK("tensornet activation");                                             \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_act_back_cuda##SUF(int act, int64_t n, int width,         \
                                                           const T *Z, const T *bias,             \
                                                           const T *scale, T *G, T *gscale,       \
                                                           void *stream) {                        \
        if (n <= 0) return NNPOPS_OK;                                                             \
        act_back_kernel<T><<<grid_for(n * 32, 128), 128, 0, as_stream(stream)>>>(                 \
            act, n, width, Z, bias, scale, G, gscale);                                            \
        NNPOPS__LAUNCH_CHECK("tensornet activation backward");                                    \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_embed_cuda##SUF(                                          \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs,  \
        int64_t capacity, const int32_t *species, const T *ptab1, const T *ptab2, T self_fc,      \
        const T *self_dk, const T *ev, const T *er, const uint8_t *mask, const int32_t *slot,     \
        const T *fc, const T *dk, const T *dk_b, T *X0, void *stream) {                           \
        if (n_centers <= 0) return NNPOPS_OK;                                                     \
        embed_kernel<T><<<(unsigned)n_centers, atom_threads(d->F), 0, as_stream(stream)>>>(       \
            *d, start, pairs, capacity, species, ptab1, ptab2, self_fc, self_dk, ev, er, mask,    \
            slot, fc, dk, dk_b, X0);                                                              \
        NNPOPS__LAUNCH_CHECK("tensornet embedding");                                              \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_atom_embed_cuda##SUF(                                     \
        const nnpops__tn_dims *d, int64_t n, const T *X0, const T *norm_w, const T *norm_b,       \
        const T *const ls_w[2], const T *const ls_b[2], const T *const lt[3], T *z1, T *z2,       \
        T *X1, void *stream) {                                                                    \
        if (n <= 0) return NNPOPS_OK;                                                             \
        const size_t sm = smem_atom_embed(d->F);                                                  \
        NNPOPS__TRY(smem_check<T>((const void *)atom_embed_kernel<T>, sm,                         \
                                  "embedding"));                                                  \
        atom_embed_kernel<T><<<(unsigned)n, atom_threads(d->F), sm * sizeof(T),                   \
                               as_stream(stream)>>>(*d, X0, norm_w, norm_b, ls_w[0], ls_b[0],     \
                                                    ls_w[1], ls_b[1], lt[0], lt[1], lt[2], z1,    \
                                                    z2, X1);                                      \
        NNPOPS__LAUNCH_CHECK("tensornet embedding gates");                                        \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_atom_embed_back_cuda##SUF(                                \
        const nnpops__tn_dims *d, int64_t n, const T *X0, const T *norm_w, const T *norm_b,       \
        const T *const ls_w[2], const T *const lt[3], const T *z1, const T *z2, T *g,             \
        void *stream) {                                                                           \
        if (n <= 0) return NNPOPS_OK;                                                             \
        const size_t sm = smem_atom_embed_back(d->F);                                             \
        NNPOPS__TRY(smem_check<T>((const void *)atom_embed_back_kernel<T>, sm,                    \
                                  "embedding backward"));                                         \
        NNPOPS__TRY(per_thread_check(d->F));                                                      \
        atom_embed_back_kernel<T><<<(unsigned)n, atom_threads(d->F), sm * sizeof(T),              \
                                    as_stream(stream)>>>(*d, X0, norm_w, norm_b, ls_w[0],         \
                                                         ls_w[1], lt[0], lt[1], lt[2], z1, z2,    \
                                                         g);                                      \
        NNPOPS__LAUNCH_CHECK("tensornet embedding gates backward");                               \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_layer_pre_cuda##SUF(const nnpops__tn_dims *d, int64_t n,  \
                                                            const T *X, const T *const lt[3],     \
                                                            T *nrm, T *cY, void *stream) {        \
        if (n <= 0) return NNPOPS_OK;                                                             \
        NNPOPS__TRY(smem_check<T>((const void *)layer_pre_kernel<T>, 10 * (size_t)d->F,           \
                                  "layer"));                                                      \
        layer_pre_kernel<T><<<(unsigned)n, atom_threads(d->F), 10 * (size_t)d->F * sizeof(T),     \
                              as_stream(stream)>>>(*d, X, lt[0], lt[1], lt[2], nrm, cY);          \
        NNPOPS__LAUNCH_CHECK("tensornet layer (normalisation, Y)");                               \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_layer_pre_back_cuda##SUF(                                 \
        const nnpops__tn_dims *d, int64_t n, const T *X, const T *nrm, const T *const lt[3],      \
        const T *gcY, T *g, void *stream) {                                                       \
        if (n <= 0) return NNPOPS_OK;                                                             \
        NNPOPS__TRY(smem_check<T>((const void *)layer_pre_back_kernel<T>, 10 * (size_t)d->F,      \
                                  "layer backward"));                                             \
        layer_pre_back_kernel<T><<<(unsigned)n, atom_threads(d->F),                               \
                                   10 * (size_t)d->F * sizeof(T), as_stream(stream)>>>(           \
            *d, X, nrm, lt[0], lt[1], lt[2], gcY, g);                                             \
        NNPOPS__LAUNCH_CHECK("tensornet layer backward (normalisation, Y)");                      \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_message_cuda##SUF(                                        \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs,  \
        int64_t capacity, const uint8_t *mask, const int32_t *slot, const T *Z, const T *bias,    \
        const T *fcP, const T *self_h, const T *cY, T *cM, void *stream) {                        \
        if (n_centers <= 0) return NNPOPS_OK;                                                     \
        message_kernel<T><<<(unsigned)n_centers, atom_threads(d->F), 0, as_stream(stream)>>>(     \
            *d, start, pairs, capacity, mask, slot, Z, bias, fcP, self_h, cY, cM);                \
        NNPOPS__LAUNCH_CHECK("tensornet messages");                                               \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_message_back_cuda##SUF(                                   \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs,  \
        int64_t capacity, const uint8_t *mask, const int32_t *slot, int64_t n_pairs,              \
        const int32_t *pentry, const T *Z, const T *bias, const T *fcP, const T *self_h,          \
        const T *cY, const T *gcM, T *gcY, T *GH, int accumulate, T *gfc, void *stream) {         \
        if (n_centers > 0) {                                                                      \
            message_gy_kernel<T><<<(unsigned)n_centers, atom_threads(d->F), 0,                    \
                                   as_stream(stream)>>>(*d, start, pairs, capacity, mask, slot,   \
                                                        Z, bias, fcP, self_h, gcM, gcY);          \
            NNPOPS__LAUNCH_CHECK("tensornet messages backward (Y)");                              \
        }                                                                                         \
        if (n_centers > 0 || n_pairs > 0) {                                                       \
            /* slices per center: about GH_ENTRIES_PER_BLOCK entries each (from the capacity's    \
             * mean per center), at most 32 */                                                    \
            const int64_t per = n_centers > 0 ? capacity / n_centers : 0;                         \
            int64_t slices = (per + GH_ENTRIES_PER_BLOCK - 1) / GH_ENTRIES_PER_BLOCK;             \
            slices = slices < 1 ? 1 : (slices > 32 ? 32 : slices);                                \
            const dim3 grid((unsigned)(n_centers + (n_pairs + GH_PAD_PAIRS - 1) / GH_PAD_PAIRS),  \
                            (unsigned)slices);                                                    \
            message_gh_kernel<T><<<grid, atom_threads(d->F), 0, as_stream(stream)>>>(             \
                *d, n_centers, start, pairs, capacity, mask, slot, n_pairs, pentry, cY, gcM, Z,   \
                bias, fcP, GH, accumulate, gfc);                                                  \
            NNPOPS__LAUNCH_CHECK("tensornet messages backward (edge factors)");                   \
        }                                                                                         \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_layer_post_cuda##SUF(                                     \
        const nnpops__tn_dims *d, int64_t n, const double *charges, const int32_t *batch,         \
        const T *X, const T *nrm, const T *cY, const T *cM, const T *const lt[3], T *Xout,        \
        void *stream) {                                                                           \
        if (n <= 0) return NNPOPS_OK;                                                             \
        NNPOPS__TRY(smem_check<T>((const void *)layer_post_kernel<T>, 10 * (size_t)d->F,          \
                                  "layer update"));                                               \
        layer_post_kernel<T><<<(unsigned)n, atom_threads(d->F), 10 * (size_t)d->F * sizeof(T),    \
                               as_stream(stream)>>>(*d, charges, batch, X, nrm, cY, cM, lt[0],    \
                                                    lt[1], lt[2], Xout);                          \
        NNPOPS__LAUNCH_CHECK("tensornet layer update");                                           \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_layer_post_back_cuda##SUF(                                \
        const nnpops__tn_dims *d, int64_t n, const double *charges, const int32_t *batch,         \
        const T *cY, const T *cM, const T *const lt[3], const T *g, T *gcY, T *gcM,               \
        void *stream) {                                                                           \
        if (n <= 0) return NNPOPS_OK;                                                             \
        NNPOPS__TRY(smem_check<T>((const void *)layer_post_back_kernel<T>, 10 * (size_t)d->F,     \
                                  "layer update backward"));                                      \
        NNPOPS__TRY(per_thread_check(d->F));                                                      \
        layer_post_back_kernel<T><<<(unsigned)n, atom_threads(d->F),                              \
                                    10 * (size_t)d->F * sizeof(T), as_stream(stream)>>>(          \
            *d, charges, batch, cY, cM, lt[0], lt[1], lt[2], g, gcY, gcM);                        \
        NNPOPS__LAUNCH_CHECK("tensornet layer update backward");                                  \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_readout_cuda##SUF(                                        \
        const nnpops__tn_dims *d, int64_t n_atoms, int64_t n_local, const T *X, const T *norm_w,  \
        const T *norm_b, const T *lin_w, const T *lin_b, const T *const out_w[],                  \
        const T *const out_b[], const int32_t *species, const T *atomref, double *atom_energy,    \
        T *g, void *stream) {                                                                     \
        if (n_atoms <= 0) return NNPOPS_OK;                                                       \
        if (d->n_out > 16)                                                                        \
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "tensornet: %d readout layers",         \
                                (int)d->n_out);                                                   \
        readout_w rw;                                                                             \
        memset(&rw, 0, sizeof rw);                                                                \
        rw.norm_w = norm_w, rw.norm_b = norm_b, rw.lin_w = lin_w, rw.lin_b = lin_b;               \
        for (int k = 0; k < d->n_out; k++) rw.out_w[k] = out_w[k], rw.out_b[k] = out_b[k];        \
        const size_t sm = smem_readout(d);                                                        \
        NNPOPS__TRY(smem_check<T>((const void *)readout_kernel<T>, sm,                            \
                                  "readout"));                                                    \
        readout_kernel<T><<<(unsigned)n_atoms, atom_threads(d->F), sm * sizeof(T),                \
                            as_stream(stream)>>>(*d, n_local, X, rw, species, atomref,            \
                                                 atom_energy, g);                                 \
        NNPOPS__LAUNCH_CHECK("tensornet readout");                                                \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_embed_back_cuda##SUF(                                     \
        const nnpops__tn_dims *d, int64_t n_pairs, const int32_t *pentry, const int32_t *pmirror, \
        const int32_t *pairs, const int32_t *species, const T *ptab1, const T *ptab2,             \
        const T *ev, const T *er, const T *fcP, const T *dk, const T *dk_b, const T *g0, T *gd,   \
        T *gu, int accumulate, T *gfc, void *stream) {                                            \
        if (n_pairs <= 0) return NNPOPS_OK;                                                       \
        embed_back_kernel<T><<<grid_for(n_pairs * 32, 128), 128, 0, as_stream(stream)>>>(         \
            *d, n_pairs, pentry, pmirror, pairs, species, ptab1, ptab2, ev, er, fcP, dk, dk_b, g0, \
            gd, gu, accumulate, gfc);                                                             \
        NNPOPS__LAUNCH_CHECK("tensornet embedding backward (pairs)");                             \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_radial_back_cuda##SUF(                                    \
        const nnpops__tn_dims *d, const T *rbf_a, const T *rbf_b, int64_t n_centers,              \
        const int64_t *start, int64_t capacity, const T *er, const uint8_t *mask,                 \
        const int32_t *pentry, const T *gphi, const T *gfc, int accumulate, T *gr,                \
        void *stream) {                                                                           \
        if (capacity <= 0) return NNPOPS_OK;                                                      \
        radial_back_kernel<T><<<grid_for(capacity * 32, 128), 128, 0, as_stream(stream)>>>(       \
            *d, rbf_a, rbf_b, n_centers, start, capacity, er, mask, pentry, gphi, gfc, accumulate, \
            gr);                                                                                  \
        NNPOPS__LAUNCH_CHECK("tensornet radial backward");                                        \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_finish_cuda##SUF(                                         \
        const nnpops__tn_dims *d, const nnpops__tn_zbl_dev *zbl, const int32_t *zbl_z,            \
        int64_t n_centers, int64_t n_local, const int64_t *start, const int32_t *pairs,           \
        int64_t capacity, const int32_t *species, const T *ev, const T *er, const uint8_t *mask,  \
        const T *gu, const T *gr, const int32_t *slot, const int32_t *pentry, const T *grP,       \
        double mean, const int32_t *batch, const int32_t *sys_count, double *atom_energy,         \
        double *pair_grad, void *stream) {                                                        \
        if (n_centers <= 0) return NNPOPS_OK;                                                     \
        finish_kernel<T><<<grid_for(n_centers, 128), 128, 0, as_stream(stream)>>>(               \
            *d, *zbl, zbl_z, n_centers, n_local, start, pairs, capacity, species, ev, er, mask,   \
            gu, gr, slot, pentry, grP, mean, batch, sys_count, atom_energy, pair_grad);           \
        NNPOPS__LAUNCH_CHECK("tensornet finish (ZBL, gradients per entry)");                      \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_pair_radial_cuda##SUF(                                    \
        const nnpops__tn_dims *d, const T *rbf_a, const T *rbf_b, int64_t n_pairs,                \
        const int32_t *pentry, const T *er, const T *fc, T *erP, T *fcP, T *phiP, void *stream) { \
        if (n_pairs <= 0 || d->R <= 0) return NNPOPS_OK;                                          \
        pair_radial_kernel<T><<<grid_for(n_pairs * d->R, 128), 128, 0, as_stream(stream)>>>(      \
            *d, rbf_a, rbf_b, n_pairs, pentry, er, fc, erP, fcP, phiP);                           \
        NNPOPS__LAUNCH_CHECK("tensornet radial basis per pair");                                  \
        return NNPOPS_OK;                                                                         \
    }

TN_CU_TWINS(_f32, float)
TN_CU_TWINS(_f64, double)

extern "C" nnpops_status nnpops__tn_count_cuda(int64_t n, int64_t n_systems, const int32_t *batch,
                                               int32_t *sys_count, void *stream) {
    if (n_systems <= 0) return NNPOPS_OK;
    count_kernel<<<1, 1024, 0, as_stream(stream)>>>(n, n_systems, batch, sys_count);
    NNPOPS__LAUNCH_CHECK("tensornet atoms per system");
    return NNPOPS_OK;
}

extern "C" nnpops_status nnpops__tn_pairs_cuda(int64_t n_centers, const int64_t *start,
                                               const int32_t *pairs, int64_t capacity,
                                               const double *vec, const uint8_t *mask,
                                               int64_t n_pairs, int32_t *slot, int32_t *pentry,
                                               int32_t *pmirror, int32_t *count, int path,
                                               void *stream) {
    if (n_centers <= 0) return NNPOPS_OK;
    cudaStream_t st = as_stream(stream);
    if (path == 1 || (path == 0 && n_centers <= PAIRS_ONE_BLOCK_CENTERS &&
                      capacity <= PAIRS_ONE_BLOCK_ENTRIES)) {
        pairs_one_block_kernel<<<1, 32 * PAIRS_WARPS, 0, st>>>(
            n_centers, start, pairs, capacity, vec, mask, n_pairs, count, slot, pentry, pmirror);
        NNPOPS__LAUNCH_CHECK("tensornet pairs (numbers, one block)");
    } else {
        pairs_count_kernel<<<grid_for(n_centers * 32, 128), 128, 0, st>>>(
            n_centers, start, pairs, capacity, vec, mask, count);
        NNPOPS__LAUNCH_CHECK("tensornet pairs (count)");
        pairs_scan_kernel<<<1, 1024, 0, st>>>(n_centers, count);
        NNPOPS__LAUNCH_CHECK("tensornet pairs (scan)");
        pairs_assign_kernel<<<grid_for(n_centers * 32, 128), 128, 0, st>>>(
            n_centers, start, pairs, capacity, vec, mask, n_pairs, count, slot, pentry, pmirror);
        NNPOPS__LAUNCH_CHECK("tensornet pairs (numbers)");
    }
    const int64_t m = capacity > n_pairs ? capacity : n_pairs;
    if (m > 0) {
        pairs_mirror_kernel<<<grid_for(m, 128), 128, 0, st>>>(n_centers, start, pairs, capacity,
                                                               vec, mask, n_pairs, count, slot,
                                                               pentry, pmirror);
        NNPOPS__LAUNCH_CHECK("tensornet pairs (mirrors)");
    }
    return NNPOPS_OK;
}
