/* test_tensornet_cpu.c - the CPU TensorNet functions (potentials/tensornet/cpu) against
 * torchmd-net 3.1.0's values and against finite differences of their own energy.
 *
 *   test_tensornet_cpu reference MODEL f64|f32   every system of the reference set for MODEL
 *   test_tensornet_cpu fd MODEL                  forces of two small systems (one periodic, in an
 *                                                8 A cell smaller than twice the cutoff) and the
 *                                                virial of a sheared (triclinic) copy of the
 *                                                periodic one against central differences of
 *                                                the energy (displacements, strains)
 *   test_tensornet_cpu replica MODEL             water8_pbc's atomic terms are 1/8 of its 2x2x2
 *                                                replica's (and so is its energy, less 'mean')
 *   test_tensornet_cpu invariance MODEL          rotation, translation, permutation; reflection
 *                                                (O(3): no change, SO(3): a change)
 *   test_tensornet_cpu variants MODEL            forces against finite differences for every
 *                                                activation, fewer layers, a lower cutoff, a
 *                                                charge, the other group, atom weights (the
 *                                                gradient per edge); float32 vs float64
 *
 * The model is the converted one (NAME.yaml + NAME.safetensors in NNPOPS_MODEL_PATH, written by
 * the fixture model.convert_tensornet); the reference is
 * $NNPOPS_SHARED_DIR/reference/tensornet/reference.json.  Edges are built here by brute force over
 * periodic images.  Tolerances (float64): |dE|/N <= 1e-8 eV, |dF| <= 1e-7 eV/A + 1e-7 |F| per
 * component, per-atom terms <= 5e-8 eV (the reference carries differences of ~1e-9 relative
 * that an independent float64 evaluation does not reproduce: tests/model/tensornet_ref.py, in
 * NumPy, gives the same energies as this code to 1e-12), each plus, with a ZBL
 * prior, the change of that prior under a one-ulp float32 change of torchmd-net's screening
 * length (its vectorised power differs by one unit from the scalar one for some Z).  float32:
 * |dE|/N <= max(5e-6, 2 x torchmd-net's own float32 deviation), max |dF| <= max(5e-4, 2 x its
 * own).  Stress (-W / V): the diagonal to 1e-8 eV/A^3; the off-diagonal also to 1e-8, after
 * applying torchmd-net's reading of a strained box (its neighbor kernel reads only the box's lower
 * triangle, so its shear stress is not the strain derivative; nnpops' is, checked by the fd
 * case).  A missing reference file fails under CI=true and skips elsewhere. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "potentials/tensornet/cpu/tensornet_cpu.h"
#include "reference.h"
#include "tensornet_reference.h"
#include "sanitized.h"

/* ---- the converted model ------------------------------------------------------------------- */

typedef struct tensor {
    char name[128];
    int64_t count;
    double *d;
    float *s;
} tensor;

typedef struct model {
    nnpops__tn_shape shape;
    double mean;
    int has_zbl;
    nnpops__tn_zbl zbl;
    int32_t zbl_map[256];
    int n_t;
    tensor t[256];
    nnpops__tn_weights_f64 w64;
    nnpops__tn_weights_f32 w32;
    const double *ls64[3 * 64], *lb64[3 * 64], *lt64[6 * 64];
    const float *ls32[3 * 64], *lb32[3 * 64], *lt32[6 * 64];
} model;

static const char *yaml_value(const char *text, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\n  %s: ", key);
    const char *p = strstr(text, pat);
    if (!p) {
        fprintf(stderr, "model YAML: no key %s\n", key);
        exit(1);
    }
    return p + strlen(pat);
}

static const tensor *find_t(const model *m, const char *name) {
    for (int i = 0; i < m->n_t; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    fprintf(stderr, "weights: no tensor %s\n", name);
    exit(1);
}

#define T64(m, ...) (find_t_fmt(m, __VA_ARGS__)->d)
#define T32(m, ...) (find_t_fmt(m, __VA_ARGS__)->s)
static const tensor *find_t_fmt(const model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static const tensor *find_t_fmt(const model *m, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return find_t(m, name);
}

static int load_model(const char *name, model *m) {
    memset(m, 0, sizeof *m);
    const char *dir = getenv("NNPOPS_MODEL_PATH");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.yaml", dir ? dir : ".", name);
    size_t len;
    char *y = read_text(path, &len);
    if (!y) return 0;
    nnpops__tn_shape *s = &m->shape;
    s->F = atoi(yaml_value(y, "embedding_dimension"));
    s->L = atoi(yaml_value(y, "num_layers"));
    s->R = atoi(yaml_value(y, "num_rbf"));
    s->max_z = atoi(yaml_value(y, "max_z"));
    s->rbf = !strncmp(yaml_value(y, "rbf_type"), "gauss", 5) ? NNPOPS__TN_GAUSS : NNPOPS__TN_EXPNORM;
    const char *act = yaml_value(y, "activation");
    s->activation = !strncmp(act, "ssp", 3)       ? NNPOPS__TN_SSP
                    : !strncmp(act, "tanh", 4)    ? NNPOPS__TN_TANH
                    : !strncmp(act, "sigmoid", 7) ? NNPOPS__TN_SIGMOID
                    : !strncmp(act, "mish", 4)    ? NNPOPS__TN_MISH
                                                  : NNPOPS__TN_SILU;
    s->so3 = strstr(yaml_value(y, "equivariance_invariance_group"), "SO(3)") ==
             yaml_value(y, "equivariance_invariance_group") + 1;
    s->cutoff_lower = strtod(yaml_value(y, "cutoff_lower"), NULL);
    s->cutoff_upper = strtod(yaml_value(y, "cutoff_upper"), NULL);
    s->std = strtod(yaml_value(y, "std"), NULL);
    m->mean = strtod(yaml_value(y, "mean"), NULL);
    const char *ow = yaml_value(y, "output_widths") + 1;
    s->n_out = -1;
    while (*ow && *ow != ']') {
        char *end;
        s->out_width[++s->n_out] = (int32_t)strtol(ow, &end, 10);
        ow = end;
        while (*ow == ',' || *ow == ' ') ow++;
    }
    CHECK(s->n_out >= 2 && s->n_out <= NNPOPS__TN_MAX_OUT);
    const char *ar = strstr(y, "{type: Atomref, enable: true, max_z: ");
    const char *zb = strstr(y, "{type: ZBL, cutoff_distance: ");
    if (zb) {
        m->has_zbl = 1;
        m->zbl.cutoff = strtod(zb + strlen("{type: ZBL, cutoff_distance: "), NULL);
        m->zbl.distance_scale = strtod(strstr(zb, "distance_scale: ") + 16, NULL);
        m->zbl.energy_scale = strtod(strstr(zb, "energy_scale: ") + 14, NULL);
        const char *p = strstr(zb, "atomic_number: [") + 16;
        int k = 0;
        while (*p && *p != ']') {
            char *end;
            CHECK(k < 256);
            m->zbl_map[k++] = (int32_t)strtol(p, &end, 10);
            p = end;
            while (*p == ',' || *p == ' ' || *p == '\n') p++;
        }
        m->zbl.map_len = k;
        m->zbl.atomic_number = m->zbl_map;
    }
    /* the weights file */
    const char *wf = strstr(y, "\nweights:\n  file: ") + strlen("\nweights:\n  file: ");
    char wname[512];
    CHECK(sscanf(wf, "%511s", wname) == 1);
    snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", wname);
    char *blob = read_text(path, &len);
    CHECK(blob != NULL);
    uint64_t hn;
    memcpy(&hn, blob, 8);
    jparser jp = {blob + 8, 0, (size_t)hn};
    jval *h = jparse(&jp);
    for (int i = 0; i < h->n; i++) {
        if (!strcmp(h->keys[i], "__metadata__")) continue;
        tensor *t = &m->t[m->n_t++];
        CHECK(m->n_t <= 256);
        snprintf(t->name, sizeof t->name, "%s", h->keys[i]);
        const jval *dt = jget(h->items[i], "dtype");
        double off[2];
        CHECK(jnumbers(jget(h->items[i], "data_offsets"), off, 2) == 2);
        int f64 = !strcmp(dt->str, "F64");
        t->count = (int64_t)(off[1] - off[0]) / (f64 ? 8 : 4);
        t->d = malloc(sizeof(double) * (size_t)(t->count + 1));
        t->s = malloc(sizeof(float) * (size_t)(t->count + 1));
        const char *src = blob + 8 + hn + (size_t)off[0];
        for (int64_t k = 0; k < t->count; k++) {
            if (f64) {
                memcpy(&t->d[k], src + 8 * k, 8);
            } else {
                float v;
                memcpy(&v, src + 4 * k, 4);
                t->d[k] = v;
            }
            t->s[k] = (float)t->d[k];
        }
    }
    jfree(h);
    free(blob);
    /* the weights' pointers, in both precisions */
    const char *P = "representation_model.";
#define BOTH(field, ...)                                                                        \
    do {                                                                                        \
        const tensor *t_ = find_t_fmt(m, __VA_ARGS__);                                          \
        m->w64.field = t_->d;                                                                   \
        m->w32.field = t_->s;                                                                   \
    } while (0)
    if (s->rbf == NNPOPS__TN_GAUSS) {
        BOTH(rbf_a, "%sdistance_expansion.offset", P);
        BOTH(rbf_b, "%sdistance_expansion.coeff", P);
    } else {
        BOTH(rbf_a, "%sdistance_expansion.means", P);
        BOTH(rbf_b, "%sdistance_expansion.betas", P);
    }
    BOTH(emb, "%stensor_embedding.emb.weight", P);
    BOTH(emb2_w, "%stensor_embedding.emb2.weight", P);
    BOTH(emb2_b, "%stensor_embedding.emb2.bias", P);
    for (int k = 0; k < 3; k++) {
        BOTH(dproj_w[k], "%stensor_embedding.distance_proj%d.weight", P, k + 1);
        BOTH(dproj_b[k], "%stensor_embedding.distance_proj%d.bias", P, k + 1);
        BOTH(emb_lt[k], "%stensor_embedding.linears_tensor.%d.weight", P, k);
    }
    for (int k = 0; k < 2; k++) {
        BOTH(emb_ls_w[k], "%stensor_embedding.linears_scalar.%d.weight", P, k);
        BOTH(emb_ls_b[k], "%stensor_embedding.linears_scalar.%d.bias", P, k);
    }
    BOTH(init_norm_w, "%stensor_embedding.init_norm.weight", P);
    BOTH(init_norm_b, "%stensor_embedding.init_norm.bias", P);
    CHECK(s->L <= 64);
    for (int l = 0; l < s->L; l++) {
        for (int k = 0; k < 3; k++) {
            const tensor *tw = find_t_fmt(m, "%slayers.%d.linears_scalar.%d.weight", P, l, k);
            const tensor *tb = find_t_fmt(m, "%slayers.%d.linears_scalar.%d.bias", P, l, k);
            m->ls64[3 * l + k] = tw->d, m->ls32[3 * l + k] = tw->s;
            m->lb64[3 * l + k] = tb->d, m->lb32[3 * l + k] = tb->s;
        }
        for (int k = 0; k < 6; k++) {
            const tensor *tt = find_t_fmt(m, "%slayers.%d.linears_tensor.%d.weight", P, l, k);
            m->lt64[6 * l + k] = tt->d, m->lt32[6 * l + k] = tt->s;
        }
    }
    m->w64.layer_ls_w = m->ls64, m->w64.layer_ls_b = m->lb64, m->w64.layer_lt = m->lt64;
    m->w32.layer_ls_w = m->ls32, m->w32.layer_ls_b = m->lb32, m->w32.layer_lt = m->lt32;
    BOTH(linear_w, "%slinear.weight", P);
    BOTH(linear_b, "%slinear.bias", P);
    BOTH(out_norm_w, "%sout_norm.weight", P);
    BOTH(out_norm_b, "%sout_norm.bias", P);
    for (int k = 0; k < s->n_out; k++) {
        BOTH(out_w[k], "output_model.output_network.layers.%d.weight", 2 * k);
        BOTH(out_b[k], "output_model.output_network.layers.%d.bias", 2 * k);
    }
    if (ar) {
        char tname[256];
        CHECK(sscanf(strstr(ar, "tensor: ") + 8, "%255[^}]", tname) == 1);
        const tensor *t = find_t(m, tname);
        m->w64.atomref = t->d;
        m->w32.atomref = t->s;
        s->atomref_len = (int32_t)t->count;
    }
#undef BOTH
    free(y);
    return 1;
}

/* ---- edges -------------------------------------------------------------------------------- */

typedef struct edges {
    int64_t n, cap;
    int32_t *i, *j;
    double *v, *r;
    int32_t *img; /* the image shift of j, in cell vectors: 3 per edge */
} edges;

static void edge_add(edges *e, int i, int j, const double v[3], const int img[3]) {
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 1024;
        e->i = realloc(e->i, sizeof(int32_t) * (size_t)e->cap);
        e->j = realloc(e->j, sizeof(int32_t) * (size_t)e->cap);
        e->v = realloc(e->v, sizeof(double) * 3 * (size_t)e->cap);
        e->r = realloc(e->r, sizeof(double) * (size_t)e->cap);
        e->img = realloc(e->img, sizeof(int32_t) * 3 * (size_t)e->cap);
        CHECK(e->i && e->j && e->v && e->r && e->img);
    }
    for (int k = 0; k < 3; k++) e->img[3 * e->n + k] = img[k];
    e->i[e->n] = i;
    e->j[e->n] = j;
    for (int k = 0; k < 3; k++) e->v[3 * e->n + k] = v[k];
    e->r[e->n] = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    e->n++;
}

/* Every pair (i, j) of atoms first .. first+n-1 with lo <= r < hi over the periodic images
 * (cell rows a, b, c, or NULL), vec = x_j + shift - x_i; plus self edges when self. */
static void build_edges(edges *e, int first, int n, const double *x, const double *cell,
                        double lo, double hi, int self) {
    int rep[3] = {0, 0, 0};
    if (cell) {
        /* planes' spacing along axis k: V / |b x c| etc. */
        for (int k = 0; k < 3; k++) {
            const double *b = cell + 3 * ((k + 1) % 3), *c = cell + 3 * ((k + 2) % 3);
            double cr[3] = {b[1] * c[2] - b[2] * c[1], b[2] * c[0] - b[0] * c[2],
                            b[0] * c[1] - b[1] * c[0]};
            const double *a = cell + 3 * k;
            double vol = fabs(a[0] * cr[0] + a[1] * cr[1] + a[2] * cr[2]);
            double sp = vol / sqrt(cr[0] * cr[0] + cr[1] * cr[1] + cr[2] * cr[2]);
            rep[k] = (int)ceil(hi / sp) + 1;
        }
    }
    for (int ii = 0; ii < n; ii++) {
        if (self) {
            double zero[3] = {0, 0, 0};
            int none[3] = {0, 0, 0};
            edge_add(e, first + ii, first + ii, zero, none);
        }
        for (int a = -rep[0]; a <= rep[0]; a++)
            for (int b = -rep[1]; b <= rep[1]; b++)
                for (int c = -rep[2]; c <= rep[2]; c++)
                    for (int jj = 0; jj < n; jj++) {
                        if (jj == ii && !a && !b && !c) continue;
                        double v[3];
                        for (int k = 0; k < 3; k++) {
                            v[k] = x[3 * (first + jj) + k] - x[3 * (first + ii) + k];
                            if (cell)
                                v[k] += a * cell[k] + b * cell[3 + k] + c * cell[6 + k];
                        }
                        double r2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
                        int img[3] = {a, b, c};
                        if (r2 < hi * hi && r2 >= lo * lo)
                            edge_add(e, first + ii, first + jj, v, img);
                    }
    }
}

/* ---- evaluation --------------------------------------------------------------------------------- */

typedef struct result {
    double energy_sys[8]; /* per system of the batch */
    double virial[8][9];  /* W = -sum_e r_e (x) dE/dr_e per system */
    double virial_tm[8][9]; /* the same as torchmd-net's strain derivative sees it (below) */
    double *atomic;       /* network terms per atom (no mean, no ZBL) */
    double *forces;
} result;

/* Evaluates systems S[0..ns) as one batch with charges q[]: energies per system (mean and ZBL
 * included), per-atom network terms and forces.  zbl_bump: scale ZBL's screening length by
 * (1 + zbl_bump) (for the allowance); zbl_only: the ZBL prior alone. */
static void evaluate_part(const model *m, int f32, const tn_sys *S, const double *q, int ns,
                          double zbl_bump, int zbl_only, result *res) {
    int N = 0;
    for (int k = 0; k < ns; k++) N += S[k].n;
    int32_t *z = malloc(sizeof(int32_t) * (size_t)N);
    double *x = malloc(sizeof(double) * 3 * (size_t)N), *qa = malloc(sizeof(double) * (size_t)N);
    int *of = malloc(sizeof(int) * (size_t)N);
    edges e = {0}, ez = {0};
    int first = 0;
    for (int k = 0; k < ns; k++) {
        memcpy(z + first, S[k].z, sizeof(int32_t) * (size_t)S[k].n);
        memcpy(x + 3 * first, S[k].x, sizeof(double) * 3 * (size_t)S[k].n);
        for (int i = 0; i < S[k].n; i++) qa[first + i] = q ? q[k] : 0.0, of[first + i] = k;
        first += S[k].n;
    }
    first = 0;
    for (int k = 0; k < ns; k++) {
        if (!zbl_only)
            build_edges(&e, first, S[k].n, x, S[k].periodic ? S[k].cell : NULL,
                        m->shape.cutoff_lower, m->shape.cutoff_upper, 1);
        if (m->has_zbl)
            build_edges(&ez, first, S[k].n, x, S[k].periodic ? S[k].cell : NULL, 0.0,
                        m->zbl.cutoff, 0);
        first += S[k].n;
    }
    double *ae = calloc((size_t)N, sizeof(double));
    double *az = calloc((size_t)N, sizeof(double));
    double *g = malloc(sizeof(double) * 3 * (size_t)(e.n + 1));
    double *gz = malloc(sizeof(double) * 3 * (size_t)(ez.n + 1));
    int64_t bad = -1;
    if (zbl_only) {
        /* no network */
    } else if (!f32) {
        void *ws = malloc(nnpops__tn_cpu_workspace_f64(&m->shape, N, e.n));
        CHECK(ws != NULL);
        CHECK(nnpops__tn_cpu_f64(&m->shape, &m->w64, N, z, qa, e.n, e.i, e.j, e.v, e.r, NULL, ae,
                                 g, ws, &bad) == NNPOPS__TN_OK);
        free(ws);
    } else {
        float *v32 = malloc(sizeof(float) * 3 * (size_t)(e.n + 1));
        float *r32 = malloc(sizeof(float) * (size_t)(e.n + 1));
        float *g32 = malloc(sizeof(float) * 3 * (size_t)(e.n + 1));
        for (int64_t k = 0; k < e.n; k++) {
            r32[k] = (float)e.r[k];
            for (int d = 0; d < 3; d++) v32[3 * k + d] = (float)e.v[3 * k + d];
        }
        void *ws = malloc(nnpops__tn_cpu_workspace_f32(&m->shape, N, e.n));
        CHECK(ws != NULL);
        CHECK(nnpops__tn_cpu_f32(&m->shape, &m->w32, N, z, qa, e.n, e.i, e.j, v32, r32, NULL, ae,
                                 g32, ws, &bad) == NNPOPS__TN_OK);
        for (int64_t k = 0; k < 3 * e.n; k++) g[k] = g32[k];
        free(ws);
        free(v32);
        free(r32);
        free(g32);
    }
    if (m->has_zbl) {
        nnpops__tn_zbl zb = m->zbl;
        zb.distance_scale /= 1.0 + zbl_bump; /* d = r ds / a: same as a (1 + bump) */
        zb.energy_scale *= 1.0 + zbl_bump;   /* keeps the prefactor 1 / (es ds) */
        if (!f32) {
            CHECK(nnpops__tn_zbl_cpu_f64(&zb, z, ez.n, ez.i, ez.j, ez.v, ez.r, NULL, az, gz,
                                         &bad) == NNPOPS__TN_OK);
        } else {
            float *v32 = malloc(sizeof(float) * 3 * (size_t)(ez.n + 1));
            float *r32 = malloc(sizeof(float) * (size_t)(ez.n + 1));
            float *g32 = malloc(sizeof(float) * 3 * (size_t)(ez.n + 1));
            for (int64_t k = 0; k < ez.n; k++) {
                r32[k] = (float)ez.r[k];
                for (int d = 0; d < 3; d++) v32[3 * k + d] = (float)ez.v[3 * k + d];
            }
            CHECK(nnpops__tn_zbl_cpu_f32(&zb, z, ez.n, ez.i, ez.j, v32, r32, NULL, az, g32,
                                         &bad) == NNPOPS__TN_OK);
            for (int64_t k = 0; k < 3 * ez.n; k++) gz[k] = g32[k];
            free(v32);
            free(r32);
            free(g32);
        }
    }
    res->atomic = malloc(sizeof(double) * (size_t)N);
    res->forces = calloc(3 * (size_t)N, sizeof(double));
    for (int k = 0; k < ns; k++) res->energy_sys[k] = m->mean;
    for (int i = 0; i < N; i++) {
        res->atomic[i] = ae[i];
        res->energy_sys[of[i]] += ae[i] + az[i];
    }
    memset(res->virial, 0, sizeof res->virial);
    memset(res->virial_tm, 0, sizeof res->virial_tm);
    for (int pass = 0; pass < 2; pass++) {
        const edges *E = pass ? &ez : &e;
        const double *G = pass ? gz : g;
        for (int64_t k = 0; k < E->n; k++) {
            const int sy = of[E->i[k]];
            const double *cell = S[sy].cell;
            for (int d = 0; d < 3; d++) {
                res->forces[3 * E->i[k] + d] += G[3 * k + d];
                res->forces[3 * E->j[k] + d] -= G[3 * k + d];
                for (int c = 0; c < 3; c++)
                    res->virial[sy][3 * d + c] -= E->v[3 * k + d] * G[3 * k + c];
            }
            /* torchmd-net's neighbor kernel reads only the lower triangle of the box (it assumes
             * a_y = a_z = b_z = 0), so the strain derivative it returns sees component d of cell
             * row a only for d = x and of row b only for d = x, y: d r_d / d eps_dc loses
             * n_row cell_row[c] for every row < d.  Its stress is that, symmetrised. */
            for (int d = 0; d < 3; d++)
                for (int c = 0; c < 3; c++) {
                    double dr = E->v[3 * k + c]; /* d r_d / d eps_dc = r_c, minus lost parts */
                    if (S[sy].periodic)
                        for (int row = 0; row < 3; row++)
                            if (d > row) dr -= E->img[3 * k + row] * cell[3 * row + c];
                    res->virial_tm[sy][3 * d + c] -= G[3 * k + d] * dr;
                }
        }
    }
    free(z), free(x), free(qa), free(of), free(ae), free(az), free(g), free(gz);
    free(e.i), free(e.j), free(e.v), free(e.r), free(e.img);
    free(ez.i), free(ez.j), free(ez.v), free(ez.r), free(ez.img);
}

static void evaluate(const model *m, int f32, const tn_sys *S, const double *q, int ns,
                     double zbl_bump, result *res) {
    evaluate_part(m, f32, S, q, ns, zbl_bump, 0, res);
}

static void result_free(result *r) {
    free(r->atomic);
    free(r->forces);
}

/* ---- cases ------------------------------------------------------------------------------------------ */

static const char *g_model;
static int g_f32;

static void free_model(model *m) {
    for (int i = 0; i < m->n_t; i++) free(m->t[i].d), free(m->t[i].s);
    free(m);
}

static int case_reference(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    model *m = malloc(sizeof *m);
    if (!load_model(g_model, m)) {
        fprintf(stderr, "converted model %s not found in NNPOPS_MODEL_PATH\n", g_model);
        return 1;
    }
    const jval *systems = jget(jget(jget(root, "models"), g_model), "systems");
    CHECK(systems != NULL);
    int fails = 0;
    double worst_e = 0, worst_f = 0, worst_a = 0, worst_s = 0;
    printf("%-22s %5s %12s %12s %12s %12s\n", "system", "atoms", "|dE|/N", "max|dF|", "max|dEi|",
           "ZBL allow");
    for (int si = 0; si < systems->n; si++) {
        const char *name = systems->keys[si];
        const jval *ref = systems->items[si];
        if (tn_ref_asan_skip(name)) continue;
        tn_sys S[8];
        double q[8];
        const jval *members = jget(ref, "members");
        const int ns = tn_entry_load(root, name, ref, S, q);
        int N = 0;
        for (int k = 0; k < ns; k++) N += S[k].n;
        result r, rb[2];
        evaluate(m, g_f32, S, q, ns, 0.0, &r);
        double allow_e[8] = {0}, allow_f = 0;
        if (m->has_zbl) {
            result r0;
            evaluate_part(m, 0, S, q, ns, 0.0, 1, &r0);
            for (int b = 0; b < 2; b++) {
                evaluate_part(m, 0, S, q, ns, b ? -0x1p-23 : 0x1p-23, 1, &rb[b]);
                for (int k = 0; k < ns; k++)
                    allow_e[k] = fmax(allow_e[k], fabs(rb[b].energy_sys[k] - r0.energy_sys[k]));
                for (int i = 0; i < 3 * N; i++)
                    allow_f = fmax(allow_f, fabs(rb[b].forces[i] - r0.forces[i]));
                result_free(&rb[b]);
            }
            result_free(&r0);
        }
        double *fref = ref_numbers(ref, "forces_eV_per_A", 3 * N);
        double *aref = ref_numbers(ref, "atomic_energies_eV", N);
        double eref[8];
        tn_entry_energies(ref, ns, eref);
        double de = 0, df = 0, da = 0, tol_e = 1e-8, tol_f = 1e-7, tol_a = 5e-8;
        if (g_f32) {
            tn_f32_bounds(ref, &tol_e, &tol_f);
            tol_a = 1e30; /* float32: energies and forces only */
        }
        int ok = 1, first = 0;
        for (int k = 0; k < ns; k++) {
            double d = fabs(r.energy_sys[k] - eref[k]) / S[k].n;
            de = fmax(de, d);
            if (d > tol_e + allow_e[k] / S[k].n) ok = 0;
            first += S[k].n;
        }
        for (int i = 0; i < 3 * N; i++) {
            double d = fabs(r.forces[i] - fref[i]);
            df = fmax(df, d);
            /* float64: plus 1e-7 relative, the reference's own noise (see the header) */
            if (d > tol_f + allow_f + (g_f32 ? 0.0 : 1e-7 * fabs(fref[i]))) ok = 0;
        }
        for (int i = 0; i < N; i++) da = fmax(da, fabs(r.atomic[i] - aref[i]));
        if (da > tol_a) ok = 0;
        /* stress = -W / V (ASE's sign), float64 to 1e-8 eV/A^3 */
        const jval *sref = jget(ref, "stress_eV_per_A3");
        double dst = 0;
        if (!members && sref && sref->type == J_ARR) {
            double st[9];
            CHECK(jnumbers(sref, st, 9) == 9);
            double vol = fabs(ref_volume(S[0].cell));
            /* the diagonal against the reference as it is; the off-diagonal against the
             * reference through torchmd-net's reading of the box (virial_tm, symmetrised);
             * nnpops' own virial is the exact strain derivative (symmetric, checked too) */
            for (int k = 0; k < 9; k++) {
                int a = k / 3, b = k % 3;
                double mine = a == b ? -r.virial[0][k] / vol
                                     : -0.5 * (r.virial_tm[0][3 * a + b] + r.virial_tm[0][3 * b + a]) / vol;
                dst = fmax(dst, fabs(mine - st[k]));
                CHECK(fabs(r.virial[0][3 * a + b] - r.virial[0][3 * b + a]) / vol <=
                      (g_f32 ? 1e-6 : 1e-10));
            }
            worst_s = fmax(worst_s, dst);
            if (dst > (g_f32 ? 1e-5 : 1e-8)) ok = 0;
        }
        printf("%-22s %5d %12.3e %12.3e %12.3e %12.3e %s\n", name, N, de, df, da, allow_f,
               ok ? "" : "FAIL");
        worst_e = fmax(worst_e, de), worst_f = fmax(worst_f, df), worst_a = fmax(worst_a, da);
        if (!ok) fails++;
        result_free(&r);
        free(fref);
        free(aref);
        for (int k = 0; k < ns; k++) free(S[k].z), free(S[k].x);
    }
    printf("worst: |dE|/N %.3e, max |dF| %.3e, max |dEi| %.3e, max |d stress| %.3e (%s)\n",
           worst_e, worst_f, worst_a, worst_s, g_f32 ? "float32" : "float64");
    jfree(root);
    free_model(m);
    return fails ? 1 : 0;
}

static double energy_of(const model *m, const tn_sys *s) {
    result r;
    evaluate(m, 0, s, NULL, 1, 0.0, &r);
    double e = r.energy_sys[0];
    result_free(&r);
    return e;
}

static int case_fd(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    model *m = malloc(sizeof *m);
    if (!load_model(g_model, m)) return 1;
    const char *names[2] = {"mol_mol_CH3SH", "water8_pbc"};
    double worst = 0;
    for (int c = 0; c < 2; c++) {
        tn_sys s;
        tn_sys_load(root, names[c], &s);
        result r;
        evaluate(m, 0, &s, NULL, 1, 0.0, &r);
        /* the first atoms (all of CH3SH, three waters); under ASan two of each system, every
         * evaluation the same code */
        const int n_check = FULL_OR_ASAN(s.n < 9 ? s.n : 9, 2);
        const double h = 1e-5;
        for (int i = 0; i < n_check; i++)
            for (int d = 0; d < 3; d++) {
                double x0 = s.x[3 * i + d];
                s.x[3 * i + d] = x0 + h;
                double ep = energy_of(m, &s);
                s.x[3 * i + d] = x0 - h;
                double em = energy_of(m, &s);
                s.x[3 * i + d] = x0;
                double fd = -(ep - em) / (2 * h);
                double diff = fabs(fd - r.forces[3 * i + d]);
                worst = fmax(worst, diff);
                if (diff > 1e-6 + 1e-6 * fabs(fd)) {
                    fprintf(stderr, "%s atom %d dir %d: analytic %.10f, finite difference %.10f\n",
                            names[c], i, d, r.forces[3 * i + d], fd);
                    return 1;
                }
            }
        result_free(&r);
        tn_sys_free(&s);
    }
    printf("worst |F - F_fd| = %.3e eV/A\n", worst);
    /* the virial against central differences of the energy under strain, in a sheared (triclinic)
     * copy of water8_pbc: a cell smaller than twice the cutoff, so atoms see their own images */
    tn_sys t;
    tn_sys_load_sheared(root, &t);
    double c0[9], x0[3 * 30];
    CHECK(t.n <= 30);
    memcpy(c0, t.cell, sizeof c0);
    memcpy(x0, t.x, sizeof(double) * 3 * (size_t)t.n);
    result rt;
    evaluate(m, 0, &t, NULL, 1, 0.0, &rt);
    double worst_w = 0;
    const double hs = 1e-6;
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++) {
            /* (under ASan a diagonal and an off-diagonal component: the same code) */
            if (TEST_SANITIZED && !(p == 0 && q == 0) && !(p == 1 && q == 2)) continue;
            double ev[2];
            for (int sg = 0; sg < 2; sg++) {
                tn_sys_strain(&t, c0, x0, p, q, sg ? -hs : hs);
                ev[sg] = energy_of(m, &t);
            }
            double dEde = (ev[0] - ev[1]) / (2 * hs); /* = -W_pq */
            double diff = fabs(dEde + rt.virial[0][3 * p + q]);
            worst_w = fmax(worst_w, diff);
            if (diff > 1e-6 + 1e-6 * fabs(dEde)) {
                fprintf(stderr, "strain %d%d: -W %.10f, finite difference %.10f\n", p, q,
                        -rt.virial[0][3 * p + q], dEde);
                return 1;
            }
        }
    printf("worst |W - W_fd| = %.3e eV (triclinic 8 A cell)\n", worst_w);
    result_free(&rt);
    tn_sys_free(&t);
    jfree(root);
    free_model(m);
    return 0;
}

static int case_replica(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    model *m = malloc(sizeof *m);
    if (!load_model(g_model, m)) return 1;
    tn_sys a, b;
    tn_sys_load(root, "water8_pbc", &a);
    tn_sys_load(root, "water8_x2_pbc", &b);
    result ra, rb;
    evaluate(m, 0, &a, NULL, 1, 0.0, &ra);
    evaluate(m, 0, &b, NULL, 1, 0.0, &rb);
    double e8 = 8 * (ra.energy_sys[0] - m->mean) + m->mean;
    printf("8 x water8_pbc %.10f, water8_x2_pbc %.10f\n", e8, rb.energy_sys[0]);
    CHECK(fabs(e8 - rb.energy_sys[0]) <= 1e-9 * b.n);
    /* the replica's first 30 atoms are the small cell's atoms */
    for (int i = 0; i < a.n; i++) CHECK(fabs(ra.atomic[i] - rb.atomic[i]) <= 1e-9);
    for (int i = 0; i < 3 * a.n; i++) CHECK(fabs(ra.forces[i] - rb.forces[i]) <= 1e-8);
    result_free(&ra);
    result_free(&rb);
    tn_sys_free(&a), tn_sys_free(&b);
    jfree(root);
    free_model(m);
    return 0;
}

/* Forces against central differences of the energy for the variants the reference set lacks:
 * every activation, 0 and 1 interaction layers, an expnorm basis with a lower cutoff, SO(3) with a
 * charge, float32 against float64; the model's weights reused with its shape changed. */
static int fd_check(const model *m, const tn_sys *s, const double *q, const char *what) {
    result r;
    evaluate(m, 0, s, q, 1, 0.0, &r);
    tn_sys t = *s;
    t.x = malloc(sizeof(double) * 3 * (size_t)s->n);
    memcpy(t.x, s->x, sizeof(double) * 3 * (size_t)s->n);
    const double h = 1e-5;
    double worst = 0;
    for (int i = 0; i < s->n; i++)
        for (int d = 0; d < 3; d++) {
            double x0 = t.x[3 * i + d], ev[2];
            for (int sg = 0; sg < 2; sg++) {
                t.x[3 * i + d] = x0 + (sg ? -h : h);
                result rr;
                evaluate(m, 0, &t, q, 1, 0.0, &rr);
                ev[sg] = rr.energy_sys[0];
                result_free(&rr);
            }
            t.x[3 * i + d] = x0;
            double fd = -(ev[0] - ev[1]) / (2 * h);
            double diff = fabs(fd - r.forces[3 * i + d]);
            worst = fmax(worst, diff);
            if (diff > 1e-6 + 1e-6 * fabs(fd)) {
                fprintf(stderr, "%s: atom %d dir %d: analytic %.10f, finite difference %.10f\n",
                        what, i, d, r.forces[3 * i + d], fd);
                return 1;
            }
        }
    printf("%-28s E %.8f  worst |F - F_fd| %.3e\n", what, r.energy_sys[0], worst);
    result_free(&r);
    free(t.x);
    return 0;
}

static int case_variants(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    model *m = malloc(sizeof *m);
    if (!load_model(g_model, m)) return 1;
    tn_sys s;
    tn_sys_load(root, "mol_mol_CH3SH", &s);
    const nnpops__tn_shape base = m->shape;
    static const char *const names[] = {"ssp", "silu", "tanh", "sigmoid", "mish"};
    char what[64];
    for (int a = 0; a < 5; a++) {
        m->shape = base;
        m->shape.activation = a;
        snprintf(what, sizeof what, "activation %s", names[a]);
        if (fd_check(m, &s, NULL, what)) return 1;
    }
    for (int l = 0; l < base.L && l < 2; l++) {
        m->shape = base;
        m->shape.L = l;
        snprintf(what, sizeof what, "%d interaction layers", l);
        if (fd_check(m, &s, NULL, what)) return 1;
    }
    m->shape = base;
    m->shape.cutoff_lower = 0.5;
    if (fd_check(m, &s, NULL, "cutoff_lower 0.5")) return 1;
    m->shape = base;
    double q = 1.0;
    if (fd_check(m, &s, &q, "charge +1")) return 1;
    m->shape.so3 = !base.so3;
    if (fd_check(m, &s, &q, base.so3 ? "O(3), charge +1" : "SO(3), charge +1")) return 1;
    m->shape = base;
    /* atom weights (ghost atoms weigh 0): the gradient of sum_i w_i E_i, by finite differences */
    {
        edges e = {0};
        build_edges(&e, 0, s.n, s.x, NULL, base.cutoff_lower, base.cutoff_upper, 1);
        double wgt[6] = {1, 0, 1, 0.5, 0, 1}, ae[6], ae2[6];
        CHECK(s.n == 6);
        double *g = malloc(sizeof(double) * 3 * (size_t)e.n);
        void *ws = malloc(nnpops__tn_cpu_workspace_f64(&base, s.n, e.n));
        int64_t bad;
        CHECK(nnpops__tn_cpu_f64(&base, &m->w64, s.n, s.z, NULL, e.n, e.i, e.j, e.v, e.r, wgt, ae,
                                 g, ws, &bad) == NNPOPS__TN_OK);
        double worst = 0;
        for (int64_t k = 0; k < e.n; k++) {
            if (!(e.r[k] > 0)) continue;
            for (int d = 0; d < 3; d++) {
                /* move edge k's vector alone (its reverse edge stays): a derivative per edge */
                double ev[2];
                for (int sg = 0; sg < 2; sg++) {
                    double v0 = e.v[3 * k + d], r0 = e.r[k];
                    e.v[3 * k + d] += sg ? -1e-6 : 1e-6;
                    e.r[k] = sqrt(e.v[3 * k] * e.v[3 * k] + e.v[3 * k + 1] * e.v[3 * k + 1] +
                                  e.v[3 * k + 2] * e.v[3 * k + 2]);
                    CHECK(nnpops__tn_cpu_f64(&base, &m->w64, s.n, s.z, NULL, e.n, e.i, e.j, e.v,
                                             e.r, NULL, ae2, NULL, ws, &bad) == NNPOPS__TN_OK);
                    ev[sg] = 0;
                    for (int i = 0; i < s.n; i++) ev[sg] += wgt[i] * ae2[i];
                    e.v[3 * k + d] = v0, e.r[k] = r0;
                }
                double fd = (ev[0] - ev[1]) / 2e-6;
                worst = fmax(worst, fabs(fd - g[3 * k + d]));
                CHECK(fabs(fd - g[3 * k + d]) <= 1e-6 + 1e-6 * fabs(fd));
            }
        }
        printf("atom weights: worst |dE/dr - fd| per edge %.3e\n", worst);
        free(g), free(ws), free(e.i), free(e.j), free(e.v), free(e.r), free(e.img);
    }
    /* named failures: an atomic number outside the table, an edge index outside the atoms; and
     * no atoms at all is a valid call */
    {
        edges e = {0};
        build_edges(&e, 0, s.n, s.x, NULL, base.cutoff_lower, base.cutoff_upper, 1);
        void *ws = malloc(nnpops__tn_cpu_workspace_f64(&base, s.n, e.n));
        double ae[6], *g = malloc(sizeof(double) * 3 * (size_t)e.n);
        int64_t bad = -1;
        int32_t z[6];
        memcpy(z, s.z, sizeof z);
        z[3] = base.max_z;
        CHECK(nnpops__tn_cpu_f64(&base, &m->w64, s.n, z, NULL, e.n, e.i, e.j, e.v, e.r, NULL, ae,
                                 g, ws, &bad) == NNPOPS__TN_BAD_Z && bad == 3);
        z[3] = -1;
        CHECK(nnpops__tn_cpu_f64(&base, &m->w64, s.n, z, NULL, e.n, e.i, e.j, e.v, e.r, NULL, ae,
                                 g, ws, &bad) == NNPOPS__TN_BAD_Z && bad == 3);
        e.j[5] = s.n;
        CHECK(nnpops__tn_cpu_f64(&base, &m->w64, s.n, s.z, NULL, e.n, e.i, e.j, e.v, e.r, NULL, ae,
                                 g, ws, &bad) == NNPOPS__TN_BAD_EDGE && bad == 5);
        CHECK(nnpops__tn_cpu_f64(&base, &m->w64, 0, s.z, NULL, 0, e.i, e.j, e.v, e.r, NULL, ae, g,
                                 ws, &bad) == NNPOPS__TN_OK);
        if (m->has_zbl) {
            z[3] = m->zbl.map_len;
            e.j[5] = e.i[5];
            CHECK(nnpops__tn_zbl_cpu_f64(&m->zbl, z, e.n, e.i, e.j, e.v, e.r, NULL, ae, g, &bad) ==
                  NNPOPS__TN_BAD_Z && bad == 3);
        }
        free(ws), free(g), free(e.i), free(e.j), free(e.v), free(e.r), free(e.img);
    }
    /* float32 against float64 on the same edges */
    result r64, r32;
    evaluate(m, 0, &s, NULL, 1, 0.0, &r64);
    evaluate(m, 1, &s, NULL, 1, 0.0, &r32);
    double df = 0;
    for (int i = 0; i < 3 * s.n; i++) df = fmax(df, fabs(r64.forces[i] - r32.forces[i]));
    printf("float32 - float64: dE/N %.3e, max |dF| %.3e\n",
           fabs(r64.energy_sys[0] - r32.energy_sys[0]) / s.n, df);
    CHECK(fabs(r64.energy_sys[0] - r32.energy_sys[0]) / s.n <= 5e-6);
    CHECK(df <= 5e-4);
    result_free(&r64), result_free(&r32);
    tn_sys_free(&s);
    jfree(root);
    free_model(m);
    return 0;
}

/* Rotation, translation and permutation leave the energy unchanged and turn the forces with the
 * atoms; a reflection leaves O(3) energies unchanged and changes SO(3) ones. */
static int case_invariance(void) {
    char path[4096];
    jval *root = tn_ref_load(path, sizeof path);
    if (!root) return test_missing_data(path);
    model *m = malloc(sizeof *m);
    if (!load_model(g_model, m)) return 1;
    tn_sys a;
    tn_sys_load(root, "mol_13_f0", &a);
    result r0;
    evaluate(m, 0, &a, NULL, 1, 0.0, &r0);
    /* a proper rotation (from a unit quaternion), a shift and a reversed order */
    double qw = 0.6, qx = 0.48, qy = -0.32, qz = 0.56, nq = sqrt(qw * qw + qx * qx + qy * qy + qz * qz);
    qw /= nq, qx /= nq, qy /= nq, qz /= nq;
    double Rm[9] = {1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw),
                    2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw),
                    2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)};
    tn_sys b = a;
    b.z = malloc(sizeof(int32_t) * (size_t)a.n);
    b.x = malloc(sizeof(double) * 3 * (size_t)a.n);
    for (int i = 0; i < a.n; i++) {
        int src = a.n - 1 - i;
        b.z[i] = a.z[src];
        for (int d = 0; d < 3; d++) {
            double v = 0;
            for (int k = 0; k < 3; k++) v += Rm[3 * d + k] * a.x[3 * src + k];
            b.x[3 * i + d] = v + (d == 0 ? 3.25 : d == 1 ? -7.5 : 0.125);
        }
    }
    result r1;
    evaluate(m, 0, &b, NULL, 1, 0.0, &r1);
    printf("rotated: dE %.3e\n", r1.energy_sys[0] - r0.energy_sys[0]);
    CHECK(fabs(r1.energy_sys[0] - r0.energy_sys[0]) <= 1e-10 * a.n);
    for (int i = 0; i < a.n; i++) {
        int src = a.n - 1 - i;
        CHECK(fabs(r1.atomic[i] - r0.atomic[src]) <= 1e-10);
        for (int d = 0; d < 3; d++) {
            double v = 0;
            for (int k = 0; k < 3; k++) v += Rm[3 * d + k] * r0.forces[3 * src + k];
            CHECK(fabs(r1.forces[3 * i + d] - v) <= 1e-9);
        }
    }
    /* a reflection through the xy plane */
    for (int i = 0; i < a.n; i++) a.x[3 * i + 2] = -a.x[3 * i + 2];
    result r2;
    evaluate(m, 0, &a, NULL, 1, 0.0, &r2);
    double de = fabs(r2.energy_sys[0] - r0.energy_sys[0]);
    printf("reflected (%s): dE %.3e\n", m->shape.so3 ? "SO(3)" : "O(3)", de);
    if (m->shape.so3)
        CHECK(de > 1e-6);
    else
        CHECK(de <= 1e-10 * a.n);
    result_free(&r0), result_free(&r1), result_free(&r2);
    tn_sys_free(&a), tn_sys_free(&b);
    jfree(root);
    free_model(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s reference|fd|replica|invariance|variants MODEL [f64|f32]\n",
                argv[0]);
        return 2;
    }
    g_model = argv[2];
    g_f32 = argc > 3 && !strcmp(argv[3], "f32");
    if (!strcmp(argv[1], "reference")) return case_reference();
    if (!strcmp(argv[1], "fd")) return case_fd();
    if (!strcmp(argv[1], "replica")) return case_replica();
    if (!strcmp(argv[1], "invariance")) return case_invariance();
    if (!strcmp(argv[1], "variants")) return case_variants();
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
