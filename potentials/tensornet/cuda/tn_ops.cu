/*
 * tn_ops.cu - the CUDA twins of TensorNet's ops (potentials/tensornet/tn_ops.h gives each op's
 * definition; cpu/tn_ops_cpu_impl.h the CPU twins).
 *
 * Kernels by shape of work:
 *   per atom (the 3x3 algebra over F channels, the gates, the readout): a block per tile of up to
 *     8 atoms and, for small systems, per chunk of the output channels; the
 *     channel linears stage their weights through shared memory, each weight read once per
 *     block, the sums in registers (lin3: a lane's output's ten components for one atom; a
 *     plain linear: a thread's output for every atom); LayerNorms reduce in a warp in a fixed
 *     tree;
 *   per center (the embedding's sum, the messages and their gradients, dE/dh of the pairs a
 *     center holds): one block per center, its threads over the channels, the center's entries in
 *     list order (no atomics; the sums stage a chunk of entries' pair numbers and neighbours in
 *     shared memory first); the pairs' numbering: a warp per center, 32 entries a round;
 *   per entry or pair (distances, radial basis and its gradient, the embedding's gradients): a
 *     thread, or a warp whose lanes split the channels or basis functions (fixed-order warp sums);
 *   the linears over pairs (edge networks, the embedding's distance projections): GEMMs, in
 *     float32 from a block per multiprocessor up on the tensor cores (3xTF32, the activations
 *     and their derivatives in the kernel's epilogue), else cuBLAS (nnpops__gemm_cuda, FP32 /
 *     FP64 compute) with the elementwise activation kernels; the biases are added as the
 *     activations and the messages read the products.
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

/* t_act as one out-of-line function, for the per-atom kernels: they call it from many places
 * outside their inner loops, and one copy of the activation's code serves them all (the pair
 * kernels inline t_act in their loops). */
template <typename T> __device__ __noinline__ T t_act_call(int kind, T x, T *d) {
    return t_act<T>(kind, x, d);
}

/* Every TensorNet kernel is launched with programmatic dependent launch (tn_launch): it lets the
 * next kernel of the step launch at once (its blocks wait in tn_kernel_start for this one to end)
 * and waits for the kernels before it before it reads or writes anything, so each launch's
 * latency overlaps the kernel before it. */
__device__ __forceinline__ void tn_kernel_start() {
    pdl_trigger();
    pdl_wait();
}

/* kern<<<grid, block, smem, stream>>>(args...) with the programmatic-stream-serialization
 * attribute (launch_pdl; each argument converted to the kernel's parameter type); `what` names
 * the kernel in the error. */
template <typename... KArgs, typename... Args>
nnpops_status tn_launch(void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem, void *stream,
                        const char *what, Args... args) {
    return launch_pdl(kern, grid, block, smem, as_stream(stream), what,
                      static_cast<KArgs>(args)...);
}

/* kern<..., ACT> for the activation act of a model: silu (the activation of the published
 * TensorNet and AceFF models) compiled in (ACT = NNPOPS__TN_SILU), any other chosen per call
 * (ACT = -1: the kernel takes the activation as an argument). */
#define TN_ACT_KERNEL(kern, act, ...)                                                              \
    ((act) == NNPOPS__TN_SILU ? kern<__VA_ARGS__, NNPOPS__TN_SILU> : kern<__VA_ARGS__, -1>)

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
    tn_kernel_start();
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
    tn_kernel_start();
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n * out) return;
    const T v = b[k % out];
    Y[k] = accumulate ? Y[k] + v : v;
}

template <typename T> constexpr int prec_of() {
    return sizeof(T) == 4 ? NNPOPS_FLOAT32 : NNPOPS_FLOAT64;
}

/* (below: float32 products on the tensor cores) */
bool gemm_tc_fits(int64_t M, int N, int K, const void *A, const void *W, const void *C,
                  const void *Zg, const void *Aout);
nnpops_status gemm_tc(int64_t M, int N, int K, int tb, const float *A, const float *W,
                      double beta, float *C, int act, const float *bias, const float *Zg,
                      float *Aout, void *stream);

/* tn_linear: float32 on the tensor cores where gemm_tc fits, else cuBLAS (float64 always) */
template <typename T>
nnpops_status linear(int64_t n, int in, int out, int trans, const T *W, const T *b, const T *X,
                     double beta, T *Y, void *blas, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    if (!trans && b) {
        NNPOPS__TRY(tn_launch(bias_rows_kernel<T>, grid_for(n * out, 256), 256, 0, stream,
                              "tensornet linear (bias)", n, out, b, beta != 0, Y));
        beta = 1.0;
    }
    if (!trans && in == 0) return NNPOPS_OK;
    const int N = trans ? in : out, K = trans ? out : in; /* Y's width, the inner dimension */
    if constexpr (sizeof(T) == 4)
        if (gemm_tc_fits(n, N, K, X, W, Y, NULL, NULL))
            return gemm_tc(n, N, K, trans, X, W, beta, Y, 0, NULL, NULL, NULL, stream);
    if (!trans)
        /* Y (out x n, column-major) = W (row-major [out][in] = column-major in x out)^T X */
        return nnpops__gemm_cuda(blas, stream, prec_of<T>(), 1, 0, out, n, in, W, in, 0, X, in, 0,
                                 beta, Y, out, 0, 1);
    return nnpops__gemm_cuda(blas, stream, prec_of<T>(), 0, 0, in, n, out, W, in, 0, X, out, 0,
                             beta, Y, in, 0, 1);
}

/* ==== tn_act, tn_act_back ==== */
/* ACT_ROWS rows per block, its threads over the columns (no index division) */
#define ACT_ROWS 8
template <typename T>
__global__ void act_kernel(int act, int64_t n, int width, const T *bias, const T *Z,
                           const T *scale, T *A) {
    tn_kernel_start();
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
    tn_kernel_start();
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

template <typename T>
nnpops_status act_launch(int act, int64_t n, int width, const T *bias, const T *Z, const T *scale,
                         T *A, void *stream) {
    if (n <= 0 || width <= 0) return NNPOPS_OK;
    return tn_launch(act_kernel<T>, (unsigned)((n + ACT_ROWS - 1) / ACT_ROWS), 128, 0, stream,
                     "tensornet activation", act, n, width, bias, Z, scale, A);
}

template <typename T>
nnpops_status act_back_launch(int act, int64_t n, int width, const T *Z, const T *bias,
                              const T *scale, T *G, T *gscale, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    return tn_launch(act_back_kernel<T>, grid_for(n * 32, 128), 128, 0, stream,
                     "tensornet activation backward", act, n, width, Z, bias, scale, G, gscale);
}

/* tn_linear_act: one tensor-core kernel with its epilogue in float32 where it fits, else the
 * linear and the activation's kernel */
template <typename T>
nnpops_status linear_act(int act, int64_t n, int in, int out, int trans, const T *W, const T *X,
                         double beta, T *Y, const T *bias, const T *Zg, T *A, void *blas,
                         void *stream) {
    if (n <= 0) return NNPOPS_OK;
    const int N = trans ? in : out, K = trans ? out : in;
    const T *zg = trans ? Zg : NULL; /* the one of Zg and A the direction takes */
    T *a = trans ? NULL : A;
    if constexpr (sizeof(T) == 4)
        if (gemm_tc_fits(n, N, K, X, W, Y, zg, a))
            return gemm_tc(n, N, K, trans, X, W, beta, Y, act, bias, zg, a, stream);
    NNPOPS__TRY(linear<T>(n, in, out, trans, W, NULL, X, beta, Y, blas, stream));
    if (a) return act_launch<T>(act, n, N, bias, Y, NULL, a, stream);
    if (zg) return act_back_launch<T>(act, n, N, zg, bias, NULL, Y, NULL, stream);
    return NNPOPS_OK;
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

/* A center's entries [e0, e1) staged in shared memory a chunk at a time (up to blockDim.x
 * entries, at most TN_CHUNK): per entry its pair number, -1 where it is no edge of the layers or
 * has no pair (slot NULL: the entry itself), and key(e) (the neighbour, its species...), one
 * independent load per thread, so that the loop over a chunk's entries starts no load chain of
 * its own.  stage_entries is called by every thread of the block between barriers. */
#define TN_CHUNK 256
template <typename Key>
__device__ inline int stage_entries(int64_t cb, int64_t e1, const uint8_t *mask,
                                    const int32_t *slot, Key key, int32_t *sq, int32_t *sk) {
    const int cnt = (int)(e1 - cb < (int64_t)blockDim.x ? e1 - cb : (int64_t)blockDim.x);
    __syncthreads(); /* the chunk before is read */
    if ((int)threadIdx.x < cnt) {
        const int64_t e = cb + threadIdx.x;
        int32_t q = -1;
        if (mask[e] & NNPOPS__TN_EDGE) q = slot ? slot[e] : (int32_t)e;
        sq[threadIdx.x] = q;
        sk[threadIdx.x] = key(e);
    }
    __syncthreads();
    return cnt;
}

template <typename T>
__global__ void embed_kernel(nnpops__tn_dims d, const int64_t *start, const int32_t *pairs,
                             int64_t capacity, const int32_t *species, const T *ptab1,
                             const T *ptab2, T self_fc, const T *self_dk, const T *ev, const T *er,
                             const uint8_t *mask, const int32_t *slot, const T *fc, const T *dk,
                             const T *dk_b, T *X0) {
    tn_kernel_start();
    const int64_t c = blockIdx.x;
    const int F = d.F;
    const int64_t e0 = start[c], e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    const T *p1 = ptab1 + (size_t)species[c] * F;
    const T *ps = ptab2 + (size_t)species[c] * F;
    const T zero[3] = {0, 0, 0};
    __shared__ int32_t sq[TN_CHUNK];
    __shared__ int32_t ssp[TN_CHUNK];
    for (int f0 = 0; f0 < F; f0 += blockDim.x) { /* (the same passes for every thread) */
        const int f = f0 + threadIdx.x;
        const bool on = f < F;
        T X[9];
        for (int k = 0; k < 9; k++) X[k] = 0;
        T b0 = 0, b1 = 0, b2 = 0;
        if (on) {
            if (dk_b) b0 = dk_b[f], b1 = dk_b[F + f], b2 = dk_b[2 * F + f];
            embed_add<T>(self_fc * (p1[f] + ps[f]), self_dk[f], self_dk[F + f],
                         self_dk[2 * F + f], zero, X);
        }
        for (int64_t cb = e0; cb < e1; cb += blockDim.x) {
            const int cnt = stage_entries(
                cb, e1, mask, slot, [&](int64_t e) { return species[pairs[2 * e + 1]]; }, sq,
                ssp);
            if (!on) continue;
#pragma unroll 4
            for (int i = 0; i < cnt; i++) {
                const int32_t q = sq[i];
                if (q < 0) continue;
                const int64_t e = cb + i;
                const T *p2 = ptab2 + (size_t)ssp[i] * F;
                T u[3];
                unit_of<T>(ev + 3 * e, er[e], u);
                const T *dke = dk + (size_t)q * 3 * F;
                embed_add<T>(fc[e] * (p1[f] + p2[f]), dke[f] + b0, dke[F + f] + b1,
                             dke[2 * F + f] + b2, u, X);
            }
        }
        if (!on) continue;
        T *out = X0 + (size_t)c * 9 * F;
        for (int k = 0; k < 9; k++) out[k * F + f] = X[k];
    }
}

/* ==== per-atom kernels: tiles of atoms ====
 * A block (TN_ATOM_THREADS threads, 8 warps) takes a tile of na <= NA atoms (NA 1, 2, 4 or 8)
 * and, where the op allows it, a chunk [cb, ce) of the output channels (blockIdx.y; chunks of
 * cw channels, a multiple of 32): the work per channel runs over (atom, channel) pairs, the
 * sums over an atom's channels (LayerNorms) in warp a for atom a (fixed-order warp sums), and
 * the channel linears in tile_linear (lin3) and tile_linear1 (a plain linear): the weights pass
 * through shared memory in rounds (tiles of TL_STAGES buffers; 32 outputs a warp), each weight
 * read once per block (coalesced, asynchronous copies, two rounds in flight) and used for all
 * the tile's atoms; in lin3 warp w computes atom w % NA for 32 outputs of a round, in a plain
 * linear each thread one output for every atom; each sum runs over the inputs in order
 * (registers, no atomics: deterministic, the same under every tiling). */
#define TL_STAGES 3 /* weight buffers in shared memory: two rounds' copies in flight */
/* the smallest weight buffer (values): 32 rows of 32 outputs of three matrices with a spare
 * column; it holds the narrowest round (tl_shape_of) of the widest: 16 bytes of every row of
 * three matrices of TN_ATOM_THREADS outputs (lin3 with one atom a tile) */
#define TL_TILE (3 * 32 * 33)
#define TN_ATOM_THREADS 256

/* A per-atom launch's shape, the kernels' argument: NA atoms a block, chunks of cw output
 * channels, weight buffers of `tile` values (a multiple of TL_TILE). */
struct tl_cfg {
    int na, cw, tile;
};

/* A block's tile: atoms a0 .. a0 + na - 1 (NA those of a full tile), output channels [cb, ce),
 * weight buffers of `tile` values each. */
struct atom_tile {
    int64_t a0;
    int NA, na, cb, ce, tile;
};
__device__ inline atom_tile tile_of(int64_t n, int F, tl_cfg cfg) {
    atom_tile t;
    t.NA = cfg.na;
    t.a0 = (int64_t)blockIdx.x * cfg.na;
    t.na = n - t.a0 < cfg.na ? (int)(n - t.a0) : cfg.na;
    t.cb = (int)blockIdx.y * cfg.cw;
    t.ce = t.cb + cfg.cw < F ? t.cb + cfg.cw : F;
    t.tile = cfg.tile;
    return t;
}

/* The asynchronous global -> shared copies of a weight tile (and of the tensor-core GEMM's
 * tiles): n values (1, or 16 bytes' worth),
 * of which the first `valid` are read from src and the rest written as zeros (valid 0: src is
 * not read).  Plain copies, done at once, where the kernels are compiled for the CPU
 * (NNPOPS_CUDA_EMULATION: tests/emu), their commit and wait nothing. */
#ifdef NNPOPS_CUDA_EMULATION
template <typename T>
__device__ __forceinline__ void tl_copy(T *dst, const T *src, int n, int valid) {
    for (int i = 0; i < n; i++) dst[i] = i < valid ? src[i] : (T)0;
}
template <typename T> __device__ __forceinline__ void tl_copy16(T *dst, const T *src) {
    for (int i = 0; i < (int)(16 / sizeof(T)); i++) dst[i] = src[i];
}
__device__ __forceinline__ void tl_commit() {}
__device__ __forceinline__ void tl_wait_prev() {}
#else
template <typename T>
__device__ __forceinline__ void tl_copy(T *dst, const T *src, int n, int valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    const int bytes = valid * (int)sizeof(T);
    if (n * sizeof(T) == 16)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                     "r"(bytes)
                     : "memory");
    else /* one value: 4 or 8 bytes */
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src),
                     "n"((int)sizeof(T)), "r"(bytes)
                     : "memory");
}
/* 16 bytes, all of them read (no bounds to check: tl_issue's full rounds) */
template <typename T> __device__ __forceinline__ void tl_copy16(T *dst, const T *src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void tl_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* all but the latest TL_STAGES - 2 committed groups of this thread's copies are done */
__device__ __forceinline__ void tl_wait_prev() {
    static_assert(TL_STAGES == 3, "tl_wait_prev waits for all but the latest group");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}
#endif

/* 16 bytes of values (one shared-memory load) */
template <typename T> struct __align__(16) tl_vec {
    T v[16 / sizeof(T)];
};

/* ==== tn_linear in float32 on the tensor cores: 3xTF32 ====
 * C [M][N] = beta C + A [M][K] B, row-major, with B = W^T (TB false: W [N][K], a linear's
 * [out][in]) or B = W (TB true: W [K][N], the transposed product of the backward).  Each product
 * a b goes through the tensor cores as a_lo b_hi + a_hi b_lo + a_hi b_hi (x = hi + lo, hi = x
 * rounded to TF32: kernels/cuda/tf32x3.cu gives the error, about that of float32), summed in
 * float32.  The epilogue applies the edge networks' activations on the way out: forward (TB
 * false, Aout not NULL) Aout = act(C + bias), backward (TB true, Zg not NULL) C *= act'(Zg + bias),
 * as tn_act and tn_act_back do (without scale).  K and N multiples of 4, every matrix 16-byte
 * aligned (gemm_tc_fits).
 * A block of GT_THREADS computes a GT_BM x GT_BN tile of C, each of its four warps 32 x 32 (2 x 4
 * mma tiles of m16n8k8), over K in steps of GT_BK staged in TL_STAGES buffers of shared memory by
 * asynchronous copies (tl_copy: two steps' copies in flight while one is multiplied).  Row strides
 * of GT_BK + 4 (A, and B without TB: [n][k]) and GT_BN + 8 (B with TB: [k][n]) make the
 * fragments' loads free of bank conflicts.  Four blocks share a multiprocessor (three for the
 * transposed products, whose epilogue needs more registers).  Emulated (tests/emu) each thread
 * computes the same outputs of its fragments from the same staged tiles with the same split, in
 * plain arithmetic. */
#define GT_BM 64
#define GT_BN 64
#define GT_BK 32
#define GT_THREADS 128
#define GT_SA (GT_BK + 4)
#define GT_SBT (GT_BN + 8)
#define GT_TILE (GT_BM * GT_SA) /* floats of one stage's A tile, and of its B tile either way */
static_assert(GT_BK * GT_SBT == GT_TILE && GT_BN == GT_BM, "GT tiles");

int g_tc_gemms = 0; /* GEMMs launched on the tensor cores (nnpops__tn_gemm_path_cuda) */
int g_tc_force = 0; /* 1: the tensor cores wherever they fit, 2: never (tests); 0: by size */

struct gt_epi {
    int act;           /* the activation (ACT < 0: chosen per call) */
    const float *bias; /* [N] */
    const float *Zg;   /* TB: the pre-activations whose act' scales C; NULL: none */
    float *Aout;       /* !TB: act(C + bias); NULL: none */
};

/* one stage: A's rows m0.., B's columns n0.., the inner index k0.. (zeros outside) */
template <bool TB>
__device__ __forceinline__ void gt_stage(float *sA, float *sB, const float *A, const float *W,
                                         int64_t M, int N, int K, int64_t m0, int n0, int k0) {
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < GT_BM * GT_BK / 4 / GT_THREADS; i++) {
        const int q = t + i * GT_THREADS, r = q / (GT_BK / 4), c = q % (GT_BK / 4) * 4;
        const bool ok = m0 + r < M && k0 + c < K;
        tl_copy(sA + r * GT_SA + c, ok ? A + (size_t)(m0 + r) * K + k0 + c : A, 4, ok ? 4 : 0);
    }
#pragma unroll
    for (int i = 0; i < GT_BN * GT_BK / 4 / GT_THREADS; i++) {
        const int q = t + i * GT_THREADS;
        if (!TB) {
            const int r = q / (GT_BK / 4), c = q % (GT_BK / 4) * 4;
            const bool ok = n0 + r < N && k0 + c < K;
            tl_copy(sB + r * GT_SA + c, ok ? W + (size_t)(n0 + r) * K + k0 + c : W, 4,
                    ok ? 4 : 0);
        } else {
            const int r = q / (GT_BN / 4), c = q % (GT_BN / 4) * 4;
            const bool ok = k0 + r < K && n0 + c < N;
            tl_copy(sB + r * GT_SBT + c, ok ? W + (size_t)(k0 + r) * N + n0 + c : W, 4,
                    ok ? 4 : 0);
        }
    }
}

/* B[k][n] of a staged tile */
template <bool TB> __device__ __forceinline__ float gt_b(const float *sB, int k, int n) {
    return TB ? sB[k * GT_SBT + n] : sB[n * GT_SA + k];
}

/* x = hi + lo, hi = x rounded to TF32 (half away from zero: tf32_split without its checks for
 * inf and nan, three instructions; a nan or inf in x still comes out as nan, through lo); the
 * tensor cores take lo's first 19 bits */
__device__ __forceinline__ void gt_split(float x, uint32_t &hi, uint32_t &lo) {
    hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}
#ifndef NNPOPS_CUDA_EMULATION
__device__ __forceinline__ void gt_mma(float (&c)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* The warp's 32 x 32 outputs over one staged step: acc[mt][nt][r] is the output of row
 * 16 mt + g + 8 (r >> 1) and column 8 nt + 2 t + (r & 1) of the warp's tile (g = lane / 4,
 * t = lane % 4: the m16n8k8 accumulator's layout). */
template <bool TB>
__device__ __forceinline__ void gt_step(const float *sA, const float *sB, int wm, int wn,
                                        float (&acc)[2][4][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#ifndef NNPOPS_CUDA_EMULATION
#pragma unroll
    for (int kk = 0; kk < GT_BK; kk += 8) {
        uint32_t ah[2][4], al[2][4], bh[4][2], bl[4][2];
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
            const float *a = sA + (32 * wm + 16 * mt + g) * GT_SA + kk + t;
            gt_split(a[0], ah[mt][0], al[mt][0]);
            gt_split(a[8 * GT_SA], ah[mt][1], al[mt][1]);
            gt_split(a[4], ah[mt][2], al[mt][2]);
            gt_split(a[8 * GT_SA + 4], ah[mt][3], al[mt][3]);
        }
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const int n = 32 * wn + 8 * nt + g;
            gt_split(gt_b<TB>(sB, kk + t, n), bh[nt][0], bl[nt][0]);
            gt_split(gt_b<TB>(sB, kk + t + 4, n), bh[nt][1], bl[nt][1]);
        }
        /* the small products first, each round over the eight tiles (independent accumulators
         * between a tile's dependent products) */
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++) gt_mma(acc[mt][nt], al[mt], bh[nt]);
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++) gt_mma(acc[mt][nt], ah[mt], bl[nt]);
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++) gt_mma(acc[mt][nt], ah[mt], bh[nt]);
    }
#else
    /* the tensor cores read TF32: lo loses its last 13 bits */
    const auto tf32 = [](float x) { return __uint_as_float(__float_as_uint(x) & 0xffffe000u); };
    for (int kk = 0; kk < GT_BK; kk += 8)
        for (int mt = 0; mt < 2; mt++)
            for (int nt = 0; nt < 4; nt++)
                for (int r = 0; r < 4; r++) {
                    const int m = 32 * wm + 16 * mt + g + 8 * (r >> 1);
                    const int n = 32 * wn + 8 * nt + 2 * t + (r & 1);
                    float s[3] = {0, 0, 0};
                    for (int k = kk; k < kk + 8; k++) {
                        uint32_t ah, al, bh, bl;
                        gt_split(sA[m * GT_SA + k], ah, al);
                        gt_split(gt_b<TB>(sB, k, n), bh, bl);
                        const float fah = __uint_as_float(ah), fbh = __uint_as_float(bh);
                        s[0] += tf32(__uint_as_float(al)) * fbh;
                        s[1] += fah * tf32(__uint_as_float(bl));
                        s[2] += fah * fbh;
                    }
                    acc[mt][nt][r] = ((acc[mt][nt][r] + s[0]) + s[1]) + s[2];
                }
#endif
}

template <bool TB, int ACT>
__global__ void __launch_bounds__(GT_THREADS, TB ? 3 : 4)
    gemm_tc_kernel(int64_t M, int N, int K, const float *A, const float *W, int beta, float *C,
                   gt_epi ep) {
    tn_kernel_start();
    extern __shared__ __align__(16) float gt_smem[];
    const int tiles_n = (N + GT_BN - 1) / GT_BN;
    const int64_t m0 = (int64_t)(blockIdx.x / tiles_n) * GT_BM;
    const int n0 = (int)(blockIdx.x % tiles_n) * GT_BN;
    const int warp = threadIdx.x >> 5, wm = warp >> 1, wn = warp & 1;
    float acc[2][4][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[mt][nt][r] = 0.0f;
    const int steps = (K + GT_BK - 1) / GT_BK;
    /* stage s: A's tile at 2 s GT_TILE, B's after it */
#pragma unroll
    for (int s = 0; s < TL_STAGES - 1; s++) {
        if (s < steps)
            gt_stage<TB>(gt_smem + 2 * s * GT_TILE, gt_smem + (2 * s + 1) * GT_TILE, A, W, M, N,
                         K, m0, n0, s * GT_BK);
        tl_commit();
    }
    for (int s = 0; s < steps; s++) {
        tl_wait_prev();
        __syncthreads(); /* step s is staged, and every warp is done with step s - 1's buffers */
        const int next = s + TL_STAGES - 1, b = next % TL_STAGES;
        if (next < steps)
            gt_stage<TB>(gt_smem + 2 * b * GT_TILE, gt_smem + (2 * b + 1) * GT_TILE, A, W, M, N,
                         K, m0, n0, next * GT_BK);
        tl_commit();
        const int c = s % TL_STAGES;
        gt_step<TB>(gt_smem + 2 * c * GT_TILE, gt_smem + (2 * c + 1) * GT_TILE, wm, wn, acc);
    }
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kind = ACT >= 0 ? ACT : ep.act;
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t m = m0 + 32 * wm + 16 * mt + g + 8 * h;
            if (m >= M) continue;
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int n = n0 + 32 * wn + 8 * nt + 2 * t; /* n + 1 < N too: N % 4 == 0 */
                if (n >= N) continue;
                const size_t o = (size_t)m * N + n;
                float v[2] = {acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]};
                if (beta) {
                    const float2 c = *reinterpret_cast<const float2 *>(C + o);
                    v[0] += c.x, v[1] += c.y;
                }
                if (TB && ep.Zg) {
                    for (int u = 0; u < 2; u++) {
                        float dv;
                        (void)t_act<float>(kind, ep.Zg[o + u] + ep.bias[n + u], &dv);
                        v[u] *= dv;
                    }
                }
                *reinterpret_cast<float2 *>(C + o) = make_float2(v[0], v[1]);
                if (!TB && ep.Aout)
                    *reinterpret_cast<float2 *>(ep.Aout + o) =
                        make_float2(t_act<float>(kind, v[0] + ep.bias[n], NULL),
                                    t_act<float>(kind, v[1] + ep.bias[n + 1], NULL));
            }
        }
}

/* the blocks of gemm_tc for a product of M rows and N columns */
inline int64_t gt_blocks(int64_t M, int N) {
    return (M + GT_BM - 1) / GT_BM * ((N + GT_BN - 1) / GT_BN);
}

/* Whether gemm_tc takes the product of M rows: K and N multiples of 4, every matrix 16-byte
 * aligned, and at least a block per multiprocessor.  Each warp of gemm_tc runs the whole inner
 * dimension on one of the multiprocessor's four tensor units, whose TF32 rate bounds it: with
 * fewer blocks than multiprocessors (the small molecules' pairs) most of those units idle and
 * cuBLAS's kernels, which split small products over more of the GPU, are as fast or faster. */
bool gemm_tc_fits(int64_t M, int N, int K, const void *A, const void *W, const void *C,
                  const void *Zg, const void *Aout) {
    const uintptr_t a = (uintptr_t)A | (uintptr_t)W | (uintptr_t)C | (uintptr_t)Zg |
                        (uintptr_t)Aout;
    if (N % 4 != 0 || K % 4 != 0 || K <= 0 || a % 16 != 0 || g_tc_force == 2) return false;
    if (g_tc_force == 1) return true;
    const int sms = device_attr(cudaDevAttrMultiProcessorCount, 0);
    return sms > 0 && gt_blocks(M, N) >= sms;
}

nnpops_status gemm_tc(int64_t M, int N, int K, int tb, const float *A, const float *W,
                      double beta, float *C, int act, const float *bias, const float *Zg,
                      float *Aout, void *stream) {
    if (M <= 0 || N <= 0) return NNPOPS_OK;
    const int64_t blocks = gt_blocks(M, N);
    if (blocks > 0x7fffffff)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "tensornet on the GPU: a GEMM of %lld rows",
                            (long long)M);
    gt_epi ep;
    ep.act = act, ep.bias = bias, ep.Zg = Zg, ep.Aout = Aout;
    const size_t bytes = (size_t)2 * TL_STAGES * GT_TILE * sizeof(float);
    void (*kern)(int64_t, int, int, const float *, const float *, int, float *, gt_epi) =
        tb ? TN_ACT_KERNEL(gemm_tc_kernel, act, true) : TN_ACT_KERNEL(gemm_tc_kernel, act, false);
    NNPOPS__TRY(set_dynamic_smem((const void *)kern, bytes));
    NNPOPS__TRY(tn_launch(kern, (unsigned)blocks, GT_THREADS, bytes, stream,
                          "tensornet linear (tensor cores)", M, N, K, A, W, beta != 0, C, ep));
    g_tc_gemms++;
    return NNPOPS_OK;
}

/* weight matrix of component k: lin3 (NC 10: W0 on component 0, W1 on 1..3, W2 on 4..9) or a
 * plain linear (NC 1) */
template <int NC> __device__ __forceinline__ int tl_wsel(int k) { return NC == 1 ? 0 : blk_of(k); }

/* A round's staged weights, in the layout of W's rows: trans 1 (W[r][j], outputs along a row)
 * keeps for each of the NW matrices KR rows r of JW outputs, row stride S = JW (a warp reads one
 * row, 32 consecutive values); trans 0 (W[j][r], inputs along a row) keeps for each matrix JW rows
 * j of KR inputs, row stride S = KR, which each thread reads 16 bytes at a time along its own row:
 * KR an odd multiple of V = 16 / sizeof(T), so that the eight threads of a shared-memory phase
 * hit eight different groups of four banks.  Both copy whole rows of W, 16 bytes a copy. */
struct tl_shape {
    int KR, S;
};
template <typename T>
__device__ __forceinline__ tl_shape tl_shape_of(int trans, int tile, int NW, int JW) {
    constexpr int V = 16 / sizeof(T);
    const int room = tile / (NW * JW); /* values a staged row may take */
    tl_shape sh;
    if (trans) {
        sh.KR = room / V * V, sh.S = JW;
    } else {
        /* the largest odd number of V-wide pieces (room >= V: TL_TILE) */
        sh.KR = sh.S = ((room / V - 1) | 1) * V;
    }
    return sh;
}

/* Whether the weights may be copied 16 bytes at a time: every matrix 16-byte aligned, and its
 * rows and the first output jb starting on 16-byte boundaries. */
template <typename T, int NW>
__device__ __forceinline__ bool tl_wide(const T *W0, const T *W1, const T *W2, int ldw, int jb) {
    constexpr int V = 16 / sizeof(T);
    bool ok = ldw % V == 0 && jb % V == 0 && (uintptr_t)W0 % 16 == 0;
    if (NW > 1) ok = ok && (uintptr_t)W1 % 16 == 0 && (uintptr_t)W2 % 16 == 0;
    return ok;
}

/* Stage rows r0 .. r0 + KR and outputs j0 .. j0 + JW of the NW matrices W0, W1, W2 into buf in
 * the layout of tl_shape (matrix b's staged rows from buf + b rows S), zeros outside K x je: the
 * block's threads walk the pieces of CW values (V, or 1 where tl_wide says no) of each staged
 * row, consecutive threads along a row of W (coalesced).  Commits the copies as one group. */
template <typename T, int NW>
__device__ __forceinline__ void tl_issue(T *buf, const T *W0, const T *W1, const T *W2, int trans,
                                         int K, int ldw, int je, int r0, int j0, int KR, int JW,
                                         int S, int CW) {
    const int rows = trans ? KR : JW, cols = trans ? JW : KR;
    const int g0 = trans ? r0 : j0, gl = trans ? K : je; /* W's rows and their bound */
    const int c0 = trans ? j0 : r0, cl = trans ? je : K; /* W's columns and their bound */
    const int cpr = cols / CW, n = rows * cpr, nt = (int)blockDim.x;
    const int drow = nt / cpr, dcol = nt % cpr * CW;
    const int row0 = (int)threadIdx.x / cpr, col0 = (int)threadIdx.x % cpr * CW;
    /* a round inside W's bounds in 16-byte pieces: the copies without the checks */
    const bool full = CW * sizeof(T) == 16 && g0 + rows <= gl && c0 + cols <= cl;
    for (int b = 0; b < NW; b++) {
        const T *W = b == 0 ? W0 : (b == 1 ? W1 : W2);
        T *dst = buf + b * rows * S;
        int row = row0, col = col0;
        if (full) {
            const T *src = W + (size_t)g0 * ldw + c0;
            if (dcol == 0) { /* the same column in every copy of the thread */
                const T *sp = src + row0 * ldw + col0;
                T *dp = dst + row0 * S + col0;
                for (int e = (int)threadIdx.x; e < n; e += nt, sp += drow * ldw, dp += drow * S)
                    tl_copy16(dp, sp);
                continue;
            }
            for (int e = (int)threadIdx.x; e < n; e += nt) {
                tl_copy16(dst + row * S + col, src + row * ldw + col);
                row += drow, col += dcol;
                if (col >= cols) col -= cols, row++;
            }
            continue;
        }
        for (int e = (int)threadIdx.x; e < n; e += nt) {
            const int g = g0 + row, c = c0 + col;
            int valid = cl - c < CW ? cl - c : CW;
            if (g >= gl || valid < 0) valid = 0;
            /* (a weight matrix has fewer than 2^31 values) */
            tl_copy(dst + row * S + col, W + (valid > 0 ? g * ldw + c : 0), CW, valid);
            row += drow, col += dcol;
            if (col >= cols) col -= cols, row++;
        }
    }
    tl_commit();
}

/* The rounds of a tile: issue(q) stages round q's weights into buffer q % TL_STAGES, body(q)
 * computes with them.  TL_STAGES - 1 rounds in flight: round q waits for its own copies (all
 * but the latest group done), then a barrier makes them visible and frees the buffer round
 * q - 1 read, which takes the copies of round q + TL_STAGES - 1.  Every thread of the block
 * calls it; it returns after a barrier. */
template <typename Issue, typename Body>
__device__ __forceinline__ void tl_rounds(int nq, Issue issue, Body body) {
    for (int q = 0; q < TL_STAGES - 1; q++)
        if (q < nq)
            issue(q);
        else
            tl_commit();
    for (int q = 0; q < nq; q++) {
        tl_wait_prev();
        __syncthreads();
        if (q + TL_STAGES - 1 < nq)
            issue(q + TL_STAGES - 1);
        else
            tl_commit();
        body(q);
    }
    __syncthreads();
}

/* The outputs a round of tile_linear or tile_linear1 takes: [jb, je) rounded up to whole warps,
 * at most `most` (the block's layout) */
__device__ __forceinline__ int tl_round_width(int jb, int je, int most) {
    const int wide = (je - jb + 31) / 32 * 32;
    return wide < most ? wide : most;
}

/* For each atom a < na of the tile and output j in [jb, je):
 *   v[k] = sum over r < K of W_{tl_wsel(k)}[j][r] x[a ldA + k ldK + r]   (trans 0: W row-major
 *          with row stride ldw), or of W_{tl_wsel(k)}[r][j] x[...]  (trans 1: the transposed
 *          product), for the NC components k,
 * each sum in r order, then store(a, j, v).  x in shared memory (written before the call); sW:
 * TL_STAGES tl.tile values of shared memory.  Every thread of the block calls it (barriers
 * inside; it returns after a barrier, with every store done). */
template <typename T, int NC, int NW, typename Store>
__device__ void tile_linear(const T *W0, const T *W1, const T *W2, int trans, int K, int ldw,
                            int jb, int je, const T *x, int ldA, int ldK, const atom_tile &tl,
                            T *sW, Store store) {
    /* warp w: atom w % NA, outputs 32 (w / NA) .. of a round of JW, the block's warps over the
     * tile's atoms, or fewer for a narrow output (the chunks of small systems): the rounds then
     * stage longer rows of fewer outputs, fewer rounds over K; the buffer's rows */
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, a = wp % tl.NA, sl = wp / tl.NA;
    const int JW = tl_round_width(jb, je, 32 * (int)(blockDim.x >> 5) / tl.NA), na = tl.na;
    const tl_shape sh = tl_shape_of<T>(trans, tl.tile, NW, JW);
    const int KR = sh.KR, S = sh.S;
    const int nk = (K + KR - 1) / KR, np = (je - jb + JW - 1) / JW, nq = nk * np;
    if (nq <= 0) return;
    const int tile = tl.tile;
    constexpr int V = 16 / sizeof(T);
    const int CW = tl_wide<T, NW>(W0, W1, W2, ldw, jb) ? V : 1;
    const bool vec = (uintptr_t)x % 16 == 0 && ldA % V == 0 && ldK % V == 0;
    /* round q: outputs jb + JW (q / nk) .., rows KR (q % nk) .. into buffer q % TL_STAGES */
    auto issue = [&](int q) {
        tl_issue<T, NW>(sW + (q % TL_STAGES) * tile, W0, W1, W2, trans, K, ldw, je, (q % nk) * KR,
                        jb + (q / nk) * JW, KR, JW, S, CW);
    };
    /* the weight of matrix b, staged row rr, for this thread's output: at w + b bs + rr rs */
    const int jj = 32 * sl + lane;
    const int bs = trans ? KR * S : JW * S, rs = trans ? S : 1;
    T acc[NC];
    tl_rounds(nq, issue, [&](int q) {
        const int kt = q % nk;
        if (kt == 0)
#pragma unroll
            for (int k = 0; k < NC; k++) acc[k] = 0;
        /* (a warp whose 32 outputs of the round all lie past je has nothing to store: the
         * narrow chunks of small systems leave half a block's warps so) */
        if (a < na && 32 * sl < JW && jb + (q / nk) * JW + 32 * sl < je) {
            const T *w = sW + (q % TL_STAGES) * tile + (trans ? jj : jj * S);
            const T *xa = x + (size_t)a * ldA + kt * KR;
            const int kn = K - kt * KR < KR ? K - kt * KR : KR;
            int rr = 0;
            if (vec) /* x in 16-byte pieces (one broadcast load each), the same sums */
                for (; rr + V <= kn; rr += V) {
                    tl_vec<T> xv[NC];
#pragma unroll
                    for (int k = 0; k < NC; k++) xv[k] = *(const tl_vec<T> *)(xa + k * ldK + rr);
                    tl_vec<T> wv[NW];
                    if (trans) {
#pragma unroll
                        for (int b = 0; b < NW; b++)
#pragma unroll
                            for (int u = 0; u < V; u++) wv[b].v[u] = w[b * bs + (rr + u) * S];
                    } else {
#pragma unroll
                        for (int b = 0; b < NW; b++) wv[b] = *(const tl_vec<T> *)(w + b * bs + rr);
                    }
#pragma unroll
                    for (int u = 0; u < V; u++)
#pragma unroll
                        for (int k = 0; k < NC; k++)
                            acc[k] += wv[tl_wsel<NC>(k)].v[u] * xv[k].v[u];
                }
            for (; rr < kn; rr++) {
                T wr[NW];
#pragma unroll
                for (int b = 0; b < NW; b++) wr[b] = w[b * bs + rr * rs];
#pragma unroll
                for (int k = 0; k < NC; k++) acc[k] += wr[tl_wsel<NC>(k)] * xa[k * ldK + rr];
            }
            const int j = jb + (q / nk) * JW + jj;
            if (kt == nk - 1 && j < je) store(a, j, (const T *)acc);
        }
    });
}

/* tile_linear's plain linear (one matrix W, NC 1) with the block's threads over the outputs:
 * thread t computes output j0 + t % JW of a round for the atoms g, g + G, ... of the tile (group
 * g = t / JW of G = blockDim.x / JW; each weight read from shared memory once per group, not once
 * per warp), the rounds staging as many rows of JW = blockDim.x outputs (fewer, whole warps, for
 * a narrow output: then the other groups take the other atoms instead of idling) as the buffers
 * hold.  The same sums, in the same order.  RA: the atoms a thread takes, at least those of the
 * tile's groups (tile_linear1 picks it); a thread with fewer sums its last atom again in the
 * spare accumulators (no branch per atom in the inner loop) and stores only its own. */
template <typename T, int RA, typename Store>
__device__ void tile_linear1_ra(const T *W, int trans, int K, int ldw, int jb, int je, const T *x,
                                int ldA, const atom_tile &tl, T *sW, int JW, Store store) {
    const int na = tl.na;
    const tl_shape sh = tl_shape_of<T>(trans, tl.tile, 1, JW);
    const int KR = sh.KR, S = sh.S;
    const int nk = (K + KR - 1) / KR, np = (je - jb + JW - 1) / JW, nq = nk * np;
    if (nq <= 0) return;
    const int tile = tl.tile;
    constexpr int V = 16 / sizeof(T);
    const int CW = tl_wide<T, 1>(W, W, W, ldw, jb) ? V : 1;
    const bool vec = (uintptr_t)x % 16 == 0 && ldA % V == 0;
    auto issue = [&](int q) {
        tl_issue<T, 1>(sW + (q % TL_STAGES) * tile, W, W, W, trans, K, ldw, je, (q % nk) * KR,
                       jb + (q / nk) * JW, KR, JW, S, CW);
    };
    /* this thread's output in a round, its group and the groups (whole warps); its atoms
     * g + i G (i < own), their rows of x (the last one's again past own) */
    const int G = (int)blockDim.x / JW, g = (int)threadIdx.x / JW, t = (int)threadIdx.x % JW;
    const int own = g < G && g < na ? (na - g + G - 1) / G : 0;
    const int rs = trans ? S : 1;
    int xo[RA];
#pragma unroll
    for (int i = 0; i < RA; i++) xo[i] = (g + (i < own ? i : own > 0 ? own - 1 : 0) * G) * ldA;
    T acc[RA];
    tl_rounds(nq, issue, [&](int q) {
        const int kt = q % nk;
        if (kt == 0)
#pragma unroll
            for (int i = 0; i < RA; i++) acc[i] = 0;
        /* (nothing to store: no atom, or the warp's 32 outputs of the round all past je) */
        if (own <= 0 || jb + (q / nk) * JW + (t & ~31) >= je) return;
        const T *w = sW + (q % TL_STAGES) * tile + (trans ? t : t * S);
        const T *xk = x + kt * KR;
        const int kn = K - kt * KR < KR ? K - kt * KR : KR;
        int rr = 0;
        if (vec)
            for (; rr + V <= kn; rr += V) {
                tl_vec<T> wv;
                if (trans) {
#pragma unroll
                    for (int u = 0; u < V; u++) wv.v[u] = w[(rr + u) * S];
                } else {
                    wv = *(const tl_vec<T> *)(w + rr);
                }
#pragma unroll
                for (int i = 0; i < RA; i++) {
                    const tl_vec<T> xv = *(const tl_vec<T> *)(xk + xo[i] + rr);
#pragma unroll
                    for (int u = 0; u < V; u++) acc[i] += wv.v[u] * xv.v[u];
                }
            }
        for (; rr < kn; rr++) {
            const T wr = w[rr * rs];
#pragma unroll
            for (int i = 0; i < RA; i++) acc[i] += wr * xk[xo[i] + rr];
        }
        const int j = jb + (q / nk) * JW + t;
        if (kt == nk - 1 && j < je) {
            /* one copy of the store's code, not RA (it runs once per output); the loop indexes
             * a copy, res, so that acc stays in registers */
            T res[RA];
#pragma unroll
            for (int i = 0; i < RA; i++) res[i] = acc[i];
#pragma unroll 1
            for (int i = 0; i < own; i++) store(g + i * G, j, (const T *)&res[i]);
        }
    });
}

/* tile_linear1_ra with the fewest atoms a thread (1, 2, 4 or 8) that cover a full tile's */
template <typename T, typename Store>
__device__ void tile_linear1(const T *W, int trans, int K, int ldw, int jb, int je, const T *x,
                             int ldA, const atom_tile &tl, T *sW, Store store) {
    /* outputs a round: the block's threads, or fewer (whole warps) for a narrow output */
    const int JW = tl_round_width(jb, je, (int)blockDim.x);
    const int G = (int)blockDim.x / JW, ra = (tl.NA + G - 1) / G;
    if (ra <= 1)
        tile_linear1_ra<T, 1>(W, trans, K, ldw, jb, je, x, ldA, tl, sW, JW, store);
    else if (ra <= 2)
        tile_linear1_ra<T, 2>(W, trans, K, ldw, jb, je, x, ldA, tl, sW, JW, store);
    else if (ra <= 4)
        tile_linear1_ra<T, 4>(W, trans, K, ldw, jb, je, x, ldA, tl, sW, JW, store);
    else
        tile_linear1_ra<T, 8>(W, trans, K, ldw, jb, je, x, ldA, tl, sW, JW, store);
}

/* mean and 1/sqrt(var + 1e-5) of x[0..n) (shared), the CPU's two passes, in one warp (all its
 * lanes call it) */
template <typename T> __device__ void warp_ln_stats(int n, const T *x, T *mu, T *rstd) {
    const int lane = threadIdx.x & 31;
    T s = 0;
    for (int i = lane; i < n; i += 32) s += x[i];
    const T m = warp_sum(s) / (T)n;
    T v = 0;
    for (int i = lane; i < n; i += 32) v += (x[i] - m) * (x[i] - m);
    const T var = warp_sum(v) / (T)n;
    *mu = m;
    *rstd = (T)1 / t_sqrt(var + (T)1e-5);
}

/* The tile's atoms' X0 into shared memory (rows PA apart): with c, its components [10F] per atom;
 * with t, its squared norm per channel; the block's threads over the atoms' channels */
template <typename T>
__device__ __forceinline__ void tile_decomp(const T *X0, int64_t a0, int na, int F, int PA, T *c,
                                            T *t) {
    for (int idx = threadIdx.x; idx < na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        const T *X = X0 + (size_t)(a0 + a) * 9 * F + f;
        T x[9], cc[10], s = 0;
        for (int k = 0; k < 9; k++) x[k] = X[k * F];
        for (int k = 0; k < 9; k++) s += x[k] * x[k];
        if (t) t[a * PA + f] = s;
        if (!c) continue;
        t_decomp(x, cc);
        for (int k = 0; k < 10; k++) c[a * PA + k * F + f] = cc[k];
    }
}

/* ==== tn_atom_embed ==== */
/* shared memory per atom: t[F], av[F], s1[2F], gate[3F], c[10F] */
template <typename T>
__global__ void atom_embed_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg, const T *X0,
                                  const T *norm_w, const T *norm_b, const T *ls_w0,
                                  const T *ls_b0, const T *ls_w1, const T *ls_b1, const T *lt0,
                                  const T *lt1, const T *lt2, T *z1a, T *z2a, T *X1) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *sa = sW + TL_STAGES * cfg.tile;
    const int F = d.F, PA = 17 * F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    T *t = sa, *av = t + F, *s1 = av + F, *gate = s1 + 2 * F, *c = gate + 3 * F;
    tile_decomp(X0, a0, tl.na, F, PA, c, t);
    __syncthreads();
    const int w = threadIdx.x >> 5;
    if (w < tl.na) {
        T mu, rstd;
        warp_ln_stats(F, t + w * PA, &mu, &rstd);
        for (int f = threadIdx.x & 31; f < F; f += 32)
            av[w * PA + f] = (t[w * PA + f] - mu) * rstd * norm_w[f] + norm_b[f];
    }
    /* the gates: z1 (every chunk's block computes all of it, the first one writes it), then the
     * chunk's channels of z2's three blocks */
    tile_linear1<T>(ls_w0, 0, F, F, 0, 2 * F, av, PA, tl, sW,
                    [&](int a, int j, const T *v) {
                        const T z = v[0] + ls_b0[j];
                        if (blockIdx.y == 0) z1a[(size_t)(a0 + a) * 2 * F + j] = z;
                        s1[a * PA + j] = t_act_call<T>(d.activation, z, NULL);
                    });
    for (int b = 0; b < 3; b++)
        tile_linear1<T>(ls_w1, 0, 2 * F, 2 * F, b * F + tl.cb, b * F + tl.ce,
                        s1, PA, tl, sW, [&](int a, int j, const T *v) {
                            const T z = v[0] + ls_b1[j];
                            z2a[(size_t)(a0 + a) * 3 * F + j] = z;
                            gate[a * PA + j] = t_act_call<T>(d.activation, z, NULL);
                        });
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 0, F, F, tl.cb, tl.ce, c, PA, F, tl, sW,
                          [&](int a, int j, const T *v) {
                              T cl[10], x[9];
                              for (int k = 0; k < 10; k++)
                                  cl[k] = v[k] * gate[a * PA + blk_of(k) * F + j];
                              t_comp(cl, x);
                              T *out = X1 + (size_t)(a0 + a) * 9 * F + j;
                              for (int k = 0; k < 9; k++) out[k * F] = x[k];
                          });
}

/* tn_atom_embed_back's steps, shared by its one-kernel and two-kernel forms.  Per channel j:
 * from the recomputed lin3 outputs cl and g = dE/dX1, the gated components' gradient gcs and the
 * gates' gradient ggate (rows ldc and ldg apart) */
template <typename T>
__device__ __forceinline__ void eb_gate_grads(const nnpops__tn_dims &d, int64_t at, int F, int j,
                                              const T *cl, const T *gall, const T *z2a, T *gcs,
                                              int ldc, T *ggate, int ldg) {
    const T *g = gall + (size_t)at * 9 * F + j;
    const T *z2 = z2a + (size_t)at * 3 * F + j;
    T gx[9], gc[10], gate[3], dv[3], gg[3] = {0, 0, 0};
    for (int k = 0; k < 9; k++) gx[k] = g[k * F];
    t_comp_T(gx, gc);
    for (int b = 0; b < 3; b++) gate[b] = t_act_call<T>(d.activation, z2[b * F], &dv[b]);
    for (int k = 0; k < 10; k++) {
        gg[blk_of(k)] += gc[k] * cl[k];
        gcs[k * ldc + j] = gc[k] * gate[blk_of(k)];
    }
    for (int b = 0; b < 3; b++) ggate[b * ldg + j] = gg[b] * dv[b];
}

/* the gate network's backward, ggate -> gs1 -> ga, then the LayerNorm's: ga becomes dE/dt (t:
 * |X0|^2 per channel; z1: the tile's first atom's pre-activations).  Every thread of the block
 * calls it. */
template <typename T>
__device__ __forceinline__ void eb_gate_net_back(const nnpops__tn_dims &d, int F, int PA,
                                                 const atom_tile &tl, T *sW, const T *norm_w,
                                                 const T *ls_w0, const T *ls_w1, const T *z1,
                                                 const T *t, const T *ggate, T *gs1, T *ga) {
    tile_linear1<T>(ls_w1, 1, 3 * F, 2 * F, 0, 2 * F, ggate, PA, tl, sW,
                    [&](int a, int j, const T *v) {
                        T dv;
                        t_act_call<T>(d.activation, z1[(size_t)a * 2 * F + j], &dv);
                        gs1[a * PA + j] = v[0] * dv;
                    });
    tile_linear1<T>(ls_w0, 1, 2 * F, F, 0, F, gs1, PA, tl, sW,
                    [&](int a, int j, const T *v) { ga[a * PA + j] = v[0]; });
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (w < tl.na) {
        const T *tw = t + w * PA;
        T *gw = ga + w * PA;
        T mu, rstd;
        warp_ln_stats(F, tw, &mu, &rstd);
        T m1 = 0, m2 = 0;
        for (int f = lane; f < F; f += 32) {
            const T gh = gw[f] * norm_w[f], xh = (tw[f] - mu) * rstd;
            m1 += gh;
            m2 += gh * xh;
        }
        m1 = warp_sum(m1) / (T)F;
        m2 = warp_sum(m2) / (T)F;
        for (int f = lane; f < F; f += 32) {
            const T xh = (tw[f] - mu) * rstd;
            gw[f] = rstd * (gw[f] * norm_w[f] - m1 - xh * m2);
        }
    }
}

/* channel j of an atom's dE/dX0 from the transposed lin3's outputs gcl and dE/dt gt (X, g: the
 * atom's rows) */
template <typename T>
__device__ __forceinline__ void eb_out(int F, int j, const T *gcl, const T *X, T gt, T *g) {
    T v[9];
    t_decomp_T(gcl, v);
    for (int k = 0; k < 9; k++) g[k * F + j] = v[k] + (T)2 * X[k * F + j] * gt;
}

/* ==== tn_atom_embed_back (one chunk: g is read whole, then written, in place) ==== */
/* shared memory per atom: c[10F], gc[10F], ggate[3F], gs1[2F], ga[F], t[F] */
template <typename T>
__global__ void atom_embed_back_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg, const T *X0,
                                       const T *norm_w, const T *norm_b, const T *ls_w0,
                                       const T *ls_w1, const T *lt0, const T *lt1, const T *lt2,
                                       const T *z1a, const T *z2a, T *gall) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *sa = sW + TL_STAGES * cfg.tile;
    const int F = d.F, PA = 27 * F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    T *c = sa, *gcs = c + 10 * F, *ggate = gcs + 10 * F, *gs1 = ggate + 3 * F, *ga = gs1 + 2 * F,
      *t = ga + F;
    tile_decomp(X0, a0, tl.na, F, PA, c, t);
    /* per channel: the gates' gradient and the gated components' gradient */
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 0, F, F, 0, F, c, PA, F, tl, sW,
                          [&](int a, int j, const T *cl) {
                              eb_gate_grads<T>(d, a0 + a, F, j, cl, gall, z2a, gcs + a * PA, F,
                                               ggate + a * PA, F);
                          });
    eb_gate_net_back<T>(d, F, PA, tl, sW, norm_w, ls_w0, ls_w1, z1a + (size_t)a0 * 2 * F, t,
                        ggate, gs1, ga);
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 1, F, F, 0, F, gcs, PA, F, tl, sW,
                          [&](int a, int j, const T *gcl) {
                              eb_out<T>(F, j, gcl, X0 + (size_t)(a0 + a) * 9 * F, ga[a * PA + j],
                                        gall + (size_t)(a0 + a) * 9 * F);
                          });
}

/* ==== tn_atom_embed_back in two kernels over chunks of channels (small systems) ====
 * The one-kernel form runs on one block per tile: its gate network and LayerNorm need every
 * channel of the gates' gradient.  With few atoms the tiles are too few to fill the GPU, so the
 * work splits where the channels meet: the first kernel computes, per chunk of channels, the
 * gated components' gradient gcs [n][10F] and the gates' gradient ggate [n][3F] (each block its
 * chunk of both, to the work space); the second, per chunk, the gate network's and the
 * LayerNorm's backward from the whole ggate (every chunk's block the same values) and then its
 * chunk of the transposed lin3 from the whole gcs.  The same sums, in the same order, as the
 * one kernel. */

/* shared memory per atom: c[10F] */
template <typename T>
__global__ void atom_embed_back_gates_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg,
                                             const T *X0, const T *lt0, const T *lt1,
                                             const T *lt2, const T *z2a, const T *gall,
                                             T *gcs_all, T *gg_all) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *c = sW + TL_STAGES * cfg.tile;
    const int F = d.F, PA = 10 * F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    tile_decomp(X0, a0, tl.na, F, PA, c, (T *)NULL);
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 0, F, F, tl.cb, tl.ce, c, PA, F, tl, sW,
                          [&](int a, int j, const T *cl) {
                              const int64_t at = a0 + a;
                              eb_gate_grads<T>(d, at, F, j, cl, gall, z2a,
                                               gcs_all + (size_t)at * 10 * F, F,
                                               gg_all + (size_t)at * 3 * F, F);
                          });
}

/* shared memory per atom: gcs[10F], ggate[3F], gs1[2F], ga[F], t[F] */
template <typename T>
__global__ void atom_embed_back_lin_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg,
                                           const T *X0, const T *norm_w, const T *ls_w0,
                                           const T *ls_w1, const T *lt0, const T *lt1,
                                           const T *lt2, const T *z1a, const T *gcs_all,
                                           const T *gg_all, T *gall) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *sa = sW + TL_STAGES * cfg.tile;
    const int F = d.F, PA = 17 * F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    T *gcs = sa, *ggate = gcs + 10 * F, *gs1 = ggate + 3 * F, *ga = gs1 + 2 * F, *t = ga + F;
    tile_decomp(X0, a0, tl.na, F, PA, (T *)NULL, t);
    for (int idx = threadIdx.x; idx < tl.na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        const T *gc = gcs_all + (size_t)(a0 + a) * 10 * F + f;
        for (int k = 0; k < 10; k++) gcs[a * PA + k * F + f] = gc[k * F];
        const T *gg = gg_all + (size_t)(a0 + a) * 3 * F + f;
        for (int b = 0; b < 3; b++) ggate[a * PA + b * F + f] = gg[b * F];
    }
    __syncthreads();
    eb_gate_net_back<T>(d, F, PA, tl, sW, norm_w, ls_w0, ls_w1, z1a + (size_t)a0 * 2 * F, t,
                        ggate, gs1, ga);
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 1, F, F, tl.cb, tl.ce, gcs, PA, F, tl, sW,
                          [&](int a, int j, const T *gcl) {
                              eb_out<T>(F, j, gcl, X0 + (size_t)(a0 + a) * 9 * F, ga[a * PA + j],
                                        gall + (size_t)(a0 + a) * 9 * F);
                          });
}

/* ==== tn_layer_pre ==== */
/* shared memory per atom: c[10F] */
template <typename T>
__global__ void layer_pre_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg, const T *Xa,
                                 const T *lt0, const T *lt1, const T *lt2, T *nrma, T *cYa) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *c = sW + TL_STAGES * cfg.tile;
    const int F = d.F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    for (int idx = threadIdx.x; idx < tl.na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        const T *X = Xa + (size_t)(a0 + a) * 9 * F + f;
        T x[9], s = 0, cc[10];
        for (int k = 0; k < 9; k++) x[k] = X[k * F];
        for (int k = 0; k < 9; k++) s += x[k] * x[k];
        s += 1;
        if (f >= tl.cb && f < tl.ce) nrma[(size_t)(a0 + a) * F + f] = s;
        for (int k = 0; k < 9; k++) x[k] = x[k] / s;
        t_decomp(x, cc);
        for (int k = 0; k < 10; k++) c[a * 10 * F + k * F + f] = cc[k];
    }
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 0, F, F, tl.cb, tl.ce, c, 10 * F, F, tl, sW,
                          [&](int a, int j, const T *cl) {
                              T *y = cYa + (size_t)(a0 + a) * 10 * F + j;
                              for (int k = 0; k < 10; k++) y[k * F] = cl[k];
                          });
}

/* ==== tn_layer_pre_back ==== */
/* shared memory per atom: gcY's components [10F] */
template <typename T>
__global__ void layer_pre_back_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg, const T *Xa,
                                      const T *nrma, const T *lt0, const T *lt1, const T *lt2,
                                      const T *gcY, T *gall) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *gs = sW + TL_STAGES * cfg.tile;
    const int F = d.F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    for (int k = threadIdx.x; k < tl.na * 10 * F; k += blockDim.x)
        gs[k] = gcY[(size_t)a0 * 10 * F + k];
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 1, F, F, tl.cb, tl.ce, gs, 10 * F, F, tl, sW,
                          [&](int a, int j, const T *gcl) {
                              const T *X = Xa + (size_t)(a0 + a) * 9 * F + j;
                              T *g = gall + (size_t)(a0 + a) * 9 * F + j;
                              T v[9], gg[9], x[9];
                              t_decomp_T(gcl, v);
                              T dot = 0;
                              for (int k = 0; k < 9; k++) {
                                  gg[k] = g[k * F] + v[k];
                                  x[k] = X[k * F];
                              }
                              for (int k = 0; k < 9; k++) dot += gg[k] * x[k];
                              const T inv = (T)1 / nrma[(size_t)(a0 + a) * F + j];
                              for (int k = 0; k < 9; k++)
                                  g[k * F] = gg[k] * inv - (T)2 * x[k] * dot * inv * inv;
                          });
}

/* ==== tn_message: a block per center ==== */
/* The messages' sum of center c (a block per center, its threads over the channels, the
 * center's entries in list order): out_c[k] = base + self_h[blk(k)] src_c[k] + sum over its
 * entries of h_blk(k)(pair) src_j[k] (the pair's edge factors h = act(Z + bias) fc, per
 * channel), with src = Y and base 0 (BACK false: the messages M) or src = dE/dM and base out_c[k]
 * itself (BACK true: dE/dY, in place).  ACT >= 0: the model's activation, fixed at compile time
 * (TN_ACT_KERNEL), -1: any, chosen per call.  The loads of MSG_BATCH entries go out before their
 * sums (a center's chain of entries is the kernel's latency where the centers are few). */
#define MSG_BATCH 4
template <typename T, bool BACK, int ACT>
__global__ void message_kernel(nnpops__tn_dims d, const int64_t *start, const int32_t *pairs,
                               int64_t capacity, const uint8_t *mask, const int32_t *slot,
                               const T *Z, const T *bias, const T *fcP, const T *self_h,
                               const T *src, T *out) {
    tn_kernel_start();
    const int64_t c = blockIdx.x;
    const int F = d.F;
    const int64_t e0 = start[c], e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    __shared__ int32_t sq[TN_CHUNK];
    __shared__ int32_t sj[TN_CHUNK];
    T *oc = out + (size_t)c * 10 * F;
    for (int f0 = 0; f0 < F; f0 += blockDim.x) { /* (the same passes for every thread) */
        const int f = f0 + threadIdx.x;
        const bool on = f < F;
        T m[10], b[3] = {0, 0, 0};
        if (on) {
            const T *sc = src + (size_t)c * 10 * F;
            for (int k = 0; k < 3; k++) b[k] = bias[k * F + f];
            for (int k = 0; k < 10; k++)
                m[k] = (BACK ? oc[k * F + f] : (T)0) + self_h[blk_of(k) * F + f] * sc[k * F + f];
        }
        for (int64_t cb = e0; cb < e1; cb += blockDim.x) {
            const int cnt = stage_entries(
                cb, e1, mask, slot, [&](int64_t e) { return pairs[2 * e + 1]; }, sq, sj);
            if (!on) continue;
            /* MSG_BATCH entries at a time: every load first, then the sums in entry order */
            for (int i0 = 0; i0 < cnt; i0 += MSG_BATCH) {
                T z[MSG_BATCH][3], fq[MSG_BATCH], y[MSG_BATCH][10];
#pragma unroll
                for (int u = 0; u < MSG_BATCH; u++) {
                    const int i = i0 + u;
                    if (i >= cnt || sq[i] < 0) continue;
                    const T *zq = Z + (size_t)sq[i] * 3 * F + f;
                    const T *nj = src + (size_t)sj[i] * 10 * F + f;
                    fq[u] = fcP[sq[i]];
#pragma unroll
                    for (int k = 0; k < 3; k++) z[u][k] = zq[k * F];
#pragma unroll
                    for (int k = 0; k < 10; k++) y[u][k] = nj[k * F];
                }
#pragma unroll
                for (int u = 0; u < MSG_BATCH; u++) {
                    const int i = i0 + u;
                    if (i >= cnt || sq[i] < 0) continue;
                    T h[3];
#pragma unroll
                    for (int k = 0; k < 3; k++)
                        h[k] = t_act<T>(ACT >= 0 ? ACT : d.activation, z[u][k] + b[k], NULL) *
                               fq[u];
                    m[0] += h[0] * y[u][0];
#pragma unroll
                    for (int k = 1; k < 4; k++) m[k] += h[1] * y[u][k];
#pragma unroll
                    for (int k = 4; k < 10; k++) m[k] += h[2] * y[u][k];
                }
            }
        }
        if (on)
            for (int k = 0; k < 10; k++) oc[k * F + f] = m[k];
    }
}

/* ==== tn_message_back ==== */
/* dE/dZ and dE/dfc per pair (both directions) through h = act(Z + bias) fc: blocks (c, s) over
 * the pairs center c holds, block s of gridDim.y taking every gridDim.y-th entry of c's list (the
 * center's gcM and cY rows read by few blocks, from cache; a few pairs per block, so that a small
 * molecule still fills the GPU), its threads over the channels, dE/dfc a block sum; then blocks
 * (x >= n_centers, 0) of GH_PAD_PAIRS pairs each for the pairs without an entry (zeros).  ACT as
 * for message_kernel. */
#define GH_PAD_PAIRS 64
#define GH_ENTRIES_PER_BLOCK 8
template <typename T, int ACT>
__global__ void message_gh_kernel(nnpops__tn_dims d, int64_t n_centers, const int64_t *start,
                                  const int32_t *pairs, int64_t capacity, const uint8_t *mask,
                                  const int32_t *slot, int64_t n_pairs, const int32_t *pentry,
                                  const T *cY, const T *gcM, const T *Z, const T *bias,
                                  const T *fcP, T *GH, int accumulate, T *gfc) {
    tn_kernel_start();
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
                const T a = t_act<T>(ACT >= 0 ? ACT : d.activation, z[b * F + f] + bias[b * F + f],
                                     &dv);
                gs += sb[b] * a;
                gh[b * F + f] = sb[b] * (dv * fq);
            }
        }
        gs = block_sum(gs, red);
        if (threadIdx.x == 0) gfc[p] = accumulate ? gfc[p] + gs : gs;
    }
}

/* ==== tn_layer_post, tn_layer_post_back ==== */
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

/* Y, M, C, Cn and nn of atom a's channel f from its components */
template <typename T>
__device__ inline void post_ymc(int so3, T qf, const T *cYa, const T *cMa, int F, int64_t a, int f,
                                T *Y, T *M, T *C, T *Cn, T *nn) {
    T cy[10], cm[10];
    for (int k = 0; k < 10; k++) {
        cy[k] = cYa[((size_t)a * 10 + k) * F + f];
        cm[k] = cMa[((size_t)a * 10 + k) * F + f];
    }
    t_comp(cy, Y);
    t_comp(cm, M);
    post_c(so3, qf, Y, M, C, Cn, nn);
}

/* The update (BACK false: Xout of X, nrm, cY, cM) and its gradient (BACK true: gcY and gcM of
 * g, cY, cM), which share C's components.  Shared memory per atom: c[10F] (and gc[10F] for
 * BACK). */
template <typename T, bool BACK>
__global__ void layer_post_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg,
                                  const double *charges, const int32_t *batch, const T *Xa,
                                  const T *nrma, const T *cYa, const T *cMa, const T *lt0,
                                  const T *lt1, const T *lt2, const T *gall, T *Xouta, T *gcYa,
                                  T *gcMa) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *c = sW + TL_STAGES * cfg.tile;
    const int F = d.F, PA = (BACK ? 20 : 10) * F;
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    for (int idx = threadIdx.x; idx < tl.na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        const T qf = qf_of<T>(charges, batch, a0 + a);
        T Y[9], M[9], C[9], Cn[9], nn, cc[10];
        post_ymc(d.so3, qf, cYa, cMa, F, a0 + a, f, Y, M, C, Cn, &nn);
        t_decomp(Cn, cc);
        for (int k = 0; k < 10; k++) c[a * PA + k * F + f] = cc[k];
    }
    if (!BACK) {
        tile_linear<T, 10, 3>(
            lt0, lt1, lt2, 0, F, F, tl.cb, tl.ce, c, PA, F, tl, sW,
            [&](int a, int j, const T *cl) {
                const int64_t at = a0 + a;
                const T qf = qf_of<T>(charges, batch, at);
                T D[9], Xo[9];
                t_comp(cl, D);
                t_mm(D, 0, D, 0, qf, Xo, 0);
                const T nr = nrma[(size_t)at * F + j];
                for (int k = 0; k < 9; k++)
                    Xouta[(at * 9 + k) * F + j] = Xo[k] + (Xa[(at * 9 + k) * F + j] / nr + D[k]);
            });
        return;
    }
    /* gD = g + qf (g D^T + D^T g) of every channel, its components to gc */
    T *gc = c + 10 * F;
    tile_linear<T, 10, 3>(lt0, lt1, lt2, 0, F, F, 0, F, c, PA, F, tl, sW,
                          [&](int a, int j, const T *cl) {
                              const int64_t at = a0 + a;
                              const T qf = qf_of<T>(charges, batch, at);
                              T D[9], g[9], gD[9], o[10];
                              t_comp(cl, D);
                              for (int k = 0; k < 9; k++)
                                  g[k] = gD[k] = gall[(at * 9 + k) * F + j];
                              t_mm(g, 0, D, 1, qf, gD, 1);
                              t_mm(D, 1, g, 0, qf, gD, 1);
                              t_comp_T(gD, o);
                              for (int k = 0; k < 10; k++) gc[a * PA + k * F + j] = o[k];
                          });
    tile_linear<T, 10, 3>(
        lt0, lt1, lt2, 1, F, F, tl.cb, tl.ce, gc, PA, F, tl, sW,
        [&](int a, int j, const T *gcl) {
            const int64_t at = a0 + a;
            const T qf = qf_of<T>(charges, batch, at);
            T gC[9], Y[9], M[9], C[9], Cn[9], nn, gY[9], gM[9], o[10];
            t_decomp_T(gcl, gC);
            post_ymc(d.so3, qf, cYa, cMa, F, at, j, Y, M, C, Cn, &nn);
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
            for (int k = 0; k < 10; k++) gcYa[(at * 10 + k) * F + j] = o[k];
            t_comp_T(gM, o);
            for (int k = 0; k < 10; k++) gcMa[(at * 10 + k) * F + j] = o[k];
        });
}

/* ==== tn_readout (one chunk) ==== */
struct readout_w {
    const void *norm_w, *norm_b, *lin_w, *lin_b;
    const void *out_w[16], *out_b[16];
};

/* the readout's widths: sum of the output layers' widths, the widest gradient (at least 3F),
 * both rounded up to multiples of 4 (16-byte pieces for tile_linear) */
__host__ __device__ inline void readout_widths(const nnpops__tn_dims &d, int *sum, int *wmax) {
    *sum = 0, *wmax = 3 * d.F;
    for (int k = 1; k <= d.n_out; k++) {
        *sum += d.out_width[k];
        if (d.out_width[k] > *wmax) *wmax = d.out_width[k];
    }
    *sum = (*sum + 3) / 4 * 4, *wmax = (*wmax + 3) / 4 * 4;
}
/* shared memory per atom: c[10F], x[3F], y[3F], zl[F], ra[F], pre[sum], post[sum], g1[wmax],
 * g2[wmax], stats[2], rounded up to a multiple of 4 */
__host__ __device__ inline int readout_per_atom(const nnpops__tn_dims &d) {
    int sum, wmax;
    readout_widths(d, &sum, &wmax);
    return (18 * d.F + 2 * sum + 2 * wmax + 2 + 3) / 4 * 4;
}

template <typename T>
__global__ void readout_kernel(nnpops__tn_dims d, int64_t n, tl_cfg cfg, int64_t n_local,
                               const T *Xa, readout_w rw, const int32_t *species,
                               const T *atomref, double *atom_energy, T *gall) {
    tn_kernel_start();
    extern __shared__ __align__(16) unsigned char tn_smem[];
    T *sW = (T *)tn_smem, *sa = sW + TL_STAGES * cfg.tile;
    const int F = d.F, PA = readout_per_atom(d);
    int sum, wmax;
    readout_widths(d, &sum, &wmax);
    const atom_tile tl = tile_of(n, F, cfg);
    const int64_t a0 = tl.a0;
    T *c = sa, *x = c + 10 * F, *y = x + 3 * F, *zl = y + 3 * F, *ra = zl + F, *pre = ra + F,
      *post = pre + sum, *g1 = post + sum, *g2 = g1 + wmax, *stats = g2 + wmax;
    const T *norm_w = (const T *)rw.norm_w, *norm_b = (const T *)rw.norm_b;
    const T *lin_w = (const T *)rw.lin_w, *lin_b = (const T *)rw.lin_b;
    for (int idx = threadIdx.x; idx < tl.na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        const T *X = Xa + (size_t)(a0 + a) * 9 * F + f;
        T xx[9], cc[10];
        for (int k = 0; k < 9; k++) xx[k] = X[k * F];
        t_decomp(xx, cc);
        for (int k = 0; k < 10; k++) c[a * PA + k * F + f] = cc[k];
        T i = cc[0];
        T av = cc[1] * cc[1] + cc[2] * cc[2] + cc[3] * cc[3];
        T sd = cc[4] * cc[4] + cc[5] * cc[5] + cc[6] * cc[6];
        T so = cc[7] * cc[7] + cc[8] * cc[8] + cc[9] * cc[9];
        x[a * PA + f] = (T)3 * i * i;
        x[a * PA + F + f] = (T)2 * av;
        x[a * PA + 2 * F + f] = sd + (T)2 * so;
    }
    __syncthreads();
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (w < tl.na) {
        T mu, rstd;
        warp_ln_stats(3 * F, x + w * PA, &mu, &rstd);
        for (int k = lane; k < 3 * F; k += 32)
            y[w * PA + k] = (x[w * PA + k] - mu) * rstd * norm_w[k] + norm_b[k];
        if (lane == 0) stats[w * PA] = mu, stats[w * PA + 1] = rstd;
    }
    tile_linear1<T>(lin_w, 0, 3 * F, 3 * F, 0, F, y, PA, tl, sW,
                    [&](int a, int j, const T *v) {
                        const T z = v[0] + lin_b[j];
                        zl[a * PA + j] = z;
                        ra[a * PA + j] = t_act_call<T>(d.activation, z, NULL);
                    });
    const T *cur = ra;
    int off = 0;
    for (int k = 0; k < d.n_out; k++) {
        const int ni = d.out_width[k], no = d.out_width[k + 1];
        const T *ob = (const T *)rw.out_b[k];
        const bool last = k == d.n_out - 1;
        tile_linear1<T>((const T *)rw.out_w[k], 0, ni, ni, 0, no, cur, PA, tl, sW,
                        [&](int a, int j, const T *v) {
                            const T p = v[0] + ob[j];
                            pre[a * PA + off + j] = p;
                            post[a * PA + off + j] =
                                last ? p : t_act_call<T>(d.activation, p, NULL);
                        });
        cur = post + off;
        off += no;
    }
    if (w < tl.na && lane == 0) {
        const int64_t at = a0 + w;
        double en = (double)cur[w * PA] * d.std;
        if (atomref) en += (double)atomref[species[at]];
        atom_energy[at] = at < n_local ? en : 0.0;
    }
    if (!gall) return;
    /* backward: seed -> readout MLP -> act(zl) -> linear -> LayerNorm -> x -> X */
    int offs[17];
    offs[0] = 0;
    for (int k = 0; k < d.n_out; k++) offs[k + 1] = offs[k] + d.out_width[k + 1];
    T *gcur = g1;
    if (w < tl.na && lane == 0) gcur[w * PA] = (T)((a0 + w < n_local ? 1.0 : 0.0) * d.std);
    __syncthreads();
    for (int k = d.n_out - 1; k >= 0; k--) {
        const int ni = d.out_width[k], no = d.out_width[k + 1];
        if (k < d.n_out - 1) {
            for (int idx = threadIdx.x; idx < tl.na * no; idx += blockDim.x) {
                const int a = idx / no, o = idx % no;
                T dv;
                t_act_call<T>(d.activation, pre[a * PA + offs[k] + o], &dv);
                gcur[a * PA + o] *= dv;
            }
        }
        T *gnext = gcur == g1 ? g2 : g1;
        tile_linear1<T>((const T *)rw.out_w[k], 1, no, ni, 0, ni, gcur, PA, tl, sW,
                        [&](int a, int j, const T *v) { gnext[a * PA + j] = v[0]; });
        gcur = gnext;
    }
    for (int idx = threadIdx.x; idx < tl.na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        T dv;
        t_act_call<T>(d.activation, zl[a * PA + f], &dv);
        gcur[a * PA + f] *= dv;
    }
    T *gy = gcur == g1 ? g2 : g1;
    tile_linear1<T>(lin_w, 1, F, 3 * F, 0, 3 * F, gcur, PA, tl, sW,
                    [&](int a, int j, const T *v) { gy[a * PA + j] = v[0]; });
    if (w < tl.na) {
        const T mu = stats[w * PA], rstd = stats[w * PA + 1];
        T m1 = 0, m2 = 0;
        for (int k = lane; k < 3 * F; k += 32) {
            const T gh = gy[w * PA + k] * norm_w[k], xh = (x[w * PA + k] - mu) * rstd;
            m1 += gh;
            m2 += gh * xh;
        }
        m1 = warp_sum(m1) / (T)(3 * F);
        m2 = warp_sum(m2) / (T)(3 * F);
        /* gy becomes dE/dx (each lane its own entries) */
        for (int k = lane; k < 3 * F; k += 32) {
            const T xh = (x[w * PA + k] - mu) * rstd;
            gy[w * PA + k] = rstd * (gy[w * PA + k] * norm_w[k] - m1 - xh * m2);
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < tl.na * F; idx += blockDim.x) {
        const int a = idx / F, f = idx % F;
        const T *ca = c + a * PA, *gx = gy + a * PA;
        T gc[10], v[9];
        gc[0] = (T)6 * ca[f] * gx[f];
        for (int k = 1; k < 4; k++) gc[k] = (T)4 * ca[k * F + f] * gx[F + f];
        for (int k = 4; k < 7; k++) gc[k] = (T)2 * ca[k * F + f] * gx[2 * F + f];
        for (int k = 7; k < 10; k++) gc[k] = (T)4 * ca[k * F + f] * gx[2 * F + f];
        t_decomp_T(gc, v);
        T *g = gall + (size_t)(a0 + a) * 9 * F + f;
        for (int k = 0; k < 9; k++) g[k * F] = v[k];
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

/* tn_embed_channel.h's channel function in both precisions (overloads) */
#define TN_EC eb_channel_of
#define TN_EC_HD __host__ __device__
#define REAL float
#include "potentials/tensornet/tn_embed_channel.h"
#undef REAL
#define REAL double
#include "potentials/tensornet/tn_embed_channel.h"
#undef REAL
#undef TN_EC
#undef TN_EC_HD

/* Channel f of one entry: its dE/du and dE/dfc terms into s, its dE/d dk terms added to gd[3]
 * (k: the pair's projections of channel f with their bias). */
template <typename T>
__device__ inline void eb_channel(int F, int f, T fce, const T *k, eb_entry<T> &s, T *gd) {
    const T zij = s.p1[f] + s.p2[f];
    T t[3];
    eb_channel_of(F, f, s.G, s.u, s.uu, zij, fce * zij, k, s.gu, &s.gfc, t);
    for (int c = 0; c < 3; c++) gd[c] += t[c];
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
    tn_kernel_start();
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
    tn_kernel_start();
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

/* ==== tn_finish: a warp per center, its lanes over the center's entries (the ZBL energies
 * summed per lane in entry order, then over the lanes in a fixed tree) ==== */
template <typename T>
__global__ void finish_kernel(nnpops__tn_dims d, nnpops__tn_zbl_dev zbl, const int32_t *zbl_z,
                              int64_t n_centers, int64_t n_local, const int64_t *start,
                              const int32_t *pairs, int64_t capacity, const int32_t *species,
                              const T *ev, const T *er, const uint8_t *mask, const T *gu,
                              const T *gr, const int32_t *slot, const int32_t *pentry,
                              const T *grP, double mean, const int32_t *batch,
                              const int32_t *sys_count, double *atom_energy, double *pair_grad) {
    tn_kernel_start();
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (c >= n_centers) return; /* whole warps leave together */
    const bool local = c < n_local;
    double en = 0.0;
    const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
    for (int64_t e = start[c] + lane; e < e1; e += 32) {
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
    en = warp_sum(en);
    if (local && lane == 0)
        atom_energy[c] = (atom_energy[c] + en) + mean / (double)sys_count[batch[c]];
}

/* ==== tn_count: one block (zero, barrier, count; integer atomics: any order gives the same) ==== */
__global__ void count_kernel(int64_t n, int64_t n_systems, const int32_t *batch,
                             int32_t *sys_count) {
    tn_kernel_start();
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
    tn_kernel_start();
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
    tn_kernel_start();
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (c >= n_centers) return; /* whole warps leave together */
    const int32_t k = warp_count_pairs(c, start, pairs, capacity, vec, mask);
    if ((threadIdx.x & 31) == 0) count[c] = k;
}

/* exclusive prefix sums of count[0 .. n) in place, count[n] = the total: one block of 1024
 * threads, each summing a contiguous chunk */
__global__ void pairs_scan_kernel(int64_t n, int32_t *count) {
    tn_kernel_start();
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
    tn_kernel_start();
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
    tn_kernel_start();
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
    tn_kernel_start();
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

/* ---- launching the per-atom kernels ---- */
#define TN_SMEM_MAX (227 * 1024) /* the most shared memory a block of sm_90 takes */

/* The most shared memory a block may opt in to on the current device (48 KiB when the device
 * does not say), at most TN_SMEM_MAX. */
inline size_t tn_smem_limit() {
    const int v = device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, 48 * 1024);
    return v < TN_SMEM_MAX ? (size_t)v : (size_t)TN_SMEM_MAX;
}

/* A per-atom launch: tiles x chunks blocks of TN_ATOM_THREADS threads, its shape cfg, bytes of
 * shared memory. */
struct atom_launch {
    tl_cfg cfg;
    unsigned tiles, chunks;
    size_t bytes;
};

/* Forced tiles (nnpops__tn_atom_tiles_cuda; 0: chosen by the launch). */
int g_tile_atoms = 0, g_tile_chunks = 0, g_tile_scale = 0;

/* The launch of a per-atom kernel whose block takes TL_STAGES weight buffers and per_atom values
 * of T per atom of shared memory: NA atoms a block, 2 below 64 atoms, 4 below 512, else 8 (each
 * block streams every weight once, so more atoms a block pay where the blocks are many; a small
 * system's few atoms go to more blocks instead), halved until the block fits; the output channels
 * (chunked) in chunks of whole warps, enough for about 256 blocks; buffers of 4 TL_TILE up to 128
 * blocks, 2 up to 256, else 1 (fewer, longer rounds where the blocks are too few to fill the GPU;
 * blocks that share a multiprocessor where they are many), halved until the block fits in the
 * device's shared memory.  The kernel may take all the shared memory a block can have (launches
 * of every size stay valid, graphs too). */
template <typename T>
nnpops_status atom_plan(const void *kernel, int64_t n, int F, size_t per_atom, int chunked,
                        const char *what, atom_launch *p) {
    const size_t fixed = (size_t)TL_STAGES * TL_TILE, limit = tn_smem_limit();
    if ((fixed + per_atom) * sizeof(T) > limit)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "tensornet on the GPU: the %s needs %zu bytes of shared memory per "
                            "block (this device gives at most %zu: a smaller "
                            "embedding_dimension)",
                            what, (fixed + per_atom) * sizeof(T), limit);
    int na = g_tile_atoms ? g_tile_atoms : n < 64 ? 2 : n < 512 ? 4 : 8;
    while (na > 1 && (fixed + na * per_atom) * sizeof(T) > limit) na /= 2;
    const int64_t tiles = (n + na - 1) / na;
    if (tiles > 0x7fffffff)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "tensornet on the GPU: %lld atoms",
                            (long long)n);
    const int slices = (F + 31) / 32;
    int64_t chunks = 1;
    if (chunked) {
        chunks = g_tile_chunks ? g_tile_chunks : (256 + tiles - 1) / tiles;
        if (chunks > slices) chunks = slices;
        if (chunks < 1) chunks = 1;
    }
    const int per = (int)((slices + chunks - 1) / chunks);
    const int64_t blocks = tiles * ((slices + per - 1) / per);
    int scale = g_tile_scale ? g_tile_scale : blocks <= 128 ? 4 : blocks <= 256 ? 2 : 1;
    while (scale > 1 && (scale * fixed + na * per_atom) * sizeof(T) > limit) scale /= 2;
    p->cfg.na = na;
    p->cfg.cw = chunked ? 32 * per : F;
    p->cfg.tile = scale * TL_TILE;
    p->tiles = (unsigned)tiles;
    p->chunks = (unsigned)(chunked ? (slices + per - 1) / per : 1);
    p->bytes = (scale * fixed + (size_t)na * per_atom) * sizeof(T);
    return set_dynamic_smem(kernel, limit);
}

template <typename T>
nnpops_status atom_embed(const nnpops__tn_dims *d, int64_t n, const T *X0, const T *norm_w,
                         const T *norm_b, const T *const ls_w[2], const T *const ls_b[2],
                         const T *const lt[3], T *z1, T *z2, T *X1, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    atom_launch p;
    NNPOPS__TRY(atom_plan<T>((const void *)atom_embed_kernel<T>, n, d->F, 17 * (size_t)d->F, 1,
                             "embedding", &p));
    NNPOPS__TRY(tn_launch(atom_embed_kernel<T>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS, p.bytes,
                          stream, "tensornet embedding gates", *d, n, p.cfg, X0, norm_w, norm_b,
                          ls_w[0], ls_b[0], ls_w[1], ls_b[1], lt[0], lt[1], lt[2], z1, z2, X1));
    return NNPOPS_OK;
}

/* tn_atom_embed_back's two-kernel runs (nnpops__tn_embed_back_split_cuda) */
int g_eb_split = 0;

/* Two kernels, through the work space gcs [n][10F] and ggate [n][3F], where the tiles are few
 * (under TN_EB_SPLIT_TILES) and the plan would split the channels over blocks: a small system,
 * whose one kernel would run its chain of linears on a few blocks.  Else one kernel: with many
 * tiles the blocks are enough, and the second kernel's gate network and LayerNorm backward,
 * repeated in every chunk, cost more than the extra blocks give. */
#define TN_EB_SPLIT_TILES 64
template <typename T>
nnpops_status atom_embed_back(const nnpops__tn_dims *d, int64_t n, const T *X0, const T *norm_w,
                              const T *norm_b, const T *const ls_w[2], const T *const lt[3],
                              const T *z1, const T *z2, T *g, T *gcs, T *ggate, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    atom_launch p;
    const size_t F = (size_t)d->F;
    NNPOPS__TRY(atom_plan<T>((const void *)atom_embed_back_gates_kernel<T>, n, d->F, 10 * F, 1,
                             "embedding backward", &p));
    if (p.chunks > 1 && p.tiles < TN_EB_SPLIT_TILES && gcs && ggate) {
        atom_launch q;
        NNPOPS__TRY(atom_plan<T>((const void *)atom_embed_back_lin_kernel<T>, n, d->F, 17 * F, 1,
                                 "embedding backward", &q));
        NNPOPS__TRY(tn_launch(atom_embed_back_gates_kernel<T>, dim3(p.tiles, p.chunks),
                              TN_ATOM_THREADS, p.bytes, stream,
                              "tensornet embedding gates backward (gradients)", *d, n, p.cfg, X0,
                              lt[0], lt[1], lt[2], z2, g, gcs, ggate));
        NNPOPS__TRY(tn_launch(atom_embed_back_lin_kernel<T>, dim3(q.tiles, q.chunks),
                              TN_ATOM_THREADS, q.bytes, stream,
                              "tensornet embedding gates backward (linears)", *d, n, q.cfg, X0,
                              norm_w, ls_w[0], ls_w[1], lt[0], lt[1], lt[2], z1, gcs, ggate, g));
        g_eb_split++;
        return NNPOPS_OK;
    }
    NNPOPS__TRY(atom_plan<T>((const void *)atom_embed_back_kernel<T>, n, d->F, 27 * F, 0,
                             "embedding backward", &p));
    NNPOPS__TRY(tn_launch(atom_embed_back_kernel<T>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS,
                          p.bytes, stream, "tensornet embedding gates backward", *d, n, p.cfg, X0,
                          norm_w, norm_b, ls_w[0], ls_w[1], lt[0], lt[1], lt[2], z1, z2, g));
    return NNPOPS_OK;
}

template <typename T>
nnpops_status layer_pre(const nnpops__tn_dims *d, int64_t n, const T *X, const T *const lt[3],
                        T *nrm, T *cY, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    atom_launch p;
    NNPOPS__TRY(atom_plan<T>((const void *)layer_pre_kernel<T>, n, d->F, 10 * (size_t)d->F, 1,
                             "layer", &p));
    NNPOPS__TRY(tn_launch(layer_pre_kernel<T>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS, p.bytes,
                          stream, "tensornet layer (normalisation, Y)", *d, n, p.cfg, X, lt[0],
                          lt[1], lt[2], nrm, cY));
    return NNPOPS_OK;
}

template <typename T>
nnpops_status layer_pre_back(const nnpops__tn_dims *d, int64_t n, const T *X, const T *nrm,
                             const T *const lt[3], const T *gcY, T *g, void *stream) {
    if (n <= 0) return NNPOPS_OK;
    atom_launch p;
    NNPOPS__TRY(atom_plan<T>((const void *)layer_pre_back_kernel<T>, n, d->F,
                             10 * (size_t)d->F, 1, "layer backward", &p));
    NNPOPS__TRY(tn_launch(layer_pre_back_kernel<T>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS,
                          p.bytes, stream, "tensornet layer backward", *d, n, p.cfg, X, nrm, lt[0],
                          lt[1], lt[2], gcY, g));
    return NNPOPS_OK;
}

/* the update (back 0: X, nrm -> Xout) or its gradient (back 1: g -> gcY, gcM) */
template <typename T>
nnpops_status layer_post(const nnpops__tn_dims *d, int64_t n, const double *charges,
                         const int32_t *batch, const T *X, const T *nrm, const T *cY, const T *cM,
                         const T *const lt[3], const T *g, T *Xout, T *gcY, T *gcM, int back,
                         void *stream) {
    if (n <= 0) return NNPOPS_OK;
    atom_launch p;
    if (!back) {
        NNPOPS__TRY(atom_plan<T>((const void *)layer_post_kernel<T, false>, n, d->F,
                                 10 * (size_t)d->F, 1, "layer update", &p));
        NNPOPS__TRY(tn_launch(layer_post_kernel<T, false>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS,
                              p.bytes, stream, "tensornet layer update", *d, n, p.cfg, charges,
                              batch, X, nrm, cY, cM, lt[0], lt[1], lt[2], g, Xout, gcY, gcM));
        return NNPOPS_OK;
    }
    NNPOPS__TRY(atom_plan<T>((const void *)layer_post_kernel<T, true>, n, d->F,
                             20 * (size_t)d->F, 1, "layer update backward", &p));
    NNPOPS__TRY(tn_launch(layer_post_kernel<T, true>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS,
                          p.bytes, stream, "tensornet layer update backward", *d, n, p.cfg, charges,
                          batch, X, nrm, cY, cM, lt[0], lt[1], lt[2], g, Xout, gcY, gcM));
    return NNPOPS_OK;
}

template <typename T>
nnpops_status readout(const nnpops__tn_dims *d, int64_t n_atoms, int64_t n_local, const T *X,
                      const T *norm_w, const T *norm_b, const T *lin_w, const T *lin_b,
                      const T *const out_w[], const T *const out_b[], const int32_t *species,
                      const T *atomref, double *atom_energy, T *g, void *stream) {
    if (n_atoms <= 0) return NNPOPS_OK;
    if (d->n_out > 16)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "tensornet: %d readout layers",
                            (int)d->n_out);
    readout_w rw;
    memset(&rw, 0, sizeof rw);
    rw.norm_w = norm_w, rw.norm_b = norm_b, rw.lin_w = lin_w, rw.lin_b = lin_b;
    for (int k = 0; k < d->n_out; k++) rw.out_w[k] = out_w[k], rw.out_b[k] = out_b[k];
    atom_launch p;
    NNPOPS__TRY(atom_plan<T>((const void *)readout_kernel<T>, n_atoms, d->F,
                             (size_t)readout_per_atom(*d), 0, "readout", &p));
    NNPOPS__TRY(tn_launch(readout_kernel<T>, dim3(p.tiles, p.chunks), TN_ATOM_THREADS, p.bytes,
                          stream, "tensornet readout", *d, n_atoms, p.cfg, n_local, X, rw, species,
                          atomref, atom_energy, g));
    return NNPOPS_OK;
}

} /* namespace */

#define TN_CU_TWINS(SUF, T)                                                                        \
    extern "C" nnpops_status nnpops__tn_edges_cuda##SUF(                                          \
        const nnpops__tn_dims *d, const T *rbf_a, const T *rbf_b, int64_t n_centers,              \
        const int64_t *start, int64_t capacity, const double *vec, T *ev, T *er, uint8_t *mask,   \
        T *fc, T *phi, void *stream) {                                                            \
        if (capacity <= 0) return NNPOPS_OK;                                                      \
        NNPOPS__TRY(tn_launch(edges_kernel<T>, grid_for(capacity, 128), 128, 0, stream,            \
                              "tensornet edges", *d, rbf_a, rbf_b, n_centers, start, capacity,     \
                              vec, ev, er, mask, fc, phi));                                        \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_linear_cuda##SUF(int64_t n, int in, int out, int trans,   \
                                                         const T *W, const T *b, const T *X,      \
                                                         double beta, T *Y, void *blas,           \
                                                         void *stream) {                          \
        return linear<T>(n, in, out, trans, W, b, X, beta, Y, blas, stream);                      \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_linear_act_cuda##SUF(                                     \
        int act, int64_t n, int in, int out, int trans, const T *W, const T *X, double beta, T *Y, \
        const T *bias, const T *Zg, T *A, void *blas, void *stream) {                             \
        return linear_act<T>(act, n, in, out, trans, W, X, beta, Y, bias, Zg, A, blas, stream);   \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_act_cuda##SUF(int act, int64_t n, int width,              \
                                                      const T *bias, const T *Z, const T *scale,  \
                                                      T *A, void *stream) {                       \
        return act_launch<T>(act, n, width, bias, Z, scale, A, stream);                           \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_act_back_cuda##SUF(int act, int64_t n, int width,         \
                                                           const T *Z, const T *bias,             \
                                                           const T *scale, T *G, T *gscale,       \
                                                           void *stream) {                        \
        return act_back_launch<T>(act, n, width, Z, bias, scale, G, gscale, stream);              \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_embed_cuda##SUF(                                          \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs,  \
        int64_t capacity, const int32_t *species, const T *ptab1, const T *ptab2, T self_fc,      \
        const T *self_dk, const T *ev, const T *er, const uint8_t *mask, const int32_t *slot,     \
        const T *fc, const T *dk, const T *dk_b, T *X0, void *stream) {                           \
        if (n_centers <= 0) return NNPOPS_OK;                                                     \
        NNPOPS__TRY(tn_launch(embed_kernel<T>, (unsigned)n_centers, atom_threads(d->F), 0, stream, \
                              "tensornet embedding", *d, start, pairs, capacity, species, ptab1,   \
                              ptab2, self_fc, self_dk, ev, er, mask, slot, fc, dk, dk_b, X0));     \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_atom_embed_cuda##SUF(                                      \
        const nnpops__tn_dims *d, int64_t n, const T *X0, const T *norm_w, const T *norm_b,        \
        const T *const ls_w[2], const T *const ls_b[2], const T *const lt[3], T *z1, T *z2,        \
        T *X1, void *stream) {                                                                     \
        return atom_embed<T>(d, n, X0, norm_w, norm_b, ls_w, ls_b, lt, z1, z2, X1, stream);        \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_atom_embed_back_cuda##SUF(                                 \
        const nnpops__tn_dims *d, int64_t n, const T *X0, const T *norm_w, const T *norm_b,        \
        const T *const ls_w[2], const T *const lt[3], const T *z1, const T *z2, T *g, T *gcs,      \
        T *ggate, void *stream) {                                                                  \
        return atom_embed_back<T>(d, n, X0, norm_w, norm_b, ls_w, lt, z1, z2, g, gcs, ggate,       \
                                  stream);                                                         \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_layer_pre_cuda##SUF(const nnpops__tn_dims *d, int64_t n,   \
                                                            const T *X, const T *const lt[3],      \
                                                            T *nrm, T *cY, void *stream) {         \
        return layer_pre<T>(d, n, X, lt, nrm, cY, stream);                                         \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_layer_pre_back_cuda##SUF(                                  \
        const nnpops__tn_dims *d, int64_t n, const T *X, const T *nrm, const T *const lt[3],       \
        const T *gcY, T *g, void *stream) {                                                        \
        return layer_pre_back<T>(d, n, X, nrm, lt, gcY, g, stream);                                \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_message_cuda##SUF(                                        \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs,  \
        int64_t capacity, const uint8_t *mask, const int32_t *slot, const T *Z, const T *bias,    \
        const T *fcP, const T *self_h, const T *cY, T *cM, void *stream) {                        \
        if (n_centers <= 0) return NNPOPS_OK;                                                     \
        NNPOPS__TRY(tn_launch(TN_ACT_KERNEL(message_kernel, d->activation, T, false),              \
                              (unsigned)n_centers, atom_threads(d->F), 0, stream,                  \
                              "tensornet messages", *d, start, pairs, capacity, mask, slot, Z,     \
                              bias, fcP, self_h, cY, cM));                                         \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_message_back_cuda##SUF(                                   \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs,  \
        int64_t capacity, const uint8_t *mask, const int32_t *slot, int64_t n_pairs,              \
        const int32_t *pentry, const T *Z, const T *bias, const T *fcP, const T *self_h,          \
        const T *cY, const T *gcM, T *gcY, T *GH, int accumulate, T *gfc, void *stream) {         \
        if (n_centers > 0) {                                                                      \
            NNPOPS__TRY(tn_launch(TN_ACT_KERNEL(message_kernel, d->activation, T, true),           \
                                  (unsigned)n_centers, atom_threads(d->F), 0, stream,              \
                                  "tensornet messages backward (Y)", *d, start, pairs, capacity,   \
                                  mask, slot, Z, bias, fcP, self_h, gcM, gcY));                    \
        }                                                                                         \
        if (n_centers > 0 || n_pairs > 0) {                                                       \
            /* slices per center: about GH_ENTRIES_PER_BLOCK entries each (from the capacity's    \
             * mean per center), at most 32 */                                                    \
            const int64_t per = n_centers > 0 ? capacity / n_centers : 0;                         \
            int64_t slices = (per + GH_ENTRIES_PER_BLOCK - 1) / GH_ENTRIES_PER_BLOCK;             \
            slices = slices < 1 ? 1 : (slices > 32 ? 32 : slices);                                \
            const dim3 grid((unsigned)(n_centers + (n_pairs + GH_PAD_PAIRS - 1) / GH_PAD_PAIRS),  \
                            (unsigned)slices);                                                    \
            NNPOPS__TRY(tn_launch(TN_ACT_KERNEL(message_gh_kernel, d->activation, T), grid,        \
                                  atom_threads(d->F), 0, stream,                                   \
                                  "tensornet messages backward (edge factors)", *d, n_centers,     \
                                  start, pairs, capacity, mask, slot, n_pairs, pentry, cY, gcM, Z, \
                                  bias, fcP, GH, accumulate, gfc));                                \
        }                                                                                         \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_layer_post_cuda##SUF(                                      \
        const nnpops__tn_dims *d, int64_t n, const double *charges, const int32_t *batch,          \
        const T *X, const T *nrm, const T *cY, const T *cM, const T *const lt[3], T *Xout,         \
        void *stream) {                                                                            \
        return layer_post<T>(d, n, charges, batch, X, nrm, cY, cM, lt, NULL, Xout, NULL, NULL, 0,  \
                             stream);                                                              \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_layer_post_back_cuda##SUF(                                 \
        const nnpops__tn_dims *d, int64_t n, const double *charges, const int32_t *batch,          \
        const T *cY, const T *cM, const T *const lt[3], const T *g, T *gcY, T *gcM,                \
        void *stream) {                                                                            \
        return layer_post<T>(d, n, charges, batch, NULL, NULL, cY, cM, lt, g, NULL, gcY, gcM, 1,   \
                             stream);                                                              \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_readout_cuda##SUF(                                         \
        const nnpops__tn_dims *d, int64_t n_atoms, int64_t n_local, const T *X, const T *norm_w,   \
        const T *norm_b, const T *lin_w, const T *lin_b, const T *const out_w[],                   \
        const T *const out_b[], const int32_t *species, const T *atomref, double *atom_energy,     \
        T *g, void *stream) {                                                                      \
        return readout<T>(d, n_atoms, n_local, X, norm_w, norm_b, lin_w, lin_b, out_w, out_b,      \
                          species, atomref, atom_energy, g, stream);                               \
    }                                                                                              \
    extern "C" nnpops_status nnpops__tn_embed_back_cuda##SUF(                                     \
        const nnpops__tn_dims *d, int64_t n_pairs, const int32_t *pentry, const int32_t *pmirror, \
        const int32_t *pairs, const int32_t *species, const T *ptab1, const T *ptab2,             \
        const T *ev, const T *er, const T *fcP, const T *dk, const T *dk_b, const T *g0, T *gd,   \
        T *gu, int accumulate, T *gfc, void *stream) {                                            \
        if (n_pairs <= 0) return NNPOPS_OK;                                                       \
        NNPOPS__TRY(tn_launch(embed_back_kernel<T>, grid_for(n_pairs * 32, 128), 128, 0, stream,   \
                              "tensornet embedding backward (pairs)", *d, n_pairs, pentry,         \
                              pmirror, pairs, species, ptab1, ptab2, ev, er, fcP, dk, dk_b, g0,    \
                              gd, gu, accumulate, gfc));                                           \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_radial_back_cuda##SUF(                                    \
        const nnpops__tn_dims *d, const T *rbf_a, const T *rbf_b, int64_t n_centers,              \
        const int64_t *start, int64_t capacity, const T *er, const uint8_t *mask,                 \
        const int32_t *pentry, const T *gphi, const T *gfc, int accumulate, T *gr,                \
        void *stream) {                                                                           \
        if (capacity <= 0) return NNPOPS_OK;                                                      \
        NNPOPS__TRY(tn_launch(radial_back_kernel<T>, grid_for(capacity * 32, 128), 128, 0, stream, \
                              "tensornet radial backward", *d, rbf_a, rbf_b, n_centers, start,     \
                              capacity, er, mask, pentry, gphi, gfc, accumulate, gr));             \
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
        NNPOPS__TRY(tn_launch(finish_kernel<T>, grid_for(n_centers * 32, 128), 128, 0, stream,     \
                              "tensornet finish (ZBL, gradients per entry)", *d, *zbl, zbl_z,      \
                              n_centers, n_local, start, pairs, capacity, species, ev, er, mask,   \
                              gu, gr, slot, pentry, grP, mean, batch, sys_count, atom_energy,      \
                              pair_grad));                                                         \
        return NNPOPS_OK;                                                                         \
    }                                                                                             \
    extern "C" nnpops_status nnpops__tn_pair_radial_cuda##SUF(                                    \
        const nnpops__tn_dims *d, const T *rbf_a, const T *rbf_b, int64_t n_pairs,                \
        const int32_t *pentry, const T *er, const T *fc, T *erP, T *fcP, T *phiP, void *stream) { \
        if (n_pairs <= 0 || d->R <= 0) return NNPOPS_OK;                                          \
        NNPOPS__TRY(tn_launch(pair_radial_kernel<T>, grid_for(n_pairs * d->R, 128), 128, 0,        \
                              stream, "tensornet radial basis per pair", *d, rbf_a, rbf_b,         \
                              n_pairs, pentry, er, fc, erP, fcP, phiP));                           \
        return NNPOPS_OK;                                                                         \
    }

TN_CU_TWINS(_f32, float)
TN_CU_TWINS(_f64, double)

extern "C" int nnpops__tn_gemm_path_cuda(int force) {
    g_tc_force = force == 1 || force == 2 ? force : 0;
    return g_tc_gemms;
}

extern "C" int nnpops__tn_embed_back_split_cuda(void) { return g_eb_split; }
extern "C" void nnpops__tn_atom_tiles_cuda(int atoms, int chunks, int scale) {
    g_tile_atoms = atoms == 1 || atoms == 2 || atoms == 4 || atoms == 8 ? atoms : 0;
    g_tile_chunks = chunks > 0 ? chunks : 0;
    g_tile_scale = scale == 1 || scale == 2 || scale == 4 ? scale : 0;
}

extern "C" nnpops_status nnpops__tn_count_cuda(int64_t n, int64_t n_systems, const int32_t *batch,
                                               int32_t *sys_count, void *stream) {
    if (n_systems <= 0) return NNPOPS_OK;
    NNPOPS__TRY(tn_launch(count_kernel, 1, 1024, 0, stream, "tensornet atoms per system", n,
                          n_systems, batch, sys_count));
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
        NNPOPS__TRY(tn_launch(pairs_one_block_kernel, 1, 32 * PAIRS_WARPS, 0, st,
                              "tensornet pairs (numbers, one block)", n_centers, start, pairs,
                              capacity, vec, mask, n_pairs, count, slot, pentry, pmirror));
    } else {
        NNPOPS__TRY(tn_launch(pairs_count_kernel, grid_for(n_centers * 32, 128), 128, 0, st,
                              "tensornet pairs (count)", n_centers, start, pairs, capacity, vec,
                              mask, count));
        NNPOPS__TRY(tn_launch(pairs_scan_kernel, 1, 1024, 0, st, "tensornet pairs (scan)",
                              n_centers, count));
        NNPOPS__TRY(tn_launch(pairs_assign_kernel, grid_for(n_centers * 32, 128), 128, 0, st,
                              "tensornet pairs (numbers)", n_centers, start, pairs, capacity, vec,
                              mask, n_pairs, count, slot, pentry, pmirror));
    }
    const int64_t m = capacity > n_pairs ? capacity : n_pairs;
    if (m > 0) {
        NNPOPS__TRY(tn_launch(pairs_mirror_kernel, grid_for(m, 128), 128, 0, st,
                              "tensornet pairs (mirrors)", n_centers, start, pairs, capacity, vec,
                              mask, n_pairs, count, slot, pentry, pmirror));
    }
    return NNPOPS_OK;
}
