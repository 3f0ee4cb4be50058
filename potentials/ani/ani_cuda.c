/*
 * ani_cuda.c - the ANI potential on the GPU: the vtable's GPU hooks (upload, release_device,
 * cuda_prepare, cuda_release_state, cuda_work_bytes, compute_cuda, cuda_capacity), host code
 * that enqueues the kernels of kernels/cuda/ and potentials/ani/cuda/.
 *
 * The core's step (nnpops__dstep) knows nothing of species columns, species sets or side streams:
 * cuda_prepare sees the atoms' species on the host and writes this step's host sizes into
 * step->pot_sizes (the local atoms per species, and the species set below), which the core's
 * graph key holds; it finds or builds the context's ANI state (step->pot_state: the species sets
 * and the side streams, created there, never while a stream captures).  The step itself then
 * groups the local atoms by species into columns on the device (nnpops__ani_columns_cuda, into
 * the work space) before the AEV.
 *
 * Weights: at load, the host arena of ani.h (the model's precision, layout [species][layer]
 * [member][out][in]) is copied once into one device allocation with the same offsets
 * (model->device_data).  Nothing is copied per step.
 *
 * Species sets (vt->cuda_prepare, once per context and set): a step whose atoms, ghosts included,
 * lack some of the model's species has AEV entries that are exactly zero with no terms behind them
 * (the radial blocks of an absent species, the angular blocks of a pair with one).  Such a step
 * computes the AEV restricted to the present species instead (nnpops__aev_desc_restrict: the AEV
 * kernels run unchanged on the restricted descriptor, with each atom's species ranked among the
 * present ones, written by the columns kernel; aev_len below is the restricted length), and its first layers'
 * products run over the restricted inner dimension with the matching columns of the first layers'
 * weights: a copy per species set (ani_set), made from the host arena the first time the context
 * sees the set (float32: stacked for the 3xTF32 products the first time a step runs a species on
 * them), kept until the context is destroyed (at most ANI_MAX_SETS sets; later sets run the full
 * AEV).  The products skip exact zeros only.  Water with ANI-2x: 128 of 1008 entries; a protein of
 * H, C, N, O and S: 560; every species present: the full AEV.
 *
 * One step (on step->stream and, for the species networks, its side streams; no host
 * synchronization, no allocation):
 *  1. AEV of all local atoms in one launch (with concurrent branches, below: one per species, in
 *     the species' branch), written feature-major into the work space,
 *     aev [aev_len][n_cols]: column r is atom centers[r]; the columns of species s are
 *     col_start[s] .. col_start[s] + col_count[s] (col_start a multiple of 32; padding columns have
 *     center -1 and are skipped).
 *  2. Per species and per chunk of at most NNPOPS__ANI_CUDA_CHUNK columns, the element network of all
 *     ensemble members at once (Me members: all M for the ensemble mean or when member energies are
 *     wanted, else the chosen member alone), activations feature-major [rows][ldc]:
 *       first layer:   ONE GEMM  Z0 (cols x Me*h1) = AEV (cols x L) . W0^T, W0 = [Me*h1][L] (the
 *                      members' first layers are contiguous in the arena), then bias + CELU in place;
 *       hidden layers: ONE strided-batched GEMM per layer, a member per batch entry (member m reads
 *                      rows m*w_l.. of the previous activations and writes rows m*w_{l+1}..), then
 *                      bias + CELU in place;
 *       output layer:  one kernel (ani_output): every member's output, the ensemble mean plus the
 *                      self energy per atom (double), member energies, and the backward seed
 *                      written over the last activations;
 *       backward:      per hidden layer one strided-batched GEMM dA_{l-1} = dZ_l . W_l into a
 *                      scratch block, and CELU' from the stored activations in place; finally ONE
 *                      GEMM dAEV (cols x L) = dZ0 (cols x Me*h1) . W0 written over the chunk's AEV
 *                      columns (the sum over members is the GEMM's inner dimension).
 *     Small species (float32 models, 1..NNPOPS__SG_MAX_COLS = 96 atoms of the species; sg_small,
 *     chosen from the column counts, which the CUDA graph key holds) skip cuBLAS: their networks run
 *     together through the grouped small-n GEMM (nnpops__small_gemm_cuda_f32, plain FP32 FMA,
 *     weights streamed once per 8 or 16 real columns, bias + CELU and CELU' fused into the GEMMs,
 *     no work space): one launch per layer over all small species, forward and backward, with the
 *     output layer fused into the last hidden layer's launch (its epilogue adds each block's part
 *     of the energies with atomics and writes the backward seed; in deterministic mode a grouped
 *     output-layer launch, nnpops__ani_output_group_cuda_f32, sums the members in order), the same
 *     products as above (sg_networks: 2 n_layers - 2 launches in all for ANI, one more in
 *     deterministic mode; when every small species has at most NNPOPS_SG_TAIL_MAX_COLS atoms,
 *     three: the first layer, the tails of all networks in one launch of thread block clusters,
 *     nnpops__sg_tail_cuda_f32, and the adjoint onto the AEV); each small species has its own
 *     activation block (its atoms rounded up to 32 columns).  When every species of the step is
 *     on this path (no branches), the adjoint onto the AEV, whose inner dimension (members x
 *     first width, 1536-2048 for ANI-2x) is long for its few outputs, runs as a k split of
 *     NNPOPS_SG_KSPLIT slices summed by separate blocks (shorter chains of weight loads after
 *     the wait) into a work block of partial sums, which the AEV adjoint adds in slice order.
 *     Concurrency: the species on the cuBLAS path are spread over up to 1 + ANI_SIDE_STREAMS
 *     branches (largest species first, each to the branch with the fewest columns so far);
 *     branch 0 runs on step->stream after the small species' grouped networks, branch b > 0 on
 *     ANI's side stream b - 1 (ani_state) with its cuBLAS handle; the branches fork before the AEV (fork_event) and join after the
 *     adjoints (join_event), and each has its own activation, scratch and stacked-operand
 *     buffers.  Every branch writes only its species' AEV columns and atoms, so the results are
 *     those of the serial order, bit for bit.  A protein's H, C, N and O networks (each a chain of
 *     small GEMMs that leaves most of the GPU idle) overlap instead of queueing.
 *  3. AEV adjoint of all columns in one launch (with branches: per species, in its branch, right
 *     after its networks): dE/dr of every center-list entry into pair_grad.
 * The cuBLAS-path GEMMs run over the chunk's columns rounded up to 4 (16-byte aligned kernels).
 * Option tensor_cores (float32): those GEMMs as one 3xTF32 product each (kernels/cuda/tf32x3.cu:
 * the weights stacked at upload, the activations stacked by the elementwise step before the
 * product, or by the product itself for the AEV and the output layer's seed).
 * Option deterministic (step->deterministic): the AEV kernels' fixed-point twins and the output
 * layer with one thread per column summing the members in order (no atomics); cuBLAS GEMMs are
 * bitwise reproducible on one GPU model with one stream and work space as they are used here.
 * Work space: aev (aev_len x n_cols) + per branch the activations of all hidden layers of all
 * members for one chunk (M * sum of hidden widths rows) + one scratch block (M * widest hidden
 * layer rows), ldc = min(chunk, largest count of the branch's species) rounded up to 32 (+ the
 * stacked operand of the 3xTF32 products: 3 x columns x widest inner dimension).  No per-atom
 * weight copies and no O(N^2) buffer: memory is linear in the atom count (AEV) plus a constant
 * (the chunk, per branch).
 */
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani.h"


typedef struct ani_dev {
    void *arena;
    size_t bytes;
    /* float32 models: the weights of the cuBLAS-path layers (all but the output layer) stacked for
     * the 3xTF32 GEMMs (option tensor_cores, kernels/cuda/tf32x3.cu), each 3 x bytes; layer l of
     * species s (in = n_l inputs, out = n_{l+1} outputs, M members, at arena + o) is at 3 o in
     * both, and both keep the inner dimension of their product contiguous (the K-major operand
     * the TF32 tensor-core kernels read without a transposition):
     *   stk_n (forward, op(B) = W^T): W^T of all members (in x M out), stacked along the rows:
     *          column j = [hi ; lo ; hi] of W's row j, ld 3 in;
     *   stk_b (backward, op(B) = W): W of all members (M out x in), stacked along the rows by
     *          member: column i = member 0's [hi ; lo ; hi] of its column i of W, then member 1's,
     *          ..., ld 3 M out; member m's block starts 3 m out rows down (the first layer's
     *          backward runs its inner dimension over the members, the hidden layers' batch
     *          entries are 3 out apart). */
    void *stk_n, *stk_b;
} ani_dev;

static size_t al256(size_t b) { return (b + 255) & ~(size_t)255; }

/* A species set's restricted AEV and first layers (see the header). */
#define ANI_MAX_SETS 8
typedef struct ani_set {
    uint32_t present;              /* bit s: species s */
    nnpops__aev_desc desc;         /* the AEV restricted to the set */
    int32_t *map;                  /* the restricted entries' indices in the full AEV */
    void *mem;
    /* the first layer of species s of the set (s with hidden layers), all members: [M out][Lr]
     * (Lr = desc.aev_len), model precision, in mem; float32, once a step of the set runs species
     * s on the tensor cores: stacked as ani_dev's stk_n and stk_b (in = Lr), in stk_mem[s] */
    void *w0[NNPOPS__MAX_SPECIES], *stk_mem[NNPOPS__MAX_SPECIES];
    float *stk_n0[NNPOPS__MAX_SPECIES], *stk_b0[NNPOPS__MAX_SPECIES];
} ani_set;

/* Side streams: the species on the cuBLAS path may run their networks concurrently on up to
 * ANI_SIDE_STREAMS streams beside the step's, each with its own cuBLAS handle (bound to that
 * stream, with its own work space of ANI_BLAS_WORK_BYTES, so that cuBLAS never allocates while a
 * stream captures); the step forks onto them with fork_event and joins back with join_event[k]
 * (inside a capture the side streams join the graph through these events). */
#define ANI_SIDE_STREAMS 3
#define ANI_BLAS_WORK_BYTES ((size_t)32 << 20)

/* ANI's GPU state of one context (vt->cuda_prepare): the species sets seen, and the side streams
 * 0 .. n_side - 1 (each created, with its handle, work space and join event, by the first step
 * that has a branch on it; never freed before the state). */
typedef struct ani_state {
    int n;
    ani_set set[ANI_MAX_SETS];
    int n_side;
    cudaStream_t side[ANI_SIDE_STREAMS];
    cublasHandle_t side_blas[ANI_SIDE_STREAMS];
    cudaEvent_t fork_event, join_event[ANI_SIDE_STREAMS];
    void *side_work[ANI_SIDE_STREAMS]; /* the side handles' cuBLAS work spaces */
} ani_state;

/* ANI's host sizes of a step (nnpops__dstep.pot_sizes, written by cuda_prepare): [s] the local
 * atoms of species s, [ANI_SIZE_SET] the step's species set (1 + its index in ani_state.set; 0:
 * the model's full AEV). */
#define ANI_SIZE_SET NNPOPS__MAX_SPECIES
_Static_assert(ANI_SIZE_SET < NNPOPS__POT_SIZES, "ANI's sizes fit nnpops__dstep.pot_sizes");

/* The step as ANI's GPU code reads it: the core's step, the stream and cuBLAS handle of a branch
 * (the step's own for branch 0), the step's species set (or NULL: the model's AEV), and the local
 * atoms grouped by species into columns (from pot_sizes): species s owns columns col_start[s] ..
 * col_start[s] + col_count[s] (col_start multiples of 32); centers[col] = atom or -1 and
 * species_rank[i] (with a set: each atom's species ranked among the set's) in the work space,
 * written by the columns kernel (nnpops__ani_columns_cuda) at the start of the step. */
typedef struct ani_step {
    const nnpops__dstep *d;
    void *stream, *blas;
    const ani_set *set;
    int64_t n_cols;
    int64_t col_start[NNPOPS__MAX_SPECIES + 1];
    int64_t col_count[NNPOPS__MAX_SPECIES];
    const int32_t *centers;
    const int32_t *species_rank;
} ani_step;

static ani_step view_of(const nnpops__ani *a, const nnpops__dstep *d) {
    ani_step v;
    memset(&v, 0, sizeof v);
    v.d = d;
    v.stream = d->stream;
    v.blas = d->blas;
    const ani_state *S = d->pot_state;
    const int64_t k = d->pot_sizes[ANI_SIZE_SET];
    v.set = S && k > 0 && k <= S->n ? &S->set[k - 1] : NULL;
    int64_t cols = 0;
    for (int s = 0; s < a->n_species; s++) {
        v.col_start[s] = cols;
        v.col_count[s] = d->pot_sizes[s];
        cols += (v.col_count[s] + 31) / 32 * 32;
    }
    v.col_start[a->n_species] = cols;
    v.n_cols = cols;
    return v;
}

/* One layer's stacked copies (see ani_dev) on `stream`: W ([M out][in], device) into stk_n, its
 * transpose Wt ([in][M out], device) into stk_b. */
static nnpops_status stack_layer(int64_t in, int64_t out, int64_t M, const float *W,
                                 const float *Wt, float *stk_n, float *stk_b, void *stream) {
    NNPOPS__TRY(nnpops__tf32_stack_cuda(in, M * out, 1, W, in, 0, stk_n, 3 * in, 0, in, 1, 1,
                                        stream));
    return nnpops__tf32_stack_cuda(M * out, in, 1, Wt, M * out, 0, stk_b, 3 * M * out, 0, out, 1, 1,
                                   stream);
}

/* Stacks every non-output layer's weights into d->stk_n and d->stk_b (see ani_dev); stk_b from
 * the members' weights transposed on the host (from the model's host arena) and copied to a
 * temporary device buffer. */
static nnpops_status stack_weights(const nnpops__ani *a, ani_dev *d, const char *device_name) {
    const float *hw = a->arena;
    float *t = malloc(d->bytes);
    if (!t) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (ANI weights, transposed)");
    memset(t, 0, d->bytes);
    for (int s = 0; s < a->n_species; s++)
        for (int l = 0; l + 1 < a->n_layers[s]; l++) {
            const int64_t in = a->width[s][l], out = a->width[s][l + 1], M = a->ensemble;
            const size_t o = a->w_off[s][l];
            for (int64_t m = 0; m < M; m++)
                for (int64_t r = 0; r < out; r++)
                    for (int64_t i = 0; i < in; i++)
                        t[o + (size_t)(i * M * out + m * out + r)] =
                            hw[o + (size_t)((m * out + r) * in + i)];
        }
    void *dt = NULL;
    cudaError_t e = cudaMalloc(&dt, d->bytes);
    if (e == cudaSuccess) e = cudaMemcpy(dt, t, d->bytes, cudaMemcpyHostToDevice);
    free(t);
    nnpops_status st = NNPOPS_OK;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                         : NNPOPS_ERROR_CUDA,
                          "%s:%d: ANI weights, transposed copy on %s: %s", __FILE__, __LINE__,
                          device_name, cudaGetErrorString(e));
    }
    for (int s = 0; s < a->n_species && st == NNPOPS_OK; s++)
        for (int l = 0; l + 1 < a->n_layers[s] && st == NNPOPS_OK; l++) {
            const size_t o = a->w_off[s][l];
            st = stack_layer(a->width[s][l], a->width[s][l + 1], a->ensemble,
                             (const float *)d->arena + o, (const float *)dt + o,
                             (float *)d->stk_n + 3 * o, (float *)d->stk_b + 3 * o, NULL);
        }
    /* the stacking kernels ran on the legacy stream: wait for them before freeing their input */
    if (dt) {
        e = cudaDeviceSynchronize();
        if (e != cudaSuccess && st == NNPOPS_OK)
            st = nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: stacking the ANI weights on %s: %s",
                              __FILE__, __LINE__, device_name, cudaGetErrorString(e));
        cudaFree(dt);
    }
    return st;
}

nnpops_status nnpops__ani_upload(nnpops_model *model) {
    const nnpops__ani *a = model->impl;
    ani_dev *d = calloc(1, sizeof *d);
    if (!d) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (ANI device data)");
    d->bytes = (a->arena_elems ? a->arena_elems : 1) * a->elem_size;
    cudaError_t e = cudaMalloc(&d->arena, d->bytes);
    if (e != cudaSuccess) {
        const size_t bytes = d->bytes;
        free(d);
        (void)cudaGetLastError();
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: cudaMalloc of %zu bytes of ANI weights on %s: %s", __FILE__,
                            __LINE__, bytes, model->device_name, cudaGetErrorString(e));
    }
    e = cudaMemcpy(d->arena, a->arena, d->bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(d->arena);
        free(d);
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: copying the ANI weights to %s: %s",
                            __FILE__, __LINE__, model->device_name, cudaGetErrorString(e));
    }
    if (a->precision == NNPOPS_FLOAT32) {
        nnpops_status st = NNPOPS_OK;
        void **bufs[2] = {&d->stk_n, &d->stk_b};
        for (int q = 0; q < 2 && st == NNPOPS_OK; q++) {
            e = cudaMalloc(bufs[q], 3 * d->bytes);
            if (e == cudaSuccess) e = cudaMemset(*bufs[q], 0, 3 * d->bytes);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                st = nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                                 : NNPOPS_ERROR_CUDA,
                                  "%s:%d: cudaMalloc of %zu bytes (ANI weights stacked for the "
                                  "tensor cores) on %s: %s",
                                  __FILE__, __LINE__, 3 * d->bytes, model->device_name,
                                  cudaGetErrorString(e));
            }
        }
        if (st == NNPOPS_OK) st = stack_weights(a, d, model->device_name);
        if (st != NNPOPS_OK) {
            if (d->stk_n) cudaFree(d->stk_n);
            if (d->stk_b) cudaFree(d->stk_b);
            cudaFree(d->arena);
            free(d);
            return st;
        }
    }
    model->device_data = d;
    return NNPOPS_OK;
}

void nnpops__ani_release_device(nnpops_model *model) {
    ani_dev *d = model->device_data;
    if (!d) return;
    cudaFree(d->arena);
    if (d->stk_n) cudaFree(d->stk_n);
    if (d->stk_b) cudaFree(d->stk_b);
    free(d);
    model->device_data = NULL;
}

/* Builds set S of `present` (see the header): the restricted descriptor and map, and per species
 * with hidden layers its first layer's columns of the restricted entries, gathered on the host from
 * the model's arena and copied to the set's allocation on `stream` (synchronized).  The stacked
 * copies for the 3xTF32 products come later, per species (stack_set_species). */
static nnpops_status build_set(const nnpops_model *model, uint32_t present, ani_set *S,
                               cudaStream_t stream) {
    const nnpops__ani *a = model->impl;
    const size_t es = a->elem_size;
    const int64_t L = a->aev.aev_len, M = a->ensemble;
    int32_t rank[NNPOPS__MAX_SPECIES];
    memset(S, 0, sizeof *S);
    S->present = present;
    S->map = malloc(sizeof(int32_t) * (size_t)L);
    if (!S->map) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (ANI species set)");
    const int64_t Lr = nnpops__aev_desc_restrict(&a->aev, present, &S->desc, rank, S->map);
    size_t off[NNPOPS__MAX_SPECIES], total = 0, most = 0;
    for (int s = 0; s < a->n_species; s++) {
        if (rank[s] < 0 || a->n_layers[s] < 2) continue;
        const size_t e = (size_t)(M * a->width[s][1] * Lr);
        if (e > most) most = e;
        off[s] = total;
        total += al256(e * es);
    }
    char *h = malloc(most * es + 1);
    cudaError_t e = h ? cudaMalloc(&S->mem, total + 1) : cudaErrorMemoryAllocation;
    for (int s = 0; s < a->n_species && e == cudaSuccess; s++) {
        if (rank[s] < 0 || a->n_layers[s] < 2) continue;
        const int64_t rows = M * a->width[s][1];
        nnpops__ani_restricted_first_layer(a, s, S->map, Lr, 0, h);
        S->w0[s] = (char *)S->mem + off[s];
        e = cudaMemcpyAsync(S->w0[s], h, es * (size_t)(rows * Lr), cudaMemcpyHostToDevice, stream);
        /* the host buffer is reused by the next species */
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    }
    free(h);
    if (e == cudaSuccess) return NNPOPS_OK;
    (void)cudaGetLastError();
    if (S->mem) cudaFree(S->mem);
    free(S->map);
    memset(S, 0, sizeof *S);
    return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                       : NNPOPS_ERROR_CUDA,
                        "%s:%d: ANI first layers of a species set (%zu bytes) on %s: %s", __FILE__,
                        __LINE__, total, model->device_name, cudaGetErrorString(e));
}

/* The stacked copies of species s's restricted first layer in set S (float32; see ani_dev), in an
 * allocation of their own, from the plain copy and its transpose (gathered on the host), on
 * `stream` (synchronized). */
static nnpops_status stack_set_species(const nnpops_model *model, ani_set *S, int s,
                                       cudaStream_t stream) {
    const nnpops__ani *a = model->impl;
    const int64_t Lr = S->desc.aev_len, out = a->width[s][1];
    const int64_t rows = a->ensemble * out;
    const size_t n = (size_t)(rows * Lr), part = al256(3 * n * sizeof(float));
    float *ht = malloc(n * sizeof(float) + 1);
    void *tmp = NULL;
    cudaError_t e = ht ? cudaMalloc(&S->stk_mem[s], 2 * part) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess) e = cudaMalloc(&tmp, n * sizeof(float) + 1);
    nnpops_status st = NNPOPS_OK;
    if (e == cudaSuccess) {
        nnpops__ani_restricted_first_layer(a, s, S->map, Lr, 1, ht);
        e = cudaMemcpyAsync(tmp, ht, n * sizeof(float), cudaMemcpyHostToDevice, stream);
    }
    if (e == cudaSuccess) {
        S->stk_n0[s] = S->stk_mem[s];
        S->stk_b0[s] = (float *)((char *)S->stk_mem[s] + part);
        st = stack_layer(Lr, out, a->ensemble, S->w0[s], tmp, S->stk_n0[s], S->stk_b0[s], stream);
        if (st == NNPOPS_OK) e = cudaStreamSynchronize(stream);
    }
    free(ht);
    if (tmp) cudaFree(tmp);
    if (e == cudaSuccess && st == NNPOPS_OK) return NNPOPS_OK;
    if (S->stk_mem[s]) cudaFree(S->stk_mem[s]);
    S->stk_mem[s] = NULL;
    S->stk_n0[s] = S->stk_b0[s] = NULL;
    if (st != NNPOPS_OK) return st;
    (void)cudaGetLastError();
    return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                       : NNPOPS_ERROR_CUDA,
                        "%s:%d: ANI first layer of a species set, stacked (%zu bytes) on %s: %s",
                        __FILE__, __LINE__, 2 * part, model->device_name, cudaGetErrorString(e));
}

static int use_tc(const nnpops__ani *a, const ani_step *st, int s);
static int ani_side_streams(const nnpops__ani *a, const ani_step *st);

/* Side streams n_side .. need - 1 with their cuBLAS handles, work spaces and join events (and
 * the fork event with the first). */
static nnpops_status create_sides(ani_state *S, int need, const char *device_name) {
    cudaError_t e = cudaSuccess;
    cublasStatus_t b = CUBLAS_STATUS_SUCCESS;
    if (!S->fork_event) e = cudaEventCreateWithFlags(&S->fork_event, cudaEventDisableTiming);
    while (S->n_side < need && e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS) {
        const int k = S->n_side;
        cudaStream_t stream = NULL;
        cudaEvent_t join = NULL;
        cublasHandle_t h = NULL;
        void *work = NULL;
        e = cudaMalloc(&work, ANI_BLAS_WORK_BYTES);
        if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
        /* plain FP32 / FP64 arithmetic, the stream set before the work space (setting a stream
         * resets a handle's work space) */
        if (e == cudaSuccess) b = cublasCreate(&h);
        if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS)
            b = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
        if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS) b = cublasSetStream(h, stream);
        if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS)
            b = cublasSetWorkspace(h, work, ANI_BLAS_WORK_BYTES);
        if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS) {
            S->side[k] = stream;
            S->side_blas[k] = h;
            S->join_event[k] = join;
            S->side_work[k] = work;
            S->n_side++;
            continue;
        }
        if (h) cublasDestroy(h);
        if (join) cudaEventDestroy(join);
        if (stream) cudaStreamDestroy(stream);
        if (work) cudaFree(work);
    }
    if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS) return NNPOPS_OK;
    (void)cudaGetLastError();
    if (b != CUBLAS_STATUS_SUCCESS)
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cuBLAS handle of an ANI side stream: %s",
                            __FILE__, __LINE__, cublasGetStatusString(b));
    return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                       : NNPOPS_ERROR_CUDA,
                        "%s:%d: side streams of the ANI step on %s: %s", __FILE__, __LINE__,
                        device_name, cudaGetErrorString(e));
}

nnpops_status nnpops__ani_cuda_prepare(const nnpops_model *model, nnpops__dstep *st,
                                       void **state) {
    const nnpops__ani *a = model->impl;
    ani_state *S = *state;
    if (!S) {
        S = calloc(1, sizeof *S);
        if (!S) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (ANI state)");
        *state = S;
    }
    st->pot_state = S;
    /* the local atoms per species (the columns), and the species present, ghosts too */
    for (int s = 0; s < NNPOPS__POT_SIZES; s++) st->pot_sizes[s] = 0;
    for (int64_t i = 0; i < st->n_local; i++) st->pot_sizes[st->species_host[i]]++;
    const uint32_t all = nnpops__species_all(a->n_species);
    const uint32_t present = nnpops__species_present(st->species_host, st->n_atoms) & all;
    st->descriptor_length = a->aev.aev_len;
    if (present != all && present != 0) {
        int k = 0;
        while (k < S->n && S->set[k].present != present) k++;
        if (k == S->n && S->n < ANI_MAX_SETS) {
            NNPOPS__TRY(build_set(model, present, &S->set[k], (cudaStream_t)st->stream));
            S->n++;
        }
        /* (past ANI_MAX_SETS sets: the model's full AEV, with the species themselves) */
        if (k < S->n) {
            st->pot_sizes[ANI_SIZE_SET] = k + 1;
            st->descriptor_length = S->set[k].desc.aev_len;
        }
    }
    const ani_step v = view_of(a, st);
    ani_set *set = v.set ? &S->set[st->pot_sizes[ANI_SIZE_SET] - 1] : NULL;
    /* the stacked copies of the species this step runs on the tensor cores */
    for (int s = 0; set && s < a->n_species; s++)
        if (set->w0[s] && !set->stk_mem[s] && v.col_count[s] > 0 && use_tc(a, &v, s))
            NNPOPS__TRY(stack_set_species(model, set, s, (cudaStream_t)st->stream));
    /* the side streams this step has branches on, the first time a step needs them */
    const int sides = ani_side_streams(a, &v);
    if (sides > S->n_side) NNPOPS__TRY(create_sides(S, sides, model->device_name));
    return NNPOPS_OK;
}

void nnpops__ani_cuda_release_state(void *state) {
    ani_state *S = state;
    if (!S) return;
    for (int k = 0; k < S->n; k++) {
        cudaFree(S->set[k].mem);
        for (int s = 0; s < NNPOPS__MAX_SPECIES; s++)
            if (S->set[k].stk_mem[s]) cudaFree(S->set[k].stk_mem[s]);
        free(S->set[k].map);
    }
    for (int k = 0; k < S->n_side; k++) {
        cudaStreamSynchronize(S->side[k]);
        cublasDestroy(S->side_blas[k]);
        cudaStreamDestroy(S->side[k]);
        cudaEventDestroy(S->join_event[k]);
        cudaFree(S->side_work[k]);
    }
    if (S->fork_event) cudaEventDestroy(S->fork_event);
    free(S);
}

/* The step's AEV: its species set's restricted one (the header), or the model's. */
static const nnpops__aev_desc *aev_of(const nnpops__ani *a, const ani_step *st) {
    return st->set ? &st->set->desc : &a->aev;
}

/* Branches: the species on the cuBLAS path run their networks concurrently, on the step's stream
 * (branch 0, together with the small species' grouped networks) and on up to ANI_SIDE_STREAMS
 * side streams (ani_state), each branch with its own activation, scratch and stacked-operand
 * buffers.  (The largest species' branch on a side stream of the greatest priority makes
 * proteins' and large water boxes' steps a few percent slower.) */
#define ANI_MAX_BRANCHES (1 + ANI_SIDE_STREAMS)
typedef struct ani_branch {
    size_t act, tmp;        /* activations of all hidden layers; one scratch block */
    size_t tc, tc_bytes;    /* stacked activations of the 3xTF32 GEMMs */
    int64_t ldc;            /* columns of the branch's buffers */
} ani_branch;

/* Work space layout (bytes) of one step. */
typedef struct ani_layout {
    size_t centers, rank;   /* the columns' atoms [n_cols], the ranked species [n_atoms] (a set) */
    size_t aev, total;
    int n_branch;                          /* branches in use (0: no species on the cuBLAS path) */
    int branch_of[NNPOPS__MAX_SPECIES];    /* the branch of a cuBLAS-path species, else -1 */
    ani_branch br[ANI_MAX_BRANCHES];
    size_t small_act[NNPOPS__MAX_SPECIES]; /* activations of a small species (sg_small) */
    int64_t small_ld[NNPOPS__MAX_SPECIES]; /* their columns (the atoms rounded up to 32) */
    int64_t act_rows;     /* rows of the activation blocks */
    /* every species on the small path (no branches, float32): the adjoint onto the AEV runs as a
     * k split of ksplit slices (nnpops__sg_problem.split), its partial sums at kpart, [ksplit]
     * [aev_len][n_cols], added by the AEV adjoint (nnpops__aev_backward_sum_cuda_f32); 1: none */
    int32_t ksplit;
    size_t kpart;
} ani_layout;

#define NNPOPS_SG_KSPLIT 4 /* slices of the small path's adjoint onto the AEV */

/* Species whose networks run through the small-n grouped GEMMs (nnpops__small_gemm_cuda_f32)
 * instead of cuBLAS: float32 models, 1 .. NNPOPS__SG_MAX_COLS atoms of the species.  Chosen from
 * the column counts, which are part of the CUDA graph key (core/src/cuda_step.c). */
/* Option tensor_cores: 3xTF32 GEMMs for the cuBLAS path of species s (float32; 1 on: always,
 * 2 auto: from ANI_TC_AUTO_COLS columns).  With the stacked single-GEMM form and 16-byte aligned
 * GEMM rows (unaligned rows get cuBLAS's align1 TF32 kernels, a quarter slower) the tensor cores
 * are equal or faster for every species of more than 64 atoms, and against FP32 GEMMs they save
 * 13-21 % of the step on water boxes, batches of small molecules and large proteins; a bound of
 * 256 left a protein's mid-sized species on FP32, a few percent slower.  The bound is the first
 * count above the small-n path's (NNPOPS__SG_MAX_COLS): every float32 species on the cuBLAS path
 * has more atoms, so auto is on there; the bound remains for networks without hidden layers
 * (which skip the small-n path). */
#define ANI_TC_AUTO_COLS (NNPOPS__SG_MAX_COLS + 1)
static int use_tc(const nnpops__ani *a, const ani_step *st, int s) {
    if (a->precision != NNPOPS_FLOAT32) return 0;
    const int tc = st->d->tensor_cores;
    return tc == 1 || (tc == 2 && st->col_count[s] >= ANI_TC_AUTO_COLS);
}

/* The tails of the small species' networks in one launch (nnpops__sg_tail_cuda_f32) when every
 * small species has at most NNPOPS_SG_TAIL_MAX_COLS atoms: 8- and 16-column chunks run three
 * blocks per SM and a step's clusters in one wave; 32-column chunks run two blocks per SM, and a
 * molecule of about a hundred atoms then needs two waves, slower than the separate launches. */
#define NNPOPS_SG_TAIL_MAX_COLS 16

static int sg_small(const nnpops__ani *a, const ani_step *st, int s) {
    return a->precision == NNPOPS_FLOAT32 && st->col_count[s] > 0 &&
           st->col_count[s] <= NNPOPS__SG_MAX_COLS && a->n_layers[s] >= 2;
}

/* The species' columns in chunks of at most NNPOPS__ANI_CUDA_CHUNK. */
static int64_t chunk_cols(int64_t n) {
    return n < NNPOPS__ANI_CUDA_CHUNK ? n : NNPOPS__ANI_CUDA_CHUNK;
}

/* Stacked-operand bytes of species s's 3xTF32 GEMMs (0 when it does not use them). */
static size_t tc_need(const nnpops__ani *a, const ani_step *st, int s) {
    if (!use_tc(a, st, s)) return 0;
    const int64_t cols = chunk_cols(st->col_count[s]), M = a->ensemble;
    const int32_t *w = a->width[s];
    size_t need = nnpops__gemm_3xtf32_work_bytes(cols, aev_of(a, st)->aev_len, 1), b;
    if ((b = nnpops__gemm_3xtf32_work_bytes(cols, M * w[1], 1)) > need) need = b;
    for (int l = 1; l < a->n_layers[s]; l++) {
        if ((b = nnpops__gemm_3xtf32_work_bytes(cols, w[l], M)) > need) need = b;
        if ((b = nnpops__gemm_3xtf32_work_bytes(cols, w[l + 1], M)) > need) need = b;
    }
    return need;
}

static ani_layout layout_of(const nnpops__ani *a, const ani_step *st) {
    ani_layout L;
    memset(&L, 0, sizeof L);
    const size_t es = a->elem_size;
    int64_t rows = 1;
    for (int s = 0; s < a->n_species; s++) {
        int64_t r = 0;
        for (int l = 1; l < a->n_layers[s]; l++) r += a->width[s][l];
        if (r > rows) rows = r;
    }
    L.act_rows = (int64_t)a->ensemble * rows;
    /* the cuBLAS-path species, largest first, each to the branch with the fewest columns so far;
     * the small species' grouped networks run on branch 0's stream first, so their columns count
     * as branch 0's load (and, when there are any, the cuBLAS-path species may use every side
     * stream) */
    int order[NNPOPS__MAX_SPECIES], n_big = 0;
    int64_t small_cols = 0;
    for (int s = 0; s < a->n_species; s++) {
        L.branch_of[s] = -1;
        if (sg_small(a, st, s)) small_cols += st->col_count[s];
        if (st->col_count[s] <= 0 || sg_small(a, st, s)) continue;
        int k = n_big++;
        while (k > 0 && st->col_count[order[k - 1]] < st->col_count[s]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = s;
    }
    /* the layout never depends on the step's streams: it sizes the work space first
     * (nnpops__ani_cuda_work_bytes) */
    const int want = n_big > 0 ? n_big + (small_cols > 0) : 0;
    L.n_branch = want < ANI_MAX_BRANCHES ? want : ANI_MAX_BRANCHES;
    int64_t load[ANI_MAX_BRANCHES] = {small_cols}, maxc[ANI_MAX_BRANCHES] = {0};
    size_t tcb[ANI_MAX_BRANCHES] = {0};
    for (int q = 0; q < n_big; q++) {
        const int s = order[q];
        int b = 0;
        for (int k = 1; k < L.n_branch; k++)
            if (load[k] < load[b]) b = k;
        L.branch_of[s] = b;
        load[b] += st->col_count[s];
        const int64_t c = chunk_cols(st->col_count[s]);
        if (c > maxc[b]) maxc[b] = c;
        const size_t t = tc_need(a, st, s);
        if (t > tcb[b]) tcb[b] = t;
    }
    size_t cur = 0;
    L.centers = cur;
    cur += al256(sizeof(int32_t) * (size_t)(st->n_cols > 0 ? st->n_cols : 1));
    L.rank = cur;
    if (st->set) cur += al256(sizeof(int32_t) * (size_t)(st->d->n_atoms > 0 ? st->d->n_atoms : 1));
    L.aev = cur;
    cur += al256(es * (size_t)aev_of(a, st)->aev_len * (size_t)(st->n_cols > 0 ? st->n_cols : 1));
    for (int b = 0; b < L.n_branch; b++) {
        ani_branch *B = &L.br[b];
        B->ldc = (maxc[b] + 31) / 32 * 32;
        B->act = cur;
        cur += al256(es * (size_t)L.act_rows * (size_t)B->ldc);
        B->tmp = cur;
        cur += al256(es * (size_t)a->ensemble * (size_t)a->max_width * (size_t)B->ldc);
        /* 3xTF32 (float32, option tensor_cores): the largest activation operand of the
         * branch's GEMMs, stacked ([lo | hi | hi]) for each product */
        B->tc = cur;
        B->tc_bytes = tcb[b];
        cur += al256(tcb[b]);
    }
    for (int s = 0; s < a->n_species; s++) {
        if (!sg_small(a, st, s)) continue;
        int64_t r = 0;
        for (int l = 1; l < a->n_layers[s]; l++) r += a->width[s][l];
        L.small_ld[s] = (st->col_count[s] + 31) / 32 * 32;
        L.small_act[s] = cur;
        cur += al256(es * (size_t)a->ensemble * (size_t)r * (size_t)L.small_ld[s]);
    }
    L.ksplit = 1;
    if (L.n_branch == 0 && small_cols > 0) {
        L.ksplit = NNPOPS_SG_KSPLIT;
        L.kpart = cur;
        cur += al256(sizeof(float) * (size_t)L.ksplit * (size_t)aev_of(a, st)->aev_len *
                     (size_t)st->n_cols);
    }
    L.total = cur;
    return L;
}

/* The side streams a step's branches use: branch b > 0 runs on side stream b - 1. */
static int ani_side_streams(const nnpops__ani *a, const ani_step *st) {
    const ani_layout L = layout_of(a, st);
    const int n = L.n_branch - 1;
    return n < 0 ? 0 : (n > ANI_SIDE_STREAMS ? ANI_SIDE_STREAMS : n);
}

size_t nnpops__ani_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step) {
    const nnpops__ani *a = model->impl;
    const ani_step v = view_of(a, step);
    return layout_of(a, &v).total;
}

int nnpops__ani_cuda_side_streams(const nnpops_model *model, const nnpops__dstep *step) {
    const nnpops__ani *a = model->impl;
    const ani_step v = view_of(a, step);
    return ani_side_streams(a, &v);
}

#define TRY(x) NNPOPS__TRY(x)

/* The first layer of species s from member moff on ([Me out][Lf], Lf = aev_of(a, st)->aev_len):
 * the step's species set's restricted copy, or the arena. */
static const void *first_layer(const nnpops__ani *a, const ani_dev *dev, const ani_step *st,
                               int s, int64_t moff) {
    const ani_set *S = st->set;
    const int64_t n = moff * a->width[s][1] * aev_of(a, st)->aev_len;
    if (S) return (const char *)S->w0[s] + a->elem_size * (size_t)n;
    return (const char *)dev->arena + a->elem_size * (a->w_off[s][0] + (size_t)n);
}

/* The networks of the small species (sg_small) of one step, grouped over species: one launch per
 * layer of the forward pass (GEMM + bias + CELU), one for the output layers, one per layer of the
 * backward pass (GEMM + CELU' in place) and one for dE/dAEV (written over the species' AEV
 * columns).  Same products as the cuBLAS path of nnpops__ani_compute_cuda. */
static nnpops_status sg_networks(const nnpops_model *model, const ani_step *st,
                                 const ani_layout *L, int64_t Me, int64_t moff) {
    const nnpops__ani *a = model->impl;
    const ani_dev *dev = model->device_data;
    const float *W = dev->arena;
    float *aev = (float *)((char *)st->d->work + L->aev);
    const int64_t Lf = aev_of(a, st)->aev_len, ld = st->n_cols;
    int maxnl = 0;
    for (int s = 0; s < a->n_species; s++)
        if (sg_small(a, st, s) && a->n_layers[s] > maxnl) maxnl = a->n_layers[s];
    if (maxnl == 0) return NNPOPS_OK;
    int64_t act_off[NNPOPS__MAX_SPECIES][NNPOPS__ANI_MAX_LAYERS];
    for (int s = 0; s < a->n_species; s++) {
        if (!sg_small(a, st, s)) continue;
        int64_t r = 0;
        for (int l = 0; l + 1 < a->n_layers[s]; l++) {
            act_off[s][l] = r;
            r += Me * a->width[s][l + 1];
        }
    }
#define SACT(s, l) ((float *)((char *)st->d->work + L->small_act[s]) + act_off[s][l] * L->small_ld[s])
#define SW(s, l)                                                                                  \
    ((l) == 0 ? (const float *)first_layer(a, dev, st, s, moff)                                   \
              : W + a->w_off[s][l] + (size_t)moff * a->width[s][(l) + 1] * a->width[s][l])
#define SB(s, l) (W + a->b_off[s][l] + (size_t)moff * a->width[s][(l) + 1])
    nnpops__sg_group g;
    /* the output layer: fused into the last hidden layer's launch (its epilogue adds the energies
     * with atomics and writes the backward seed), or, in deterministic mode, its own grouped
     * launch with the members summed in order */
    nnpops__ani_output_args oa[NNPOPS__MAX_SPECIES];
    const float *ow[NNPOPS__MAX_SPECIES], *ob[NNPOPS__MAX_SPECIES];
    float *oA[NNPOPS__MAX_SPECIES];
    int32_t no = 0, out_of[NNPOPS__MAX_SPECIES];
    for (int s = 0; s < a->n_species; s++) {
        out_of[s] = -1;
        if (!sg_small(a, st, s)) continue;
        const int lo = a->n_layers[s] - 1;
        out_of[s] = no;
        oa[no] = (nnpops__ani_output_args){
            .n = st->col_count[s],
            .members = (int32_t)Me,
            .width = a->width[s][lo],
            .alpha = a->alpha,
            .lda = L->small_ld[s],
            .need_grad = st->d->need_grad,
            .member_offset = (int32_t)moff,
            .ensemble = a->ensemble,
            .member = st->d->member,
            .self_energy = a->self_energy[s],
            .centers = st->centers + st->col_start[s],
            .atom_energy = st->d->atom_energy,
            .member_energy = st->d->member_atom_energy,
            .deterministic = st->d->deterministic,
        };
        ow[no] = SW(s, lo);
        ob[no] = SB(s, lo);
        oA[no] = SACT(s, lo - 1);
        no++;
    }
    /* the output layer fused into the last hidden layer's launch, except in deterministic mode */
    const int fuse_out = !st->d->deterministic;
    int fused[NNPOPS__MAX_SPECIES] = {0};
    /* the tails (hidden layers 1 on, output layer, their backward) in one launch when every small
     * species' network can (nnpops__sg_tail_supported) */
    nnpops__sg_tail tails[NNPOPS__MAX_SPECIES];
    int32_t nt = 0;
    int use_tail = fuse_out;
    for (int s = 0; s < a->n_species && use_tail; s++) {
        if (!sg_small(a, st, s)) continue;
        const int lo = a->n_layers[s] - 1;
        nnpops__sg_tail *t = &tails[nt++];
        memset(t, 0, sizeof *t);
        t->hidden = lo;
        if (lo < 2 || lo > NNPOPS__SG_TAIL_MAX_HIDDEN) {
            use_tail = 0;
            break;
        }
        for (int l = 0; l < lo; l++) t->width[l] = a->width[s][l + 1];
        for (int l = 1; l <= lo; l++) {
            t->W[l] = SW(s, l);
            t->b[l] = SB(s, l);
        }
        t->A = SACT(s, 0);
        t->out = oa[out_of[s]];
        if (st->col_count[s] > NNPOPS_SG_TAIL_MAX_COLS || !nnpops__sg_tail_supported(t))
            use_tail = 0;
    }
    /* forward: hidden layer l of every small species that has it (only the first with the tails) */
    for (int l = 0; l + 1 < (use_tail ? 2 : maxnl); l++) {
        memset(&g, 0, sizeof g);
        g.alpha = a->alpha;
        for (int s = 0; s < a->n_species; s++) {
            if (!sg_small(a, st, s) || l + 1 >= a->n_layers[s]) continue;
            const int32_t *w = a->width[s];
            const int64_t lds = L->small_ld[s];
            nnpops__sg_problem *p = &g.p[g.count++];
            p->trans = 0;
            p->epilogue = NNPOPS__SG_BIAS_CELU;
            p->n = st->col_count[s];
            p->k = l == 0 ? Lf : w[l];
            p->A = SW(s, l);
            p->lda = p->k;
            p->bias = SB(s, l);
            p->C = SACT(s, l);
            p->ldc = lds;
            if (l == 0) {
                p->m = Me * w[1];
                p->batch = 1;
                p->B = aev + st->col_start[s];
                p->ldb = ld;
            } else {
                p->m = w[l + 1];
                p->batch = Me;
                p->stride_a = (int64_t)w[l + 1] * w[l];
                p->B = SACT(s, l - 1);
                p->ldb = lds;
                p->stride_b = (int64_t)w[l] * lds;
                p->stride_c = (int64_t)w[l + 1] * lds;
            }
            if (fuse_out && l >= 1 && l + 2 == a->n_layers[s]) { /* the last hidden layer */
                p->epilogue = NNPOPS__SG_BIAS_CELU_OUT;
                p->out = oa[out_of[s]];
                p->out_w = ow[out_of[s]];
                p->out_b = ob[out_of[s]];
                fused[out_of[s]] = 1;
            }
        }
        TRY(nnpops__small_gemm_cuda_f32(&g, NULL, 0, st->stream));
    }
    if (use_tail) {
        TRY(nnpops__sg_tail_cuda_f32(tails, nt, a->alpha, st->stream));
        if (!st->d->need_grad) return NNPOPS_OK;
        goto adjoint;
    }
    /* output layers, energies, backward seeds of the species not fused (deterministic mode, or a
     * single hidden layer): one grouped launch */
    int32_t nu = 0;
    for (int32_t q = 0; q < no; q++) {
        if (fused[q]) continue;
        oa[nu] = oa[q];
        ow[nu] = ow[q];
        ob[nu] = ob[q];
        oA[nu] = oA[q];
        nu++;
    }
    if (nu) TRY(nnpops__ani_output_group_cuda_f32(nu, oa, ow, ob, oA, st->stream));
    if (!st->d->need_grad) return NNPOPS_OK;
    /* backward through the hidden layers: step d handles layer n_layers - 2 - d of each species */
    for (int d = 0; d + 2 < maxnl; d++) {
        memset(&g, 0, sizeof g);
        g.alpha = a->alpha;
        for (int s = 0; s < a->n_species; s++) {
            if (!sg_small(a, st, s)) continue;
            const int l = a->n_layers[s] - 2 - d;
            if (l < 1) continue;
            const int32_t *w = a->width[s];
            const int64_t lds = L->small_ld[s];
            nnpops__sg_problem *p = &g.p[g.count++];
            p->trans = 1;
            p->epilogue = NNPOPS__SG_CELU_ACT;
            p->m = w[l];
            p->k = w[l + 1];
            p->n = st->col_count[s];
            p->batch = Me;
            p->A = SW(s, l);
            p->lda = w[l];
            p->stride_a = (int64_t)w[l + 1] * w[l];
            p->B = SACT(s, l);
            p->ldb = lds;
            p->stride_b = (int64_t)w[l + 1] * lds;
            p->C = SACT(s, l - 1);
            p->ldc = lds;
            p->stride_c = (int64_t)w[l] * lds;
        }
        if (g.count) TRY(nnpops__small_gemm_cuda_f32(&g, NULL, 0, st->stream));
    }
adjoint:
    /* dE/dAEV = sum over members of dZ0_m . W0_m, over the species' AEV columns */
    memset(&g, 0, sizeof g);
    g.alpha = a->alpha;
    for (int s = 0; s < a->n_species; s++) {
        if (!sg_small(a, st, s)) continue;
        const int32_t *w = a->width[s];
        nnpops__sg_problem *p = &g.p[g.count++];
        p->trans = 1;
        p->epilogue = NNPOPS__SG_STORE;
        p->m = Lf;
        p->k = Me * w[1];
        p->n = st->col_count[s];
        p->batch = 1;
        p->A = SW(s, 0);
        p->lda = Lf;
        p->B = SACT(s, 0);
        p->ldb = L->small_ld[s];
        p->C = aev + st->col_start[s];
        p->ldc = ld;
        if (L->ksplit > 1) { /* the slices' partial sums, added by the AEV adjoint */
            p->C = (float *)((char *)st->d->work + L->kpart) + st->col_start[s];
            p->split = L->ksplit;
            p->split_stride = Lf * ld;
        }
    }
#undef SACT
#undef SW
#undef SB
    return nnpops__small_gemm_cuda_f32(&g, NULL, 0, st->stream);
}

/* One GEMM of the cuBLAS path: C = beta C + A op(W), A the activations (m x k, column major), W
 * layer l of species s from member moff on (op(W) = W^T forward, W backward, `trans_b`; batch
 * entries one member apart).  When tc (the species' GEMMs on the tensor cores): 3xTF32 with the
 * weights' stacked copy (stk_n forward, stk_b backward: both K-major, so both products run as
 * op(B) = B) and the activations stacked into the layout's tc space here (inner groups of kg: k,
 * or one member's width when the inner dimension runs over the members) or, when `stacked`,
 * already there from the elementwise step before; otherwise plain FP32 / FP64 through
 * nnpops__gemm_cuda on the arena. */
static nnpops_status net_gemm(const nnpops__ani *a, const ani_dev *dev, const ani_step *st,
                              const ani_branch *B, int tc, int trans_b, int s, int l,
                              int64_t moff, int64_t m, int64_t n, int64_t k, int64_t kg,
                              int stacked, const void *A, int64_t lda, int64_t stride_a,
                              double beta, void *C, int64_t ldc, int64_t stride_c, int64_t batch) {
    const ani_set *S = l == 0 ? st->set : NULL;
    const int64_t in = l == 0 ? aev_of(a, st)->aev_len : a->width[s][l];
    const int64_t out = a->width[s][l + 1], M = a->ensemble;
    const size_t o = S ? 0 : a->w_off[s][l];
    if (tc) {
        const float *stk_b = S ? S->stk_b0[s] : dev->stk_b, *stk_n = S ? S->stk_n0[s] : dev->stk_n;
        const float *B3 = trans_b ? stk_b + 3 * o + (size_t)(3 * out * moff)
                                  : stk_n + 3 * (o + (size_t)(moff * out * in));
        const int64_t ldb3 = trans_b ? 3 * M * out : 3 * in;
        const int64_t stride_b3 = trans_b ? 3 * out : 3 * out * in;
        float *A3 = (float *)((char *)st->d->work + B->tc);
        if (stacked) {
            const int64_t ld3 = nnpops__tf32_stack_ld(m);
            return nnpops__gemm_cuda_3xtf32_stacked(st->blas, st->stream, 0, 0, m, n, k, A3, ld3,
                                                    3 * k * ld3, B3, ldb3, stride_b3, beta, C,
                                                    ldc, stride_c, batch);
        }
        return nnpops__gemm_cuda_3xtf32(st->blas, st->stream, 0, 0, m, n, k, kg, A, lda, stride_a,
                                        B3, ldb3, stride_b3, beta, C, ldc, stride_c, batch, A3,
                                        B->tc_bytes);
    }
    const char *Wp = l == 0 ? (const char *)first_layer(a, dev, st, s, moff)
                            : (const char *)dev->arena +
                                  a->elem_size * (o + (size_t)(moff * out * in));
    return nnpops__gemm_cuda(st->blas, st->stream, a->precision, 0, trans_b, m, n, k, A, lda,
                             stride_a, Wp, in, out * in, beta, C, ldc, stride_c, batch);
}

/* Bias + CELU of the activations Z (cols x width, ld ldc) in place; stack_g > 0 (float32 with the
 * tensor cores): also their stacked copy, groups of stack_g, into the tc space for the next GEMM
 * (net_gemm with `stacked`). */
static nnpops_status bias_celu_step(const nnpops__ani *a, const ani_step *st,
                                    const ani_branch *B, int64_t cols, int64_t width,
                                    const char *b, char *Z, int64_t ldc, int64_t stack_g) {
    if (a->precision == NNPOPS_FLOAT64)
        return nnpops__bias_celu_cuda_f64(cols, width, a->alpha, (const double *)b, (double *)Z,
                                          ldc, st->stream);
    if (stack_g > 0)
        return nnpops__bias_celu_stack_cuda_f32(cols, width, a->alpha, (const float *)b,
                                                (float *)Z, ldc, stack_g,
                                                (float *)((char *)st->d->work + B->tc),
                                                nnpops__tf32_stack_ld(cols), st->stream);
    return nnpops__bias_celu_cuda_f32(cols, width, a->alpha, (const float *)b, (float *)Z, ldc,
                                      st->stream);
}

/* dZ = dA CELU'(A) (cols x width, ld ldc) over the activations A in place; stack_g > 0: into the
 * stacked copy only, as bias_celu_step. */
static nnpops_status celu_bwd_step(const nnpops__ani *a, const ani_step *st,
                                   const ani_branch *B, int64_t cols, int64_t width,
                                   const char *dA, char *A, int64_t ldc, int64_t stack_g) {
    if (a->precision == NNPOPS_FLOAT64)
        return nnpops__celu_backward_act_cuda_f64(cols, width, a->alpha, (const double *)dA, ldc,
                                                  (double *)A, ldc, st->stream);
    if (stack_g > 0)
        return nnpops__celu_backward_act_stack_cuda_f32(
            cols, width, a->alpha, (const float *)dA, ldc, (float *)A, ldc, stack_g,
            (float *)((char *)st->d->work + B->tc), nnpops__tf32_stack_ld(cols), st->stream);
    return nnpops__celu_backward_act_cuda_f32(cols, width, a->alpha, (const float *)dA, ldc,
                                              (float *)A, ldc, st->stream);
}

/* The species the AEV kernels take: a species set's restricted AEV the ranked ones (see the
 * header), the model's AEV the species themselves. */
static const int32_t *aev_species(const ani_step *st) {
    return st->set ? st->species_rank : st->d->species;
}

/* The AEV (backward: its adjoint) of the step's columns c0 .. c0 + n, on `stream`. */
static nnpops_status aev_cols(const nnpops__ani *a, const ani_step *st, int backward,
                              int64_t c0, int64_t n, char *aev, void *stream) {
    const int det = st->d->deterministic;
    const int32_t *centers = st->centers + c0;
    char *X = aev + a->elem_size * (size_t)c0;
    const int64_t ld = st->n_cols;
    const nnpops__aev_desc *d = aev_of(a, st);
    const int32_t *species = aev_species(st);
    if (a->precision == NNPOPS_FLOAT64) {
        if (backward)
            return (det ? nnpops__aev_backward_det_cuda_f64 : nnpops__aev_backward_cuda_f64)(
                d, n, centers, st->d->start, NULL, st->d->pairs, st->d->vec, species,
                (const double *)X, ld, st->d->pair_grad, st->d->capacity, st->d->pot_capacity, st->d->status,
                stream);
        return (det ? nnpops__aev_forward_det_cuda_f64 : nnpops__aev_forward_cuda_f64)(
            d, n, centers, st->d->start, NULL, st->d->pairs, st->d->vec, species, (double *)X, ld,
            st->d->capacity, st->d->pot_capacity, st->d->status, stream);
    }
    if (backward)
        return (det ? nnpops__aev_backward_det_cuda_f32 : nnpops__aev_backward_cuda_f32)(
            d, n, centers, st->d->start, NULL, st->d->pairs, st->d->vec, species,
            (const float *)X, ld, st->d->pair_grad, st->d->capacity, st->d->pot_capacity, st->d->status, stream);
    return (det ? nnpops__aev_forward_det_cuda_f32 : nnpops__aev_forward_cuda_f32)(
        d, n, centers, st->d->start, NULL, st->d->pairs, st->d->vec, species, (float *)X, ld,
        st->d->capacity, st->d->pot_capacity, st->d->status, stream);
}

/* A CUDA runtime call of the step's stream plumbing (events) as a status. */
static nnpops_status cuda_call(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return NNPOPS_OK;
    (void)cudaGetLastError();
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: %s: %s", __FILE__, __LINE__, what,
                        cudaGetErrorString(e));
}

nnpops_status nnpops__ani_compute_cuda(const nnpops_model *model, const nnpops__dstep *step) {
    const nnpops__ani *a = model->impl;
    const ani_dev *dev = model->device_data;
    if (!dev) return nnpops__fail(NNPOPS_ERROR_INTERNAL, "ANI weights are not on the device");
    if (step->member < -1 || step->member >= a->ensemble)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "ensemble_member %d is out of range (-1 or 0..%d for model %s)",
                            (int)step->member, (int)a->ensemble - 1, model->name);
    ani_step view = view_of(a, step);
    const ani_step *st = &view;
    if (step->n_local <= 0 || st->n_cols <= 0) return NNPOPS_OK;
    const ani_layout L = layout_of(a, st);
    if (step->work_bytes < L.total)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "ANI GPU work space: %zu bytes, %zu needed",
                            step->work_bytes, L.total);
    /* the columns (and the ranked species of a set) from the species on the device */
    {
        nnpops__ani_columns_args ca;
        memset(&ca, 0, sizeof ca);
        ca.n_atoms = step->n_atoms;
        ca.n_local = step->n_local;
        ca.n_species = a->n_species;
        for (int s = 0; s <= a->n_species; s++) ca.start[s] = st->col_start[s];
        int32_t *rank = NULL;
        if (st->set) {
            nnpops__species_ranks(st->set->present, a->n_species, ca.rank_of);
            rank = (int32_t *)((char *)step->work + L.rank);
        }
        int32_t *centers = (int32_t *)((char *)step->work + L.centers);
        TRY(nnpops__ani_columns_cuda(&ca, step->species, centers, rank, step->stream));
        view.centers = centers;
        view.species_rank = rank;
    }
    const ani_state *state = step->pot_state;
    const int n_side = state ? state->n_side : 0;
    const int f64 = a->precision == NNPOPS_FLOAT64;
    const size_t es = a->elem_size;
    char *work = st->d->work;
    char *aev = work + L.aev;
    const char *W = dev->arena;
    const int64_t Lf = aev_of(a, st)->aev_len, ld = st->n_cols;
    void *stream = st->stream;

    const int det = st->d->deterministic;
    const int all = st->d->member < 0 || st->d->member_atom_energy != NULL;
    const int64_t Me = all ? a->ensemble : 1;
    const int64_t moff = all ? 0 : st->d->member;
    /* the cuBLAS-path species' branches fork off the step's stream (branch 0 stays on it, after
     * the small species' networks) and join it again at the end; branches beyond the step's side
     * streams run on the step's stream, in turn.  With branches, each species' AEV and AEV adjoint
     * run in its branch (a launch over its own columns: the center lists give every entry to one
     * center, so the adjoints of different species write disjoint entries), so that one species'
     * AEV overlaps another's networks; without, one launch each over all columns. */
    ani_step side[ANI_MAX_BRANCHES];
    int n_fork = 0; /* branches on side streams: 1 .. n_fork */
    for (int b = 0; b < L.n_branch; b++) {
        side[b] = *st;
        if (b == 0 || b > n_side) continue;
        side[b].stream = state->side[b - 1];
        side[b].blas = state->side_blas[b - 1];
        n_fork = b;
    }
    const int split = n_fork > 0;
    if (split) {
        TRY(cuda_call(cudaEventRecord(state->fork_event, (cudaStream_t)stream),
                      "cudaEventRecord (fork)"));
        for (int b = 1; b <= n_fork; b++)
            TRY(cuda_call(cudaStreamWaitEvent((cudaStream_t)side[b].stream,
                                              state->fork_event, 0),
                          "cudaStreamWaitEvent (fork)"));
        for (int s = 0; s < a->n_species; s++)
            if (sg_small(a, st, s))
                TRY(aev_cols(a, st, 0, st->col_start[s], st->col_count[s], aev, stream));
    } else {
        TRY(aev_cols(a, st, 0, 0, st->n_cols, aev, stream));
    }
    if (!f64) TRY(sg_networks(model, st, &L, Me, moff));
    if (split && st->d->need_grad)
        for (int s = 0; s < a->n_species; s++)
            if (sg_small(a, st, s))
                TRY(aev_cols(a, st, 1, st->col_start[s], st->col_count[s], aev, stream));
    for (int s = 0; s < a->n_species; s++) {
        const int64_t ns = st->col_count[s];
        if (ns <= 0 || L.branch_of[s] < 0) continue;
        const ani_branch *B = &L.br[L.branch_of[s]];
        const ani_step *sb = &side[L.branch_of[s]];
        char *act = work + B->act, *tmp = work + B->tmp;
        const int64_t ldc = B->ldc;
        const int nl = a->n_layers[s];
        const int32_t *w = a->width[s];
        if (nl < 2)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                                "model %s: the GPU path needs at least one hidden layer (species %s "
                                "has none)",
                                model->name, nnpops__element_symbols[model->species_z[s]]);
        /* activations of hidden layer l (output width w[l+1]) start at row act_off[l] */
        int64_t act_off[NNPOPS__ANI_MAX_LAYERS];
        {
            int64_t r = 0;
            for (int l = 0; l + 1 < nl; l++) {
                act_off[l] = r;
                r += Me * w[l + 1];
            }
        }
#define ACT(l) (act + es * (size_t)act_off[l] * (size_t)ldc)
#define WPTR(l, m) (W + es * (a->w_off[s][l] + (size_t)(m) * (size_t)w[(l) + 1] * (size_t)w[l]))
#define BPTR(l, m) (W + es * (a->b_off[s][l] + (size_t)(m) * (size_t)w[(l) + 1]))
        if (split) TRY(aev_cols(a, st, 0, st->col_start[s], ns, aev, sb->stream));
        for (int64_t c0 = 0; c0 < ns; c0 += NNPOPS__ANI_CUDA_CHUNK) {
            const int64_t cols = ns - c0 < NNPOPS__ANI_CUDA_CHUNK ? ns - c0 : NNPOPS__ANI_CUDA_CHUNK;
            /* the GEMMs run over the columns rounded up to 4 (inside the species' padding to 32;
             * the extra rows are independent and never read back): cuBLAS takes its 16-byte
             * aligned kernels only then (an odd count gets align1 kernels, a quarter slower) */
            const int64_t gm = (cols + 3) & ~(int64_t)3;
            char *X = aev + es * (size_t)(st->col_start[s] + c0);
            /* with the tensor cores, the elementwise step before a GEMM also stacks that GEMM's
             * operand (activations feeding a GEMM: ACT(l) for l < nl - 2) */
            const ani_set *set = st->set;
            const int tc = use_tc(a, sb, s) && dev->stk_n != NULL && (!set || set->stk_n0[s]);
#define STACK_G(l, g) (tc && (l) < nl - 2 ? (int64_t)(g) : 0)
            /* first layer of all Me members: one GEMM, then bias + CELU */
            TRY(net_gemm(a, dev, sb, B, tc, 0, s, 0, moff, gm, Me * w[1], Lf, Lf, 0, X, ld, 0, 0.0,
                         ACT(0), ldc, 0, 1));
            TRY(bias_celu_step(a, sb, B, cols, Me * w[1], BPTR(0, moff), ACT(0), ldc,
                               STACK_G(0, w[1])));
            /* hidden layers: strided-batched over members */
            for (int l = 1; l + 1 < nl; l++) {
                TRY(net_gemm(a, dev, sb, B, tc, 0, s, l, moff, gm, w[l + 1], w[l], w[l], tc,
                             ACT(l - 1), ldc, (int64_t)w[l] * ldc, 0.0, ACT(l), ldc,
                             (int64_t)w[l + 1] * ldc, Me));
                TRY(bias_celu_step(a, sb, B, cols, Me * w[l + 1], BPTR(l, moff), ACT(l), ldc,
                                   STACK_G(l, w[l + 1])));
            }
            /* output layer, energies, backward seed */
            const int lo = nl - 1;
            nnpops__ani_output_args oa = {
                .n = cols,
                .members = (int32_t)Me,
                .width = w[lo],
                .alpha = a->alpha,
                .lda = ldc,
                .need_grad = st->d->need_grad,
                .member_offset = (int32_t)moff,
                .ensemble = a->ensemble,
                .member = st->d->member,
                .self_energy = a->self_energy[s],
                .centers = st->centers + st->col_start[s] + c0,
                .atom_energy = st->d->atom_energy,
                .member_energy = st->d->member_atom_energy,
                .deterministic = det,
            };
            if (f64)
                TRY(nnpops__ani_output_cuda_f64(&oa, (const double *)WPTR(lo, moff),
                                                (const double *)BPTR(lo, moff),
                                                (double *)ACT(lo - 1), sb->stream));
            else
                TRY(nnpops__ani_output_cuda_f32(&oa, (const float *)WPTR(lo, moff),
                                                (const float *)BPTR(lo, moff), (float *)ACT(lo - 1),
                                                sb->stream));
            if (!st->d->need_grad) continue;
            /* backward through the hidden layers (ACT(nl - 2), the output kernel's seed, is not
             * stacked; the CELU' steps stack theirs) */
            for (int l = nl - 2; l >= 1; l--) {
                TRY(net_gemm(a, dev, sb, B, tc, 1, s, l, moff, gm, w[l], w[l + 1], w[l + 1],
                             tc && l < nl - 2, ACT(l), ldc, (int64_t)w[l + 1] * ldc, 0.0, tmp, ldc,
                             (int64_t)w[l] * ldc, Me));
                TRY(celu_bwd_step(a, sb, B, cols, Me * w[l], tmp, ACT(l - 1), ldc,
                                  STACK_G(l - 1, w[l])));
            }
            /* dE/dAEV = sum over members of dZ0_m . W0_m: one GEMM over the stacked members */
            TRY(net_gemm(a, dev, sb, B, tc, 1, s, 0, moff, gm, Lf, Me * w[1], w[1], tc && nl > 2,
                         ACT(0), ldc, 0, 0.0, X, ld, 0, 1));
#undef STACK_G
        }
#undef ACT
#undef WPTR
#undef BPTR
        if (split && st->d->need_grad) TRY(aev_cols(a, st, 1, st->col_start[s], ns, aev, sb->stream));
    }
    for (int b = 1; b <= n_fork; b++) {
        TRY(cuda_call(cudaEventRecord(state->join_event[b - 1],
                                      (cudaStream_t)side[b].stream),
                      "cudaEventRecord (join)"));
        TRY(cuda_call(cudaStreamWaitEvent((cudaStream_t)stream,
                                          state->join_event[b - 1], 0),
                      "cudaStreamWaitEvent (join)"));
    }
    if (!st->d->need_grad || split) return NNPOPS_OK;
    if (L.ksplit > 1) /* (float32, every species on the small path) */
        return nnpops__aev_backward_sum_cuda_f32(
            aev_of(a, st), st->n_cols, st->centers, st->d->start, NULL, st->d->pairs, st->d->vec,
            aev_species(st), (const float *)(work + L.kpart), ld,
            L.ksplit, Lf * ld, st->d->pair_grad, st->d->capacity, st->d->pot_capacity, st->d->status, stream,
            det);
    return aev_cols(a, st, 1, 0, st->n_cols, aev, stream);
}

int32_t nnpops__ani_cuda_capacity(const nnpops_model *model, int32_t need) {
    (void)model;
    return need <= 0 ? 64 : (need + 31) / 32 * 32;
}
