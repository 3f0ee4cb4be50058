/*
 * kernels_cuda.h - launchers of the CUDA kernels (C interface; the kernels live in the .cu files here).
 *
 * Every launcher is the twin of a CPU op (kernels/cpu/kernels.h, kernels/cpu/fused.h): the same
 * arguments, all arrays DEVICE pointers, plus
 *   - `stream` (a cudaStream_t as void *; NULL = the legacy default stream),
 *   - where the op needs scratch: `work` / `work_bytes` (device memory from the caller's workspace;
 *     the size comes from the matching *_work_bytes function),
 *   - where the op multiplies matrices: `blas` (a cublasHandle_t as void *; its stream is set to
 *     `stream` by the launcher).
 * Launchers only enqueue work: they never allocate, never synchronize and never read device memory
 * on the host, so they can be captured into a CUDA graph.  They return NNPOPS_OK, or
 * NNPOPS_ERROR_CUDA (message: call site and cudaGetErrorString) when a launch fails, or
 * NNPOPS_ERROR_INVALID_ARGUMENT / NNPOPS_ERROR_UNSUPPORTED for sizes they cannot serve.
 * Results that depend on data (pair counts, overflow, too-close pairs) are written to a device
 * nnpops__dev_status and read by the caller with the step's results.
 *
 * Differences from the CPU twins (documented per launcher): sums use atomics, so results agree with
 * the CPU to rounding, not bitwise, and entries of the neighbor search come in an unspecified order
 * within a center.
 */
#ifndef NNPOPS_KERNELS_CUDA_H
#define NNPOPS_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/fused.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- neighbor search (neighbors.cu) ---------------------------------------------------------- *
 * Algorithms (the header of neighbors.cu describes them):
 *   NNPOPS__NBR_SMALL      one launch of one block (brute force, counts scanned in shared memory)
 *                          for tiny inputs: at most 1024 atoms and centers; center lists only;
 *   NNPOPS__NBR_BRUTE      brute force over all atoms of the center's system and all image shifts
 *                          within the cutoff (warps split each center's atoms into `slices`; in a
 *                          cell whose periodic widths are all at least twice the reach, the one
 *                          image of each atom that can be within it);
 *   NNPOPS__NBR_ONEPASS    the brute force's tests in one launch for center lists: each block
 *                          counts a range of centers, takes its offset from the blocks before it
 *                          (a chained scan in the work space) and writes the entries; the half list
 *                          runs it as BRUTE;
 *   NNPOPS__NBR_CELL       cell list, a warp per center (bins in fractional coordinates, any
 *                          triclinic cell, stencils several bins wide when the cutoff exceeds the
 *                          cell width): the general one;
 *   NNPOPS__NBR_CELL_FAST  cell list with a float32 pre-test (decisions still the CPU's double
 *                          test): search pass a block per bin with the candidates in shared
 *                          memory, keeping each center's accepted candidates as codes (at most
 *                          128, int32, per atom of work space), emit pass a warp per center
 *                          writing the entries from them; center lists only; chosen when every
 *                          periodic axis is at least a cutoff wide.
 * nnpops__nbr_cuda_plan picks one from host copies of the geometry (cells/pbc may be NULL); a
 * force_algorithm other than NNPOPS__NBR_AUTO is taken as is (tests).  Launchers fall back where a
 * plan's algorithm cannot serve the call, within the same work space: the half list runs SMALL and
 * ONEPASS as BRUTE and CELL_FAST as CELL, and SMALL with more than 1024 atoms or centers runs as
 * BRUTE. */
enum {
    NNPOPS__NBR_AUTO = 0,
    NNPOPS__NBR_BRUTE = 1,
    NNPOPS__NBR_CELL = 2,
    NNPOPS__NBR_SMALL = 3,
    NNPOPS__NBR_CELL_FAST = 4,
    NNPOPS__NBR_ONEPASS = 5
};
typedef struct nnpops__nbr_plan {
    int32_t algorithm;  /* one of the NNPOPS__NBR_* above (not AUTO) */
    int32_t slices;     /* brute force and one pass: warps per center (1..32) */
    int32_t deterministic; /* 1: the atoms of each cell-list bin are put in atom order after
                            * placing, so the entries of a center come in the same order on every
                            * run (brute force, the one pass and the small path always do); set
                            * by the caller, not by the plan */
} nnpops__nbr_plan;
void nnpops__nbr_cuda_plan(int64_t n_systems, const int64_t *sys_start_host,
                           const double *cells_host, const uint8_t *pbc_host, double cutoff,
                           int32_t force_algorithm, nnpops__nbr_plan *plan);
/* "brute", "cell", "small", "cell-fast", "onepass" (reports). */
const char *nnpops__nbr_cuda_algorithm_name(int32_t algorithm);
size_t nnpops__nbr_cuda_work_bytes(int64_t n_atoms, int64_t n_systems, int64_t n_centers,
                                   const nnpops__nbr_plan *plan);

/* Twin of nnpops__center_neighbors_cpu: the center lists of atoms 0 .. n_centers-1 (the entries of a
 * center in unspecified order; the same order on every run with plan->deterministic).  `in` holds
 * device pointers (positions, sys_start, order, cells, pbc); out->status (device) must be zeroed
 * by the caller before the launch (its counters, n_entries included, are used as accumulators).
 * Vectors, distances and the cutoff decisions are the CPU's expressions with every operation
 * rounded on its own (no FMA contraction). */
nnpops_status nnpops__center_neighbors_cuda(const nnpops__nbr_in *in, int64_t n_centers,
                                            double min_distance, const nnpops__nbr_plan *plan,
                                            nnpops__center_out *out, void *work,
                                            size_t work_bytes, void *stream);
/* A staging job (nnpops__stage_cuda's arguments): copy copy_bytes from src to dst, zero
 * zero_bytes at zdst. */
typedef struct nnpops__stage_job {
    void *dst;
    const void *src;
    size_t copy_bytes;
    void *zdst;
    size_t zero_bytes;
} nnpops__stage_job;
/* nnpops__center_neighbors_cuda after the staging job `stage` (the host entry's inputs in, its
 * output block zeroed; everything the search reads may come from it): the one-block path does
 * the job itself before it searches (one kernel fewer at the start of a small step), the other
 * paths launch the staging kernel first. */
nnpops_status nnpops__center_neighbors_staged_cuda(const nnpops__nbr_in *in, int64_t n_centers,
                                                   double min_distance,
                                                   const nnpops__nbr_plan *plan,
                                                   nnpops__center_out *out, void *work,
                                                   size_t work_bytes,
                                                   const nnpops__stage_job *stage, void *stream);
/* Twin of nnpops__neighbors_cpu (the half list): same rule and orientation; out->n_pairs is not
 * written (the count is status->n_entries, device); overflow sets NNPOPS__ST_OVERFLOW. */
nnpops_status nnpops__neighbors_cuda(const nnpops__nbr_in *in, const nnpops__nbr_plan *plan,
                                     nnpops__nbr_out *out, nnpops__dev_status *status, void *work,
                                     size_t work_bytes, void *stream);

/* ---- center lists from a half list (neighbors.cu) -------------------------------------------- *
 * Twin of nnpops__center_lists_cpu: start [n_centers + 1], entry [2 n_pairs]; entries of a center
 * in unspecified order.  n_pairs_dev (device, or NULL = n_pairs) bounds the pairs read.  The
 * largest count is written to *max_count_dev (device, or NULL) instead of being returned. */
size_t nnpops__center_lists_cuda_work_bytes(int64_t n_centers);
nnpops_status nnpops__center_lists_cuda(int64_t n_centers, int64_t n_pairs, const int32_t *pairs,
                                        const int64_t *n_pairs_dev, int64_t *start, int64_t *entry,
                                        int64_t *max_count_dev, void *work, size_t work_bytes,
                                        void *stream);


/* ---- dense layers, CELU and the fused activation steps (mlp.cu) ------------------------------ *
 * Twins of kernels.h (dense_forward/backward through cuBLAS in plain FP32 / FP64 compute,
 * CUBLAS_COMPUTE_32F / _64F, never TF32) and of kernels/cpu/fused.h. */
nnpops_status nnpops__dense_forward_cuda_f32(int64_t n, int64_t in, int64_t out, const float *W,
                                             const float *b, const float *X, int64_t ldx, float *Y,
                                             int64_t ldy, void *blas, void *stream);
nnpops_status nnpops__dense_forward_cuda_f64(int64_t n, int64_t in, int64_t out, const double *W,
                                             const double *b, const double *X, int64_t ldx,
                                             double *Y, int64_t ldy, void *blas, void *stream);
nnpops_status nnpops__dense_backward_cuda_f32(int64_t n, int64_t in, int64_t out, const float *W,
                                              const float *dY, int64_t ldy, float *dX, int64_t ldx,
                                              void *blas, void *stream);
nnpops_status nnpops__dense_backward_cuda_f64(int64_t n, int64_t in, int64_t out, const double *W,
                                              const double *dY, int64_t ldy, double *dX,
                                              int64_t ldx, void *blas, void *stream);
nnpops_status nnpops__celu_forward_cuda_f32(int64_t n, int64_t width, double alpha, const float *Z,
                                            int64_t ldz, float *A, int64_t lda, void *stream);
nnpops_status nnpops__celu_forward_cuda_f64(int64_t n, int64_t width, double alpha,
                                            const double *Z, int64_t ldz, double *A, int64_t lda,
                                            void *stream);
nnpops_status nnpops__celu_backward_cuda_f32(int64_t n, int64_t width, double alpha,
                                             const float *Z, int64_t ldz, const float *dA,
                                             int64_t ldda, float *dZ, int64_t lddz, void *stream);
nnpops_status nnpops__celu_backward_cuda_f64(int64_t n, int64_t width, double alpha,
                                             const double *Z, int64_t ldz, const double *dA,
                                             int64_t ldda, double *dZ, int64_t lddz, void *stream);
/* fused.h twins. */
nnpops_status nnpops__bias_celu_cuda_f32(int64_t n, int64_t width, double alpha, const float *b,
                                         float *Z, int64_t ldz, void *stream);
nnpops_status nnpops__bias_celu_cuda_f64(int64_t n, int64_t width, double alpha, const double *b,
                                         double *Z, int64_t ldz, void *stream);
nnpops_status nnpops__celu_backward_act_cuda_f32(int64_t n, int64_t width, double alpha,
                                                 const float *dA, int64_t ldda, float *A,
                                                 int64_t lda, void *stream);
nnpops_status nnpops__celu_backward_act_cuda_f64(int64_t n, int64_t width, double alpha,
                                                 const double *dA, int64_t ldda, double *A,
                                                 int64_t lda, void *stream);
/* C = op(A) op(B) (+ beta C) over `batch` strided problems, column-major (cuBLAS conventions),
 * precision NNPOPS_FLOAT32 (CUBLAS_COMPUTE_32F), NNPOPS_FLOAT64 (CUBLAS_COMPUTE_64F) or
 * NNPOPS__GEMM_FAST_TF32 (float32 data, CUBLAS_COMPUTE_32F_FAST_TF32: the tensor cores, inputs
 * rounded to TF32; only the 3xTF32 products below use it).  The one cuBLAS call site of the GPU
 * path (the fused ensemble layers of potentials/ani/ani_cuda.c, directly or through the 3xTF32
 * products). */
#define NNPOPS__GEMM_FAST_TF32 2
nnpops_status nnpops__gemm_cuda(void *blas, void *stream, int precision, int trans_a, int trans_b,
                                int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                                int64_t stride_a, const void *B, int64_t ldb, int64_t stride_b,
                                double beta, void *C, int64_t ldc, int64_t stride_c,
                                int64_t batch);

/* ---- reductions (reduce.cu) ------------------------------------------------------------------ *
 * Twins of nnpops__pair_reduce_cpu / nnpops__energy_reduce_cpu (outputs overwritten).  The _acc
 * variant ADDS into outputs the caller zeroed (the GPU step itself runs its reductions in one
 * launch, nnpops__reduce_cuda below).  n_pairs_dev (device, or NULL = n_pairs) bounds the pairs
 * read; n_pairs is then the grid size. */
nnpops_status nnpops__pair_reduce_cuda(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                                       int64_t n_pairs, const int32_t *pairs,
                                       const double *pair_vec, const double *pair_grad,
                                       double *forces, double *virials, double *atomic_virials,
                                       const int64_t *n_pairs_dev, void *stream);
nnpops_status nnpops__energy_reduce_cuda(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                                         const double *atom_energy, int64_t width,
                                         double *energies, void *stream);
nnpops_status nnpops__energy_reduce_cuda_acc(int64_t n_atoms, int64_t n_systems,
                                             const int32_t *batch, const double *atom_energy,
                                             int64_t width, double *energies, void *stream);

/* The GPU step's reductions (non-deterministic mode) in one launch, added into outputs the caller
 * zeroed (each part runs when its inputs and outputs are given): the pair reduction (grad: forces,
 * virials, atomic virials; n_pairs bounds the grid, n_pairs_dev, when given, the pairs read), the
 * energy reduction of atom_energy (width 1) into energies and of member_atom_energy (width
 * ensemble) into member_energies.  Staging tail (stage_bytes > 0): after every part is done, the
 * last block to finish copies stage_bytes (16-byte aligned ends) from stage_src to stage_dst (the
 * host entry's output block into its pinned buffer); ticket: a device word that is 0 at launch
 * (the step zeroes it with its outputs). */
typedef struct nnpops__reduce_args {
    int64_t n_atoms, n_systems;
    const int32_t *batch;
    int64_t n_pairs;
    const int64_t *n_pairs_dev;
    const int32_t *pairs;
    const double *vec, *grad;
    double *forces, *virials, *atomic_virials;
    const double *atom_energy;
    double *energies;
    const double *member_atom_energy;
    int64_t ensemble;
    double *member_energies;
    void *stage_dst;
    const void *stage_src;
    size_t stage_bytes;
    unsigned *ticket;
} nnpops__reduce_args;
nnpops_status nnpops__reduce_cuda(const nnpops__reduce_args *args, void *stream);

/* Deterministic reductions of the GPU step over center lists (option deterministic): gathers
 * instead of atomic scatters, every sum in a fixed order, so the results are bitwise the same on
 * every run.  Entries e < start[n_local] (and < capacity) are valid, pairs[e] = {center, j}.
 *   forces[i] = sum of grad[e] over i's own entries (in entry order) - sum of grad[e] over the
 *               entries whose neighbor is i (in increasing e: a stable radix sort of the entries by
 *               neighbor gives that reverse index);
 *   atomic_virials[i] the same gathers of -0.5 r (x) g;
 *   virials[s], energies[s], member_energies[s][w]: a block per system over its atoms
 *               order[sys_start[s] .. sys_start[s+1]), each thread a fixed stride, then a fixed
 *               shared-memory tree.
 * Outputs are overwritten (each may be NULL).  work: nnpops__center_reduce_det_work_bytes. */
size_t nnpops__center_reduce_det_work_bytes(int64_t n_atoms, int64_t capacity);
nnpops_status nnpops__center_reduce_det_cuda(
    int64_t n_atoms, int64_t n_local, int64_t n_systems, const int64_t *sys_start,
    const int32_t *order, const int64_t *start, int64_t capacity, const int32_t *pairs,
    const double *vec, const double *grad, const double *atom_energy,
    const double *member_atom_energy, int64_t ensemble, double *forces, double *virials,
    double *atomic_virials, double *energies, double *member_energies, void *work,
    size_t work_bytes, void *stream);
/* ==== device entry: input preparation and output finishing (device_io.cu) =====================
 * (Owned by the device-pointer entry nnpops_compute_device, core/src/cuda_device.c; not a twin of a
 * CPU op.)  The step of the device entry reads the caller's DEVICE arrays through two kernels:
 *   prepare: positions -> angstrom into the step's arena (a non-finite coordinate is flagged and
 *            written as 0 so the neighbor search stays in bounds), atomic numbers -> species
 *            compared with the species of the plan, batch indices compared with the plan's (an
 *            index outside 0 .. n_systems-1 has its own flag), cells -> angstrom into the arena, and
 *            the plan generation compared with the context's (a graph captured before a re-plan);
 *   finish:  the caller's outputs in the caller's units, or NaN in every element of every output
 *            when any flag of the step (the neighbor/AEV status word or the io word) is set; then
 *            the flags are accumulated into the context's sticky record, read by
 *            nnpops_context_device_status.
 * Both only enqueue (no allocation, no synchronization): they may be captured into a graph. */
#define NNPOPS__IO_BAD_POSITION 1u  /* a non-finite coordinate (bad_position) */
#define NNPOPS__IO_SPECIES 2u       /* an atomic number that differs from the plan's (bad_species) */
#define NNPOPS__IO_BATCH 4u         /* a batch index that differs from the plan's (bad_batch) */
#define NNPOPS__IO_BATCH_RANGE 8u   /* a batch index outside 0 .. n_systems-1 (bad_batch_range) */
#define NNPOPS__IO_MAX_NEIGHBORS 16u /* more half-list pairs than max_neighbors * n_atoms */
#define NNPOPS__IO_STALE 32u        /* the step belongs to a plan that is no longer current */
/* Per-step input status, zeroed with the step's outputs.  The bad_* words pack the first offending
 * atom and its value: ((n_atoms - atom) << 32) | (uint32_t)value, so that atomicMax keeps the
 * smallest atom index; 0 = none.  nnpops__io_key_atom / _value unpack them. */
typedef struct nnpops__io_status {
    uint32_t flags;
    uint32_t pad;
    unsigned long long bad_position, bad_species, bad_batch, bad_batch_range;
} nnpops__io_status;
static inline int64_t nnpops__io_key_atom(unsigned long long key, int64_t n_atoms) {
    return n_atoms - (int64_t)(key >> 32);
}
static inline int32_t nnpops__io_key_value(unsigned long long key) {
    return (int32_t)(uint32_t)(key & 0xffffffffull);
}
/* Accumulated over the device steps since the last nnpops_context_device_status (which zeroes it);
 * lives in a device allocation of the context that never moves (a caller's graph refers to it). */
#define NNPOPS__ST_GEOMETRY (NNPOPS__ST_TOO_CLOSE | NNPOPS__ST_BAD_CELL | NNPOPS__ST_TOO_MANY_IMAGES)
typedef struct nnpops__io_sticky {
    int64_t steps;              /* steps finished */
    int64_t flagged_steps;      /* steps with any flag (their outputs are NaN) */
    uint32_t step_flags;        /* OR of the status words' flags (NNPOPS__ST_*, without GEOM_SET) */
    uint32_t io_flags;          /* OR of the io flags (NNPOPS__IO_*) */
    int64_t max_entries;        /* largest entry count of a step with NNPOPS__ST_OVERFLOW */
    int64_t max_half;           /* largest pair count of a step with NNPOPS__IO_MAX_NEIGHBORS */
    int32_t pot_need;           /* largest pot_need of a step with NNPOPS__ST_POT_CAPACITY */
    int32_t pad;
    int64_t last_n_half, last_n_entries; /* of the last step */
    nnpops__dev_status geometry;         /* status word of the first step with NNPOPS__ST_GEOMETRY */
    /* the io keys of the first step that had each kind (see nnpops__io_status) */
    unsigned long long bad_position, bad_species, bad_batch, bad_batch_range;
} nnpops__io_sticky;

typedef struct nnpops__io_prep_args {
    int64_t n_atoms, n_systems;
    double to_A;                         /* caller length -> angstrom */
    /* the caller's arrays (device): batch and cells may be NULL */
    const double *positions;
    const int32_t *atomic_numbers, *batch;
    const double *cells;
    /* the plan's arrays in the arena (device) */
    const int32_t *species, *plan_batch;
    double *pos_out;                     /* [n_atoms][3] angstrom */
    double *cells_out;                   /* [n_systems][9] angstrom (0 when cells is NULL) */
    nnpops__io_status *io;
    const int64_t *generation;           /* device word: the context's current plan generation */
    int64_t expected_generation;         /* the generation of the plan this step was enqueued for */
    int32_t z_to_species[119];           /* the model's table, -1 = not described */
} nnpops__io_prep_args;
nnpops_status nnpops__io_prepare_cuda(const nnpops__io_prep_args *args, void *stream);

typedef struct nnpops__io_finish_args {
    int64_t n_atoms, n_systems;
    int64_t max_pairs;                   /* > 0: more half-list pairs set NNPOPS__IO_MAX_NEIGHBORS */
    double e_factor, f_factor;           /* model energy -> caller; model energy/angstrom -> caller */
    const nnpops__dev_status *status;    /* the step's status word (arena) */
    const nnpops__io_status *io;         /* the step's io word (arena) */
    const double *energies, *forces, *virials;    /* the step's results (arena), NULL = not wanted */
    double *out_energies, *out_forces, *out_virials; /* the caller's outputs (device), NULL alike */
    nnpops__io_sticky *sticky;           /* accumulated record (device), or NULL */
} nnpops__io_finish_args;
nnpops_status nnpops__io_finish_cuda(const nnpops__io_finish_args *args, void *stream);
/* ==== end of the device entry section ========================================================== */

/* Staging in ONE kernel (kernels/cuda/device_io.cu; the host entry's small steps, cuda_step.c):
 * copies copy_bytes from src to dst and zeroes zero_bytes at zdst (NULL when zero_bytes is 0).
 * src or dst may be pinned host memory from cudaMallocHost, addressed through its device pointer
 * (cudaHostGetDevicePointer; mapped under unified addressing).  Every pointer 16-byte aligned.  In
 * a CUDA graph a kernel node follows and precedes the step's kernels with far less latency than
 * the copy engines' memcpy and memset nodes. */
nnpops_status nnpops__stage_cuda(void *dst, const void *src, size_t copy_bytes, void *zdst,
                                 size_t zero_bytes, void *stream);

/* ---- 3xTF32 GEMMs (kernels/cuda/tf32x3.cu): float32 accuracy on the tensor cores ----
 * nnpops__tf32_stack_cuda: x (rows x cols, column major, ld ldx, batch entries stride_x apart)
 * split into hi (x rounded to TF32) and lo (x - hi, exact) and written three times along the rows
 * (by_rows) or the columns, by groups of g (g divides that count): group q's rows (columns) go to
 * 3 g q + b g + (index % g) for the blocks b = 0, 1, 2, block lo_block holding lo and the others
 * hi; out has ld ld_out and batch entries stride_out apart.
 * nnpops__gemm_cuda_3xtf32: C = beta C + op(A) op(B) as one TF32 tensor-core GEMM of inner
 * dimension 3 k, [A_lo | A_hi | A_hi] [B_hi ; B_lo ; B_hi] per group of kg (kg divides k; see
 * tf32x3.cu), float32 only.  A is stacked on every call into work
 * (nnpops__gemm_3xtf32_work_bytes(rows of A, columns of A, batch) bytes); B3 comes stacked: op(B3)
 * is 3 k x n (stacked with lo_block 1, along the rows when trans_b is 0, else along the columns),
 * ld ldb3, batch entries stride_b3 apart. */
nnpops_status nnpops__tf32_stack_cuda(int64_t rows, int64_t cols, int64_t batch, const float *x,
                                      int64_t ldx, int64_t stride_x, float *out, int64_t ld_out,
                                      int64_t stride_out, int64_t g, int by_rows, int lo_block,
                                      void *stream);
size_t nnpops__gemm_3xtf32_work_bytes(int64_t rows_a, int64_t cols_a, int64_t batch);
/* The ld of an m-row A stacked by nnpops__gemm_cuda_3xtf32 (a multiple of 32); batch entries of a
 * stacked m x k A are 3 k ld apart. */
int64_t nnpops__tf32_stack_ld(int64_t rows);
/* As nnpops__gemm_cuda_3xtf32 with A already stacked (A3: op(A3) = m x 3 k, ld lda3, batch entries
 * stride_a3 apart), e.g. by the stacked elementwise kernels below. */
nnpops_status nnpops__gemm_cuda_3xtf32_stacked(void *blas, void *stream, int trans_a, int trans_b,
                                               int64_t m, int64_t n, int64_t k, const float *A3,
                                               int64_t lda3, int64_t stride_a3, const float *B3,
                                               int64_t ldb3, int64_t stride_b3, double beta,
                                               float *C, int64_t ldc, int64_t stride_c,
                                               int64_t batch);
/* The elementwise step before a 3xTF32 GEMM, fused with the stacking of its result (the next
 * GEMM's A: n rows, `width` columns stacked along the columns by groups of g, into out3 with ld
 * ld3, as nnpops__tf32_stack_cuda with lo_block 0):
 * nnpops__bias_celu_stack_cuda_f32: nnpops__bias_celu_cuda_f32 (Z in place) and the stacked copy;
 * nnpops__celu_backward_act_stack_cuda_f32: dZ = dA CELU'(A) written only as the stacked copy (A
 * is left as it is). */
nnpops_status nnpops__bias_celu_stack_cuda_f32(int64_t n, int64_t width, double alpha,
                                               const float *b, float *Z, int64_t ldz, int64_t g,
                                               float *out3, int64_t ld3, void *stream);
nnpops_status nnpops__celu_backward_act_stack_cuda_f32(int64_t n, int64_t width, double alpha,
                                                       const float *dA, int64_t ldda,
                                                       float *A, int64_t lda, int64_t g,
                                                       float *out3, int64_t ld3, void *stream);
nnpops_status nnpops__gemm_cuda_3xtf32(void *blas, void *stream, int trans_a, int trans_b,
                                       int64_t m, int64_t n, int64_t k, int64_t kg, const float *A,
                                       int64_t lda, int64_t stride_a, const float *B3,
                                       int64_t ldb3, int64_t stride_b3, double beta, float *C,
                                       int64_t ldc, int64_t stride_c, int64_t batch, void *work,
                                       size_t work_bytes);

#ifdef __cplusplus
}
#endif

#endif /* NNPOPS_KERNELS_CUDA_H */
