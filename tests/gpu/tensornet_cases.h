/* tensornet_cases.h - the cases of test_gpu_tensornet.c, included once per precision (REAL, SUF,
 * TOL_A, TOL_R defined).  No include guard on purpose. */

#define TC_CAT_(a, b) a##b
#define TC_CAT(a, b) TC_CAT_(a, b)
#define TC(name) TC_CAT(name, SUF)

/* The model of a fixture as the ops read it: host arena (and device copy when dev). */
typedef struct {
    nnpops__tn_oplayout lay;
    REAL *arena;
    REAL *darena;
    int32_t zbl_z[4];
    int32_t *dzbl_z;
    TC(nnpops__tn_opmodel) host, dev;
} TC(opm);

static const TC(nnpops__tn_weights) *TC(weights_of)(const fixture *fx) {
    return (const TC(nnpops__tn_weights) *)(sizeof(REAL) == 8 ? (const void *)&fx->w64
                                                              : (const void *)&fx->w32);
}

static void TC(make_opm)(const fixture *fx, TC(opm) *o, int dev) {
    memset(o, 0, sizeof *o);
    const TC(nnpops__tn_weights) *w = TC(weights_of)(fx);
    TC(nnpops__tn_opmodel_fill)(&fx->s, w, fx->n_species, fx->species_z, &o->lay, NULL);
    o->arena = malloc(sizeof(REAL) * o->lay.total);
    TC(nnpops__tn_opmodel_fill)(&fx->s, w, fx->n_species, fx->species_z, &o->lay, o->arena);
    for (int k = 0; k < fx->n_species; k++) o->zbl_z[k] = fx->zmap[fx->species_z[k]];
    const nnpops__tn_zbl *zbl = fx->has_zbl ? &fx->zbl : NULL;
    TC(nnpops__tn_opmodel_bind)(&fx->s, &o->lay, o->arena, o->arena[o->lay.self_fc], fx->mean, zbl,
                                o->zbl_z, fx->ell, &o->host);
    if (dev) {
        o->darena = dup_to_device(o->arena, sizeof(REAL) * o->lay.total);
        o->dzbl_z = dup_to_device(o->zbl_z, sizeof o->zbl_z);
        TC(nnpops__tn_opmodel_bind)(&fx->s, &o->lay, o->darena, o->arena[o->lay.self_fc],
                                    fx->mean, zbl, o->dzbl_z, fx->ell, &o->dev);
    }
}

static void TC(free_opm)(TC(opm) *o) {
    free(o->arena);
    if (o->darena) cudaFree(o->darena);
    if (o->dzbl_z) cudaFree(o->dzbl_z);
}

static double TC(cmp)(const char *what, const REAL *a, const REAL *b, size_t n, double atol,
                      double rtol) {
    double *x = malloc(sizeof(double) * (n ? n : 1)), *y = malloc(sizeof(double) * (n ? n : 1));
    for (size_t k = 0; k < n; k++) x[k] = (double)a[k], y[k] = (double)b[k];
    const double r = compare(what, x, y, n, atol, rtol);
    free(x);
    free(y);
    return r;
}

/* ---- compose: the step of the CPU ops against the CPU pass ---- */

static int TC(compose_one)(int variant, int F, int R, int n_per, int keep) {
    fixture fx;
    make_fixture(&fx, F, R, n_per, variant);
    printf(" variant %d (F %d, R %d, %lld atoms, %lld entries; %s)\n", variant, F, R,
           (long long)fx.n, (long long)fx.n_entries,
           keep ? "pre-activations per layer" : "one set for the layers");
    const nnpops__tn_shape *s = &fx.s;
    const int64_t n = fx.n, ne = fx.n_entries;
    const double lo = s->cutoff_lower * fx.ell, hi = s->cutoff_upper * fx.ell;
    const double zc = fx.has_zbl ? fx.zbl.cutoff * fx.ell : 0.0;
    /* the CPU pass over the edges of the same lists */
    int32_t *ei = malloc(sizeof(int32_t) * (n + ne)), *ej = malloc(sizeof(int32_t) * (n + ne));
    int64_t *eentry = malloc(sizeof(int64_t) * (n + ne)), *zentry = malloc(sizeof(int64_t) * ne);
    int32_t *zi = malloc(sizeof(int32_t) * ne), *zj = malloc(sizeof(int32_t) * ne);
    REAL *ev = calloc(4 * (n + ne), sizeof(REAL)), *zv = calloc(4 * ne + 1, sizeof(REAL));
    REAL *eg = calloc(3 * (n + ne), sizeof(REAL)), *zg = calloc(3 * ne + 1, sizeof(REAL));
    int64_t m = 0, mz = 0;
    for (int64_t c = 0; c < n; c++) {
        eentry[m] = -1, ei[m] = ej[m] = (int32_t)c, m++;
        for (int64_t e = fx.start[c]; e < fx.start[c + 1]; e++) {
            const double *v = fx.vec + 3 * e;
            const double r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
            if (r >= lo && r < hi) {
                eentry[m] = e, ei[m] = (int32_t)c, ej[m] = fx.pairs[2 * e + 1];
                for (int k = 0; k < 3; k++) ev[3 * m + k] = (REAL)(v[k] / fx.ell);
                ev[3 * (n + ne) + m] = (REAL)(r / fx.ell);
                m++;
            }
            if (r < zc) {
                zentry[mz] = e, zi[mz] = (int32_t)c, zj[mz] = fx.pairs[2 * e + 1];
                for (int k = 0; k < 3; k++) zv[3 * mz + k] = (REAL)(v[k] / fx.ell);
                zv[3 * ne + mz] = (REAL)(r / fx.ell);
                mz++;
            }
        }
    }
    /* the edges' distances follow their vectors, at 3 (n + ne) */
    REAL *edist = ev + 3 * (n + ne);
    double *wgt = malloc(sizeof(double) * n), *q = malloc(sizeof(double) * n);
    double *ref_e = calloc(n, sizeof(double));
    int32_t count[2] = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        wgt[i] = i < fx.n_local ? 1.0 : 0.0;
        q[i] = fx.charges[fx.batch[i]];
        count[fx.batch[i]]++;
    }
    size_t wb = sizeof(REAL) == 8 ? nnpops__tn_cpu_workspace_f64(s, n, m)
                                  : nnpops__tn_cpu_workspace_f32(s, n, m);
    void *ws = malloc(wb);
    int64_t bad = -1;
    const TC(nnpops__tn_weights) *w = TC(weights_of)(&fx);
    CHECK(TC(nnpops__tn_cpu)(s, w, n, fx.z, q, m, ei, ej, ev, edist, wgt, ref_e, eg, ws, &bad) ==
          NNPOPS__TN_OK);
    if (fx.has_zbl)
        CHECK(TC(nnpops__tn_zbl_cpu)(&fx.zbl, fx.z, mz, zi, zj, zv, zv + 3 * ne, wgt, ref_e, zg,
                                     &bad) == NNPOPS__TN_OK);
    double *ref_g = calloc(3 * ne, sizeof(double));
    for (int64_t k = 0; k < m; k++)
        if (eentry[k] >= 0)
            for (int c = 0; c < 3; c++) ref_g[3 * eentry[k] + c] += (double)eg[3 * k + c] / fx.ell;
    for (int64_t k = 0; k < mz; k++)
        for (int c = 0; c < 3; c++) ref_g[3 * zentry[k] + c] += (double)zg[3 * k + c] / fx.ell;
    for (int64_t i = 0; i < n; i++)
        ref_e[i] = i < fx.n_local ? ref_e[i] + fx.mean / count[fx.batch[i]] : 0.0;

    /* the composed step */
    TC(opm) o;
    TC(make_opm)(&fx, &o, 0);
    const size_t bytes = TC(nnpops__tn_step_work_bytes)(&o.host, n, 2, fx.capacity);
    /* the work space shows which plan ran: a set of pre-activations per layer (keep, the default
     * at this size) or one set the layers share (a budget of 0) */
    nnpops__tn_step_keep_bytes(keep ? SIZE_MAX : 0);
    const size_t bytes_other = TC(nnpops__tn_step_work_bytes)(&o.host, n, 2, fx.capacity);
    int bad_cmp = keep ? bytes_other != bytes : (s->L > 1) != (bytes_other < bytes);
    void *work = aligned_alloc(256, (bytes + 255) / 256 * 256);
    double *e = calloc(n, sizeof(double)), *g = calloc(3 * fx.capacity, sizeof(double));
    nnpops__tn_step_args a = {n,       fx.n_local, 2,         fx.capacity, fx.start, fx.pairs,
                              fx.vec,  fx.species, fx.batch,  fx.charges,  1,        e,
                              g,       work,       NULL,      NULL};
    CHECK_OK(TC(nnpops__tn_step)(&o.host, &a, 0));
    bad_cmp |= compare("energies per atom", e, ref_e, n, TOL_A, TOL_R) > 1;
    /* forces and virial as the core reduces the entries' gradients (the GPU step gives a pair's
     * radial gradient to the entry that holds the pair, the CPU pass shares it between both) */
    double *f = calloc(3 * n, sizeof(double)), *f_ref = calloc(3 * n, sizeof(double));
    double vir[9] = {0}, vir_ref[9] = {0};
    for (int64_t k = 0; k < ne; k++) {
        const int32_t i = fx.pairs[2 * k], j = fx.pairs[2 * k + 1];
        for (int c = 0; c < 3; c++) {
            f[3 * i + c] += g[3 * k + c], f[3 * j + c] -= g[3 * k + c];
            f_ref[3 * i + c] += ref_g[3 * k + c], f_ref[3 * j + c] -= ref_g[3 * k + c];
            for (int c2 = 0; c2 < 3; c2++) {
                vir[3 * c + c2] -= fx.vec[3 * k + c] * g[3 * k + c2];
                vir_ref[3 * c + c2] -= fx.vec[3 * k + c] * ref_g[3 * k + c2];
            }
        }
    }
    bad_cmp |= compare("forces", f, f_ref, 3 * n, TOL_A, TOL_R) > 1;
    bad_cmp |= compare("virial", vir, vir_ref, 9, TOL_A, TOL_R) > 1;
    for (int64_t k = 3 * ne; k < 3 * fx.capacity; k++) bad_cmp |= g[k] != 0.0;
    free(f), free(f_ref);
    /* energies alone: the same values */
    double *e2 = calloc(n, sizeof(double));
    a.need_grad = 0, a.atom_energy = e2, a.pair_grad = NULL;
    CHECK_OK(TC(nnpops__tn_step)(&o.host, &a, 0));
    bad_cmp |= memcmp(e, e2, sizeof(double) * n) != 0;
    nnpops__tn_step_keep_bytes(SIZE_MAX);
    free(e2), free(e), free(g), free(work), free(ws), free(ref_e), free(ref_g), free(wgt), free(q);
    free(ei), free(ej), free(eentry), free(zentry), free(zi), free(zj), free(ev), free(zv);
    free(eg), free(zg);
    TC(free_opm)(&o);
    free_fixture(&fx);
    return bad_cmp;
}

static int TC(compose)(void) {
    const int variants[] = {0, 1 | 8, 2 | 4, 16, 32 | 8, 1 | 2 | 4 | 8, 64, 64 | 4 | 8};
    int bad = 0;
    for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++)
        for (int keep = 1; keep >= 0; keep--)
            bad |= TC(compose_one)(variants[k], 12, 6, 9, keep);
    return bad;
}

/* ---- ops: each CUDA twin against its CPU twin ---- */

/* a host array of n random values in (-scale, scale) and its device copy */
typedef struct {
    size_t n;
    REAL *h, *d, *back;
} TC(arr);

static TC(arr) TC(mk)(size_t n, double scale) {
    TC(arr) x;
    x.n = n;
    x.h = malloc(sizeof(REAL) * (n ? n : 1));
    x.back = malloc(sizeof(REAL) * (n ? n : 1));
    for (size_t k = 0; k < n; k++) x.h[k] = (REAL)(scale * srand1());
    x.d = dup_to_device(x.h, sizeof(REAL) * n);
    return x;
}
static TC(arr) TC(mk_from)(const REAL *h, size_t n) {
    TC(arr) x = TC(mk)(n, 0.0);
    memcpy(x.h, h, sizeof(REAL) * n);
    CUDA_CHECK(cudaMemcpy(x.d, x.h, sizeof(REAL) * n, cudaMemcpyHostToDevice));
    return x;
}
static double TC(chk)(const char *what, TC(arr) *x) {
    to_host(x->back, x->d, sizeof(REAL) * x->n);
    return TC(cmp)(what, x->back, x->h, x->n, TOL_A, TOL_R);
}
static void TC(drop)(TC(arr) *x) {
    free(x->h), free(x->back);
    cudaFree(x->d);
}

static int TC(ops_one)(int variant, int F, int R, int n_per) {
    fixture fx;
    make_fixture(&fx, F, R, n_per, variant);
    printf(" variant %d (F %d, R %d, %lld atoms, %lld entries)\n", variant, F, R, (long long)fx.n,
           (long long)fx.n_entries);
    TC(opm) o;
    TC(make_opm)(&fx, &o, 1);
    const TC(nnpops__tn_opmodel) *mh = &o.host, *md = &o.dev;
    const nnpops__tn_dims *d = &mh->d;
    const int64_t n = fx.n, E = fx.capacity;
    const size_t Fz = (size_t)F;
    void *st = (void *)g_stream;
    cublasHandle_t blas;
    CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasSetStream(blas, g_stream) == CUBLAS_STATUS_SUCCESS);
    int64_t *dstart = dup_to_device(fx.start, sizeof(int64_t) * (n + 1));
    int32_t *dpairs = dup_to_device(fx.pairs, sizeof(int32_t) * 2 * fx.n_entries);
    double *dvec = dup_to_device(fx.vec, sizeof(double) * 3 * fx.n_entries);
    int32_t *dspecies = dup_to_device(fx.species, sizeof(int32_t) * n);
    int32_t *dbatch = dup_to_device(fx.batch, sizeof(int32_t) * n);
    double *dcharges = dup_to_device(fx.charges, sizeof(double) * 2);
    double worst = 0;
#define WORST(x) worst = fmax(worst, (x))

    /* edges (the real geometry of the lists; the tail beyond the entries zero) */
    TC(arr) ev = TC(mk)(3 * E, 1), er = TC(mk)(E, 1), fc = TC(mk)(E, 1), phi = TC(mk)(E * R, 1);
    uint8_t *mask = malloc(E), *mask_back = malloc(E), *dmask = dalloc(E);
    memset(mask, 0xff, E);
    TC(nnpops__tn_edges_cpu)(d, mh->rbf_a, mh->rbf_b, n, fx.start, E, fx.vec, ev.h, er.h, mask,
                             fc.h, phi.h);
    CHECK_OK(TC(nnpops__tn_edges_cuda)(d, md->rbf_a, md->rbf_b, n, dstart, E, dvec, ev.d, er.d,
                                       dmask, fc.d, phi.d, st));
    WORST(TC(chk)("edges: vectors", &ev));
    WORST(TC(chk)("edges: distances", &er));
    WORST(TC(chk)("edges: cutoff", &fc));
    WORST(TC(chk)("edges: radial basis", &phi));
    to_host(mask_back, dmask, E);
    CHECK(memcmp(mask, mask_back, E) == 0);
    int n_edge = 0;
    for (int64_t e = 0; e < E; e++) n_edge += mask[e] & NNPOPS__TN_EDGE;
    CHECK(n_edge > 0);

    /* pairs: the same numbers (integers: exactly); each pair's two entries are mirrors */
    const int64_t P = (E + 1) / 2;
    int32_t *slot = malloc(sizeof(int32_t) * E), *pentry = malloc(sizeof(int32_t) * P);
    int32_t *slot_b = malloc(sizeof(int32_t) * E), *pentry_b = malloc(sizeof(int32_t) * P);
    int32_t *pmirror = malloc(sizeof(int32_t) * P), *pmirror_b = malloc(sizeof(int32_t) * P);
    int32_t *dpmirror = dalloc(sizeof(int32_t) * P);
    int32_t *cnt_scratch = malloc(sizeof(int32_t) * (n + 1));
    int32_t *dslot = dalloc(sizeof(int32_t) * E), *dpentry = dalloc(sizeof(int32_t) * P);
    int32_t *dcnt_scratch = dalloc(sizeof(int32_t) * (n + 1));
    nnpops__tn_pairs_cpu(n, fx.start, fx.pairs, E, fx.vec, mask, P, slot, pentry, pmirror,
                         cnt_scratch);
    for (int path = 2; path >= 1; path--) { /* three kernels, then one block (what a step uses) */
        CHECK_OK(nnpops__tn_pairs_cuda(n, dstart, dpairs, E, dvec, dmask, P, dslot, dpentry,
                                       dpmirror, dcnt_scratch, path, st));
        to_host(slot_b, dslot, sizeof(int32_t) * E);
        to_host(pentry_b, dpentry, sizeof(int32_t) * P);
        to_host(pmirror_b, dpmirror, sizeof(int32_t) * P);
        CHECK(memcmp(slot, slot_b, sizeof(int32_t) * E) == 0);
        CHECK(memcmp(pentry, pentry_b, sizeof(int32_t) * P) == 0);
        CHECK(memcmp(pmirror, pmirror_b, sizeof(int32_t) * P) == 0);
    }
    for (int64_t p = 0; p < P; p++) /* every held pair has its mirror entry */
        CHECK((pentry[p] >= 0) == (pmirror[p] >= 0) &&
              (pmirror[p] < 0 || slot[pmirror[p]] == p));
    {
        int64_t held = 0;
        for (int64_t p = 0; p < P; p++) held += pentry[p] >= 0;
        CHECK(2 * held == n_edge);
        for (int64_t e = 0; e < E; e++) {
            if (!(mask[e] & NNPOPS__TN_EDGE)) {
                CHECK(slot[e] == -1);
                continue;
            }
            CHECK(slot[e] >= 0 && slot[e] < P);
            const int32_t h = pentry[slot[e]];
            CHECK(h >= 0);
            if (h != e) /* the mirror: the same two atoms the other way round */
                CHECK(fx.pairs[2 * h] == fx.pairs[2 * e + 1] &&
                      fx.pairs[2 * h + 1] == fx.pairs[2 * e]);
        }
        printf("  pairs: %lld held, slots and entries the same\n", (long long)held);
    }
    TC(arr) erP = TC(mk)(P, 1), fcP = TC(mk)(P, 1), phiP = TC(mk)(P * R, 1);
    TC(nnpops__tn_pair_radial_cpu)(d, mh->rbf_a, mh->rbf_b, P, pentry, er.h, fc.h, erP.h, fcP.h,
                                   phiP.h);
    CHECK_OK(TC(nnpops__tn_pair_radial_cuda)(d, md->rbf_a, md->rbf_b, P, dpentry, er.d, fc.d,
                                             erP.d, fcP.d, phiP.d, st));
    WORST(TC(chk)("pairs: distances", &erP));
    WORST(TC(chk)("pairs: cutoff", &fcP));
    WORST(TC(chk)("pairs: radial basis", &phiP));

    /* linear: forward with bias over the entries, backward accumulating; the products with
     * their activations (the edge networks' forward and backward): each with the float32
     * products on the tensor cores where they fit, then on cuBLAS */
    for (int path = 1; path <= 2; path++) {
        nnpops__tn_gemm_path_cuda(path);
        TC(arr) y = TC(mk)(E * 3 * Fz, 1), x = TC(mk)(E * Fz, 1);
        TC(nnpops__tn_linear_cpu)(E, R, 3 * F, 0, mh->dproj_w, mh->dproj_b, phi.h, 0.0, y.h);
        CHECK_OK(TC(nnpops__tn_linear_cuda)(E, R, 3 * F, 0, md->dproj_w, md->dproj_b, phi.d, 0.0,
                                            y.d, blas, st));
        WORST(TC(chk)("linear (bias)", &y));
        TC(arr) g = TC(mk)(E * 2 * Fz, 1), gx = TC(mk)(E * Fz, 1);
        TC(nnpops__tn_linear_cpu)(E, F, 2 * F, 1, mh->emb_ls_w[0], NULL, g.h, 1.0, gx.h);
        CHECK_OK(TC(nnpops__tn_linear_cuda)(E, F, 2 * F, 1, md->emb_ls_w[0], NULL, g.d, 1.0, gx.d,
                                            blas, st));
        WORST(TC(chk)("linear transposed (accumulating)", &gx));
        TC(arr) za = TC(mk)(E * 3 * Fz, 1), aa = TC(mk)(E * 3 * Fz, 1), zg = TC(mk)(E * 2 * Fz, 2);
        TC(nnpops__tn_linear_act_cpu)(d->activation, E, 2 * F, 3 * F, 0, mh->ls_w[2], g.h, 0.0,
                                      za.h, mh->ls_b[2], NULL, aa.h);
        CHECK_OK(TC(nnpops__tn_linear_act_cuda)(d->activation, E, 2 * F, 3 * F, 0, md->ls_w[2],
                                                g.d, 0.0, za.d, md->ls_b[2], NULL, aa.d, blas,
                                                st));
        WORST(TC(chk)("linear with activation: pre-activations", &za));
        WORST(TC(chk)("linear with activation: activations", &aa));
        TC(nnpops__tn_linear_act_cpu)(d->activation, E, 2 * F, 3 * F, 1, mh->ls_w[2], y.h, 0.0,
                                      g.h, mh->ls_b[1], zg.h, NULL);
        CHECK_OK(TC(nnpops__tn_linear_act_cuda)(d->activation, E, 2 * F, 3 * F, 1, md->ls_w[2],
                                                y.d, 0.0, g.d, md->ls_b[1], zg.d, NULL, blas,
                                                st));
        WORST(TC(chk)("linear transposed with activation backward", &g));
        TC(drop)(&za), TC(drop)(&aa), TC(drop)(&zg);
        /* activations: forward with a scale, backward with its sum */
        TC(arr) z = TC(mk)(E * 3 * Fz, 3), A = TC(mk)(E * 3 * Fz, 1), G = TC(mk)(E * 3 * Fz, 1),
                gs = TC(mk)(E, 1);
        TC(nnpops__tn_act_cpu)(d->activation, E, 3 * F, mh->ls_b[2], z.h, fc.h, A.h);
        CHECK_OK(TC(nnpops__tn_act_cuda)(d->activation, E, 3 * F, md->ls_b[2], z.d, fc.d, A.d,
                                         st));
        WORST(TC(chk)("activation (bias, scale)", &A));
        WORST(TC(chk)("activation: Z left as it is", &z));
        TC(nnpops__tn_act_cpu)(d->activation, E, 2 * F, NULL, z.h, NULL, A.h);
        CHECK_OK(TC(nnpops__tn_act_cuda)(d->activation, E, 2 * F, NULL, z.d, NULL, A.d, st));
        WORST(TC(chk)("activation (no bias, no scale)", &A));
        TC(nnpops__tn_act_back_cpu)(d->activation, E, 3 * F, z.h, mh->ls_b[2], fc.h, G.h, gs.h);
        CHECK_OK(TC(nnpops__tn_act_back_cuda)(d->activation, E, 3 * F, z.d, md->ls_b[2], fc.d,
                                              G.d, gs.d, st));
        WORST(TC(chk)("activation backward (bias, scale)", &G));
        WORST(TC(chk)("activation backward: scale gradient", &gs));
        TC(nnpops__tn_act_back_cpu)(d->activation, E, 2 * F, z.h, NULL, NULL, G.h, NULL);
        CHECK_OK(TC(nnpops__tn_act_back_cuda)(d->activation, E, 2 * F, z.d, NULL, NULL, G.d,
                                              NULL, st));
        WORST(TC(chk)("activation backward (no bias, no scale)", &G));
        TC(drop)(&y), TC(drop)(&x), TC(drop)(&g), TC(drop)(&gx), TC(drop)(&z), TC(drop)(&A);
        TC(drop)(&G), TC(drop)(&gs);
        nnpops__tn_gemm_path_cuda(0);
    }
    /* the embedding */
    TC(arr) dk = TC(mk)(P * 3 * Fz, 1), X0 = TC(mk)(n * 9 * Fz, 1);
    {
        TC(nnpops__tn_embed_cpu)(d, n, fx.start, fx.pairs, E, fx.species, mh->ptab1, mh->ptab2,
                                 mh->self_fc, mh->self_dk, ev.h, er.h, mask, slot, fc.h, dk.h,
                                 NULL, X0.h);
        CHECK_OK(TC(nnpops__tn_embed_cuda)(d, n, dstart, dpairs, E, dspecies, md->ptab1,
                                           md->ptab2, md->self_fc, md->self_dk, ev.d, er.d, dmask,
                                           dslot, fc.d, dk.d, NULL, X0.d, st));
        WORST(TC(chk)("embedding X0", &X0));
        /* the projections' bias added on read (what the step does) */
        TC(nnpops__tn_embed_cpu)(d, n, fx.start, fx.pairs, E, fx.species, mh->ptab1, mh->ptab2,
                                 mh->self_fc, mh->self_dk, ev.h, er.h, mask, slot, fc.h, dk.h,
                                 mh->dproj_b, X0.h);
        CHECK_OK(TC(nnpops__tn_embed_cuda)(d, n, dstart, dpairs, E, dspecies, md->ptab1,
                                           md->ptab2, md->self_fc, md->self_dk, ev.d, er.d, dmask,
                                           dslot, fc.d, dk.d, md->dproj_b, X0.d, st));
        WORST(TC(chk)("embedding X0 (bias of dk)", &X0));
        TC(arr) z1 = TC(mk)(n * 2 * Fz, 1), z2 = TC(mk)(n * 3 * Fz, 1), X1 = TC(mk)(n * 9 * Fz, 1);
        TC(nnpops__tn_atom_embed_cpu)(d, n, X0.h, mh->norm_w, mh->norm_b, mh->emb_ls_w,
                                      mh->emb_ls_b, mh->emb_lt, z1.h, z2.h, X1.h);
        CHECK_OK(TC(nnpops__tn_atom_embed_cuda)(d, n, X0.d, md->norm_w, md->norm_b, md->emb_ls_w,
                                                md->emb_ls_b, md->emb_lt, z1.d, z2.d, X1.d, st));
        WORST(TC(chk)("embedding gates z1", &z1));
        WORST(TC(chk)("embedding gates z2", &z2));
        WORST(TC(chk)("embedding X1", &X1));
        TC(arr) g = TC(mk)(n * 9 * Fz, 1), g1 = TC(mk)(n * 9 * Fz, 0.0);
        CUDA_CHECK(cudaMemcpy(g1.d, g.d, sizeof(REAL) * n * 9 * Fz, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaDeviceSynchronize());
        TC(nnpops__tn_atom_embed_back_cpu)(d, n, X0.h, mh->norm_w, mh->norm_b, mh->emb_ls_w,
                                           mh->emb_lt, z1.h, z2.h, g.h);
        memcpy(g1.h, g.h, sizeof(REAL) * n * 9 * Fz);
        /* through the work space: two kernels where the channels split over blocks (more than
         * one warp of them; the tiles are few at this size), else one; then as one (none
         * given): the same sums */
        const int want = (F + 31) / 32 > 1;
        REAL *wc = dalloc(sizeof(REAL) * n * 10 * Fz), *wg = dalloc(sizeof(REAL) * n * 3 * Fz);
        const int split0 = nnpops__tn_embed_back_split_cuda();
        CHECK_OK(TC(nnpops__tn_atom_embed_back_cuda)(d, n, X0.d, md->norm_w, md->norm_b,
                                                     md->emb_ls_w, md->emb_lt, z1.d, z2.d, g.d,
                                                     wc, wg, st));
        CHECK(nnpops__tn_embed_back_split_cuda() - split0 == want);
        WORST(TC(chk)("embedding gates backward (work space given)", &g));
        CHECK_OK(TC(nnpops__tn_atom_embed_back_cuda)(d, n, X0.d, md->norm_w, md->norm_b,
                                                     md->emb_ls_w, md->emb_lt, z1.d, z2.d, g1.d,
                                                     NULL, NULL, st));
        CHECK(nnpops__tn_embed_back_split_cuda() - split0 == want);
        WORST(TC(chk)("embedding gates backward (one kernel)", &g1));
        {
            REAL *a = malloc(sizeof(REAL) * n * 9 * Fz), *b = malloc(sizeof(REAL) * n * 9 * Fz);
            to_host(a, g.d, sizeof(REAL) * n * 9 * Fz);
            to_host(b, g1.d, sizeof(REAL) * n * 9 * Fz);
            CHECK(memcmp(a, b, sizeof(REAL) * n * 9 * Fz) == 0);
            free(a), free(b);
        }
        cudaFree(wc), cudaFree(wg);
        TC(drop)(&g1);
        TC(arr) gd = TC(mk)(P * 3 * Fz, 1), gu = TC(mk)(3 * E, 1), gfc = TC(mk)(E, 1),
                gfcq = TC(mk)(P, 1);
        for (int acc = 0; acc < 2; acc++) { /* dE/dfc written, then accumulated */
            TC(nnpops__tn_embed_back_cpu)(d, P, pentry, pmirror, fx.pairs, fx.species, mh->ptab1,
                                          mh->ptab2, ev.h, er.h, fcP.h, dk.h, mh->dproj_b, g.h,
                                          gd.h, gu.h, acc, gfcq.h);
            CHECK_OK(TC(nnpops__tn_embed_back_cuda)(d, P, dpentry, dpmirror, dpairs, dspecies,
                                                    md->ptab1, md->ptab2, ev.d, er.d, fcP.d, dk.d,
                                                    md->dproj_b, g.d, gd.d, gu.d, acc, gfcq.d,
                                                    st));
            WORST(TC(chk)("embedding backward: projections (pairs)", &gd));
            WORST(TC(chk)("embedding backward: unit vectors (entries)", &gu));
            WORST(TC(chk)(acc ? "embedding backward: cutoff (pairs, accumulating)"
                              : "embedding backward: cutoff (pairs)",
                          &gfcq));
        }
        /* radial backward (written, then accumulated) */
        TC(arr) gphi = TC(mk)(E * R, 1), gr = TC(mk)(E, 1);
        for (int acc = 0; acc < 2; acc++) {
            TC(nnpops__tn_radial_back_cpu)(d, mh->rbf_a, mh->rbf_b, n, fx.start, E, er.h, mask,
                                           NULL, gphi.h, gfc.h, acc, gr.h);
            CHECK_OK(TC(nnpops__tn_radial_back_cuda)(d, md->rbf_a, md->rbf_b, n, dstart, E, er.d,
                                                     dmask, NULL, gphi.d, gfc.d, acc, gr.d, st));
            WORST(TC(chk)(acc ? "radial backward (accumulating)" : "radial backward", &gr));
        }
        TC(arr) gphiP = TC(mk)(P * R, 1), gfcP = TC(mk)(P, 1), grP = TC(mk)(P, 1);
        TC(nnpops__tn_radial_back_cpu)(d, mh->rbf_a, mh->rbf_b, n, fx.start, P, erP.h, mask,
                                       pentry, gphiP.h, gfcP.h, 0, grP.h);
        CHECK_OK(TC(nnpops__tn_radial_back_cuda)(d, md->rbf_a, md->rbf_b, n, dstart, P, erP.d,
                                                 dmask, dpentry, gphiP.d, gfcP.d, 0, grP.d, st));
        WORST(TC(chk)("radial backward per pair", &grP));
        /* finish: ZBL, entry gradients, the mean */
        int32_t cnt[2] = {0, 0}, *dcnt = dalloc(sizeof cnt), cnt_back[2];
        nnpops__tn_count_cpu(n, 2, fx.batch, cnt);
        CHECK_OK(nnpops__tn_count_cuda(n, 2, dbatch, dcnt, st));
        to_host(cnt_back, dcnt, sizeof cnt);
        CHECK(cnt[0] == cnt_back[0] && cnt[1] == cnt_back[1]);
        double *en = malloc(sizeof(double) * n), *pg = malloc(sizeof(double) * 3 * E);
        double *en_b = malloc(sizeof(double) * n), *pg_b = malloc(sizeof(double) * 3 * E);
        for (int64_t i = 0; i < n; i++) en[i] = srand1();
        for (int64_t k = 0; k < 3 * E; k++) pg[k] = 7.0;
        double *den = dup_to_device(en, sizeof(double) * n);
        double *dpg = dup_to_device(pg, sizeof(double) * 3 * E);
        TC(nnpops__tn_finish_cpu)(d, &mh->zbl, mh->zbl_z, n, fx.n_local, fx.start, fx.pairs, E,
                                  fx.species, ev.h, er.h, mask, gu.h, gr.h, slot, pentry, grP.h,
                                  mh->mean, fx.batch, cnt, en, pg);
        CHECK_OK(TC(nnpops__tn_finish_cuda)(d, &md->zbl, md->zbl_z, n, fx.n_local, dstart, dpairs,
                                            E, dspecies, ev.d, er.d, dmask, gu.d, gr.d, dslot,
                                            dpentry, grP.d, md->mean, dbatch, dcnt, den, dpg, st));
        to_host(en_b, den, sizeof(double) * n);
        to_host(pg_b, dpg, sizeof(double) * 3 * E);
        WORST(compare("finish: energies", en_b, en, n, TOL_A, TOL_R));
        WORST(compare("finish: entry gradients", pg_b, pg, 3 * E, TOL_A, TOL_R));
        free(en), free(pg), free(en_b), free(pg_b);
        cudaFree(den), cudaFree(dpg), cudaFree(dcnt);
        TC(drop)(&z1), TC(drop)(&z2), TC(drop)(&X1), TC(drop)(&g), TC(drop)(&gd), TC(drop)(&gu);
        TC(drop)(&gfc), TC(drop)(&gphi), TC(drop)(&gr), TC(drop)(&gphiP), TC(drop)(&gfcP);
        TC(drop)(&gfcq);
        TC(drop)(&grP);
    }
    /* a layer (layer 0's weights) */
    if (mh->L > 0) {
        TC(arr) X = TC(mk)(n * 9 * Fz, 1), nrm = TC(mk)(n * Fz, 1), cY = TC(mk)(n * 10 * Fz, 1);
        TC(nnpops__tn_layer_pre_cpu)(d, n, X.h, mh->lt, nrm.h, cY.h);
        CHECK_OK(TC(nnpops__tn_layer_pre_cuda)(d, n, X.d, md->lt, nrm.d, cY.d, st));
        WORST(TC(chk)("layer: norms", &nrm));
        WORST(TC(chk)("layer: Y", &cY));
        TC(arr) Z = TC(mk)(P * 3 * Fz, 3), cM = TC(mk)(n * 10 * Fz, 1);
        TC(nnpops__tn_message_cpu)(d, n, fx.start, fx.pairs, E, mask, slot, Z.h, mh->ls_b[2],
                                   fcP.h, mh->self_h[0], cY.h, cM.h);
        CHECK_OK(TC(nnpops__tn_message_cuda)(d, n, dstart, dpairs, E, dmask, dslot, Z.d,
                                             md->ls_b[2], fcP.d, md->self_h[0], cY.d, cM.d, st));
        WORST(TC(chk)("layer: messages", &cM));
        TC(arr) Xo = TC(mk)(n * 9 * Fz, 1);
        TC(nnpops__tn_layer_post_cpu)(d, n, fx.charges, fx.batch, X.h, nrm.h, cY.h, cM.h,
                                      mh->lt + 3, Xo.h);
        CHECK_OK(TC(nnpops__tn_layer_post_cuda)(d, n, dcharges, dbatch, X.d, nrm.d, cY.d, cM.d,
                                                md->lt + 3, Xo.d, st));
        WORST(TC(chk)("layer: update", &Xo));
        TC(arr) g = TC(mk)(n * 9 * Fz, 1), gcY = TC(mk)(n * 10 * Fz, 1),
                gcM = TC(mk)(n * 10 * Fz, 1);
        TC(nnpops__tn_layer_post_back_cpu)(d, n, fx.charges, fx.batch, cY.h, cM.h, mh->lt + 3,
                                           g.h, gcY.h, gcM.h);
        CHECK_OK(TC(nnpops__tn_layer_post_back_cuda)(d, n, dcharges, dbatch, cY.d, cM.d,
                                                     md->lt + 3, g.d, gcY.d, gcM.d, st));
        WORST(TC(chk)("layer backward: dE/dY (update)", &gcY));
        WORST(TC(chk)("layer backward: dE/dM", &gcM));
        TC(arr) GH = TC(mk)(P * 3 * Fz, 1), gfc = TC(mk)(P, 1);
        for (int acc = 0; acc < 2; acc++) { /* dE/dfc written, then accumulated */
            TC(nnpops__tn_message_back_cpu)(d, n, fx.start, fx.pairs, E, mask, slot, P, pentry,
                                            Z.h, mh->ls_b[2], fcP.h, mh->self_h[0], cY.h, gcM.h,
                                            gcY.h, GH.h, acc, gfc.h);
            CHECK_OK(TC(nnpops__tn_message_back_cuda)(d, n, dstart, dpairs, E, dmask, dslot, P,
                                                      dpentry, Z.d, md->ls_b[2], fcP.d,
                                                      md->self_h[0], cY.d, gcM.d, gcY.d, GH.d,
                                                      acc, gfc.d, st));
            WORST(TC(chk)("messages backward: dE/dZ", &GH));
            WORST(TC(chk)(acc ? "messages backward: dE/dfc (accumulating)"
                              : "messages backward: dE/dfc",
                          &gfc));
            WORST(TC(chk)("messages backward: dE/dY", &gcY));
        }
        TC(nnpops__tn_layer_pre_back_cpu)(d, n, X.h, nrm.h, mh->lt, gcY.h, g.h);
        CHECK_OK(TC(nnpops__tn_layer_pre_back_cuda)(d, n, X.d, nrm.d, md->lt, gcY.d, g.d, st));
        WORST(TC(chk)("layer backward: dE/dX", &g));
        TC(drop)(&X), TC(drop)(&nrm), TC(drop)(&cY), TC(drop)(&Z), TC(drop)(&cM), TC(drop)(&Xo);
        TC(drop)(&g), TC(drop)(&gcY), TC(drop)(&gcM), TC(drop)(&GH), TC(drop)(&gfc);
    }
    /* the readout (ghosts: no energy, no gradient) */
    {
        TC(arr) X = TC(mk)(n * 9 * Fz, 1), g = TC(mk)(n * 9 * Fz, 1);
        double *en = malloc(sizeof(double) * n), *en_b = malloc(sizeof(double) * n);
        double *den = dalloc(sizeof(double) * n);
        TC(nnpops__tn_readout_cpu)(d, n, fx.n_local, X.h, mh->out_norm_w, mh->out_norm_b,
                                   mh->lin_w, mh->lin_b, mh->out_w, mh->out_b, fx.species,
                                   mh->atomref, en, g.h);
        CHECK_OK(TC(nnpops__tn_readout_cuda)(d, n, fx.n_local, X.d, md->out_norm_w,
                                             md->out_norm_b, md->lin_w, md->lin_b, md->out_w,
                                             md->out_b, dspecies, md->atomref, den, g.d, st));
        to_host(en_b, den, sizeof(double) * n);
        WORST(compare("readout: energies", en_b, en, n, TOL_A, TOL_R));
        WORST(TC(chk)("readout: gradient", &g));
        free(en), free(en_b);
        cudaFree(den);
        TC(drop)(&X), TC(drop)(&g);
    }
#undef WORST
    TC(drop)(&ev), TC(drop)(&er), TC(drop)(&fc), TC(drop)(&phi), TC(drop)(&dk), TC(drop)(&X0);
    TC(drop)(&erP), TC(drop)(&fcP), TC(drop)(&phiP);
    free(mask), free(mask_back), free(slot), free(pentry), free(slot_b), free(pentry_b);
    free(pmirror), free(pmirror_b);
    cudaFree(dpmirror);
    free(cnt_scratch);
    cudaFree(dslot), cudaFree(dpentry), cudaFree(dcnt_scratch);
    cudaFree(dmask), cudaFree(dstart), cudaFree(dpairs), cudaFree(dvec), cudaFree(dspecies);
    cudaFree(dbatch), cudaFree(dcharges);
    cublasDestroy(blas);
    TC(free_opm)(&o);
    free_fixture(&fx);
    return worst > 1.0;
}

static int TC(ops)(void) {
    need_gpu();
    int bad = TC(ops_one)(1 | 8 | 64, GPU_OR_EMU(40, 8), GPU_OR_EMU(12, 5), GPU_OR_EMU(30, 5));
    bad |= TC(ops_one)(2 | 4, GPU_OR_EMU(40, 8), GPU_OR_EMU(12, 5), GPU_OR_EMU(30, 5));
    if (!TEST_EMULATED) bad |= TC(ops_one)(0, 300, 16, 12); /* channels over several passes */
    return bad;
}

/* ---- tiles: the per-atom ops under every tiling, against their CPU twins and bitwise against
 * one another ---- */

/* the per-atom ops' outputs of one run */
#define TC_TILE_OUTS 12
static void TC(tiles_run)(const TC(nnpops__tn_opmodel) *m, const nnpops__tn_dims *d, int64_t n,
                          int64_t n_local, const double *charges, const int32_t *batch,
                          const int32_t *species, const REAL *X, const REAL *X2, const REAL *cY,
                          const REAL *cM, const REAL *g9, const REAL *g10, REAL *o[TC_TILE_OUTS],
                          double *en, REAL *wc, REAL *wg, int cuda, void *st) {
    const size_t F = (size_t)d->F;
    if (!cuda) {
        TC(nnpops__tn_atom_embed_cpu)(d, n, X, m->norm_w, m->norm_b, m->emb_ls_w, m->emb_ls_b,
                                      m->emb_lt, o[0], o[1], o[2]);
        memcpy(o[3], g9, sizeof(REAL) * n * 9 * F);
        TC(nnpops__tn_atom_embed_back_cpu)(d, n, X, m->norm_w, m->norm_b, m->emb_ls_w, m->emb_lt,
                                           o[0], o[1], o[3]);
        TC(nnpops__tn_layer_pre_cpu)(d, n, X2, m->lt, o[4], o[5]);
        memcpy(o[6], g9, sizeof(REAL) * n * 9 * F);
        TC(nnpops__tn_layer_pre_back_cpu)(d, n, X2, o[4], m->lt, g10, o[6]);
        TC(nnpops__tn_layer_post_cpu)(d, n, charges, batch, X2, o[4], cY, cM, m->lt + 3, o[7]);
        TC(nnpops__tn_layer_post_back_cpu)(d, n, charges, batch, cY, cM, m->lt + 3, g9, o[8],
                                           o[9]);
        TC(nnpops__tn_readout_cpu)(d, n, n_local, X, m->out_norm_w, m->out_norm_b, m->lin_w,
                                   m->lin_b, m->out_w, m->out_b, species, m->atomref, en, o[10]);
        return;
    }
    CHECK_OK(TC(nnpops__tn_atom_embed_cuda)(d, n, X, m->norm_w, m->norm_b, m->emb_ls_w,
                                            m->emb_ls_b, m->emb_lt, o[0], o[1], o[2], st));
    CUDA_CHECK(cudaMemcpy(o[3], g9, sizeof(REAL) * n * 9 * F, cudaMemcpyDeviceToDevice));
    CHECK_OK(TC(nnpops__tn_atom_embed_back_cuda)(d, n, X, m->norm_w, m->norm_b, m->emb_ls_w,
                                                 m->emb_lt, o[0], o[1], o[3], wc, wg, st));
    CHECK_OK(TC(nnpops__tn_layer_pre_cuda)(d, n, X2, m->lt, o[4], o[5], st));
    CUDA_CHECK(cudaMemcpy(o[6], g9, sizeof(REAL) * n * 9 * F, cudaMemcpyDeviceToDevice));
    CHECK_OK(TC(nnpops__tn_layer_pre_back_cuda)(d, n, X2, o[4], m->lt, g10, o[6], st));
    CHECK_OK(TC(nnpops__tn_layer_post_cuda)(d, n, charges, batch, X2, o[4], cY, cM, m->lt + 3,
                                            o[7], st));
    CHECK_OK(TC(nnpops__tn_layer_post_back_cuda)(d, n, charges, batch, cY, cM, m->lt + 3, g9,
                                                 o[8], o[9], st));
    CHECK_OK(TC(nnpops__tn_readout_cuda)(d, n, n_local, X, m->out_norm_w, m->out_norm_b,
                                         m->lin_w, m->lin_b, m->out_w, m->out_b, species,
                                         m->atomref, en, o[10], st));
}

static int TC(tiles_one)(int variant, int F, int n_per) {
    fixture fx;
    make_fixture(&fx, F, 5, n_per, variant);
    printf(" variant %d (F %d, %lld atoms)\n", variant, F, (long long)fx.n);
    TC(opm) o;
    TC(make_opm)(&fx, &o, 1);
    const nnpops__tn_dims *d = &o.host.d;
    const int64_t n = fx.n;
    const size_t Fz = (size_t)F;
    const size_t len[TC_TILE_OUTS] = {n * 2 * Fz,  n * 3 * Fz,  n * 9 * Fz, n * 9 * Fz,
                                      n * Fz,      n * 10 * Fz, n * 9 * Fz, n * 9 * Fz,
                                      n * 10 * Fz, n * 10 * Fz, n * 9 * Fz, 1};
    const char *names[TC_TILE_OUTS] = {"embedding gates z1", "embedding gates z2",
                                       "embedding X1",       "embedding gates backward",
                                       "layer: norms",       "layer: Y",
                                       "layer backward: dE/dX (pre)", "layer: update",
                                       "layer backward: dE/dY (update)", "layer backward: dE/dM",
                                       "readout: gradient",  "(unused)"};
    TC(arr) X = TC(mk)(n * 9 * Fz, 1), X2 = TC(mk)(n * 9 * Fz, 1), cY = TC(mk)(n * 10 * Fz, 1),
            cM = TC(mk)(n * 10 * Fz, 1), g9 = TC(mk)(n * 9 * Fz, 1), g10 = TC(mk)(n * 10 * Fz, 1);
    int32_t *dspecies = dup_to_device(fx.species, sizeof(int32_t) * n);
    int32_t *dbatch = dup_to_device(fx.batch, sizeof(int32_t) * n);
    double *dcharges = dup_to_device(fx.charges, sizeof(double) * 2);
    REAL *ref[TC_TILE_OUTS], *out[TC_TILE_OUTS], *first[TC_TILE_OUTS], *dout[TC_TILE_OUTS];
    for (int k = 0; k < TC_TILE_OUTS; k++) {
        ref[k] = calloc(len[k], sizeof(REAL));
        out[k] = calloc(len[k], sizeof(REAL));
        first[k] = calloc(len[k], sizeof(REAL));
        dout[k] = dalloc(sizeof(REAL) * len[k]);
    }
    double *en = malloc(sizeof(double) * n), *en_b = malloc(sizeof(double) * n);
    double *en_first = malloc(sizeof(double) * n), *den = dalloc(sizeof(double) * n);
    TC(tiles_run)(&o.host, d, n, fx.n_local, fx.charges, fx.batch, fx.species, X.h, X2.h, cY.h,
                  cM.h, g9.h, g10.h, ref, en, NULL, NULL, 0, NULL);
    /* the work space of the embedding backward's two-kernel form */
    REAL *wc = dalloc(sizeof(REAL) * n * 10 * Fz), *wg = dalloc(sizeof(REAL) * n * 3 * Fz);
    /* atoms per block, channel chunks and weight buffers: forced, then as the launches choose
     * them */
    const int tiles[][3] = {{1, 1, 1}, {2, 0, 4}, {4, 2, 2}, {8, 3, 1},
                            {8, 1, 4}, {1, 64, 2}, {2, 1, 1}, {0, 0, 0}};
    double worst = 0;
    int bad = 0;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        nnpops__tn_atom_tiles_cuda(tiles[t][0], tiles[t][1], tiles[t][2]);
        const int split0 = nnpops__tn_embed_back_split_cuda();
        TC(tiles_run)(&o.dev, d, n, fx.n_local, dcharges, dbatch, dspecies, X.d, X2.d, cY.d,
                      cM.d, g9.d, g10.d, dout, den, wc, wg, 1, (void *)g_stream);
        const int split = nnpops__tn_embed_back_split_cuda() - split0;
        nnpops__tn_atom_tiles_cuda(0, 0, 0);
        /* the embedding backward as two kernels where the channels split over blocks (the
         * tiles are few at this size), else one (1 atom a block, one chunk: the reference of
         * the bitwise comparisons below) */
        if (tiles[t][1] == 1 && split != 0) {
            printf("  one chunk, but the embedding backward ran as two kernels\n");
            bad = 1;
        }
        if (tiles[t][1] > 1 && split != 1) {
            printf("  %d chunks, but the embedding backward ran as one kernel\n", tiles[t][1]);
            bad = 1;
        }
        printf("  %d atoms a block, %d chunks, weight buffers x%d%s\n", tiles[t][0], tiles[t][1],
               tiles[t][2], tiles[t][0] ? "" : " (chosen)");
        for (int k = 0; k < TC_TILE_OUTS - 1; k++) {
            to_host(out[k], dout[k], sizeof(REAL) * len[k]);
            worst = fmax(worst, TC(cmp)(names[k], out[k], ref[k], len[k], TOL_A, TOL_R));
            if (t == 0)
                memcpy(first[k], out[k], sizeof(REAL) * len[k]);
            else if (memcmp(first[k], out[k], sizeof(REAL) * len[k]) != 0) {
                printf("  %s: not bitwise the same as under 1 atom a block\n", names[k]);
                bad = 1;
            }
        }
        to_host(en_b, den, sizeof(double) * n);
        worst = fmax(worst, compare("readout: energies", en_b, en, n, TOL_A, TOL_R));
        if (t == 0)
            memcpy(en_first, en_b, sizeof(double) * n);
        else if (memcmp(en_first, en_b, sizeof(double) * n) != 0) {
            printf("  readout energies: not bitwise the same as under 1 atom a block\n");
            bad = 1;
        }
    }
    for (int k = 0; k < TC_TILE_OUTS; k++)
        free(ref[k]), free(out[k]), free(first[k]), cudaFree(dout[k]);
    free(en), free(en_b), free(en_first);
    cudaFree(den), cudaFree(dspecies), cudaFree(dbatch), cudaFree(dcharges);
    cudaFree(wc), cudaFree(wg);
    TC(drop)(&X), TC(drop)(&X2), TC(drop)(&cY), TC(drop)(&cM), TC(drop)(&g9), TC(drop)(&g10);
    TC(free_opm)(&o);
    free_fixture(&fx);
    return bad || worst > 1.0;
}

/* F 40 and 70: channels over two and three warps, the last one partial, and reductions over
 * partial weight tiles; 14 and 10 atoms: partial tiles of atoms under most tilings */
static int TC(tiles)(void) {
    need_gpu();
    int bad = TC(tiles_one)(8, 40, 7);
    bad |= TC(tiles_one)(4, 70, 5);
    /* an atom's arrays beyond a block's shared memory: a named error, nothing launched */
    {
        nnpops__tn_dims big;
        memset(&big, 0, sizeof big);
        big.F = 4096;
        const REAL *w[3] = {NULL, NULL, NULL};
        CHECK(TC(nnpops__tn_atom_embed_back_cuda)(&big, 1, NULL, NULL, NULL, w, w, NULL, NULL,
                                                  NULL, NULL, NULL, (void *)g_stream) ==
              NNPOPS_ERROR_UNSUPPORTED);
        CHECK(TC(nnpops__tn_layer_post_back_cuda)(&big, 1, NULL, NULL, NULL, NULL, w, NULL, NULL,
                                                  NULL, (void *)g_stream) ==
              NNPOPS_ERROR_UNSUPPORTED);
        printf("  F 4096: refused (shared memory)\n");
    }
    return bad;
}

/* ---- step: the CUDA ops against the CPU ops, bitwise over repeats and with a side stream ---- */

static int TC(step)(void) {
    need_gpu();
    int bad = 0;
    const int variants[2] = {8 | 64, 1 | 2 | 4};
    for (int vi = 0; vi < 2; vi++) {
        /* the first with a set of pre-activations per layer (the default at this size), the
         * second with one set for the layers (a budget of 0) */
        nnpops__tn_step_keep_bytes(vi == 0 ? SIZE_MAX : 0);
        fixture fx;
        make_fixture(&fx, GPU_OR_EMU(64, 8), GPU_OR_EMU(16, 5), GPU_OR_EMU(40, 5), variants[vi]);
        printf(" variant %d (%lld atoms, %lld entries; %s)\n", variants[vi], (long long)fx.n,
               (long long)fx.n_entries,
               vi == 0 ? "pre-activations per layer" : "one set for the layers");
        TC(opm) o;
        TC(make_opm)(&fx, &o, 1);
        const int64_t n = fx.n, E = fx.capacity;
        const size_t bytes = TC(nnpops__tn_step_work_bytes)(&o.host, n, 2, E);
        void *work = aligned_alloc(256, (bytes + 255) / 256 * 256);
        void *dwork = dalloc(bytes);
        double *e = calloc(n, sizeof(double)), *g = calloc(3 * E, sizeof(double));
        nnpops__tn_step_args a = {n,      fx.n_local, 2,        E,          fx.start, fx.pairs,
                                  fx.vec, fx.species, fx.batch, fx.charges, 1,        e,
                                  g,      work,       NULL,     NULL};
        CHECK_OK(TC(nnpops__tn_step)(&o.host, &a, 0));
        cublasHandle_t blas;
        CHECK(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
        CHECK(cublasSetStream(blas, g_stream) == CUBLAS_STATUS_SUCCESS);
        nnpops__tn_step_args b = a;
        b.start = dup_to_device(fx.start, sizeof(int64_t) * (n + 1));
        b.pairs = dup_to_device(fx.pairs, sizeof(int32_t) * 2 * fx.n_entries);
        b.vec = dup_to_device(fx.vec, sizeof(double) * 3 * fx.n_entries);
        b.species = dup_to_device(fx.species, sizeof(int32_t) * n);
        b.batch = dup_to_device(fx.batch, sizeof(int32_t) * n);
        b.charges = dup_to_device(fx.charges, sizeof(double) * 2);
        b.atom_energy = dalloc(sizeof(double) * n);
        b.pair_grad = dalloc(sizeof(double) * 3 * E);
        b.work = dwork, b.blas = blas, b.stream = g_stream;
        double *e1 = malloc(sizeof(double) * n), *g1 = malloc(sizeof(double) * 3 * E);
        double *e2 = malloc(sizeof(double) * n), *g2 = malloc(sizeof(double) * 3 * E);
        /* the same step with a side stream, its own cuBLAS handle and the two events */
        nnpops__tn_step_args c = b;
        cudaStream_t side;
        cublasHandle_t side_blas;
        cudaEvent_t fork, join;
        CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess);
        CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
        CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
        CHECK(cublasCreate(&side_blas) == CUBLAS_STATUS_SUCCESS);
        CHECK(cublasSetStream(side_blas, side) == CUBLAS_STATUS_SUCCESS);
        c.side_stream = side, c.side_blas = side_blas, c.fork_event = fork, c.join_event = join;
        /* the edge networks' products on cuBLAS, then on the tensor cores (float32: they must
         * have run there; float64 never does) */
        for (int path = 2; path >= 1; path--) {
            const int tc0 = nnpops__tn_gemm_path_cuda(path);
            CHECK_OK(TC(nnpops__tn_step)(&o.dev, &b, 1));
            const int tc = nnpops__tn_gemm_path_cuda(path) - tc0;
            printf("  products on %s: %d on the tensor cores\n",
                   path == 2 ? "cuBLAS" : "the tensor cores where they fit", tc);
            bad |= path == 1 && sizeof(REAL) == 4 ? tc == 0 : tc != 0;
            to_host(e1, b.atom_energy, sizeof(double) * n);
            to_host(g1, b.pair_grad, sizeof(double) * 3 * E);
            bad |= compare("step: energies per atom", e1, e, n, TOL_A, TOL_R) > 1;
            bad |= compare("step: gradients per entry", g1, g, 3 * E, TOL_A, TOL_R) > 1;
            CHECK_OK(TC(nnpops__tn_step)(&o.dev, &b, 1));
            to_host(e2, b.atom_energy, sizeof(double) * n);
            to_host(g2, b.pair_grad, sizeof(double) * 3 * E);
            CHECK(memcmp(e1, e2, sizeof(double) * n) == 0);
            CHECK(memcmp(g1, g2, sizeof(double) * 3 * E) == 0);
            /* with the side stream: the edge networks there where every layer has its own
             * pre-activations (a budget of 0: one stream still); the same sums */
            const int sides0 = nnpops__tn_side_steps();
            CHECK_OK(TC(nnpops__tn_step)(&o.dev, &c, 1));
            const int sides = nnpops__tn_side_steps() - sides0;
            printf("  with a side stream: %s\n", sides ? "taken" : "not taken");
            CHECK(sides == (vi == 0));
            /* (what a context asks before it makes the side stream: the same answer) */
            CHECK(TC(nnpops__tn_step_takes_side)(&o.dev, n, 2, E) == sides);
            /* energies alone with the side stream: the same energies */
            nnpops__tn_step_args c0 = c;
            c0.need_grad = 0;
            CHECK_OK(TC(nnpops__tn_step)(&o.dev, &c0, 1));
            to_host(e2, c0.atom_energy, sizeof(double) * n);
            CHECK(memcmp(e1, e2, sizeof(double) * n) == 0);
            to_host(e2, c.atom_energy, sizeof(double) * n);
            to_host(g2, c.pair_grad, sizeof(double) * 3 * E);
            CHECK(memcmp(e1, e2, sizeof(double) * n) == 0);
            CHECK(memcmp(g1, g2, sizeof(double) * 3 * E) == 0);
        }
        nnpops__tn_gemm_path_cuda(0);
        cublasDestroy(side_blas);
        cudaEventDestroy(fork), cudaEventDestroy(join), cudaStreamDestroy(side);
        free(e1), free(g1), free(e2), free(g2), free(e), free(g), free(work);
        cudaFree((void *)b.start), cudaFree((void *)b.pairs), cudaFree((void *)b.vec);
        cudaFree((void *)b.species), cudaFree((void *)b.batch), cudaFree((void *)b.charges);
        cudaFree(b.atom_energy), cudaFree(b.pair_grad), cudaFree(dwork);
        cublasDestroy(blas);
        TC(free_opm)(&o);
        free_fixture(&fx);
    }
    nnpops__tn_step_keep_bytes(SIZE_MAX);
    return bad;
}

#undef TC_TILE_OUTS
#undef TC
#undef TC_CAT
#undef TC_CAT_
