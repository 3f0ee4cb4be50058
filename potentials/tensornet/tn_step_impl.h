/*
 * tn_step_impl.h - the body of tn_step.c, included once per compute precision (REAL, SUF).  No
 * include guard on purpose.
 */

#define TS_CAT_(a, b) a##b
#define TS_CAT(a, b) TS_CAT_(a, b)
#define TS(name) TS_CAT(name, SUF)
#define OPM TS(nnpops__tn_opmodel)

void TS(nnpops__tn_opmodel_bind)(const nnpops__tn_shape *s, const nnpops__tn_oplayout *lay,
                                 const REAL *arena, REAL self_fc, double mean,
                                 const nnpops__tn_zbl *zbl, const int32_t *zbl_z,
                                 double length_to_A, OPM *m) {
    memset(m, 0, sizeof *m);
    m->self_fc = self_fc;
    nnpops__tn_dims *d = &m->d;
    d->F = s->F, d->R = s->R, d->activation = s->activation, d->rbf = s->rbf, d->so3 = s->so3;
    d->n_out = s->n_out;
    for (int k = 0; k <= s->n_out && k < 17; k++) d->out_width[k] = s->out_width[k];
    d->lo = s->cutoff_lower, d->hi = s->cutoff_upper;
    d->zcut = zbl ? zbl->cutoff : 0.0;
    d->inv_ell = 1.0 / length_to_A;
    d->lo_A = d->lo * length_to_A, d->hi_A = d->hi * length_to_A, d->zcut_A = d->zcut * length_to_A;
    d->std = s->std;
    m->L = s->L;
    m->mean = mean;
    m->has_zbl = zbl != NULL;
    if (zbl) {
        m->zbl.pref = 0.5 * 2.30707755e-28 / zbl->energy_scale / zbl->distance_scale;
        m->zbl.ds = zbl->distance_scale;
        m->zbl.k_a = (float)(0.8854 * 5.29177210903e-11);
        m->zbl_z = zbl_z;
    }
    m->rbf_a = arena + lay->rbf_a, m->rbf_b = arena + lay->rbf_b;
    m->ptab1 = arena + lay->ptab1, m->ptab2 = arena + lay->ptab2;
    m->self_dk = arena + lay->self_dk;
    m->dproj_w = arena + lay->dproj_w, m->dproj_b = arena + lay->dproj_b;
    m->norm_w = arena + lay->norm_w, m->norm_b = arena + lay->norm_b;
    for (int k = 0; k < 2; k++)
        m->emb_ls_w[k] = arena + lay->emb_ls_w[k], m->emb_ls_b[k] = arena + lay->emb_ls_b[k];
    for (int k = 0; k < 3; k++) m->emb_lt[k] = arena + lay->emb_lt[k];
    for (int l = 0; l < s->L; l++) {
        for (int k = 0; k < 3; k++)
            m->ls_w[3 * l + k] = arena + lay->ls_w[3 * l + k],
            m->ls_b[3 * l + k] = arena + lay->ls_b[3 * l + k];
        for (int k = 0; k < 6; k++) m->lt[6 * l + k] = arena + lay->lt[6 * l + k];
        m->self_h[l] = arena + lay->self_h[l];
    }
    m->lin_w = arena + lay->lin_w, m->lin_b = arena + lay->lin_b;
    m->out_norm_w = arena + lay->out_norm_w, m->out_norm_b = arena + lay->out_norm_b;
    for (int k = 0; k < s->n_out; k++)
        m->out_w[k] = arena + lay->out_w[k], m->out_b[k] = arena + lay->out_b[k];
    m->atomref = lay->atomref == SIZE_MAX ? NULL : arena + lay->atomref;
}

/* The work space's layout (byte offsets, each 256-aligned); keep: every layer has Z1, Z2, Z3 of
 * its own; sep: so does every layer of a one-layer model, and the projections dk have a block
 * of their own (see ts_plan). */
typedef struct {
    int keep, sep;
    size_t ev, er, fc, mask, gu, slot;
    size_t pentry, pmirror, pcount, erP, fcP, phiP, dk, Z1, Z2, Z3, H, gphiP, gfcP, grP;
    size_t X0, z1, z2, Xl, nrm, cY, cM, gX, gcY, gcM, count, total;
} TS(ts_work);

/* Pairs of a step with `capacity` entries: each pair is two entries of symmetric lists; rounded
 * up to 4, the rows of the edge networks' GEMMs (cuBLAS takes its 16-byte aligned kernels only
 * then: an odd count gets align1 kernels, slower; the rows past the count are pairs without an
 * entry, zeros). */
static int64_t TS(ts_pairs)(int64_t capacity) { return ((capacity + 1) / 2 + 3) / 4 * 4; }

/* The most bytes the other layers' own Z1, Z2, Z3 may add to the work space (tests may set
 * another: nnpops__tn_step_keep_bytes): below it the backward reads each layer's pre-activations
 * as the forward left them; above it one set serves every layer and the backward computes the
 * edge network of each layer but the last again (L - 1 passes more over the pairs than the 2 L of
 * forward and backward, a quarter more GEMM work with two layers, but 6 F values per pair and
 * layer less memory, which large systems need). */
#define TS_KEEP_BYTES ((size_t)96 << 20)

static TS(ts_work) TS(ts_plan)(const OPM *m, int64_t N, int64_t S, int64_t E) {
    TS(ts_work) p;
    const size_t F = (size_t)m->d.F, R = (size_t)m->d.R, L = (size_t)m->L, n = (size_t)N,
                 e = (size_t)E, r = sizeof(REAL), P = (size_t)TS(ts_pairs)(E);
    size_t o = 0;
    const size_t budget = g_keep_bytes == SIZE_MAX ? TS_KEEP_BYTES : g_keep_bytes;
    p.keep = L > 1 && (L - 1) * P * 6 * F * r <= budget;
    /* sep (within the same budget): every layer's pre-activations and the projections their own,
     * so that nothing the edge networks write is read by the embedding and the layers' other
     * ops until they are done: the GPU step may run them on a second stream */
    p.sep = L > 0 && (L == 1 || p.keep) && ((L - 1) * 6 + 3) * P * F * r <= budget;
    const size_t LZ = p.keep ? L : 1;
#define TS_TAKE(field, bytes)                                                                  \
    do {                                                                                       \
        p.field = o;                                                                           \
        o += ((size_t)(bytes) + 255) & ~(size_t)255;                                           \
    } while (0)
    TS_TAKE(ev, 3 * e * r);
    TS_TAKE(er, e * r);
    TS_TAKE(fc, e * r);
    TS_TAKE(mask, e);
    TS_TAKE(gu, 3 * e * r);
    TS_TAKE(slot, e * sizeof(int32_t));
    /* per pair: the edge networks' pre-activations Z1 [F], Z2 [2F], Z3 [3F] (without the bias,
     * kept for the backward; the messages compute h = act(Z3 + b) fc as they read it) and one
     * block H [3F] that holds in turn the hidden activations A1 and A2 (flat: A1 = H[0, P F),
     * A2 = H[P F, 3 P F); each read only by the next GEMM), dE/dZ3 and the backward's G1.  The
     * embedding's projections dk [3F] live in Z3's place (read by tn_embed before the first
     * layer writes Z3; computed again for the embedding's backward), or with sep in a block of
     * their own (read by tn_embed while the edge networks may write Z3; kept for the backward).
     * The backward's G2 lives in Z3's place (Z3 is read for the last time by the message_back
     * before the GEMM that writes G2).  With keep, layer l's Z1, Z2, Z3 follow layer l - 1's in
     * each (G2 in layer l's Z3); without, one set for all layers: the backward computes a
     * layer's edge network again before its message_back (the last layer's is still there). */
    TS_TAKE(pentry, P * sizeof(int32_t));
    TS_TAKE(pmirror, P * sizeof(int32_t));
    TS_TAKE(pcount, (n + 1) * sizeof(int32_t));
    TS_TAKE(erP, P * r);
    TS_TAKE(fcP, P * r);
    TS_TAKE(phiP, P * R * r);
    TS_TAKE(dk, p.sep ? P * 3 * F * r : 0); /* (without sep: Z3's, below) */
    TS_TAKE(Z1, LZ * P * F * r);
    TS_TAKE(Z2, LZ * P * 2 * F * r);
    TS_TAKE(Z3, LZ * P * 3 * F * r);
    if (!p.sep) p.dk = p.Z3;
    TS_TAKE(H, P * 3 * F * r);
    TS_TAKE(gphiP, P * R * r);
    TS_TAKE(gfcP, P * r);
    TS_TAKE(grP, P * r);
    TS_TAKE(X0, n * 9 * F * r);
    TS_TAKE(z1, n * 2 * F * r);
    TS_TAKE(z2, n * 3 * F * r);
    TS_TAKE(Xl, (L + 1) * n * 9 * F * r);
    TS_TAKE(nrm, L * n * F * r);
    TS_TAKE(cY, L * n * 10 * F * r);
    TS_TAKE(cM, L * n * 10 * F * r);
    TS_TAKE(gX, n * 9 * F * r);
    TS_TAKE(gcY, n * 10 * F * r);
    TS_TAKE(gcM, n * 10 * F * r);
    TS_TAKE(count, (size_t)S * sizeof(int32_t));
#undef TS_TAKE
    p.total = o;
    return p;
}

size_t TS(nnpops__tn_step_work_bytes)(const OPM *m, int64_t n_atoms, int64_t n_systems,
                                      int64_t capacity) {
    return TS(ts_plan)(m, n_atoms, n_systems, capacity).total;
}

int TS(nnpops__tn_step_takes_side)(const OPM *m, int64_t n_atoms, int64_t n_systems,
                                   int64_t capacity) {
    return TS(ts_plan)(m, n_atoms, n_systems, capacity).sep;
}

/* One op on the chosen backend: X(name, args...) calls nnpops__tn_<name>_cpu<SUF>(args) or
 * nnpops__tn_<name>_cuda<SUF>(args, stream). */
#if TN_HAVE_CUDA
#define X(name, ...)                                                                           \
    do {                                                                                       \
        if (cuda) {                                                                            \
            NNPOPS__TRY(TS(nnpops__tn_##name##_cuda)(__VA_ARGS__, a->stream));                 \
        } else {                                                                               \
            TS(nnpops__tn_##name##_cpu)(__VA_ARGS__);                                          \
        }                                                                                      \
    } while (0)
#define XLIN(n, in, out, trans, W, b, Xin, beta, Y)                                            \
    do {                                                                                       \
        if (cuda) {                                                                            \
            NNPOPS__TRY(TS(nnpops__tn_linear_cuda)(n, in, out, trans, W, b, Xin, beta, Y,      \
                                                   a->blas, a->stream));                       \
        } else {                                                                               \
            TS(nnpops__tn_linear_cpu)(n, in, out, trans, W, b, Xin, beta, Y);                  \
        }                                                                                      \
    } while (0)
#define XLA(n, in, out, trans, W, Xin, beta, Y, bias, Zg, A)                                   \
    do {                                                                                       \
        if (cuda) {                                                                            \
            NNPOPS__TRY(TS(nnpops__tn_linear_act_cuda)(act, n, in, out, trans, W, Xin, beta, Y, \
                                                       bias, Zg, A, a->blas, a->stream));      \
        } else {                                                                               \
            TS(nnpops__tn_linear_act_cpu)(act, n, in, out, trans, W, Xin, beta, Y, bias, Zg, A); \
        }                                                                                      \
    } while (0)
#else
#define X(name, ...) TS(nnpops__tn_##name##_cpu)(__VA_ARGS__)
#define XLA(n, in, out, trans, W, Xin, beta, Y, bias, Zg, A)                                   \
    TS(nnpops__tn_linear_act_cpu)(act, n, in, out, trans, W, Xin, beta, Y, bias, Zg, A)
#define XLIN(n, in, out, trans, W, b, Xin, beta, Y)                                            \
    TS(nnpops__tn_linear_cpu)(n, in, out, trans, W, b, Xin, beta, Y)
#endif

/* One layer's edge network over the P pairs up to its last pre-activations: Z1 = phi W0^T,
 * A1 = act(Z1 + b0), Z2 = A1 W1^T, A2 = act(Z2 + b1), Z3 = A2 W2^T (A1 and A2 are H's two parts,
 * see ts_plan; each activation comes with the product before it: tn_linear_act).  The Z keep no
 * bias: the activations add it as they read them, forward and back; the messages read
 * h = act(Z3 + b2) fc from Z3 the same way. */
static nnpops_status TS(ts_edge_net)(const OPM *m, const nnpops__tn_step_args *a, int cuda,
                                     int64_t P, const REAL *const *Wl, const REAL *const *bl,
                                     const REAL *phiP, REAL *Z1, REAL *Z2, REAL *Z3, REAL *A1,
                                     REAL *A2) {
    const int F = m->d.F, R = m->d.R, act = m->d.activation;
    (void)a, (void)cuda;
    XLA(P, R, F, 0, Wl[0], phiP, 0.0, Z1, bl[0], NULL, A1);
    XLA(P, F, 2 * F, 0, Wl[1], A1, 0.0, Z2, bl[1], NULL, A2);
    XLIN(P, 2 * F, 3 * F, 0, Wl[2], NULL, A2, 0.0, Z3);
    return NNPOPS_OK;
}

/* The edge network's backward from dE/dZ3 (GHP) to dE/dphi (gphiP, added to it with acc): G2
 * (dE/dZ2) and G1 (dE/dZ1) on the way, through the activations' derivatives at Z2 and Z1. */
static nnpops_status TS(ts_edge_net_back)(const OPM *m, const nnpops__tn_step_args *a, int cuda,
                                          int64_t P, const REAL *const *Wl,
                                          const REAL *const *bl, const REAL *Z1, const REAL *Z2,
                                          const REAL *GHP, REAL *G2, REAL *G1, int acc,
                                          REAL *gphiP) {
    const int F = m->d.F, R = m->d.R, act = m->d.activation;
    (void)a, (void)cuda;
    XLA(P, 2 * F, 3 * F, 1, Wl[2], GHP, 0.0, G2, bl[1], Z2, NULL);
    XLA(P, F, 2 * F, 1, Wl[1], G2, 0.0, G1, bl[0], Z1, NULL);
    XLIN(P, R, F, 1, Wl[0], NULL, G1, acc ? 1.0 : 0.0, gphiP);
    return NNPOPS_OK;
}

nnpops_status TS(nnpops__tn_step)(const OPM *m, const nnpops__tn_step_args *a, int cuda) {
    if (cuda && !TN_HAVE_CUDA)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "tensornet: a GPU step in a build without CUDA");
    const nnpops__tn_dims *d = &m->d;
    const int F = d->F, R = d->R, L = m->L;
    const int64_t N = a->n_atoms, E = a->capacity;
    const TS(ts_work) p = TS(ts_plan)(m, N, a->n_systems, E);
    unsigned char *base = a->work;
#define W_(field, type) ((type *)(base + p.field))
    REAL *ev = W_(ev, REAL), *er = W_(er, REAL), *fc = W_(fc, REAL);
    uint8_t *mask = W_(mask, uint8_t);
    REAL *Z1 = W_(Z1, REAL), *Z2 = W_(Z2, REAL), *Z3 = W_(Z3, REAL), *H = W_(H, REAL);
    REAL *dk = W_(dk, REAL), *G1 = H, *GHP = H;
    int32_t *slot = W_(slot, int32_t), *pentry = W_(pentry, int32_t);
    int32_t *pmirror = W_(pmirror, int32_t);
    int32_t *pcount = W_(pcount, int32_t);
    REAL *erP = W_(erP, REAL), *fcP = W_(fcP, REAL), *phiP = W_(phiP, REAL);
    REAL *gphiP = W_(gphiP, REAL), *gfcP = W_(gfcP, REAL);
    REAL *grP = W_(grP, REAL);
    REAL *gu = W_(gu, REAL), *X0 = W_(X0, REAL), *z1 = W_(z1, REAL);
    REAL *z2 = W_(z2, REAL), *Xl = W_(Xl, REAL), *nrm = W_(nrm, REAL), *cY = W_(cY, REAL);
    REAL *cM = W_(cM, REAL), *gX = W_(gX, REAL), *gcY = W_(gcY, REAL), *gcM = W_(gcM, REAL);
    int32_t *count = W_(count, int32_t);
#undef W_
    const size_t NF9 = (size_t)N * 9 * F, NF10 = (size_t)N * 10 * F, NF = (size_t)N * F;
    const int64_t P = TS(ts_pairs)(E);
    REAL *A1 = H, *A2 = H + (size_t)P * F;
    const REAL self_fc = m->self_fc;

    /* ---- forward ---- */
    /* the side stream (sa: the ops there): the atoms per system (read by the last op), then the
     * edge networks from phiP, each to its layer's messages */
    const int side = cuda && p.sep && a->side_stream != NULL;
    nnpops__tn_step_args sa = *a;
    if (side) {
#if TN_HAVE_CUDA
        sa.stream = a->side_stream, sa.blas = a->side_blas;
        NNPOPS__TRY(ts_after(sa.stream, a->stream, a->fork_event));
        g_side_steps++;
#endif
    }
    if (cuda) {
#if TN_HAVE_CUDA
        NNPOPS__TRY(nnpops__tn_count_cuda(N, a->n_systems, a->batch, count, sa.stream));
#endif
    } else {
        nnpops__tn_count_cpu(N, a->n_systems, a->batch, count);
    }
    /* (the radial basis per pair only: tn_pair_radial) */
    X(edges, d, m->rbf_a, m->rbf_b, N, a->start, E, a->vec, ev, er, mask, fc, NULL);
    if (cuda) {
#if TN_HAVE_CUDA
        NNPOPS__TRY(nnpops__tn_pairs_cuda(N, a->start, a->pairs, E, a->vec, mask, P, slot, pentry,
                                          pmirror, pcount, 0, a->stream));
#endif
    } else {
        nnpops__tn_pairs_cpu(N, a->start, a->pairs, E, a->vec, mask, P, slot, pentry, pmirror,
                             pcount);
    }
    X(pair_radial, d, m->rbf_a, m->rbf_b, P, pentry, er, fc, erP, fcP, phiP);
#if TN_HAVE_CUDA
    if (side) NNPOPS__TRY(ts_after(sa.stream, a->stream, a->fork_event));
#endif
    /* (the projections' bias is added by the embedding as it reads dk) */
    XLIN(P, R, 3 * F, 0, m->dproj_w, NULL, phiP, 0.0, dk);
    X(embed, d, N, a->start, a->pairs, E, a->species, m->ptab1, m->ptab2, self_fc, m->self_dk, ev,
      er, mask, slot, fc, dk, m->dproj_b, X0);
    X(atom_embed, d, N, X0, m->norm_w, m->norm_b, m->emb_ls_w, m->emb_ls_b, m->emb_lt, z1, z2, Xl);
    /* layer l's Z1, Z2, Z3 (one set for every layer without keep) */
    const size_t zl = p.keep ? (size_t)P * F : 0;
#define Z1_(l) (Z1 + (size_t)(l) * zl)
#define Z2_(l) (Z2 + (size_t)(l) * 2 * zl)
#define Z3_(l) (Z3 + (size_t)(l) * 3 * zl)
    for (int l = 0; l < L; l++) {
        const REAL *const *Wl = m->ls_w + 3 * l, *const *bl = m->ls_b + 3 * l;
        NNPOPS__TRY(
            TS(ts_edge_net)(m, &sa, cuda, P, Wl, bl, phiP, Z1_(l), Z2_(l), Z3_(l), A1, A2));
        X(layer_pre, d, N, Xl + l * NF9, m->lt + 6 * l, nrm + l * NF, cY + l * NF10);
#if TN_HAVE_CUDA
        if (side) NNPOPS__TRY(ts_after(a->stream, sa.stream, a->join_event));
#endif
        X(message, d, N, a->start, a->pairs, E, mask, slot, Z3_(l), bl[2], fcP, m->self_h[l],
          cY + l * NF10, cM + l * NF10);
        X(layer_post, d, N, a->charges, a->batch, Xl + l * NF9, nrm + l * NF, cY + l * NF10,
          cM + l * NF10, m->lt + 6 * l + 3, Xl + (l + 1) * NF9);
    }
    X(readout, d, N, a->n_local, Xl + (size_t)L * NF9, m->out_norm_w, m->out_norm_b, m->lin_w,
      m->lin_b, m->out_w, m->out_b, a->species, m->atomref, a->atom_energy,
      a->need_grad ? gX : NULL);
    if (!a->need_grad) {
        X(finish, d, &m->zbl, m->zbl_z, N, a->n_local, a->start, a->pairs, E, a->species, ev, er,
          mask, NULL, NULL, NULL, NULL, NULL, m->mean, a->batch, count, a->atom_energy, NULL);
        return NNPOPS_OK;
    }

    /* ---- backward ---- */
    for (int l = L - 1; l >= 0; l--) {
        const REAL *const *Wl = m->ls_w + 3 * l, *const *bl = m->ls_b + 3 * l;
        X(layer_post_back, d, N, a->charges, a->batch, cY + l * NF10, cM + l * NF10,
          m->lt + 6 * l + 3, gX, gcY, gcM);
        /* the layer's edge network again, without keep (the last layer's is still there) */
        if (l < L - 1 && !p.keep)
            NNPOPS__TRY(TS(ts_edge_net)(m, a, cuda, P, Wl, bl, phiP, Z1, Z2, Z3, A1, A2));
        /* dE/dZ3 and dE/dfc through h, then back to dE/dphi, per pair (dE/dfc and dE/dphi summed
         * over the layers and the embedding: one radial backward at the end); G2 in the layer's
         * Z3 */
        REAL *G2 = Z3_(l);
        /* (the side stream's GEMMs of layer l + 1 read GHP: done first) */
#if TN_HAVE_CUDA
        if (side && l < L - 1) NNPOPS__TRY(ts_after(a->stream, sa.stream, a->join_event));
#endif
        X(message_back, d, N, a->start, a->pairs, E, mask, slot, P, pentry, Z3_(l), bl[2], fcP,
          m->self_h[l], cY + l * NF10, gcM, gcY, GHP, l < L - 1, gfcP);
#if TN_HAVE_CUDA
        if (side) NNPOPS__TRY(ts_after(sa.stream, a->stream, a->fork_event));
#endif
        NNPOPS__TRY(TS(ts_edge_net_back)(m, &sa, cuda, P, Wl, bl, Z1_(l), Z2_(l), GHP, G2, G1,
                                         l < L - 1, gphiP));
        X(layer_pre_back, d, N, Xl + l * NF9, nrm + l * NF, m->lt + 6 * l, gcY, gX);
    }
    /* (the CUDA twin's work space: the layers' gcY and gcM, read for the last time above) */
    if (cuda) {
#if TN_HAVE_CUDA
        NNPOPS__TRY(TS(nnpops__tn_atom_embed_back_cuda)(d, N, X0, m->norm_w, m->norm_b,
                                                        m->emb_ls_w, m->emb_lt, z1, z2, gX, gcY,
                                                        gcM, a->stream));
#endif
    } else {
        TS(nnpops__tn_atom_embed_back_cpu)(d, N, X0, m->norm_w, m->norm_b, m->emb_ls_w, m->emb_lt,
                                           z1, z2, gX);
    }
    /* (the side stream's last GEMMs read GHP and write gphiP: done first) */
#if TN_HAVE_CUDA
    if (side) NNPOPS__TRY(ts_after(a->stream, sa.stream, a->join_event));
#endif
    /* the embedding's terms per pair (both directions; gu per entry), then dE/dr per pair from
     * all of dE/dphi and dE/dfc; the projections dk again when the layers took their place
     * (without sep) */
    if (L > 0 && !p.sep) XLIN(P, R, 3 * F, 0, m->dproj_w, NULL, phiP, 0.0, dk);
    X(embed_back, d, P, pentry, pmirror, a->pairs, a->species, m->ptab1, m->ptab2, ev, er, fcP,
      dk, m->dproj_b, gX, GHP, gu, L > 0, gfcP);
    XLIN(P, R, 3 * F, 1, m->dproj_w, NULL, GHP, L > 0 ? 1.0 : 0.0, gphiP);
    X(radial_back, d, m->rbf_a, m->rbf_b, N, a->start, P, erP, mask, pentry, gphiP, gfcP, 0, grP);
    X(finish, d, &m->zbl, m->zbl_z, N, a->n_local, a->start, a->pairs, E, a->species, ev, er,
      mask, gu, NULL, slot, pentry, grP, m->mean, a->batch, count, a->atom_energy, a->pair_grad);
    return NNPOPS_OK;
}

#undef Z1_
#undef Z2_
#undef Z3_
#undef X
#undef XLIN
#undef XLA
#undef OPM
#undef TS
#undef TS_CAT
#undef TS_CAT_
