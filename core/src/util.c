/*
 * util.c - small shared pieces: growable buffers, the element table, version queries.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NNPOPS__STR2(x) #x
#define NNPOPS__STR(x) NNPOPS__STR2(x)

int32_t nnpops_version_number(void) { return NNPOPS_VERSION_NUMBER; }

const char *nnpops_version_string(void) {
    return NNPOPS__STR(NNPOPS_VERSION_MAJOR) "." NNPOPS__STR(NNPOPS_VERSION_MINOR) "." NNPOPS__STR(
        NNPOPS_VERSION_PATCH);
}

nnpops_status nnpops__buf_reserve(nnpops__buf *b, size_t bytes, const char *what) {
    if (bytes <= b->bytes) return NNPOPS_OK;
    size_t grown = b->bytes + b->bytes / 2;
    size_t want = bytes > grown ? bytes : grown;
    /* 64-byte aligned so vector loads of any precision are aligned */
    want = (want + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0 || !p) {
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory allocating %zu bytes for %s",
                            want, what ? what : "a buffer");
    }
    free(b->ptr);
    b->ptr = p;
    b->bytes = want;
    return NNPOPS_OK;
}

void nnpops__buf_free(nnpops__buf *b) {
    free(b->ptr);
    b->ptr = NULL;
    b->bytes = 0;
}

const char *const nnpops__element_symbols[119] = {
    "",   "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si",
    "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu",
    "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru",
    "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr",
    "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",
    "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac",
    "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf",
    "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};

int nnpops__element_from_symbol(const char *symbol) {
    if (!symbol || !symbol[0]) return 0;
    for (int z = 1; z < 119; z++) {
        if (strcmp(nnpops__element_symbols[z], symbol) == 0) return z;
    }
    return 0;
}
