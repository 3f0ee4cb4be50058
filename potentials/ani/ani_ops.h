/*
 * ani_ops.h - ANI's own ops, each with its CPU twin (potentials/ani/cpu) and CUDA twin
 * (potentials/ani/cuda) declared here: the atomic environment vectors (aev.c, aev.cu), the
 * ensemble output layer and the small-n grouped GEMM of the species networks (networks.c,
 * networks.cu), the tails of small species' networks in one launch (tail.c, tail.cu), and the
 * grouping of the local atoms by species into the networks' columns (columns.c, columns.cu).  Layouts and conventions as
 * in kernels/cpu/kernels.h (pairs, CSR center lists, feature-major matrices, _f32 / _f64); the
 * ops shared by every potential (dense layers, GEMMs, reductions, neighbor search) are in
 * kernels/.
 *
 * The AEV (torchani's, with torchani's constants) of a center i with species S in total:
 *   radial block of neighbor species s (offset s * R, R = n_eta_r * n_shf_r), index e*n_shf_r + k:
 *       sum_j 0.25 exp(-eta_r[e] (d_ij - shf_r[k])^2) fc(d_ij, rc_r)
 *   angular block of the unordered neighbor species pair (s1 <= s2), block number
 *   s1*S - s1*(s1-1)/2 + (s2 - s1) (offset S*R + block * A, A = n_eta_a*n_zeta*n_shf_a*n_shf_z),
 *   index ((a*n_zeta + z)*n_shf_a + q)*n_shf_z + t:
 *       sum_{j<k} 2 ((1 + cos(theta_ijk - shf_z[t])) / 2)^zeta[z]
 *                  exp(-eta_a[a] ((d_ij + d_ik)/2 - shf_a[q])^2) fc(d_ij, rc_a) fc(d_ik, rc_a)
 *   with theta = acos(0.95 cos_ijk), cos_ijk = r_ij.r_ik / max(d_ij d_ik, 1e-10), and
 *   fc(d, rc) = 0.5 cos(pi d / rc) + 0.5 for d < rc, else 0. */
#ifndef NNPOPS_POTENTIALS_ANI_OPS_H
#define NNPOPS_POTENTIALS_ANI_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "kernels/cpu/fused.h"
#include "kernels/cpu/kernels.h"

/* ==== CPU twins (potentials/ani/cpu) ============================================================ */

/* ---- the ensemble output layer and the small-n grouped GEMM (potentials/ani/cpu/networks.c) ----
 * Layout as in kernels/cpu/fused.h (feature-major, X[f * ld + r] for column r < n).
 * ani_output: the output layer of `members` ensemble members over the n columns, the ensemble
 * mean (or one member) and self energy per atom, and the seed of the backward pass, in one sweep:
 *     y_m[r] = b[m] + sum_k w[m][k] A[m*width + k][r]          (REAL, k in order)
 *     atom_energy[centers[r]] = self + (member < 0 ? sum_m y_m / ensemble
 *                                                  : y_{member - member_offset})
 *     member_energy[centers[r] * ensemble + member_offset + m] = self + y_m
 *     need_grad: A[m*width + k][r] <- coef_m w[m][k] celu'(A[m*width + k][r])
 *   with coef_m = 1/ensemble (member < 0) or [member_offset + m == member]; the
 *   members of one call are members member_offset .. member_offset+members-1 of
 *   the model (w [members][width], b [members]).  The CUDA twin ADDS each
 *   member's share to atom_energy (atomics), so there it must be zero on entry;
 *   its sums run in another order (equal to rounding).
 */
typedef struct nnpops__ani_output_args {
    int64_t n;               /* columns */
    int32_t members;         /* members in this call */
    int32_t width;           /* width of the last hidden layer */
    double alpha;            /* CELU alpha */
    int64_t lda;
    int32_t need_grad;
    int32_t member_offset;   /* model index of the first member of this call */
    int32_t ensemble;        /* members of the model */
    int32_t member;          /* -1: ensemble mean (then members == ensemble); else that member */
    double self_energy;      /* of this species, model energy unit */
    const int32_t *centers;  /* [n] atom of each column */
    double *atom_energy;     /* [n_atoms] */
    double *member_energy;   /* [n_atoms][ensemble] or NULL */
    int32_t deterministic;   /* GPU only: 1 = members summed in order by one thread per column,
                              * atom_energy written (no atomics); the CPU twin always is */
} nnpops__ani_output_args;

void nnpops__ani_output_cpu_f32(const nnpops__ani_output_args *args, const float *w, const float *b,
                                float *A);
void nnpops__ani_output_cpu_f64(const nnpops__ani_output_args *args, const double *w,
                                const double *b, double *A);

/* ---- small-n grouped GEMM (float32): the fused-ensemble layers of species with few atoms -------
 * A group of independent problems (at most NNPOPS__SG_MAX_PROBLEMS; the GPU launcher runs them in
 * launches of at most NNPOPS__SG_PER_LAUNCH problems of one kind, trans 0 or 1).  Problem p, batch
 * entry t < batch, rows i < m, columns r < n (n <= NNPOPS__SG_MAX_COLS), A_t = A + t stride_a,
 * B_t = B + t stride_b, C_t = C + t stride_c:
 *     s[i][r] = sum_j op(A_t)[i][j] B_t[j * ldb + r]      j < k (in order on the CPU)
 *               op(A)[i][j] = A[i * lda + j] (trans 0: W [m][k], a forward layer)
 *                           = A[j * lda + i] (trans 1: W [k][m], a backward layer)
 *     C_t[i * ldc + r] = NNPOPS__SG_STORE:      s
 *                        NNPOPS__SG_BIAS_CELU:  celu(s + bias[t * m + i])   (bias may be NULL)
 *                        NNPOPS__SG_CELU_ACT:   s * celu'(C_t[i * ldc + r])  (C holds the
 *                                               activation on entry, as nnpops__celu_backward_act)
 *                        NNPOPS__SG_BIAS_CELU_OUT: the activation as NNPOPS__SG_BIAS_CELU, then
 *                                               the output layer over it: exactly
 *                                               nnpops__ani_output_cpu_f32(&out, out_w, out_b, C)
 *                                               (trans 0, batch = out.members, stride_c =
 *                                               m * ldc: batch entry t is member
 *                                               out.member_offset + t; out.width = m, out.lda =
 *                                               ldc, out.n = n): the last hidden layer and the
 *                                               output layer in one launch
 * With a k split (split > 1) each slice of the inner dimension is summed into its own copy of C
 * (see the field).  Only columns r < n are read from B and written to C.  The CUDA twin
 * (kernels_cuda.h) sums each output within one block in a fixed order (no work space):
 * deterministic, equal to this twin to rounding. */
#define NNPOPS__SG_MAX_PROBLEMS 32
#define NNPOPS__SG_PER_LAUNCH 8
/* 96: a protein's nitrogen atoms (~80) still take the small path, which is faster for them than
 * the tensor-core GEMMs; 64 or 128 gave slower steps, other systems even */
#define NNPOPS__SG_MAX_COLS 96
enum {
    NNPOPS__SG_STORE = 0,
    NNPOPS__SG_BIAS_CELU = 1,
    NNPOPS__SG_CELU_ACT = 2,
    NNPOPS__SG_BIAS_CELU_OUT = 3
};

typedef struct nnpops__sg_problem {
    int32_t trans, epilogue;
    int64_t m, k, n, batch;
    const float *A;
    int64_t lda, stride_a;
    const float *B;
    int64_t ldb, stride_b;
    float *C;
    int64_t ldc, stride_c;
    const float *bias;
    /* k split (trans 1 with NNPOPS__SG_STORE only; 0 or 1: none): slice j < split of the inner
     * dimension, j kper <= j' < min(k, (j + 1) kper) with kper = nnpops__sg_split_k(k, split),
     * is summed into C_t + j split_stride (the caller adds the slices: more blocks, each with a
     * shorter chain of loads, for products with few outputs and a long inner dimension) */
    int32_t split;
    int64_t split_stride;
    /* NNPOPS__SG_BIAS_CELU_OUT: the output layer (its weights [members][m], biases [members]);
     * the CUDA twin ADDS the energies (atomics: out.atom_energy and out.member_energy zero on
     * entry) and needs out.deterministic = 0 */
    nnpops__ani_output_args out;
    const float *out_w, *out_b;
} nnpops__sg_problem;

/* Slices of a problem's k split (split 0 or 1: one). */
static inline int32_t nnpops__sg_slices(int32_t split) { return split > 1 ? split : 1; }

/* Inner rows per slice of a k split (a multiple of 4). */
static inline int64_t nnpops__sg_split_k(int64_t k, int32_t split) {
    return split > 1 ? ((k + split - 1) / split + 3) / 4 * 4 : k;
}

typedef struct nnpops__sg_group {
    int32_t count;
    double alpha; /* CELU alpha */
    nnpops__sg_problem p[NNPOPS__SG_MAX_PROBLEMS];
} nnpops__sg_group;

/* Bytes of GPU work space of the group: none since the CUDA twin sums every output within one
 * block (kept so that callers size and pass `work` as before; it may be NULL). */
static inline size_t nnpops__small_gemm_work_bytes(const nnpops__sg_group *g) {
    (void)g;
    return 0;
}

void nnpops__small_gemm_cpu_f32(const nnpops__sg_group *g);

/* Largest number of values of each descriptor constant list. */
#define NNPOPS__AEV_MAX_TERMS 32

/* The descriptor constants (passed by value to GPU kernels; double holds the float32-rounded
 * values of the model file exactly).  Lengths in angstrom. */
typedef struct nnpops__aev_desc {
    int32_t n_species;
    int32_t n_eta_r, n_shf_r;                  /* radial */
    int32_t n_eta_a, n_zeta, n_shf_a, n_shf_z; /* angular */
    int32_t radial_len;                        /* n_eta_r * n_shf_r: one radial block */
    int32_t angular_len;                       /* n_eta_a * n_zeta * n_shf_a * n_shf_z: one block */
    int32_t aev_len;                           /* S * radial_len + S (S+1)/2 * angular_len */
    double rc_r, rc_a;
    double eta_r[NNPOPS__AEV_MAX_TERMS], shf_r[NNPOPS__AEV_MAX_TERMS];
    double eta_a[NNPOPS__AEV_MAX_TERMS], zeta[NNPOPS__AEV_MAX_TERMS];
    double shf_a[NNPOPS__AEV_MAX_TERMS], shf_z[NNPOPS__AEV_MAX_TERMS];
} nnpops__aev_desc;

/* ---- AEV (potentials/ani/cpu/aev.c) ----
 * Work space of the AEV kernels in bytes (64-byte aligned, caller-owned, reused by every call)
 * for centers with at most max_entries entries. */
size_t nnpops__aev_work_bytes(const nnpops__aev_desc *desc, int64_t max_entries);

/* Forward: for the n columns r < n, center atom centers[r]: writes its full AEV into column r
 * of aev (feature-major, [aev_len][ld]; every value is overwritten).  species [n_atoms]. */
void nnpops__aev_forward_cpu_f32(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                 const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                 const double *pair_vec, const int32_t *species, float *aev,
                                 int64_t ld, void *work);
void nnpops__aev_forward_cpu_f64(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                 const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                 const double *pair_vec, const int32_t *species, double *aev,
                                 int64_t ld, void *work);

/* Backward: given g = dE/dAEV of the n centers (feature-major [aev_len][ld], column r for center
 * centers[r]), ADDS dE/dr_p into pair_grad[p] ([n_pairs][3], double) for every pair the centers
 * see: + for entries 2p (vector +r_p), - for entries 2p+1 (vector -r_p). */
void nnpops__aev_backward_cpu_f32(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                  const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                  const double *pair_vec, const int32_t *species,
                                  const float *grad_aev, int64_t ld, double *pair_grad,
                                  void *work);
void nnpops__aev_backward_cpu_f64(const nnpops__aev_desc *desc, int64_t n, const int32_t *centers,
                                  const int64_t *start, const int64_t *entry, const int32_t *pairs,
                                  const double *pair_vec, const int32_t *species,
                                  const double *grad_aev, int64_t ld, double *pair_grad,
                                  void *work);

/* The same, where other threads may add to the same pair_grad entries at once (the centers of
 * one pair in two threads' calls): atomic additions.  Each pair receives at most two terms (one
 * from each of its centers, or both from one center for an atom's own image), added to zero, so
 * the sums do not depend on their order: the same bits as nnpops__aev_backward_cpu_*. */
void nnpops__aev_backward_shared_cpu_f32(const nnpops__aev_desc *desc, int64_t n,
                                         const int32_t *centers, const int64_t *start,
                                         const int64_t *entry, const int32_t *pairs,
                                         const double *pair_vec, const int32_t *species,
                                         const float *grad_aev, int64_t ld, double *pair_grad,
                                         void *work);
void nnpops__aev_backward_shared_cpu_f64(const nnpops__aev_desc *desc, int64_t n,
                                         const int32_t *centers, const int64_t *start,
                                         const int64_t *entry, const int32_t *pairs,
                                         const double *pair_vec, const int32_t *species,
                                         const double *grad_aev, int64_t ld, double *pair_grad,
                                         void *work);

/* The AEV kernels in a chosen variant (tests: all give the same bits): isa 0 16-byte vectors, 1
 * 32-byte vectors, 2 64-byte vectors; backward 0: nnpops__aev_forward_cpu_* (aev_or_grad: the
 * AEV written, pair_grad unused), 1: nnpops__aev_backward_cpu_* (aev_or_grad: dE/dAEV, read).
 * Returns 0 when the variant is not available on this machine (nothing computed), else 1. */
int nnpops__aev_variant_cpu_f32(int isa, int backward, const nnpops__aev_desc *desc, int64_t n,
                                const int32_t *centers, const int64_t *start,
                                const int64_t *entry, const int32_t *pairs,
                                const double *pair_vec, const int32_t *species,
                                float *aev_or_grad, int64_t ld, double *pair_grad, void *work);
int nnpops__aev_variant_cpu_f64(int isa, int backward, const nnpops__aev_desc *desc, int64_t n,
                                const int32_t *centers, const int64_t *start,
                                const int64_t *entry, const int32_t *pairs,
                                const double *pair_vec, const int32_t *species,
                                double *aev_or_grad, int64_t ld, double *pair_grad, void *work);
/* The natural logarithm of the AEV kernels (kernels/cpu/vmath.h) in a chosen variant: y[i] =
 * ln x[i] for positive normal x (tests).  Returns 0 when the variant is not available. */
int nnpops__log_variant_cpu_f32(int isa, int64_t n, const float *x, float *y);
int nnpops__log_variant_cpu_f64(int isa, int64_t n, const double *x, double *y);

/* The AEV restricted to the neighbor species of `present` (bit s: species s occurs among the
 * atoms; species s < full->n_species <= 32): *out is *full with the present species renumbered by
 * rank (rank[s], -1 for an absent species; rank has full->n_species entries), n_species their
 * count and aev_len recomputed.  The AEV of a center computed with *out and the ranks as species
 * is the subsequence of its full AEV made of the radial blocks of present species and the angular
 * blocks of pairs of present species, in the full order (ranks keep the order of the species and
 * of the pairs); the other entries of the full AEV are exactly zero, with no terms behind them,
 * and so are their gradients' contributions.  map (NULL or out->aev_len entries) receives each
 * restricted entry's index in the full AEV.  Returns out->aev_len. */
int32_t nnpops__aev_desc_restrict(const nnpops__aev_desc *full, uint32_t present,
                                  nnpops__aev_desc *out, int32_t *rank, int32_t *map);

/* ---- the tail of small species' networks (float32) ---------------------------------------------
 * Hidden layers 1 .. h-1 of a network (bias + CELU), its output layer and, with out.need_grad,
 * the backward pass through them down to dE/dZ of hidden layer 0, for every member of the call:
 * the products of nnpops__small_gemm_cpu_f32 problems run layer after layer (the last hidden
 * layer as NNPOPS__SG_BIAS_CELU_OUT, the backward ones as trans 1 with NNPOPS__SG_CELU_ACT).
 * Member t (t < out.members) reads hidden layer 0's activations [width[0]][out.lda] at
 * A + t width[0] out.lda (columns r < out.n) and, with out.need_grad, overwrites them with
 * dE/dZ0 (the operand of the adjoint onto the AEV); the energies go where the output layer's
 * (out) do.  W[l] (1 <= l < h): member out.member_offset's layer from hidden l-1 to hidden l,
 * [width[l]][width[l-1]], the members' consecutive; W[h]: the output layer [width[h-1]] per
 * member; b[l]: biases [members][width[l]], b[h] [members].  The CUDA twin (below) runs a whole
 * group in one launch. */
#define NNPOPS__SG_TAIL_MAX_HIDDEN 6
typedef struct nnpops__sg_tail {
    int32_t hidden;                                 /* h: 2 .. NNPOPS__SG_TAIL_MAX_HIDDEN */
    int32_t width[NNPOPS__SG_TAIL_MAX_HIDDEN];      /* hidden widths */
    const float *W[NNPOPS__SG_TAIL_MAX_HIDDEN + 1]; /* W[0] unused */
    const float *b[NNPOPS__SG_TAIL_MAX_HIDDEN + 1]; /* b[0] unused */
    float *A;
    nnpops__ani_output_args out; /* out.width = width[h-1] */
} nnpops__sg_tail;

/* Floats of work space of the CPU twin: the activations of hidden layers 1 .. h-1. */
static inline int64_t nnpops__sg_tail_work_floats(const nnpops__sg_tail *t) {
    int64_t r = 0;
    for (int32_t l = 1; l < t->hidden; l++) r += t->width[l];
    return r * t->out.members * t->out.lda;
}
void nnpops__sg_tail_cpu_f32(const nnpops__sg_tail *t, double alpha, float *work);

/* ---- species columns (potentials/ani/cpu/columns.c) ----
 * The GPU step runs the element networks over the local atoms grouped by species into columns:
 * species s owns columns start[s] .. start[s+1] - 1 (start[] chosen by the host: start[0] = 0,
 * each species' atom count rounded up to a multiple of 32); its first columns hold its local atoms
 * (i < n_local) in increasing index, the rest are padding.  Writes centers[c] = the atom of column
 * c, or -1 for padding, for every c < start[n_species]; a species with more local atoms than its
 * columns fills them with its first atoms (never another species' columns).  When rank != NULL,
 * also rank[i] = rank_of[species[i]] for every atom i < n_atoms, ghosts too (each atom's species
 * in another numbering, e.g. ranked among the species present).  species [n_atoms], each in
 * 0 .. n_species - 1. */
typedef struct nnpops__ani_columns_args {
    int64_t n_atoms, n_local;
    int32_t n_species;
    int64_t start[NNPOPS__MAX_SPECIES + 1];
    int32_t rank_of[NNPOPS__MAX_SPECIES];
} nnpops__ani_columns_args;
void nnpops__ani_columns_cpu(const nnpops__ani_columns_args *a, const int32_t *species,
                             int32_t *centers, int32_t *rank);

/* ==== CUDA twins (potentials/ani/cuda; CUDA builds) ============================================== */

/* ---- AEV (potentials/ani/cuda/aev.cu) ------------------------------------------------------------------------------ *
 * Twins of nnpops__aev_forward_cpu_* / nnpops__aev_backward_cpu_*.  Extra behaviour:
 *  - entry may be NULL: entry e is 2 e (the center lists of nnpops__center_out); then the backward
 *    WRITES pair_grad[e] (each entry belongs to one center) instead of adding to it;
 *  - centers[r] < 0 marks a padding column (skipped);
 *  - at most max_angular entries within the angular cutoff per center are held in shared memory;
 *    a center with more sets NNPOPS__ST_POT_CAPACITY and status->pot_need (the step grows the
 *    potential's capacity, vt->cuda_capacity, and retries; see nnpops__aev_cuda_max_angular_limit);
 *  - `capacity` bounds the entries read (a truncated list after an overflow is never read out of
 *    bounds; its results are discarded by the caller).
 * The descriptor must have angular_len <= 1024 (NNPOPS_ERROR_UNSUPPORTED otherwise). */
int32_t nnpops__aev_cuda_max_angular_limit(const nnpops__aev_desc *desc, int precision);
nnpops_status nnpops__aev_forward_cuda_f32(const nnpops__aev_desc *desc, int64_t n,
                                           const int32_t *centers, const int64_t *start,
                                           const int64_t *entry, const int32_t *pairs,
                                           const double *pair_vec, const int32_t *species,
                                           float *aev, int64_t ld, int64_t capacity,
                                           int32_t max_angular, nnpops__dev_status *status,
                                           void *stream);
nnpops_status nnpops__aev_forward_cuda_f64(const nnpops__aev_desc *desc, int64_t n,
                                           const int32_t *centers, const int64_t *start,
                                           const int64_t *entry, const int32_t *pairs,
                                           const double *pair_vec, const int32_t *species,
                                           double *aev, int64_t ld, int64_t capacity,
                                           int32_t max_angular, nnpops__dev_status *status,
                                           void *stream);
nnpops_status nnpops__aev_backward_cuda_f32(const nnpops__aev_desc *desc, int64_t n,
                                            const int32_t *centers, const int64_t *start,
                                            const int64_t *entry, const int32_t *pairs,
                                            const double *pair_vec, const int32_t *species,
                                            const float *grad_aev, int64_t ld, double *pair_grad,
                                            int64_t capacity, int32_t max_angular,
                                            nnpops__dev_status *status, void *stream);
/* As nnpops__aev_backward_cuda_f32 (det: the deterministic twin) with dE/dAEV given as `slices`
 * slices grad_aev + j slice_stride, each [aev_len][ld] (the partial sums of a k-split adjoint,
 * nnpops__sg_problem.split), added in slice order. */
nnpops_status nnpops__aev_backward_sum_cuda_f32(
    const nnpops__aev_desc *desc, int64_t n, const int32_t *centers, const int64_t *start,
    const int64_t *entry, const int32_t *pairs, const double *pair_vec, const int32_t *species,
    const float *grad_aev, int64_t ld, int32_t slices, int64_t slice_stride, double *pair_grad,
    int64_t capacity, int32_t max_angular, nnpops__dev_status *status, void *stream, int det);
nnpops_status nnpops__aev_backward_cuda_f64(const nnpops__aev_desc *desc, int64_t n,
                                            const int32_t *centers, const int64_t *start,
                                            const int64_t *entry, const int32_t *pairs,
                                            const double *pair_vec, const int32_t *species,
                                            const double *grad_aev, int64_t ld, double *pair_grad,
                                            int64_t capacity, int32_t max_angular,
                                            nnpops__dev_status *status, void *stream);

/* Deterministic variants (option deterministic; entry == NULL center lists only): fixed-point
 * shared sums, bitwise reproducible for a given entry order (see aev.cu). */
nnpops_status nnpops__aev_forward_det_cuda_f32(const nnpops__aev_desc *desc, int64_t n,
                                               const int32_t *centers, const int64_t *start,
                                               const int64_t *entry, const int32_t *pairs,
                                               const double *pair_vec, const int32_t *species,
                                               float *aev, int64_t ld, int64_t capacity,
                                               int32_t max_angular, nnpops__dev_status *status,
                                               void *stream);
nnpops_status nnpops__aev_forward_det_cuda_f64(const nnpops__aev_desc *desc, int64_t n,
                                               const int32_t *centers, const int64_t *start,
                                               const int64_t *entry, const int32_t *pairs,
                                               const double *pair_vec, const int32_t *species,
                                               double *aev, int64_t ld, int64_t capacity,
                                               int32_t max_angular, nnpops__dev_status *status,
                                               void *stream);
nnpops_status nnpops__aev_backward_det_cuda_f32(const nnpops__aev_desc *desc, int64_t n,
                                                const int32_t *centers, const int64_t *start,
                                                const int64_t *entry, const int32_t *pairs,
                                                const double *pair_vec, const int32_t *species,
                                                const float *grad_aev, int64_t ld,
                                                double *pair_grad, int64_t capacity,
                                                int32_t max_angular, nnpops__dev_status *status,
                                                void *stream);
nnpops_status nnpops__aev_backward_det_cuda_f64(const nnpops__aev_desc *desc, int64_t n,
                                                const int32_t *centers, const int64_t *start,
                                                const int64_t *entry, const int32_t *pairs,
                                                const double *pair_vec, const int32_t *species,
                                                const double *grad_aev, int64_t ld,
                                                double *pair_grad, int64_t capacity,
                                                int32_t max_angular, nnpops__dev_status *status,
                                                void *stream);

/* ---- the tails of small species' networks (potentials/ani/cuda/tail.cu) ---- */
/* The tails of `count` networks (nnpops__sg_tail_cpu_f32: hidden layers 1 .. h-1, the output
 * layer adding the energies with atomics (out.atom_energy, out.member_energy zero on entry), the
 * backward pass down to dE/dZ0 written over t[q].A) in one launch per NNPOPS__SG_PER_LAUNCH
 * networks (thread block clusters, tail.cu).  Every network must pass nnpops__sg_tail_supported
 * (else NNPOPS_ERROR_UNSUPPORTED, nothing enqueued). */
nnpops_status nnpops__sg_tail_cuda_f32(const nnpops__sg_tail *t, int32_t count, double alpha,
                                       void *stream);
/* 1 when the current device runs network t's tail in one launch: compute capability 9.0 on, 2 to
 * NNPOPS__SG_TAIL_MAX_HIDDEN hidden layers, widths at most 256 and multiples of 4, 16-byte
 * aligned weights, out.n <= NNPOPS__SG_MAX_COLS, the atomic output form (not deterministic). */
int nnpops__sg_tail_supported(const nnpops__sg_tail *t);

/* ---- the ensemble output layer and the small-n grouped GEMM (potentials/ani/cuda/networks.cu) ----
 * nnpops__ani_output_cuda_* ADDS each member's share to args->atom_energy with atomics (the buffer
 * must be zero on entry; the CPU twin writes it). */
nnpops_status nnpops__ani_output_cuda_f32(const nnpops__ani_output_args *args, const float *w,
                                          const float *b, float *A, void *stream);
nnpops_status nnpops__ani_output_cuda_f64(const nnpops__ani_output_args *args, const double *w,
                                          const double *b, double *A, void *stream);

/* Twin of nnpops__small_gemm_cpu_f32: a group of small-n float32 GEMMs with fused
 * epilogues, plain FP32 FMA (no cuBLAS, no tensor cores), ONE launch per kind (trans 0, trans 1)
 * and NNPOPS__SG_PER_LAUNCH problems: each output is summed within one block, in a fixed order
 * (deterministic, no second pass; a k split's slices are summed by separate blocks into their
 * own copies of C, a slice per block).  Only the n real columns are computed (chunks of 8 or 16).
 * NNPOPS__SG_BIAS_CELU_OUT adds each block's part of the output layer's energies with atomics
 * (the entry's atom and member energies zero on entry; not deterministic: refused with
 * out.deterministic set).
 * work / work_bytes are unused (nnpops__small_gemm_work_bytes is 0; NULL is fine).  Used by the
 * ANI networks of species with at most NNPOPS__SG_MAX_COLS atoms (potentials/ani/ani_cuda.c). */
nnpops_status nnpops__small_gemm_cuda_f32(const nnpops__sg_group *g, void *work,
                                          size_t work_bytes, void *stream);
/* The output layers of `count` networks in one launch (per NNPOPS__SG_PER_LAUNCH entries and per
 * kind: entries with args[q].deterministic run the one-thread-per-column kernel): entry q is
 * nnpops__ani_output_cuda_f32(&args[q], w[q], b[q], A[q]), with its atomics / determinism. */
nnpops_status nnpops__ani_output_group_cuda_f32(int32_t count, const nnpops__ani_output_args *args,
                                                const float *const *w, const float *const *b,
                                                float *const *A, void *stream);

/* ---- species columns (potentials/ani/cuda/columns.cu) ---- */
/* Twin of nnpops__ani_columns_cpu (device arrays; the args by value): one launch. */
nnpops_status nnpops__ani_columns_cuda(const nnpops__ani_columns_args *a, const int32_t *species,
                                       int32_t *centers, int32_t *rank, void *stream);

#endif /* NNPOPS_POTENTIALS_ANI_OPS_H */
