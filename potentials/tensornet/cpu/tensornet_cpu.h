/*
 * tensornet_cpu.h - the TensorNet forward pass and its hand-written backward on the CPU, as pure
 * functions of an edge list and the weights (docs/model-format.md, section 9, gives the maths).
 *
 * Input: atoms 0 .. n_atoms-1 (of one or several systems; an edge never joins two systems) with
 * their atomic numbers and the total charge of their system, and directed edges e = (center[e],
 * neighbor[e]) with vec[e] = x_neighbor - x_center (+ the neighbor's image shift; nnpops' r_ij =
 * x_j - x_i convention) and dist[e] = |vec[e]|.  The list holds every pair of one system with
 * cutoff_lower <= r < cutoff_upper in both directions (an atom's own periodic images included, as
 * ordinary edges) and one self edge (i, i) with vec = 0, dist = 0 per atom.  An edge with
 * dist = 0 has a zero unit vector and carries no gradient.  The message of edge e goes to
 * center[e].
 *
 * Output: each atom's term x_i std + atomref[z_i] (the model's `mean` and ZBL are not included;
 * nnpops__tn_zbl_cpu_* adds ZBL), accumulated and returned in float64, and, when edge_grad is
 * not NULL, dE/d vec[e] for E = sum_i w_i E_i (w = atom_weight, NULL = all 1).  Forces follow as
 * F_center += g, F_neighbor -= g; the virial as W = -sum_e vec[e] (x) g[e].
 *
 * Two compute precisions with the same signature shape: _f64 (double weights, vectors and
 * gradients) and _f32 (float).  Per-atom energies are float64 in both.  Nothing allocates: the
 * caller passes a workspace of nnpops__tn_cpu_workspace_*() bytes.  Single-threaded and
 * deterministic (a fixed summation order for a given edge order).
 */
#ifndef NNPOPS_POTENTIALS_TENSORNET_CPU_H
#define NNPOPS_POTENTIALS_TENSORNET_CPU_H

#include <stddef.h>
#include <stdint.h>

#define NNPOPS__TN_MAX_OUT 16 /* readout linears, at most */

typedef enum {
    NNPOPS__TN_SSP = 0,
    NNPOPS__TN_SILU = 1, /* also torchmd-net's swish (beta 1) */
    NNPOPS__TN_TANH = 2,
    NNPOPS__TN_SIGMOID = 3,
    NNPOPS__TN_MISH = 4
} nnpops__tn_activation;

typedef enum { NNPOPS__TN_EXPNORM = 0, NNPOPS__TN_GAUSS = 1 } nnpops__tn_rbf;

/* The model's shape and scalars (precision-independent). */
typedef struct nnpops__tn_shape {
    int32_t F;          /* embedding_dimension */
    int32_t R;          /* num_rbf */
    int32_t L;          /* num_layers, >= 0 */
    int32_t max_z;      /* rows of the embedding table; atomic numbers must be below it */
    int32_t rbf;        /* nnpops__tn_rbf */
    int32_t activation; /* nnpops__tn_activation */
    int32_t so3;        /* 0: O(3), 1: SO(3) */
    int32_t n_out;      /* readout linears (>= 2) */
    int32_t out_width[NNPOPS__TN_MAX_OUT + 1]; /* F, ..., 1 */
    int32_t atomref_len;                       /* 0: no (or a disabled) Atomref prior */
    double cutoff_lower, cutoff_upper;
    double std;
} nnpops__tn_shape;

/* Pointers into a weight arena, each tensor row-major as docs/model-format.md 9.3 names it. */
#define NNPOPS__TN_WEIGHTS(REAL)                                                                  \
    struct {                                                                                      \
        const REAL *rbf_a;        /* expnorm means [R] | gauss offset [R] */                      \
        const REAL *rbf_b;        /* expnorm betas [R] | gauss coeff [1] */                       \
        const REAL *emb;          /* [max_z][F] */                                                \
        const REAL *emb2_w;       /* [F][2F] */                                                   \
        const REAL *emb2_b;       /* [F] */                                                       \
        const REAL *dproj_w[3];   /* [F][R] */                                                    \
        const REAL *dproj_b[3];   /* [F] */                                                       \
        const REAL *emb_lt[3];    /* [F][F] */                                                    \
        const REAL *emb_ls_w[2];  /* [2F][F], [3F][2F] */                                         \
        const REAL *emb_ls_b[2];  /* [2F], [3F] */                                                \
        const REAL *init_norm_w;  /* [F] */                                                       \
        const REAL *init_norm_b;  /* [F] */                                                       \
        const REAL *const *layer_ls_w; /* [L * 3]: [F][R], [2F][F], [3F][2F] */                   \
        const REAL *const *layer_ls_b; /* [L * 3]: [F], [2F], [3F] */                             \
        const REAL *const *layer_lt;   /* [L * 6]: [F][F] */                                      \
        const REAL *linear_w;     /* [F][3F] */                                                   \
        const REAL *linear_b;     /* [F] */                                                       \
        const REAL *out_norm_w;   /* [3F] */                                                      \
        const REAL *out_norm_b;   /* [3F] */                                                      \
        const REAL *out_w[NNPOPS__TN_MAX_OUT]; /* [w_{k+1}][w_k] */                              \
        const REAL *out_b[NNPOPS__TN_MAX_OUT]; /* [w_{k+1}] */                                   \
        const REAL *atomref;      /* [atomref_len], or NULL */                                    \
    }

typedef NNPOPS__TN_WEIGHTS(double) nnpops__tn_weights_f64;
typedef NNPOPS__TN_WEIGHTS(float) nnpops__tn_weights_f32;

/* The ZBL prior: its cutoff, scales and atomic-number map (docs/model-format.md 9.2). */
typedef struct nnpops__tn_zbl {
    double cutoff;
    double distance_scale; /* metres per model length unit */
    double energy_scale;   /* joules per model energy unit */
    int32_t map_len;
    const int32_t *atomic_number; /* [map_len] */
} nnpops__tn_zbl;

/* Status values of the functions below. */
#define NNPOPS__TN_OK 0
#define NNPOPS__TN_BAD_Z 1      /* an atomic number outside 0 .. max_z-1 (or the Atomref's) */
#define NNPOPS__TN_BAD_EDGE 2   /* an edge index outside 0 .. n_atoms-1 */

size_t nnpops__tn_cpu_workspace_f64(const nnpops__tn_shape *s, int64_t n_atoms, int64_t n_edges);
size_t nnpops__tn_cpu_workspace_f32(const nnpops__tn_shape *s, int64_t n_atoms, int64_t n_edges);

/* The forward pass (atom_energy[i] = x_i std + atomref[z_i], when atom_energy is not NULL) and,
 * when edge_grad is not NULL, the backward (edge_grad[3 e + k] = dE/d vec[e][k] with
 * E = sum_i atom_weight[i] E_i).  charge: per atom, the total charge of its system (NULL: 0).
 * On a bad input returns a nonzero status and *bad_index the offending atom or edge. */
int nnpops__tn_cpu_f64(const nnpops__tn_shape *s, const nnpops__tn_weights_f64 *w,
                       int64_t n_atoms, const int32_t *z, const double *charge, int64_t n_edges,
                       const int32_t *center, const int32_t *neighbor, const double *vec,
                       const double *dist, const double *atom_weight, double *atom_energy,
                       double *edge_grad, void *workspace, int64_t *bad_index);
int nnpops__tn_cpu_f32(const nnpops__tn_shape *s, const nnpops__tn_weights_f32 *w,
                       int64_t n_atoms, const int32_t *z, const double *charge, int64_t n_edges,
                       const int32_t *center, const int32_t *neighbor, const float *vec,
                       const float *dist, const double *atom_weight, double *atom_energy,
                       float *edge_grad, void *workspace, int64_t *bad_index);

/* The ZBL prior over directed pairs (i != j, r < cutoff, both directions listed, vec = x_j - x_i
 * as above): adds half of each pair's energy to atom_energy[center] (so each unordered pair adds
 * its energy once over its two atoms), and writes pair_grad[3 p + k] = dE/d vec[p][k] with E =
 * sum_i atom_weight[i] E_i (when not NULL).  The screening length is computed in float32, as
 * torchmd-net does.  Returns NNPOPS__TN_BAD_Z for an atomic number outside the map. */
int nnpops__tn_zbl_cpu_f64(const nnpops__tn_zbl *zbl, const int32_t *z, int64_t n_pairs,
                           const int32_t *center, const int32_t *neighbor, const double *vec,
                           const double *dist, const double *atom_weight, double *atom_energy,
                           double *pair_grad, int64_t *bad_index);
int nnpops__tn_zbl_cpu_f32(const nnpops__tn_zbl *zbl, const int32_t *z, int64_t n_pairs,
                           const int32_t *center, const int32_t *neighbor, const float *vec,
                           const float *dist, const double *atom_weight, double *atom_energy,
                           float *pair_grad, int64_t *bad_index);

#endif /* NNPOPS_POTENTIALS_TENSORNET_CPU_H */
