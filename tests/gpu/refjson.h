/* refjson.h - the torchani reference sets for the GPU tests and the GPU benchmark: a minimal JSON
 * reader (objects, arrays, numbers, strings, literals) and the systems of
 * $NNPOPS_SHARED_DIR/reference/<model>-torchani.json (symbols, positions_A, cell_A, energy_eV,
 * forces_eV_per_A, atomic_energies_eV, stress_eV_per_A3). */
#ifndef NNPOPS_TEST_REFJSON_H
#define NNPOPS_TEST_REFJSON_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct jnode {
    char kind;             /* 'o' object, 'a' array, 'n' number, 's' string, 'l' literal */
    double num;
    char *str;
    int n;
    char **keys;
    struct jnode **kids;
} jnode;

typedef struct jcur {
    const char *p, *end;
} jcur;

static void jws(jcur *c) {
    while (c->p < c->end && isspace((unsigned char)*c->p)) c->p++;
}

static jnode *jparse_value(jcur *c);

static char *jparse_string(jcur *c) {
    /* c->p at the opening quote; escapes other than \" \\ \/ are kept verbatim (not needed here) */
    c->p++;
    const char *s = c->p;
    size_t cap = 16, len = 0;
    char *out = malloc(cap);
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if (ch == '\\' && c->p < c->end) ch = *c->p++;
        if (len + 2 > cap) out = realloc(out, cap *= 2);
        out[len++] = ch;
    }
    (void)s;
    out[len] = 0;
    if (c->p < c->end) c->p++;
    return out;
}

static void jpush(jnode *v, char *key, jnode *kid) {
    v->keys = realloc(v->keys, sizeof(char *) * (v->n + 1));
    v->kids = realloc(v->kids, sizeof(jnode *) * (v->n + 1));
    v->keys[v->n] = key;
    v->kids[v->n] = kid;
    v->n++;
}

static jnode *jparse_value(jcur *c) {
    jws(c);
    if (c->p >= c->end) return NULL;
    jnode *v = calloc(1, sizeof *v);
    const char ch = *c->p;
    if (ch == '{' || ch == '[') {
        v->kind = ch == '{' ? 'o' : 'a';
        c->p++;
        for (;;) {
            jws(c);
            if (c->p < c->end && (*c->p == '}' || *c->p == ']')) {
                c->p++;
                break;
            }
            char *key = NULL;
            if (v->kind == 'o') {
                key = jparse_string(c);
                jws(c);
                if (c->p < c->end && *c->p == ':') c->p++;
            }
            jpush(v, key, jparse_value(c));
            jws(c);
            if (c->p < c->end && *c->p == ',') c->p++;
        }
    } else if (ch == '"') {
        v->kind = 's';
        v->str = jparse_string(c);
    } else if (ch == '-' || isdigit((unsigned char)ch)) {
        v->kind = 'n';
        char *e;
        v->num = strtod(c->p, &e);
        c->p = e;
    } else {
        v->kind = 'l';
        v->num = (*c->p == 't');
        while (c->p < c->end && isalpha((unsigned char)*c->p)) c->p++;
    }
    return v;
}

static const jnode *jget(const jnode *o, const char *key) {
    if (!o || o->kind != 'o') return NULL;
    for (int k = 0; k < o->n; k++)
        if (!strcmp(o->keys[k], key)) return o->kids[k];
    return NULL;
}

/* Numbers of a (nested) array in order; returns the count written (at most cap). */
static int jflat(const jnode *v, double *out, int cap) {
    if (!v) return 0;
    if (v->kind == 'n') {
        if (cap > 0) out[0] = v->num;
        return 1;
    }
    if (v->kind != 'a') return 0;
    int k = 0;
    for (int i = 0; i < v->n; i++) k += jflat(v->kids[i], out + k, cap - k > 0 ? cap - k : 0);
    return k;
}

typedef struct refsys {
    char name[64];
    int n;
    int32_t *z;
    double *x, *forces, *atomic;
    int periodic;
    double cell[9];
    uint8_t pbc[3];
    double energy;
    int has_stress;
    double stress[9];
} refsys;

typedef struct refset {
    int n;
    refsys sys[64];
    char path[4096];
} refset;

static int ref_z(const char *sym) {
    static const char *const t[] = {"", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne",
                                    "Na", "Mg", "Al", "Si", "P", "S", "Cl"};
    for (int z = 1; z < (int)(sizeof t / sizeof *t); z++)
        if (!strcmp(t[z], sym)) return z;
    return 0;
}

/* Loads MODEL-torchani.json; 0 when the file is missing. */
static int ref_load(const char *model, refset *set) {
    const char *dir = getenv("NNPOPS_SHARED_DIR");
    snprintf(set->path, sizeof set->path, "%s/reference/%s-torchani.json", dir ? dir : "../shared",
             model);
    FILE *f = fopen(set->path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    if (fread(text, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        return 0;
    }
    fclose(f);
    jcur c = {text, text + len};
    jnode *root = jparse_value(&c);
    const jnode *systems = jget(root, "systems");
    set->n = 0;
    for (int k = 0; systems && k < systems->n && set->n < 64; k++) {
        const jnode *s = systems->kids[k];
        refsys *r = &set->sys[set->n++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", systems->keys[k]);
        const jnode *sym = jget(s, "symbols");
        r->n = sym->n;
        r->z = malloc(sizeof(int32_t) * r->n);
        r->x = malloc(sizeof(double) * 3 * r->n);
        r->forces = malloc(sizeof(double) * 3 * r->n);
        r->atomic = malloc(sizeof(double) * r->n);
        for (int i = 0; i < r->n; i++) r->z[i] = ref_z(sym->kids[i]->str);
        jflat(jget(s, "positions_A"), r->x, 3 * r->n);
        jflat(jget(s, "forces_eV_per_A"), r->forces, 3 * r->n);
        jflat(jget(s, "atomic_energies_eV"), r->atomic, r->n);
        r->energy = jget(s, "energy_eV")->num;
        const jnode *cell = jget(s, "cell_A");
        r->periodic = cell && cell->kind == 'a';
        if (r->periodic) {
            jflat(cell, r->cell, 9);
            const jnode *pbc = jget(s, "pbc");
            for (int a = 0; a < 3; a++)
                r->pbc[a] = pbc && pbc->kind == 'a' && pbc->n == 3 ? (uint8_t)(pbc->kids[a]->num != 0) : 1;
        }
        const jnode *st = jget(s, "stress_eV_per_A3");
        r->has_stress = st && st->kind == 'a';
        if (r->has_stress) jflat(st, r->stress, 9);
    }
    free(text);
    return set->n > 0;
}

#endif
