/*
 * tn_ops_cpu_impl.h - the CPU twins of the ops of potentials/tensornet/tn_ops.h, included by
 * tensornet_cpu.c after tensornet_cpu_impl.h once per compute precision (REAL, SUF defined), so
 * that they are built from the same pieces as the CPU pass: per channel (tn_decomp, tn_lin3,
 * tn_mm, tn_act, tn_rbf, tn_fc, tn_readout, ...) and per atom (tn_embed_gate, tn_layer_y,
 * tn_layer_cd, tn_layer_out and their backwards).  No include guard on purpose.
 *
 * They serve as the reference of the CUDA twins (tests/gpu/test_gpu_tensornet.c) and, composed
 * over center lists, as the CPU image of the GPU step (the same order of operations).  Scratch of
 * one atom lives on the stack.
 */

#define TO_CAT_(a, b) a##b
#define TO_CAT(a, b) TO_CAT_(a, b)
#define TO(name) TO_CAT(name, SUF)

/* Entries of the lists that are real: min(start[n_centers], capacity). */
static int64_t TO(to_entries)(int64_t n_centers, const int64_t *start, int64_t capacity) {
    const int64_t n = start[n_centers];
    return n < capacity ? n : capacity;
}

/* The radial basis's shape and weights (tn_rbf's arguments) from the ops' dimensions. */
static void TO(to_rbf_model)(const nnpops__tn_dims *d, const REAL *rbf_a, const REAL *rbf_b,
                             nnpops__tn_shape *s, TO_CAT(nnpops__tn_weights, SUF) *w) {
    memset(s, 0, sizeof *s);
    s->R = d->R, s->rbf = d->rbf, s->cutoff_lower = d->lo, s->cutoff_upper = d->hi;
    memset(w, 0, sizeof *w);
    w->rbf_a = rbf_a, w->rbf_b = rbf_b;
}

void TO(nnpops__tn_edges_cpu)(const nnpops__tn_dims *d, const REAL *rbf_a, const REAL *rbf_b,
                              int64_t n_centers, const int64_t *start, int64_t capacity,
                              const double *vec, REAL *ev, REAL *er, uint8_t *mask, REAL *fc,
                              REAL *phi) {
    const int64_t ne = TO(to_entries)(n_centers, start, capacity);
    nnpops__tn_shape s;
    TO_CAT(nnpops__tn_weights, SUF) w;
    TO(to_rbf_model)(d, rbf_a, rbf_b, &s, &w);
    for (int64_t e = 0; e < capacity; e++) {
        REAL *ph = phi ? phi + (size_t)e * d->R : NULL;
        for (int k = 0; ph && k < d->R; k++) ph[k] = 0;
        ev[3 * e] = ev[3 * e + 1] = ev[3 * e + 2] = 0;
        er[e] = 0;
        fc[e] = 0;
        mask[e] = 0;
        if (e >= ne) continue;
        const double *v = vec + 3 * e;
        const double r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        for (int k = 0; k < 3; k++) ev[3 * e + k] = (REAL)(v[k] * d->inv_ell);
        const double rm = r * d->inv_ell;
        er[e] = (REAL)rm;
        uint8_t m = 0;
        if (r >= d->lo_A && r < d->hi_A) m |= NNPOPS__TN_EDGE;
        if (r < d->zcut_A) m |= NNPOPS__TN_ZBLP;
        mask[e] = m;
        if (!(m & NNPOPS__TN_EDGE)) continue;
        REAL dd;
        fc[e] = TO(tn_fc)(d->lo, d->hi, er[e], &dd);
        if (ph) TO(tn_rbf)(&s, (const void *)&w, er[e], ph, NULL);
    }
}

void TO(nnpops__tn_linear_cpu)(int64_t n, int in, int out, int trans, const REAL *W,
                               const REAL *b, const REAL *X, double beta, REAL *Y) {
    for (int64_t c = 0; c < n; c++) {
        if (!trans) {
            const REAL *x = X + (size_t)c * in;
            REAL *y = Y + (size_t)c * out;
            for (int o = 0; o < out; o++) {
                REAL acc = b ? b[o] : (REAL)0;
                const REAL *row = W + (size_t)o * in;
                for (int i = 0; i < in; i++) acc += row[i] * x[i];
                y[o] = beta != 0 ? y[o] + acc : acc;
            }
        } else {
            const REAL *x = X + (size_t)c * out;
            REAL *y = Y + (size_t)c * in;
            for (int i = 0; i < in; i++) {
                REAL acc = 0;
                for (int o = 0; o < out; o++) acc += W[(size_t)o * in + i] * x[o];
                y[i] = beta != 0 ? y[i] + acc : acc;
            }
        }
    }
}

void TO(nnpops__tn_linear_act_cpu)(int act, int64_t n, int in, int out, int trans, const REAL *W,
                                   const REAL *X, double beta, REAL *Y, const REAL *bias,
                                   const REAL *Zg, REAL *A) {
    TO(nnpops__tn_linear_cpu)(n, in, out, trans, W, NULL, X, beta, Y);
    if (!trans && A) TO(nnpops__tn_act_cpu)(act, n, out, bias, Y, NULL, A);
    if (trans && Zg) TO(nnpops__tn_act_back_cpu)(act, n, in, Zg, bias, NULL, Y, NULL);
}

void TO(nnpops__tn_act_cpu)(int act, int64_t n, int width, const REAL *bias, const REAL *Z,
                            const REAL *scale, REAL *A) {
    for (int64_t c = 0; c < n; c++)
        for (int o = 0; o < width; o++) {
            const size_t k = (size_t)c * width + o;
            const REAL z = bias ? Z[k] + bias[o] : Z[k];
            A[k] = TO(tn_act)(act, z, NULL) * (scale ? scale[c] : (REAL)1);
        }
}

void TO(nnpops__tn_act_back_cpu)(int act, int64_t n, int width, const REAL *Z, const REAL *bias,
                                 const REAL *scale, REAL *G, REAL *gscale) {
    for (int64_t c = 0; c < n; c++) {
        REAL gs = 0;
        for (int o = 0; o < width; o++) {
            const size_t k = (size_t)c * width + o;
            REAL dv;
            REAL a = TO(tn_act)(act, bias ? Z[k] + bias[o] : Z[k], &dv);
            gs += G[k] * a;
            G[k] *= dv * (scale ? scale[c] : (REAL)1);
        }
        if (gscale) gscale[c] = gs;
    }
}

void TO(nnpops__tn_embed_cpu)(const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start,
                              const int32_t *pairs, int64_t capacity, const int32_t *species,
                              const REAL *ptab1, const REAL *ptab2, REAL self_fc,
                              const REAL *self_dk, const REAL *ev, const REAL *er,
                              const uint8_t *mask, const int32_t *slot, const REAL *fc,
                              const REAL *dk, const REAL *dk_b, REAL *X0) {
    const int F = d->F;
    const REAL zero[3] = {0, 0, 0};
    REAL dkq[3 * (size_t)F]; /* a pair's projections with their bias */
    for (int64_t c = 0; c < n_centers; c++) {
        REAL *X = X0 + (size_t)c * 9 * F;
        for (int k = 0; k < 9 * F; k++) X[k] = 0;
        const REAL *p1 = ptab1 + (size_t)species[c] * F;
        const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
        for (int f = 0; f < F; f++) {
            const REAL *p2 = ptab2 + (size_t)species[c] * F;
            TO(tn_embed_add)(F, f, self_fc * (p1[f] + p2[f]), self_dk, zero, X);
        }
        for (int64_t e = start[c]; e < e1; e++) {
            if (!(mask[e] & NNPOPS__TN_EDGE)) continue;
            const REAL *p2 = ptab2 + (size_t)species[pairs[2 * e + 1]] * F;
            REAL u[3];
            TO(tn_unit)(ev + 3 * e, er[e], u);
            const int64_t q = slot ? slot[e] : e;
            if (q < 0) continue;
            for (int k = 0; k < 3 * F; k++)
                dkq[k] = dk[(size_t)q * 3 * F + k] + (dk_b ? dk_b[k] : (REAL)0);
            for (int f = 0; f < F; f++)
                TO(tn_embed_add)(F, f, fc[e] * (p1[f] + p2[f]), dkq, u, X);
        }
    }
}

/* Per-atom scratch (a variable-length array on the stack): the largest op below needs about
 * 130 F values. */
#define TO_SCRATCH(F) (130 * (size_t)(F) + 64)

void TO(nnpops__tn_atom_embed_cpu)(const nnpops__tn_dims *d, int64_t n, const REAL *X0,
                                   const REAL *norm_w, const REAL *norm_b,
                                   const REAL *const ls_w[2], const REAL *const ls_b[2],
                                   const REAL *const lt[3], REAL *z1a, REAL *z2a, REAL *X1) {
    const int F = d->F;
    REAL tmp[TO_SCRATCH(d->F)];
    for (int64_t a = 0; a < n; a++) {
        REAL mu, rstd;
        TO(tn_embed_gate)(F, d->activation, norm_w, norm_b, ls_w, ls_b, lt, X0 + (size_t)a * 9 * F,
                          z1a + (size_t)a * 2 * F, z2a + (size_t)a * 3 * F, &mu, &rstd,
                          X1 + (size_t)a * 9 * F, tmp);
    }
}

void TO(nnpops__tn_atom_embed_back_cpu)(const nnpops__tn_dims *d, int64_t n, const REAL *X0,
                                        const REAL *norm_w, const REAL *norm_b,
                                        const REAL *const ls_w[2], const REAL *const lt[3],
                                        const REAL *z1a, const REAL *z2a, REAL *gall) {
    const int F = d->F;
    REAL tmp[TO_SCRATCH(d->F)];
    for (int64_t a = 0; a < n; a++) {
        const REAL *X = X0 + (size_t)a * 9 * F;
        /* the LayerNorm's statistics again (the forward keeps no copy) */
        REAL *t = tmp, *av = t + F, mu, rstd;
        TO(tn_norm2)(F, X, t);
        TO(tn_layer_norm)(F, t, norm_w, norm_b, av, &mu, &rstd);
        TO(tn_embed_gate_T)(F, d->activation, norm_w, ls_w, lt, X, z1a + (size_t)a * 2 * F,
                            z2a + (size_t)a * 3 * F, mu, rstd, gall + (size_t)a * 9 * F, tmp);
    }
}

void TO(nnpops__tn_layer_pre_cpu)(const nnpops__tn_dims *d, int64_t n, const REAL *Xa,
                                  const REAL *const lt[3], REAL *nrma, REAL *cYa) {
    const int F = d->F;
    REAL tmp[TO_SCRATCH(d->F)];
    for (int64_t a = 0; a < n; a++)
        TO(tn_layer_y)(F, lt, Xa + (size_t)a * 9 * F, nrma + (size_t)a * F,
                       cYa + (size_t)a * 10 * F, tmp);
}

void TO(nnpops__tn_layer_pre_back_cpu)(const nnpops__tn_dims *d, int64_t n, const REAL *Xa,
                                       const REAL *nrma, const REAL *const lt[3],
                                       const REAL *gcY, REAL *gall) {
    const int F = d->F;
    REAL tmp[TO_SCRATCH(d->F)];
    for (int64_t a = 0; a < n; a++)
        TO(tn_layer_y_T)(F, lt, Xa + (size_t)a * 9 * F, nrma + (size_t)a * F,
                         gcY + (size_t)a * 10 * F, gall + (size_t)a * 9 * F, tmp);
}

void TO(nnpops__tn_pair_radial_cpu)(const nnpops__tn_dims *d, const REAL *rbf_a,
                                    const REAL *rbf_b, int64_t n_pairs, const int32_t *pentry,
                                    const REAL *er, const REAL *fc, REAL *erP, REAL *fcP,
                                    REAL *phiP) {
    nnpops__tn_shape s;
    TO_CAT(nnpops__tn_weights, SUF) w;
    TO(to_rbf_model)(d, rbf_a, rbf_b, &s, &w);
    for (int64_t p = 0; p < n_pairs; p++) {
        const int32_t e = pentry[p];
        REAL *ph = phiP + (size_t)p * d->R;
        erP[p] = e >= 0 ? er[e] : (REAL)0;
        fcP[p] = e >= 0 ? fc[e] : (REAL)0;
        for (int k = 0; k < d->R; k++) ph[k] = 0;
        if (e >= 0) TO(tn_rbf)(&s, (const void *)&w, er[e], ph, NULL);
    }
}

/* out += h (x) y with h = act(z + bias) fc computed per value (tn_message's edge factors). */
static void TO(to_hmul_z)(int F, int act, const REAL *z, const REAL *bias, REAL fc,
                          const REAL *y, REAL *out) {
    for (int k = 0; k < 10; k++) {
        const size_t blk = (size_t)(k == 0 ? 0 : (k < 4 ? 1 : 2)) * F;
        for (int f = 0; f < F; f++)
            out[k * F + f] += TO(tn_act)(act, z[blk + f] + bias[blk + f], NULL) * fc * y[k * F + f];
    }
}

void TO(nnpops__tn_message_cpu)(const nnpops__tn_dims *d, int64_t n_centers, const int64_t *start,
                                const int32_t *pairs, int64_t capacity, const uint8_t *mask,
                                const int32_t *slot, const REAL *Z, const REAL *bias,
                                const REAL *fcP, const REAL *self_h, const REAL *cY, REAL *cM) {
    const int F = d->F;
    for (int64_t c = 0; c < n_centers; c++) {
        REAL *m = cM + (size_t)c * 10 * F;
        for (int k = 0; k < 10 * F; k++) m[k] = 0;
        TO(tn_hmul)(F, self_h, cY + (size_t)c * 10 * F, m);
        const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
        for (int64_t e = start[c]; e < e1; e++)
            if ((mask[e] & NNPOPS__TN_EDGE) && slot[e] >= 0)
                TO(to_hmul_z)(F, d->activation, Z + (size_t)slot[e] * 3 * F, bias, fcP[slot[e]],
                              cY + (size_t)pairs[2 * e + 1] * 10 * F, m);
    }
}

void TO(nnpops__tn_message_back_cpu)(const nnpops__tn_dims *d, int64_t n_centers,
                                     const int64_t *start, const int32_t *pairs, int64_t capacity,
                                     const uint8_t *mask, const int32_t *slot, int64_t n_pairs,
                                     const int32_t *pentry, const REAL *Z, const REAL *bias,
                                     const REAL *fcP, const REAL *self_h, const REAL *cY,
                                     const REAL *gcM, REAL *gcY, REAL *GH, int accumulate,
                                     REAL *gfc) {
    const int F = d->F;
    for (int64_t c = 0; c < n_centers; c++) {
        REAL *gy = gcY + (size_t)c * 10 * F;
        TO(tn_hmul)(F, self_h, gcM + (size_t)c * 10 * F, gy);
        const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
        for (int64_t e = start[c]; e < e1; e++)
            if ((mask[e] & NNPOPS__TN_EDGE) && slot[e] >= 0)
                TO(to_hmul_z)(F, d->activation, Z + (size_t)slot[e] * 3 * F, bias, fcP[slot[e]],
                              gcM + (size_t)pairs[2 * e + 1] * 10 * F, gy);
    }
    for (int64_t p = 0; p < n_pairs; p++) {
        REAL *gh = GH + (size_t)p * 3 * F;
        for (int k = 0; k < 3 * F; k++) gh[k] = 0;
        const int32_t e = pentry[p];
        if (e >= 0) {
            const int32_t c = pairs[2 * e], j = pairs[2 * e + 1];
            const REAL *gc = gcM + (size_t)c * 10 * F, *yj = cY + (size_t)j * 10 * F;
            const REAL *gj = gcM + (size_t)j * 10 * F, *yc = cY + (size_t)c * 10 * F;
            for (int k = 0; k < 10; k++) {
                const int blk = k == 0 ? 0 : (k < 4 ? 1 : 2);
                for (int f = 0; f < F; f++)
                    gh[blk * F + f] +=
                        gc[k * F + f] * yj[k * F + f] + gj[k * F + f] * yc[k * F + f];
            }
        }
        /* through h = act(Z + bias) fcP (pairs without an entry too: G is 0 there) */
        REAL gs;
        TO(nnpops__tn_act_back_cpu)(d->activation, 1, 3 * F, Z + (size_t)p * 3 * F, bias,
                                    fcP + p, gh, &gs);
        gfc[p] = accumulate ? gfc[p] + gs : gs;
    }
}

static REAL TO(to_qf)(const double *charges, const int32_t *batch, int64_t a) {
    return (REAL)(1.0 + 0.1 * (charges ? charges[batch[a]] : 0.0));
}

void TO(nnpops__tn_layer_post_cpu)(const nnpops__tn_dims *d, int64_t n, const double *charges,
                                   const int32_t *batch, const REAL *Xa, const REAL *nrma,
                                   const REAL *cYa, const REAL *cMa, const REAL *const lt[3],
                                   REAL *Xouta) {
    const int F = d->F;
    const size_t F9 = 9 * (size_t)F, F10 = 10 * (size_t)F;
    REAL tmp[TO_SCRATCH(d->F)];
    for (int64_t a = 0; a < n; a++) {
        const REAL qf = TO(to_qf)(charges, batch, a);
        REAL *Y = tmp, *M = Y + F9, *C = M + F9, *D = C + F9, *nn = D + F9;
        TO(tn_layer_cd)(F, d->so3, qf, lt, cYa + (size_t)a * F10, cMa + (size_t)a * F10, Y, M, C,
                        nn, D, nn + F);
        TO(tn_layer_out)(F, qf, Xa + (size_t)a * F9, nrma + (size_t)a * F, D,
                         Xouta + (size_t)a * F9);
    }
}

void TO(nnpops__tn_layer_post_back_cpu)(const nnpops__tn_dims *d, int64_t n,
                                        const double *charges, const int32_t *batch,
                                        const REAL *cYa, const REAL *cMa, const REAL *const lt[3],
                                        const REAL *gall, REAL *gcYa, REAL *gcMa) {
    const int F = d->F;
    const size_t F9 = 9 * (size_t)F, F10 = 10 * (size_t)F;
    REAL tmp[TO_SCRATCH(d->F)];
    for (int64_t a = 0; a < n; a++) {
        const REAL qf = TO(to_qf)(charges, batch, a);
        REAL *Y = tmp, *M = Y + F9, *C = M + F9, *D = C + F9, *nn = D + F9;
        /* the forward of this atom again: C, its norm, D */
        TO(tn_layer_cd)(F, d->so3, qf, lt, cYa + (size_t)a * F10, cMa + (size_t)a * F10, Y, M, C,
                        nn, D, nn + F);
        TO(tn_layer_cd_T)(F, d->so3, qf, lt, gall + (size_t)a * F9, Y, M, C, nn, D,
                          gcYa + (size_t)a * F10, gcMa + (size_t)a * F10, nn + F);
    }
}

void TO(nnpops__tn_readout_cpu)(const nnpops__tn_dims *d, int64_t n_atoms, int64_t n_local,
                                const REAL *Xa, const REAL *norm_w, const REAL *norm_b,
                                const REAL *lin_w, const REAL *lin_b, const REAL *const out_w[],
                                const REAL *const out_b[], const int32_t *species,
                                const REAL *atomref, double *atom_energy, REAL *g) {
    nnpops__tn_shape s;
    memset(&s, 0, sizeof s);
    s.F = d->F, s.activation = d->activation, s.n_out = d->n_out, s.std = d->std;
    for (int k = 0; k <= d->n_out; k++) s.out_width[k] = d->out_width[k];
    TO_CAT(nnpops__tn_weights, SUF) w;
    memset(&w, 0, sizeof w);
    w.out_norm_w = norm_w, w.out_norm_b = norm_b, w.linear_w = lin_w, w.linear_b = lin_b;
    for (int k = 0; k < d->n_out; k++) w.out_w[k] = out_w[k], w.out_b[k] = out_b[k];
    REAL tmp[TO_SCRATCH(d->F) + 8 * d->F];
    const size_t F9 = 9 * (size_t)d->F;
    for (int64_t a = 0; a < n_atoms; a++) {
        const int local = a < n_local;
        REAL seed = (REAL)((local ? 1.0 : 0.0) * d->std);
        REAL o = TO(tn_readout)(&s, (const void *)&w, Xa + (size_t)a * F9, seed,
                                g ? g + (size_t)a * F9 : NULL, tmp);
        double en = (double)o * d->std;
        if (atomref) en += (double)atomref[species[a]];
        atom_energy[a] = local ? en : 0.0;
    }
}

/* One direction of a pair: entry e's dE/du into gu[e], its dE/d dk added into gd, dE/dfc
 * returned. */
static REAL TO(to_embed_back_entry)(int F, int64_t e, const int32_t *pairs,
                                    const int32_t *species, const REAL *ptab1, const REAL *ptab2,
                                    const REAL *ev, const REAL *er, REAL fce, const REAL *dke,
                                    const REAL *g0, REAL *gd, REAL *gu) {
    const int i = pairs[2 * e], j = pairs[2 * e + 1];
    REAL u[3];
    TO(tn_unit)(ev + 3 * e, er[e], u);
    const REAL *G = g0 + (size_t)i * 9 * F;
    const REAL *p1 = ptab1 + (size_t)species[i] * F, *p2 = ptab2 + (size_t)species[j] * F;
    return TO(tn_embed_edge_T)(F, G, u, p1, p2, fce, dke, gd, 1, gu + 3 * e);
}

void TO(nnpops__tn_embed_back_cpu)(const nnpops__tn_dims *d, int64_t n_pairs,
                                   const int32_t *pentry, const int32_t *pmirror,
                                   const int32_t *pairs, const int32_t *species, const REAL *ptab1,
                                   const REAL *ptab2, const REAL *ev, const REAL *er,
                                   const REAL *fcP, const REAL *dk, const REAL *dk_b,
                                   const REAL *g0, REAL *gd, REAL *gu, int accumulate,
                                   REAL *gfcv) {
    const int F = d->F;
    REAL dkb[3 * (size_t)F]; /* the pair's projections with their bias */
    for (int64_t p = 0; p < n_pairs; p++) {
        REAL *gdp = gd + (size_t)p * 3 * F;
        for (int k = 0; k < 3 * F; k++) gdp[k] = 0;
        REAL gfc = 0;
        for (int k = 0; k < 3 * F; k++)
            dkb[k] = dk[(size_t)p * 3 * F + k] + (dk_b ? dk_b[k] : (REAL)0);
        const REAL *dkp = dkb;
        if (pentry[p] >= 0)
            gfc += TO(to_embed_back_entry)(F, pentry[p], pairs, species, ptab1, ptab2, ev, er,
                                           fcP[p], dkp, g0, gdp, gu);
        if (pmirror[p] >= 0)
            gfc += TO(to_embed_back_entry)(F, pmirror[p], pairs, species, ptab1, ptab2, ev, er,
                                           fcP[p], dkp, g0, gdp, gu);
        gfcv[p] = accumulate ? gfcv[p] + gfc : gfc;
    }
}

void TO(nnpops__tn_radial_back_cpu)(const nnpops__tn_dims *d, const REAL *rbf_a,
                                    const REAL *rbf_b, int64_t n_centers, const int64_t *start,
                                    int64_t capacity, const REAL *er, const uint8_t *mask,
                                    const int32_t *pentry, const REAL *gphi, const REAL *gfc,
                                    int accumulate, REAL *gr) {
    const int64_t ne = pentry ? capacity : TO(to_entries)(n_centers, start, capacity);
    nnpops__tn_shape s;
    TO_CAT(nnpops__tn_weights, SUF) w;
    TO(to_rbf_model)(d, rbf_a, rbf_b, &s, &w);
    REAL phv[d->R > 0 ? d->R : 1], dphi[d->R > 0 ? d->R : 1];
    for (int64_t e = 0; e < capacity; e++) {
        if (pentry ? pentry[e] < 0 : e >= ne || !(mask[e] & NNPOPS__TN_EDGE)) {
            if (!accumulate) gr[e] = 0;
            continue;
        }
        REAL fcd;
        TO(tn_fc)(d->lo, d->hi, er[e], &fcd);
        TO(tn_rbf)(&s, (const void *)&w, er[e], phv, dphi);
        REAL g = gfc[e] * fcd;
        for (int k = 0; k < d->R; k++) g += gphi[(size_t)e * d->R + k] * dphi[k];
        gr[e] = accumulate ? gr[e] + g : g;
    }
}

void TO(nnpops__tn_finish_cpu)(const nnpops__tn_dims *d, const nnpops__tn_zbl_dev *zbl,
                               const int32_t *zbl_z, int64_t n_centers, int64_t n_local,
                               const int64_t *start, const int32_t *pairs, int64_t capacity,
                               const int32_t *species, const REAL *ev, const REAL *er,
                               const uint8_t *mask, const REAL *gu, const REAL *gr,
                               const int32_t *slot, const int32_t *pentry, const REAL *grP,
                               double mean, const int32_t *batch, const int32_t *sys_count,
                               double *atom_energy, double *pair_grad) {
    for (int64_t c = 0; c < n_centers; c++) {
        const int local = c < n_local;
        double en = local ? atom_energy[c] : 0.0;
        const int64_t e1 = start[c + 1] < capacity ? start[c + 1] : capacity;
        for (int64_t e = start[c]; e < e1; e++) {
            REAL g[3] = {0, 0, 0};
            const REAL r = er[e];
            if ((mask[e] & NNPOPS__TN_EDGE) && r > 0 && pair_grad && (!slot || slot[e] >= 0)) {
                REAL u[3], gdotu = 0;
                for (int k = 0; k < 3; k++) {
                    u[k] = ev[3 * e + k] / r;
                    gdotu += gu[3 * e + k] * u[k];
                }
                REAL grv = gr ? gr[e] : (REAL)0;
                if (grP && slot[e] >= 0 && pentry[slot[e]] == e) grv += grP[slot[e]];
                for (int k = 0; k < 3; k++) g[k] = (gu[3 * e + k] - u[k] * gdotu) / r + u[k] * grv;
            }
            double gz[3] = {0, 0, 0};
            if (mask[e] & NNPOPS__TN_ZBLP) {
                const int32_t Zi = zbl_z[species[c]], Zj = zbl_z[species[pairs[2 * e + 1]]];
                float sa = (float)pow((double)Zi, 0.23) + (float)pow((double)Zj, 0.23);
                float af = ((float)1 / sa) * zbl->k_a;
                REAL a = (REAL)af, ds = (REAL)zbl->ds, pref = (REAL)zbl->pref;
                REAL dd = r * ds / a;
                REAL x1 = (REAL)exp((REAL)-3.2 * dd), x2 = (REAL)exp((REAL)-0.9423 * dd);
                REAL x3 = (REAL)exp((REAL)-0.4029 * dd), x4 = (REAL)exp((REAL)-0.2016 * dd);
                REAL phi = (REAL)0.1818 * x1 + (REAL)0.5099 * x2 + (REAL)0.2802 * x3 +
                           (REAL)0.02817 * x4;
                REAL dphi = (REAL)-3.2 * (REAL)0.1818 * x1 - (REAL)0.9423 * (REAL)0.5099 * x2 -
                            (REAL)0.4029 * (REAL)0.2802 * x3 - (REAL)0.2016 * (REAL)0.02817 * x4;
                REAL fcd;
                REAL fcz = TO(tn_fc)(0.0, d->zcut, r, &fcd);
                REAL zz = (REAL)Zi * (REAL)Zj;
                en += local ? (double)(pref * phi * fcz * zz / r) : 0.0;
                if (local) {
                    REAL dE = pref * zz *
                              (dphi * ds / a * fcz / r + phi * fcd / r - phi * fcz / (r * r));
                    for (int k = 0; k < 3; k++) gz[k] = (double)(dE * ev[3 * e + k] / r);
                }
            }
            if (pair_grad)
                for (int k = 0; k < 3; k++)
                    pair_grad[3 * e + k] = d->inv_ell * ((double)g[k] + gz[k]);
        }
        if (local) atom_energy[c] = en + mean / (double)sys_count[batch[c]];
    }
}


void TO(nnpops__tn_opmodel_fill)(const nnpops__tn_shape *s,
                                 const TO_CAT(nnpops__tn_weights, SUF) *w,
                                 int32_t n_species, const int32_t *species_z,
                                 nnpops__tn_oplayout *lay, REAL *arena) {
    const size_t F = (size_t)s->F, R = (size_t)s->R, S = (size_t)n_species;
    const int L = s->L;
    size_t o = 0;
#define TO_TAKE(field, count)                                                                  \
    do {                                                                                       \
        lay->field = o;                                                                        \
        o += ((size_t)(count) + 7) & ~(size_t)7;                                               \
    } while (0)
    TO_TAKE(self_fc, 1);
    TO_TAKE(rbf_a, R);
    TO_TAKE(rbf_b, s->rbf == NNPOPS__TN_GAUSS ? 1 : R);
    TO_TAKE(ptab1, S * F);
    TO_TAKE(ptab2, S * F);
    TO_TAKE(self_dk, 3 * F);
    TO_TAKE(dproj_w, 3 * F * R);
    TO_TAKE(dproj_b, 3 * F);
    TO_TAKE(norm_w, F);
    TO_TAKE(norm_b, F);
    TO_TAKE(emb_ls_w[0], 2 * F * F);
    TO_TAKE(emb_ls_b[0], 2 * F);
    TO_TAKE(emb_ls_w[1], 6 * F * F);
    TO_TAKE(emb_ls_b[1], 3 * F);
    for (int k = 0; k < 3; k++) TO_TAKE(emb_lt[k], F * F);
    for (int l = 0; l < L; l++) {
        TO_TAKE(ls_w[3 * l], F * R);
        TO_TAKE(ls_b[3 * l], F);
        TO_TAKE(ls_w[3 * l + 1], 2 * F * F);
        TO_TAKE(ls_b[3 * l + 1], 2 * F);
        TO_TAKE(ls_w[3 * l + 2], 6 * F * F);
        TO_TAKE(ls_b[3 * l + 2], 3 * F);
        for (int k = 0; k < 6; k++) TO_TAKE(lt[6 * l + k], F * F);
        TO_TAKE(self_h[l], 3 * F);
    }
    TO_TAKE(lin_w, 3 * F * F);
    TO_TAKE(lin_b, F);
    TO_TAKE(out_norm_w, 3 * F);
    TO_TAKE(out_norm_b, 3 * F);
    for (int k = 0; k < s->n_out; k++) {
        TO_TAKE(out_w[k], (size_t)s->out_width[k + 1] * s->out_width[k]);
        TO_TAKE(out_b[k], s->out_width[k + 1]);
    }
    if (w->atomref) TO_TAKE(atomref, S);
    else lay->atomref = SIZE_MAX;
#undef TO_TAKE
    lay->total = o;
    if (!arena) return;
    memset(arena, 0, o * sizeof(REAL));
#define TO_PUT(field, src, count) memcpy(arena + lay->field, (src), (size_t)(count) * sizeof(REAL))
    TO_PUT(rbf_a, w->rbf_a, R);
    TO_PUT(rbf_b, w->rbf_b, s->rbf == NNPOPS__TN_GAUSS ? 1 : R);
    for (int k = 0; k < 3; k++) {
        TO_PUT(dproj_w + (size_t)k * F * R, w->dproj_w[k], F * R);
        TO_PUT(dproj_b + (size_t)k * F, w->dproj_b[k], F);
    }
    TO_PUT(norm_w, w->init_norm_w, F);
    TO_PUT(norm_b, w->init_norm_b, F);
    TO_PUT(emb_ls_w[0], w->emb_ls_w[0], 2 * F * F);
    TO_PUT(emb_ls_b[0], w->emb_ls_b[0], 2 * F);
    TO_PUT(emb_ls_w[1], w->emb_ls_w[1], 6 * F * F);
    TO_PUT(emb_ls_b[1], w->emb_ls_b[1], 3 * F);
    for (int k = 0; k < 3; k++) TO_PUT(emb_lt[k], w->emb_lt[k], F * F);
    for (int l = 0; l < L; l++) {
        TO_PUT(ls_w[3 * l], w->layer_ls_w[3 * l], F * R);
        TO_PUT(ls_b[3 * l], w->layer_ls_b[3 * l], F);
        TO_PUT(ls_w[3 * l + 1], w->layer_ls_w[3 * l + 1], 2 * F * F);
        TO_PUT(ls_b[3 * l + 1], w->layer_ls_b[3 * l + 1], 2 * F);
        TO_PUT(ls_w[3 * l + 2], w->layer_ls_w[3 * l + 2], 6 * F * F);
        TO_PUT(ls_b[3 * l + 2], w->layer_ls_b[3 * l + 2], 3 * F);
        for (int k = 0; k < 6; k++) TO_PUT(lt[6 * l + k], w->layer_lt[6 * l + k], F * F);
    }
    TO_PUT(lin_w, w->linear_w, 3 * F * F);
    TO_PUT(lin_b, w->linear_b, F);
    TO_PUT(out_norm_w, w->out_norm_w, 3 * F);
    TO_PUT(out_norm_b, w->out_norm_b, 3 * F);
    for (int k = 0; k < s->n_out; k++) {
        TO_PUT(out_w[k], w->out_w[k], (size_t)s->out_width[k + 1] * s->out_width[k]);
        TO_PUT(out_b[k], w->out_b[k], s->out_width[k + 1]);
    }
#undef TO_PUT
    /* the embedding's pair terms per species, as the CPU pass computes them per atom */
    for (size_t sp = 0; sp < S; sp++) {
        const int32_t z = species_z[sp];
        if (z < 0 || z >= s->max_z) continue;
        const REAL *em = w->emb + (size_t)z * F;
        for (size_t q = 0; q < F; q++) {
            const REAL *row = w->emb2_w + q * 2 * F;
            REAL a = w->emb2_b[q], b = 0;
            for (size_t i = 0; i < F; i++) {
                a += row[i] * em[i];
                b += row[F + i] * em[i];
            }
            arena[lay->ptab1 + sp * F + q] = a;
            arena[lay->ptab2 + sp * F + q] = b;
        }
        if (w->atomref && z < s->atomref_len) arena[lay->atomref + sp] = w->atomref[z];
    }
    /* the self edge (r = 0) */
    REAL phi0[R > 0 ? R : 1], dd;
    TO(tn_rbf)(s, w, (REAL)0, phi0, NULL);
    const REAL fc0 = TO(tn_fc)(s->cutoff_lower, s->cutoff_upper, (REAL)0, &dd);
    arena[lay->self_fc] = fc0;
    for (int k = 0; k < 3; k++)
        TO(tn_linear)(w->dproj_w[k], w->dproj_b[k], (int)R, (int)F, phi0,
                      arena + lay->self_dk + (size_t)k * F);
    REAL z1[F > 0 ? F : 1], z2[2 * F > 0 ? 2 * F : 1], z3[3 * F > 0 ? 3 * F : 1];
    for (int l = 0; l < L; l++) {
        TO(tn_linear)(w->layer_ls_w[3 * l], w->layer_ls_b[3 * l], (int)R, (int)F, phi0, z1);
        for (size_t k = 0; k < F; k++) z1[k] = TO(tn_act)(s->activation, z1[k], NULL);
        TO(tn_linear)(w->layer_ls_w[3 * l + 1], w->layer_ls_b[3 * l + 1], (int)F, (int)(2 * F),
                      z1, z2);
        for (size_t k = 0; k < 2 * F; k++) z2[k] = TO(tn_act)(s->activation, z2[k], NULL);
        TO(tn_linear)(w->layer_ls_w[3 * l + 2], w->layer_ls_b[3 * l + 2], (int)(2 * F),
                      (int)(3 * F), z2, z3);
        for (size_t k = 0; k < 3 * F; k++)
            arena[lay->self_h[l] + k] = fc0 * TO(tn_act)(s->activation, z3[k], NULL);
    }
}

#undef TO
#undef TO_CAT
#undef TO_CAT_
#undef TO_SCRATCH
