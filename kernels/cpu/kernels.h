/*
 * kernels.h - the CPU ops any potential may use (neighbor search, center lists, reductions, dense
 * layers and activations), with plain-array signatures so that the CUDA twins
 * (kernels/cuda/<op>.cu, declared in kernels/cuda/kernels_cuda.h) take the same arguments.
 *
 * Every kernel exists in two precisions, suffix _f32 (float) and _f64 (double); REAL below
 * stands for float or double respectively.  Inputs that come from the step (pair vectors) are
 * always double; the _f32 kernels round them to float on load.  Accumulators that the caller
 * owns across kernels (pair gradients, energies) are always double.
 *
 * Layouts
 *  - Pairs: the step's half list, pairs[p] = (i, j) ([n_pairs][2]) with r_p = x_j - x_i + shift
 *    in pair_vec[p] ([n_pairs][3], angstrom).
 *  - Center lists (CSR): for center c (an atom index below n_centers), its neighbor entries
 *    are entry[start[c] .. start[c+1]).  An entry encodes a pair and the direction in which the
 *    center sees it: entry = 2 p + 0 when c is the pair's first atom (vector +r_p, neighbor j),
 *    entry = 2 p + 1 when c is the second atom (vector -r_p, neighbor i).  A pair (i, i, shift),
 *    an atom and its own periodic image, gives both entries to i.
 *  - Activations are FEATURE-MAJOR: a matrix of n atoms (columns) by F features (rows) is
 *    stored as X[f * ld + r], r < n <= ld.  A block of atoms is a column range; the dense layers
 *    then are plain row-major GEMMs whose inner loop runs over atoms.
 *  - Dense weights are row-major [out][in] (PyTorch's Linear layout), biases [out].
 */
#ifndef NNPOPS_KERNELS_CPU_KERNELS_H
#define NNPOPS_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"

/* ---- neighbor search on the CPU (kernels/cpu/neighbors.c) ----
 * Half list of all pairs closer than `cutoff` among the atoms of each system, each system with its
 * own cell and periodicity; atoms of system s are order[sys_start[s] .. sys_start[s+1]).  Pairs
 * whose atoms are both >= skip_from are omitted (ghost-ghost pairs).  Shift-0 pairs have i < j.
 * If more than `capacity` pairs exist, *n_pairs is set to the total and the first `capacity`
 * are written, returning NNPOPS_ERROR_NEIGHBOR_OVERFLOW (without setting an error message: the
 * caller grows and retries).  Bad cells are NNPOPS_ERROR_BAD_CELL, too many images
 * NNPOPS_ERROR_TOO_MANY_IMAGES (with messages naming the system). */
typedef struct nnpops__nbr_in {
    int64_t n_atoms;
    const double *positions;    /* [n_atoms][3] */
    int64_t n_systems;
    const int64_t *sys_start;   /* [n_systems + 1] */
    const int32_t *order;       /* [n_atoms] atom ids grouped by system */
    const double *cells;        /* [n_systems][9] rows a, b, c; NULL = none */
    const uint8_t *pbc;         /* [n_systems][3]; NULL = none */
    double cutoff;
    int64_t skip_from;          /* n_atoms = keep everything */
    int32_t max_images;         /* per axis */
} nnpops__nbr_in;

typedef struct nnpops__nbr_out {
    int64_t capacity;
    int64_t n_pairs;
    int32_t *pairs;     /* [capacity][2] */
    int32_t *shifts;    /* [capacity][3] integer lattice shifts, or NULL */
    double *vec;        /* [capacity][3] */
    double *dist;       /* [capacity] */
} nnpops__nbr_out;

nnpops_status nnpops__neighbors_cpu(const nnpops__nbr_in *in, nnpops__scratch *scratch,
                                    nnpops__nbr_out *out);

/* ---- reductions on the CPU (kernels/cpu/reduce.c) ---- */
/* forces [n_atoms][3], virials [n_systems][9], atomic_virials [n_atoms][9]: each may be NULL;
 * they are overwritten (not accumulated). */
void nnpops__pair_reduce_cpu(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                             int64_t n_pairs, const int32_t *pairs, const double *pair_vec,
                             const double *pair_grad, double *forces, double *virials,
                             double *atomic_virials);
/* energies[s] = sum of atom_energy over the atoms of s (float64). */
void nnpops__energy_reduce_cpu(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                               const double *atom_energy, int64_t width, double *energies);

/* Center lists (the "directed" neighbor layout of the GPU step): for every center c < n_centers
 * (local atom), its entries are e = start[c] .. start[c+1]-1 with pairs[e] = {c, j},
 * vec[e] = x_j - x_c + s . H (angstrom, double), shifts[e] = s, dist[e] = |vec[e]|: every atom
 * (or periodic image, own images included) within the cutoff, ghosts included.  A local-local
 * pair appears twice (once per center), so the list is also a valid pair list for
 * nnpops__pair_reduce_* whose pair p = entry e, and the CSR center lists of kernels.h are
 * start[] with entry[e] = 2 e.  CPU twin below; the CUDA version is in kernels/cuda. */
typedef struct nnpops__center_out {
    int64_t capacity;   /* entries the arrays hold */
    int64_t *start;     /* [n_centers + 1] (always complete, also on overflow) */
    int32_t *pairs;     /* [capacity][2] */
    int32_t *shifts;    /* [capacity][3] or NULL */
    double *vec;        /* [capacity][3] or NULL */
    double *dist;       /* [capacity] or NULL */
    nnpops__dev_status *status; /* n_entries, n_half, flags (TOO_CLOSE: min_distance > 0) */
} nnpops__center_out;
/* CPU twin: uses the half-list search (kernels/cpu/neighbors.c, scratch slots 0..2 and 10..11),
 * entries in pair order.  Errors of the half-list search are returned with their messages;
 * overflow and too-close pairs are reported in *status only (NNPOPS_OK). */
nnpops_status nnpops__center_neighbors_cpu(const nnpops__nbr_in *in, int64_t n_centers,
                                           double min_distance, nnpops__scratch *scratch,
                                           nnpops__center_out *out);

/* Column padding of the dense kernels (see below). */
#define NNPOPS__DENSE_PAD 16


/* ---- center lists (kernels/cpu/center_neighbors.c) ----
 * Builds the CSR lists of the centers 0 .. n_centers-1 (atoms at or above n_centers, ghosts, get
 * no list) from the half pair list.  start [n_centers + 1], entry [2 * n_pairs] (at most that many
 * are written).  Entries of a center are in pair order (deterministic).  Returns the largest
 * number of entries of one center. */
int64_t nnpops__center_lists_cpu(int64_t n_centers, int64_t n_pairs, const int32_t *pairs,
                                 int64_t *start, int64_t *entry);


/* The widest vectors this machine runs (kernels/cpu/mlp.c): 2 (64 bytes, AVX-512F), 1 (32 bytes,
 * AVX2 and FMA), 0 (16).  NNPOPS__CPU_X86: the build has the 32- and 64-byte variants (x86 with
 * GCC or Clang: vector extensions and target attributes); elsewhere nnpops__cpu_isa is 0. */
int nnpops__cpu_isa(void);
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define NNPOPS__CPU_X86 1
#else
#define NNPOPS__CPU_X86 0
#endif

/* Species sets as bit masks (bit s: species s, s < n_species <= 32): every species of a model, the
 * species of n atoms, and the ranks of a set's species (rank[s] = how many present species are
 * below s, -1 for an absent species; rank has n_species entries; returns the number present). */
static inline uint32_t nnpops__species_all(int32_t n_species) {
    return n_species >= 32 ? 0xffffffffu : (1u << n_species) - 1u;
}
static inline uint32_t nnpops__species_present(const int32_t *species, int64_t n) {
    uint32_t present = 0;
    for (int64_t i = 0; i < n; i++) present |= 1u << species[i];
    return present;
}
static inline int32_t nnpops__species_ranks(uint32_t present, int32_t n_species, int32_t *rank) {
    int32_t np = 0;
    for (int32_t s = 0; s < n_species; s++) rank[s] = (present >> s) & 1u ? np++ : -1;
    return np;
}


/* ---- dense layers and CELU (kernels/cpu/mlp.c) ----
 * All matrices feature-major over n atom columns (see above): X [in][ldx], Y [out][ldy].
 * Padding: the dense kernels may work on whole vectors of columns; they may read the columns
 * n <= r < round_up(n, NNPOPS__DENSE_PAD) of their inputs and write those of their outputs
 * (values there are meaningless), so every ld must be >= round_up(n, NNPOPS__DENSE_PAD).  Keep
 * the padding columns of the inputs finite (e.g. zero) to avoid slow denormal/NaN arithmetic.
 * The CELU kernels touch the n columns only.
 *
 * dense_forward:   Y[o][r] = b[o] + sum_k W[o][k] X[k][r]        (W [out][in], b [out] or NULL)
 * dense_backward:  dX[k][r] = sum_o W[o][k] dY[o][r]             (overwrites dX)
 * celu_forward:    A[f][r] = max(0, Z) + min(0, alpha (exp(Z / alpha) - 1))   (A may equal Z)
 * celu_backward:   dZ[f][r] = dA[f][r] * (Z > 0 ? 1 : exp(Z / alpha))        (dZ may equal dA)
 * A [width][lda], Z [width][ldz], ... all with n columns. */
void nnpops__dense_forward_cpu_f32(int64_t n, int64_t in, int64_t out, const float *W,
                                   const float *b, const float *X, int64_t ldx, float *Y,
                                   int64_t ldy);
void nnpops__dense_forward_cpu_f64(int64_t n, int64_t in, int64_t out, const double *W,
                                   const double *b, const double *X, int64_t ldx, double *Y,
                                   int64_t ldy);
void nnpops__dense_backward_cpu_f32(int64_t n, int64_t in, int64_t out, const float *W,
                                    const float *dY, int64_t ldy, float *dX, int64_t ldx);
void nnpops__dense_backward_cpu_f64(int64_t n, int64_t in, int64_t out, const double *W,
                                    const double *dY, int64_t ldy, double *dX, int64_t ldx);
/* Panels: W [out][in] laid out for the few-column kernel (at most a dozen or two columns), so that
 * it reads vectors of consecutive output rows with no packing: NNPOPS__DENSE_PANEL rows per panel,
 * panel p (rows p P .. p P + pw, pw = min(P, out - p P)) at Wp + p P in, as [in][pw] (Wp holds
 * out in values, as W).  dense_forward_packed: dense_forward reading the panels Wp of W where the
 * few-column kernel runs, W elsewhere (Wp may be NULL: W everywhere); the same bits either way
 * (every output is summed by the same operations in the same order). */
#define NNPOPS__DENSE_PANEL 64
void nnpops__dense_pack_panels_cpu_f32(int64_t in, int64_t out, const float *W, float *Wp);
void nnpops__dense_pack_panels_cpu_f64(int64_t in, int64_t out, const double *W, double *Wp);
void nnpops__dense_forward_packed_cpu_f32(int64_t n, int64_t in, int64_t out, const float *W,
                                          const float *Wp, const float *b, const float *X,
                                          int64_t ldx, float *Y, int64_t ldy);
void nnpops__dense_forward_packed_cpu_f64(int64_t n, int64_t in, int64_t out, const double *W,
                                          const double *Wp, const double *b, const double *X,
                                          int64_t ldx, double *Y, int64_t ldy);
/* The GEMM behind the dense kernels, C (m x n) = A (m x kk) . B (kk x n) (+ bias; A[i][k] =
 * a[i * sa_i + k * sa_k], B [kk][ldb], C [m][ldc]), in a chosen variant (tests: each gives the
 * same bits, within the fused and the unfused ones: nnpops__dense_variant_fused_cpu_*): AUTO the
 * dense kernels' choice, BLOCKED_* columns in vectors, ROWS_* rows in vectors (few columns), *_BASE
 * 16-byte vectors, *_AVX 32-byte vectors (AVX2 and FMA), *_AVX512 64-byte vectors.
 * Returns 0 when the variant is not available on this machine (nothing computed), else 1. */
enum {
    NNPOPS__GEMM_AUTO = 0,
    NNPOPS__GEMM_BLOCKED_BASE = 1,
    NNPOPS__GEMM_BLOCKED_AVX = 2,
    NNPOPS__GEMM_ROWS_BASE = 3,
    NNPOPS__GEMM_ROWS_AVX = 4,
    NNPOPS__GEMM_BLOCKED_AVX512 = 5,
    NNPOPS__GEMM_ROWS_AVX512 = 6,
};
int nnpops__dense_gemm_variant_cpu_f32(int variant, int64_t m, int64_t n, int64_t kk,
                                       const float *a, int64_t sa_i, int64_t sa_k, const float *b,
                                       int64_t ldb, const float *bias, float *c, int64_t ldc);
int nnpops__dense_gemm_variant_cpu_f64(int variant, int64_t m, int64_t n, int64_t kk,
                                       const double *a, int64_t sa_i, int64_t sa_k,
                                       const double *b, int64_t ldb, const double *bias,
                                       double *c, int64_t ldc);
/* 1 when the GEMM variant adds its products with fused multiply-adds (one rounding each: the 32-
 * and 64-byte variants), 0 when with a multiply and an add (kernels/cpu/mlp.c). */
int nnpops__dense_variant_fused_cpu_f32(int variant);
int nnpops__dense_variant_fused_cpu_f64(int variant);
/* The CELU kernels in a chosen variant (tests: all give the same bits): isa 0 16-byte vectors,
 * 1 32-byte vectors, 2 64-byte vectors; backward 0: out = A from Z (dA unused), 1: out = dZ from
 * Z and dA.  Returns 0 when the variant is not available on this machine (nothing computed),
 * else 1. */
int nnpops__celu_variant_cpu_f32(int isa, int backward, int64_t n, int64_t width, double alpha,
                                 const float *Z, int64_t ldz, const float *dA, int64_t ldda,
                                 float *out, int64_t ldo);
int nnpops__celu_variant_cpu_f64(int isa, int backward, int64_t n, int64_t width, double alpha,
                                 const double *Z, int64_t ldz, const double *dA, int64_t ldda,
                                 double *out, int64_t ldo);
void nnpops__celu_forward_cpu_f32(int64_t n, int64_t width, double alpha, const float *Z,
                                  int64_t ldz, float *A, int64_t lda);
void nnpops__celu_forward_cpu_f64(int64_t n, int64_t width, double alpha, const double *Z,
                                  int64_t ldz, double *A, int64_t lda);
void nnpops__celu_backward_cpu_f32(int64_t n, int64_t width, double alpha, const float *Z,
                                   int64_t ldz, const float *dA, int64_t ldda, float *dZ,
                                   int64_t lddz);
void nnpops__celu_backward_cpu_f64(int64_t n, int64_t width, double alpha, const double *Z,
                                   int64_t ldz, const double *dA, int64_t ldda, double *dZ,
                                   int64_t lddz);

#endif /* NNPOPS_KERNELS_CPU_KERNELS_H */
