/*
 * tn_ops.h - TensorNet's ops over center lists, each with its CPU twin (cpu/tn_ops_cpu_impl.h,
 * compiled into cpu/tensornet_cpu.c) and its CUDA twin (cuda/tn_ops.cu), declared together here.
 * They are the pieces of the GPU step (tensornet_cuda.c) and compute the function of
 * cpu/tensornet_cpu.h (docs/model-format.md section 9) from the center lists the GPU step hands a
 * potential, in the same layouts as the CPU pass:
 *
 *   per atom n and channel f, a 3x3 matrix X[(n * 9 + e) * F + f] (e = 3 row + col), its ten
 *   components c[(n * 10 + k) * F + f] (tensornet_cpu_impl.h names them);
 *   per entry e (center lists: entries start[c] .. start[c+1]-1 of center c < n_centers, pairs[e]
 *   = {c, j}, vec[e] = x_j - x_c + shift in angstrom), values entry-major: phi[e * R + k],
 *   h[e * 3F + f], ...  Entries at or beyond min(start[n_centers], capacity) are not real: the
 *   ops write zeros for them (so GEMMs over `capacity` columns stay finite) and read nothing of
 *   theirs.  The lists must be symmetric (every entry (c, j, v) has its mirror (j, c, -v) in j's
 *   list, which holds when every atom is a center): the gradient of a neighbor's features is
 *   gathered over the neighbor's own entries, whose edge factors are those of their mirrors (they
 *   depend on the distance alone).
 *
 * The network's self edge (i, i) with r = 0 is not an entry: its terms are constants of the
 * model (self_dk = dproj(phi(0)), self_fc = fc(0), self_h[l] = fc(0) act(MLP_l(phi(0)))) added
 * first in each center's sums, as the CPU pass adds its self edge first.
 *
 * Every sum over a center's entries runs in entry order in one thread (no atomics on floats), and
 * every reduction over channels in a fixed tree: the CUDA twins are deterministic; they agree
 * with the CPU twins to rounding (other summation trees, contracted multiply-adds).  REAL is float
 * (_f32) or double (_f64); energies are double in both.  The CUDA twins take device pointers and
 * enqueue on `stream` (never allocate, never synchronize: capture-safe); `blas` is the step's
 * cuBLAS handle.
 */
#ifndef NNPOPS_POTENTIALS_TENSORNET_OPS_H
#define NNPOPS_POTENTIALS_TENSORNET_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base.h"
#include "potentials/tensornet/cpu/tensornet_cpu.h" /* activations, radial bases */

/* Entry flags (tn_edges): a network edge (cutoff_lower <= r < cutoff_upper), a ZBL pair
 * (r < the ZBL cutoff). */
#define NNPOPS__TN_EDGE 1
#define NNPOPS__TN_ZBLP 2

/* The model's scalars the ops need (lengths in the model's unit). */
typedef struct nnpops__tn_dims {
    int32_t F, R, activation, rbf, so3;
    int32_t n_out;                          /* readout linears */
    int32_t out_width[17];                  /* F, ..., 1 */
    double lo, hi;                          /* network cutoffs */
    double zcut;                            /* ZBL cutoff (0: no ZBL) */
    double inv_ell;                         /* angstrom -> model length */
    double lo_A, hi_A, zcut_A;              /* the cutoffs in angstrom (which entries count) */
    double std;                             /* the readout's scale */
} nnpops__tn_dims;

/* The ZBL prior per species (tn_finish): atomic number, and constants as the CPU pass uses them. */
typedef struct nnpops__tn_zbl_dev {
    double pref;           /* 0.5 * 2.30707755e-28 / energy_scale / distance_scale */
    double ds;             /* distance_scale */
    float k_a;             /* 0.8854 a0 in float32 */
} nnpops__tn_zbl_dev;

#define NNPOPS__TN_OP_DECLS(SUF, REAL)                                                             \
    /* tn_edges: per entry e < capacity: ev[3e..] = vec inv_ell, er[e] = |vec| inv_ell (REAL),   \
     * mask[e] (NNPOPS__TN_EDGE | NNPOPS__TN_ZBLP), and for network edges fc[e] = the layers'    \
     * cosine cutoff and, when phi is not NULL, phi[e R ..] the radial basis (0 for other        \
     * entries; the step leaves it to tn_pair_radial). */                                        \
    void nnpops__tn_edges_cpu##SUF(const nnpops__tn_dims *d, const REAL *rbf_a, const REAL *rbf_b, \
                                   int64_t n_centers, const int64_t *start, int64_t capacity,    \
                                   const double *vec, REAL *ev, REAL *er, uint8_t *mask, REAL *fc, \
                                   REAL *phi);                                                   \
    nnpops_status nnpops__tn_edges_cuda##SUF(                                                    \
        const nnpops__tn_dims *d, const REAL *rbf_a, const REAL *rbf_b, int64_t n_centers,       \
        const int64_t *start, int64_t capacity, const double *vec, REAL *ev, REAL *er,           \
        uint8_t *mask, REAL *fc, REAL *phi, void *stream);                                       \
    /* tn_linear: over n rows, trans 0: Y[c][o] = beta Y[c][o] + b[o] + sum_i W[o][i] X[c][i]    \
     * (X [n][in], Y [n][out]; b may be NULL); trans 1: Y[c][i] = beta Y[c][i] + sum_o W[o][i]   \
     * X[c][o] (X [n][out], Y [n][in]; b unused).  beta 0 or 1.  The float32 CUDA twin runs on   \
     * the tensor cores with float32 accuracy (3xTF32) where the width of Y and the inner        \
     * dimension are multiples of 4, the matrices 16-byte aligned and the rows many enough       \
     * (nnpops__tn_gemm_path_cuda), else on cuBLAS. */                                           \
    void nnpops__tn_linear_cpu##SUF(int64_t n, int in, int out, int trans, const REAL *W,        \
                                    const REAL *b, const REAL *X, double beta, REAL *Y);         \
    nnpops_status nnpops__tn_linear_cuda##SUF(int64_t n, int in, int out, int trans,            \
                                              const REAL *W, const REAL *b, const REAL *X,       \
                                              double beta, REAL *Y, void *blas, void *stream);   \
    /* tn_linear_act: tn_linear (without b) and then, trans 0 with A not NULL: tn_act of Y into \
     * A (A = act(Y + bias), no scale); trans 1 with Zg not NULL: tn_act_back of Zg on Y       \
     * (Y *= act'(Zg + bias), no scale, no gscale).  Zg, A [n][width of Y]; bias may be NULL. */ \
    void nnpops__tn_linear_act_cpu##SUF(int act, int64_t n, int in, int out, int trans,         \
                                        const REAL *W, const REAL *X, double beta, REAL *Y,      \
                                        const REAL *bias, const REAL *Zg, REAL *A);              \
    nnpops_status nnpops__tn_linear_act_cuda##SUF(int act, int64_t n, int in, int out,          \
                                                  int trans, const REAL *W, const REAL *X,       \
                                                  double beta, REAL *Y, const REAL *bias,        \
                                                  const REAL *Zg, REAL *A, void *blas,           \
                                                  void *stream);                                 \
    /* tn_act: over n rows of width values, A[c][o] = act(Z[c][o] + bias[o]) * (scale ? scale[c] \
     * : 1) (bias may be NULL: 0; Z is left as it is: the backward adds the bias again). */      \
    void nnpops__tn_act_cpu##SUF(int act, int64_t n, int width, const REAL *bias, const REAL *Z, \
                                 const REAL *scale, REAL *A);                                    \
    nnpops_status nnpops__tn_act_cuda##SUF(int act, int64_t n, int width, const REAL *bias,      \
                                           const REAL *Z, const REAL *scale, REAL *A,            \
                                           void *stream);                                        \
    /* tn_act_back: with z = Z[c][o] + bias[o] (bias may be NULL): gscale[c] = sum_o G[c][o]     \
     * act(z) (when gscale is not NULL), then G[c][o] *= act'(z) * (scale ? scale[c] : 1). */    \
    void nnpops__tn_act_back_cpu##SUF(int act, int64_t n, int width, const REAL *Z,              \
                                      const REAL *bias, const REAL *scale, REAL *G,              \
                                      REAL *gscale);                                             \
    nnpops_status nnpops__tn_act_back_cuda##SUF(int act, int64_t n, int width, const REAL *Z,    \
                                                const REAL *bias, const REAL *scale, REAL *G,    \
                                                REAL *gscale, void *stream);                     \
    /* tn_embed: X0 of the n_centers centers: the self edge's term (P1 + P2 of the center's      \
     * species times self_fc self_dk on the diagonal) and, per network edge e = (c, j),          \
     * fc[e] (P1[s_c] + P2[s_j]) (dk I + dk A(u) + dk S(u)) with dk = dk[q][0 | F | 2F ..] + dk_b \
     * of q = slot[e] (the pair's projections; slot NULL: q = e; dk_b [3F] the projections' bias, \
     * may be NULL).  ptab1, ptab2: [species][F]. */                                             \
    void nnpops__tn_embed_cpu##SUF(const nnpops__tn_dims *d, int64_t n_centers,                  \
                                   const int64_t *start, const int32_t *pairs, int64_t capacity, \
                                   const int32_t *species, const REAL *ptab1, const REAL *ptab2, \
                                   REAL self_fc, const REAL *self_dk, const REAL *ev,            \
                                   const REAL *er, const uint8_t *mask, const int32_t *slot,     \
                                   const REAL *fc, const REAL *dk, const REAL *dk_b, REAL *X0);  \
    nnpops_status nnpops__tn_embed_cuda##SUF(                                                    \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs, \
        int64_t capacity, const int32_t *species, const REAL *ptab1, const REAL *ptab2,          \
        REAL self_fc, const REAL *self_dk, const REAL *ev, const REAL *er, const uint8_t *mask,  \
        const int32_t *slot, const REAL *fc, const REAL *dk, const REAL *dk_b, REAL *X0,         \
        void *stream);                                                                           \
    /* tn_atom_embed: per atom, the gates of X0 (norm, LayerNorm, two linears with activations:  \
     * pre-activations z1 [n][2F], z2 [n][3F] kept) and X1 = comp(gate lin3(decomp(X0))). */     \
    void nnpops__tn_atom_embed_cpu##SUF(const nnpops__tn_dims *d, int64_t n, const REAL *X0,    \
                                        const REAL *norm_w, const REAL *norm_b,                  \
                                        const REAL *const ls_w[2], const REAL *const ls_b[2],    \
                                        const REAL *const lt[3], REAL *z1, REAL *z2, REAL *X1);  \
    nnpops_status nnpops__tn_atom_embed_cuda##SUF(                                               \
        const nnpops__tn_dims *d, int64_t n, const REAL *X0, const REAL *norm_w,                 \
        const REAL *norm_b, const REAL *const ls_w[2], const REAL *const ls_b[2],                \
        const REAL *const lt[3], REAL *z1, REAL *z2, REAL *X1, void *stream);                    \
    /* tn_atom_embed_back: g = dE/dX1 in, dE/dX0 out (in place).  The CUDA twin may use gcs    \
     * [n][10F] and ggate [n][3F] as work space (a small system's two kernels; NULL: one).    \
     */                                                                                         \
    void nnpops__tn_atom_embed_back_cpu##SUF(                                                    \
        const nnpops__tn_dims *d, int64_t n, const REAL *X0, const REAL *norm_w,                 \
        const REAL *norm_b, const REAL *const ls_w[2], const REAL *const lt[3], const REAL *z1,  \
        const REAL *z2, REAL *g);                                                                \
    nnpops_status nnpops__tn_atom_embed_back_cuda##SUF(                                          \
        const nnpops__tn_dims *d, int64_t n, const REAL *X0, const REAL *norm_w,                 \
        const REAL *norm_b, const REAL *const ls_w[2], const REAL *const lt[3], const REAL *z1,  \
        const REAL *z2, REAL *g, REAL *gcs, REAL *ggate, void *stream);                          \
    /* tn_layer_pre: nrm = |X|^2 + 1 per channel, cY = lin3(lt_a, decomp(X / nrm)). */           \
    void nnpops__tn_layer_pre_cpu##SUF(const nnpops__tn_dims *d, int64_t n, const REAL *X,      \
                                       const REAL *const lt[3], REAL *nrm, REAL *cY);            \
    nnpops_status nnpops__tn_layer_pre_cuda##SUF(const nnpops__tn_dims *d, int64_t n,           \
                                                 const REAL *X, const REAL *const lt[3],          \
                                                 REAL *nrm, REAL *cY, void *stream);             \
    /* tn_layer_pre_back: g (dE/dXn direct part, in) += decomp^T(lin3^T(gcY)), then through     \
     * Xn = X / nrm: g = dE/dX (in place). */                                                    \
    void nnpops__tn_layer_pre_back_cpu##SUF(const nnpops__tn_dims *d, int64_t n, const REAL *X, \
                                            const REAL *nrm, const REAL *const lt[3],            \
                                            const REAL *gcY, REAL *g);                           \
    nnpops_status nnpops__tn_layer_pre_back_cuda##SUF(                                           \
        const nnpops__tn_dims *d, int64_t n, const REAL *X, const REAL *nrm,                     \
        const REAL *const lt[3], const REAL *gcY, REAL *g, void *stream);                        \
    /* tn_pair_radial: per pair p < n_pairs (pentry[p] its entry, -1: none), the entry's         \
     * distance, cutoff and the radial basis of that distance (zeros for none). */               \
    void nnpops__tn_pair_radial_cpu##SUF(const nnpops__tn_dims *d, const REAL *rbf_a,            \
                                         const REAL *rbf_b, int64_t n_pairs,                     \
                                         const int32_t *pentry, const REAL *er, const REAL *fc,  \
                                         REAL *erP, REAL *fcP, REAL *phiP);                      \
    nnpops_status nnpops__tn_pair_radial_cuda##SUF(                                              \
        const nnpops__tn_dims *d, const REAL *rbf_a, const REAL *rbf_b, int64_t n_pairs,         \
        const int32_t *pentry, const REAL *er, const REAL *fc, REAL *erP, REAL *fcP, REAL *phiP, \
        void *stream);                                                                           \
    /* tn_message: cM[c] = self_h (x) cY[c] + sum over c's network edges e = (c, j) of           \
     * h[slot[e]] (x) cY[j] (h per pair, its three blocks weighting components 0, 1..3, 4..9),   \
     * h[q] = act(Z[q] + bias) fcP[q] from the edge network's last pre-activations Z             \
     * [n_pairs][3F] (without the bias [3F]) and the pairs' cutoffs fcP. */                      \
    void nnpops__tn_message_cpu##SUF(const nnpops__tn_dims *d, int64_t n_centers,                \
                                     const int64_t *start, const int32_t *pairs,                 \
                                     int64_t capacity, const uint8_t *mask,                      \
                                     const int32_t *slot, const REAL *Z, const REAL *bias,       \
                                     const REAL *fcP, const REAL *self_h, const REAL *cY,        \
                                     REAL *cM);                                                  \
    nnpops_status nnpops__tn_message_cuda##SUF(                                                  \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs, \
        int64_t capacity, const uint8_t *mask, const int32_t *slot, const REAL *Z,               \
        const REAL *bias, const REAL *fcP, const REAL *self_h, const REAL *cY, REAL *cM,         \
        void *stream);                                                                           \
    /* tn_message_back, with h = act(Z + bias) fcP as in tn_message: gcY[c] += self_h gcM[c] +   \
     * sum over c's edges e = (c, j) of h[slot[e]] gcM[j] (the mirrors' terms), and for each pair \
     * p < n_pairs of entry pentry[p] = (c, j) with G[p] = dE/dh[p] (per block, the sum over its \
     * components of gcM[c] cY[j] + gcM[j] cY[c]: both directions; 0 without an entry):          \
     * GH[p][k] = dE/dZ[p][k] = G[p][k] act'(z) fcP[p] and gfc[p] (+)= dE/dfcP[p] = sum_k        \
     * G[p][k] act(z), z = Z[p][k] + bias[k] (accumulate 0: written). */                         \
    void nnpops__tn_message_back_cpu##SUF(const nnpops__tn_dims *d, int64_t n_centers,           \
                                          const int64_t *start, const int32_t *pairs,            \
                                          int64_t capacity, const uint8_t *mask,                 \
                                          const int32_t *slot, int64_t n_pairs,                  \
                                          const int32_t *pentry, const REAL *Z, const REAL *bias, \
                                          const REAL *fcP, const REAL *self_h, const REAL *cY,   \
                                          const REAL *gcM, REAL *gcY, REAL *GH, int accumulate,  \
                                          REAL *gfc);                                            \
    nnpops_status nnpops__tn_message_back_cuda##SUF(                                             \
        const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start, const int32_t *pairs, \
        int64_t capacity, const uint8_t *mask, const int32_t *slot, int64_t n_pairs,             \
        const int32_t *pentry, const REAL *Z, const REAL *bias, const REAL *fcP,                 \
        const REAL *self_h, const REAL *cY, const REAL *gcM, REAL *gcY, REAL *GH, int accumulate, \
        REAL *gfc, void *stream);                                                                \
    /* tn_layer_post: Xout = X / nrm + D + qf D D with C = qf (M Y + Y M) (O(3)) or 2 Y M       \
     * (SO(3)), D = comp(lin3(lt_b, decomp(C / (|C|^2 + 1)))), qf = 1 + 0.1 q of the atom's      \
     * system (charges [n_systems] may be NULL). */                                              \
    void nnpops__tn_layer_post_cpu##SUF(const nnpops__tn_dims *d, int64_t n,                    \
                                        const double *charges, const int32_t *batch,             \
                                        const REAL *X, const REAL *nrm, const REAL *cY,          \
                                        const REAL *cM, const REAL *const lt[3], REAL *Xout);    \
    nnpops_status nnpops__tn_layer_post_cuda##SUF(                                               \
        const nnpops__tn_dims *d, int64_t n, const double *charges, const int32_t *batch,        \
        const REAL *X, const REAL *nrm, const REAL *cY, const REAL *cM, const REAL *const lt[3], \
        REAL *Xout, void *stream);                                                               \
    /* tn_layer_post_back: from g = dE/dXout (read; it is also the direct path's gradient of Xn) \
     * to gcY (written) and gcM (written). */                                                    \
    void nnpops__tn_layer_post_back_cpu##SUF(const nnpops__tn_dims *d, int64_t n,               \
                                             const double *charges, const int32_t *batch,        \
                                             const REAL *cY, const REAL *cM,                     \
                                             const REAL *const lt[3], const REAL *g, REAL *gcY,  \
                                             REAL *gcM);                                         \
    nnpops_status nnpops__tn_layer_post_back_cuda##SUF(                                          \
        const nnpops__tn_dims *d, int64_t n, const double *charges, const int32_t *batch,        \
        const REAL *cY, const REAL *cM, const REAL *const lt[3], const REAL *g, REAL *gcY,       \
        REAL *gcM, void *stream);                                                                \
    /* tn_readout: per atom n < n_atoms the readout o_n of X; atom_energy[n] = o_n std +         \
     * atomref[s_n] for n < n_local (atomref by species, may be NULL), 0 for ghosts; when g is   \
     * not NULL g[n] = dE/dX[n] of E = sum of the local atoms' energies. */                      \
    void nnpops__tn_readout_cpu##SUF(const nnpops__tn_dims *d, int64_t n_atoms, int64_t n_local, \
                                     const REAL *X, const REAL *norm_w, const REAL *norm_b,      \
                                     const REAL *lin_w, const REAL *lin_b,                       \
                                     const REAL *const out_w[], const REAL *const out_b[],       \
                                     const int32_t *species, const REAL *atomref,                \
                                     double *atom_energy, REAL *g);                              \
    nnpops_status nnpops__tn_readout_cuda##SUF(                                                  \
        const nnpops__tn_dims *d, int64_t n_atoms, int64_t n_local, const REAL *X,               \
        const REAL *norm_w, const REAL *norm_b, const REAL *lin_w, const REAL *lin_b,            \
        const REAL *const out_w[], const REAL *const out_b[], const int32_t *species,            \
        const REAL *atomref, double *atom_energy, REAL *g, void *stream);                        \
    /* tn_embed_back: per pair p < n_pairs, its two entries e = pentry[p] and pmirror[p] (-1:    \
     * none), each (c, j) with g0 = dE/dX0 of its center: gu[e] = dE/du of the entry (3; other   \
     * entries' gu are not written), and the pair's sums over its entries gd[p] = dE/d dk[p] (3F) \
     * and gfc[p] (+)= dE/dfc (0 for a pair without entries; accumulate 0: written).  fc, dk per \
     * pair (dk + dk_b as in tn_embed). */                                                       \
    void nnpops__tn_embed_back_cpu##SUF(const nnpops__tn_dims *d, int64_t n_pairs,               \
                                        const int32_t *pentry, const int32_t *pmirror,           \
                                        const int32_t *pairs, const int32_t *species,            \
                                        const REAL *ptab1, const REAL *ptab2, const REAL *ev,    \
                                        const REAL *er, const REAL *fcP, const REAL *dk,         \
                                        const REAL *dk_b, const REAL *g0, REAL *gd, REAL *gu,    \
                                        int accumulate, REAL *gfc);                              \
    nnpops_status nnpops__tn_embed_back_cuda##SUF(                                               \
        const nnpops__tn_dims *d, int64_t n_pairs, const int32_t *pentry, const int32_t *pmirror, \
        const int32_t *pairs, const int32_t *species, const REAL *ptab1, const REAL *ptab2,      \
        const REAL *ev, const REAL *er, const REAL *fcP, const REAL *dk, const REAL *dk_b,       \
        const REAL *g0, REAL *gd, REAL *gu, int accumulate, REAL *gfc, void *stream);            \
    /* tn_radial_back: per network edge (pentry NULL: entries e < capacity, by start and mask;   \
     * else pairs e < capacity with pentry[e] >= 0), gr[e] (+)= gfc[e] fc'(r) + sum_k gphi[e][k] \
     * phi_k'(r) (accumulate 0: written, 0 for the others). */                                   \
    void nnpops__tn_radial_back_cpu##SUF(const nnpops__tn_dims *d, const REAL *rbf_a,           \
                                         const REAL *rbf_b, int64_t n_centers,                   \
                                         const int64_t *start, int64_t capacity, const REAL *er, \
                                         const uint8_t *mask, const int32_t *pentry,             \
                                         const REAL *gphi, const REAL *gfc, int accumulate,      \
                                         REAL *gr);                                              \
    nnpops_status nnpops__tn_radial_back_cuda##SUF(                                              \
        const nnpops__tn_dims *d, const REAL *rbf_a, const REAL *rbf_b, int64_t n_centers,       \
        const int64_t *start, int64_t capacity, const REAL *er, const uint8_t *mask,             \
        const int32_t *pentry, const REAL *gphi, const REAL *gfc, int accumulate, REAL *gr,      \
        void *stream);                                                                           \
    /* tn_finish: per center c < n_centers and its entries: pair_grad[e] (double, angstrom;      \
     * written for every entry < min(start[n_centers], capacity), when pair_grad is not NULL) =  \
     * inv_ell ((gu - u (gu.u)) / r + u gr) of the network edges (gr: gr[e] (gr may be NULL),   \
     * plus grP[slot[e]] for the entry that holds its pair, pentry[slot[e]] == e; grP may be     \
     * NULL) plus the ZBL                                                                        \
     * pair's gradient                                                                           \
     * (weight 1 for a local center, 0 for a ghost); atom_energy[c] (local c) += half of each     \
     * ZBL pair's energy, then + mean / (atoms of c's system: sys_count[batch[c]]). */           \
    void nnpops__tn_finish_cpu##SUF(const nnpops__tn_dims *d, const nnpops__tn_zbl_dev *zbl,    \
                                    const int32_t *zbl_z, int64_t n_centers, int64_t n_local,    \
                                    const int64_t *start, const int32_t *pairs,                  \
                                    int64_t capacity, const int32_t *species, const REAL *ev,    \
                                    const REAL *er, const uint8_t *mask, const REAL *gu,         \
                                    const REAL *gr, const int32_t *slot, const int32_t *pentry,  \
                                    const REAL *grP, double mean, const int32_t *batch,          \
                                    const int32_t *sys_count, double *atom_energy,               \
                                    double *pair_grad);                                          \
    nnpops_status nnpops__tn_finish_cuda##SUF(                                                   \
        const nnpops__tn_dims *d, const nnpops__tn_zbl_dev *zbl, const int32_t *zbl_z,           \
        int64_t n_centers, int64_t n_local, const int64_t *start, const int32_t *pairs,          \
        int64_t capacity, const int32_t *species, const REAL *ev, const REAL *er,                \
        const uint8_t *mask, const REAL *gu, const REAL *gr, const int32_t *slot,                \
        const int32_t *pentry, const REAL *grP, double mean, const int32_t *batch,               \
        const int32_t *sys_count, double *atom_energy, double *pair_grad, void *stream);


/* ==== the model as the ops read it, and the whole step composed of the ops ==================== */

#define NNPOPS__TN_OPS_MAX_LAYERS 64

/* Every value the ops read, in one REAL arena (offsets in values), laid out and filled by
 * nnpops__tn_opmodel_fill_*: the weights of tensornet_cpu.h in the compute precision, the
 * embedding's distance projections stacked ([3F][R]), and the tables made of the weights: the
 * embedding's pair terms per species (ptab1 = emb2's first half applied to emb[z] plus its bias,
 * ptab2 its second half), the self edge's terms (self_dk, self_h per layer, self_fc), atomref per
 * species (when the model has one).  Species whose atomic number lies outside the model's tables
 * get zero rows (the potential refuses them before a step). */
typedef struct nnpops__tn_oplayout {
    size_t self_fc, rbf_a, rbf_b, ptab1, ptab2, self_dk, dproj_w, dproj_b, norm_w, norm_b;
    size_t emb_ls_w[2], emb_ls_b[2], emb_lt[3];
    size_t ls_w[3 * NNPOPS__TN_OPS_MAX_LAYERS], ls_b[3 * NNPOPS__TN_OPS_MAX_LAYERS];
    size_t lt[6 * NNPOPS__TN_OPS_MAX_LAYERS], self_h[NNPOPS__TN_OPS_MAX_LAYERS];
    size_t lin_w, lin_b, out_norm_w, out_norm_b, out_w[NNPOPS__TN_MAX_OUT],
        out_b[NNPOPS__TN_MAX_OUT];
    size_t atomref; /* SIZE_MAX: none */
    size_t total;
} nnpops__tn_oplayout;

#define NNPOPS__TN_OPMODEL(REAL)                                                                  \
    struct {                                                                                      \
        nnpops__tn_dims d;                                                                        \
        int32_t L;                                                                                \
        REAL self_fc;                                                                             \
        double mean;                                                                              \
        int32_t has_zbl;                                                                          \
        nnpops__tn_zbl_dev zbl;                                                                   \
        const int32_t *zbl_z; /* [species] ZBL atomic number */                                   \
        const REAL *rbf_a, *rbf_b, *ptab1, *ptab2, *self_dk, *dproj_w, *dproj_b, *norm_w,         \
            *norm_b;                                                                              \
        const REAL *emb_ls_w[2], *emb_ls_b[2], *emb_lt[3];                                        \
        const REAL *ls_w[3 * NNPOPS__TN_OPS_MAX_LAYERS], *ls_b[3 * NNPOPS__TN_OPS_MAX_LAYERS];   \
        const REAL *lt[6 * NNPOPS__TN_OPS_MAX_LAYERS], *self_h[NNPOPS__TN_OPS_MAX_LAYERS];       \
        const REAL *lin_w, *lin_b, *out_norm_w, *out_norm_b;                                      \
        const REAL *out_w[NNPOPS__TN_MAX_OUT], *out_b[NNPOPS__TN_MAX_OUT];                        \
        const REAL *atomref; /* [species] or NULL */                                              \
    }
typedef NNPOPS__TN_OPMODEL(float) nnpops__tn_opmodel_f32;
typedef NNPOPS__TN_OPMODEL(double) nnpops__tn_opmodel_f64;

/* The step's arguments (pointers of the backend that runs it: host for the CPU ops, device for
 * the CUDA ops).  Center lists of n_centers = n_atoms atoms (ghosts included; symmetric),
 * entries bounded by capacity.  Outputs: atom_energy [n_atoms] (written: the local atoms' energies,
 * 0 for ghosts), pair_grad [capacity][3] (written for every entry, when need_grad). */
typedef struct nnpops__tn_step_args {
    int64_t n_atoms, n_local, n_systems, capacity;
    const int64_t *start;
    const int32_t *pairs;
    const double *vec;
    const int32_t *species, *batch;
    const double *charges; /* [n_systems] or NULL */
    int need_grad;
    double *atom_energy, *pair_grad;
    void *work;            /* nnpops__tn_step_work_bytes bytes, 256-byte aligned */
    void *blas, *stream;   /* CUDA only */
    /* CUDA only, optional (side_stream NULL: every op on `stream`): a second stream with a
     * cuBLAS handle of its own and two events, fork and join (see nnpops__tn_step) */
    void *side_stream, *side_blas, *fork_event, *join_event;
} nnpops__tn_step_args;

#define NNPOPS__TN_STEP_DECLS(SUF, REAL)                                                           \
    /* the layout (arena NULL) or the layout and the values (arena of layout->total values) */    \
    void nnpops__tn_opmodel_fill##SUF(const nnpops__tn_shape *s,                                  \
                                      const nnpops__tn_weights##SUF *w, int32_t n_species,        \
                                      const int32_t *species_z, nnpops__tn_oplayout *layout,      \
                                      REAL *arena);                                               \
    /* points m's arrays into an arena (host or device) laid out by layout; sets the scalars   \
     * (self_fc: the value the fill wrote at layout->self_fc) */                                  \
    void nnpops__tn_opmodel_bind##SUF(const nnpops__tn_shape *s,                                  \
                                      const nnpops__tn_oplayout *layout, const REAL *arena,        \
                                      REAL self_fc, double mean, const nnpops__tn_zbl *zbl,       \
                                      const int32_t *zbl_z, double length_to_A,                   \
                                      nnpops__tn_opmodel##SUF *m);                               \
    size_t nnpops__tn_step_work_bytes##SUF(const nnpops__tn_opmodel##SUF *m, int64_t n_atoms,    \
                                           int64_t n_systems, int64_t capacity);                  \
    /* whether a GPU step of these sizes takes a side stream the caller gives */                 \
    int nnpops__tn_step_takes_side##SUF(const nnpops__tn_opmodel##SUF *m, int64_t n_atoms,       \
                                        int64_t n_systems, int64_t capacity);                     \
    /* the step with the CPU ops (cuda 0) or the CUDA ops (cuda 1) */                              \
    nnpops_status nnpops__tn_step##SUF(const nnpops__tn_opmodel##SUF *m,                         \
                                       const nnpops__tn_step_args *a, int cuda);

#ifdef __cplusplus
extern "C" {
#endif

NNPOPS__TN_OP_DECLS(_f32, float)
NNPOPS__TN_OP_DECLS(_f64, double)

NNPOPS__TN_STEP_DECLS(_f32, float)
NNPOPS__TN_STEP_DECLS(_f64, double)

/* tn_pairs: each pair of network edges once.  An entry e = (c, j, v) holds its pair when j > c
 * or j == c and v > 0 lexicographically (an atom's own image); the pairs are numbered in entry
 * order.  slot[e] (e < capacity) = the pair of each network edge (its mirror's for the other
 * entry: the entry of j's list with neighbor c nearest to -v), -1 for other entries;
 * pentry[p] (p < n_pairs) = the entry holding pair p, pmirror[p] = its mirror entry (-1 for
 * none, and past the count; pairs past n_pairs get no slot: a truncated list).  count: scratch
 * of n_centers + 1 values.  The CUDA twin numbers the pairs in one block of warps for small lists
 * (up to 256 centers and 8,192 entries), else in three kernels of a warp per center (count,
 * scan, numbers); path 1 / 2 forces one of them (tests), 0 picks. */
void nnpops__tn_pairs_cpu(int64_t n_centers, const int64_t *start, const int32_t *pairs,
                          int64_t capacity, const double *vec, const uint8_t *mask,
                          int64_t n_pairs, int32_t *slot, int32_t *pentry, int32_t *pmirror,
                          int32_t *count);
nnpops_status nnpops__tn_pairs_cuda(int64_t n_centers, const int64_t *start, const int32_t *pairs,
                                    int64_t capacity, const double *vec, const uint8_t *mask,
                                    int64_t n_pairs, int32_t *slot, int32_t *pentry,
                                    int32_t *pmirror, int32_t *count, int path, void *stream);

/* The tiles of the per-atom CUDA ops (tn_atom_embed, tn_layer_pre, tn_layer_post, tn_readout and
 * their gradients), forced for tests: atoms per block (1, 2, 4 or 8; else chosen by the number
 * of atoms), chunks of the output channels of the ops that split them (0: chosen by the grid)
 * and the size of the weight buffers (1, 2 or 4 units; else the most that fit).  Their results
 * do not depend on the tiles.  Process-wide: not for concurrent use. */
void nnpops__tn_atom_tiles_cuda(int atoms, int chunks, int scale);

/* The path of the float32 products of the CUDA twins of tn_linear and tn_linear_act, forced for
 * tests: 1 the tensor cores wherever the shapes fit, 2 cuBLAS always, else chosen by the size
 * (the tensor cores from a block of 64 x 64 outputs per multiprocessor).  Returns how many
 * products have run on the tensor cores since the process started.  Process-wide: not for
 * concurrent use. */
int nnpops__tn_gemm_path_cuda(int force);

/* How many times the CUDA twin of tn_atom_embed_back has run as two kernels over chunks of
 * channels (where the plan splits the channels over blocks and the work space is given) since
 * the process started (tests). */
int nnpops__tn_embed_back_split_cuda(void);

/* The work-space budget of the step's per-layer pre-activations (tn_step_impl.h, TS_KEEP_BYTES),
 * forced for tests: 0 makes every layer share one set (the backward computes each layer's edge
 * network again), SIZE_MAX restores the default.  Process-wide: not for concurrent use. */
void nnpops__tn_step_keep_bytes(size_t bytes);

/* How many GPU steps have run the layers' edge networks on the side stream since the process
 * started (tests). */
int nnpops__tn_side_steps(void);

/* tn_count: sys_count[s] = the atoms of system s among the n atoms (sys_count zeroed here). */
void nnpops__tn_count_cpu(int64_t n, int64_t n_systems, const int32_t *batch, int32_t *sys_count);
nnpops_status nnpops__tn_count_cuda(int64_t n, int64_t n_systems, const int32_t *batch,
                                    int32_t *sys_count, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* NNPOPS_POTENTIALS_TENSORNET_OPS_H */
