/*
 * potentials.c - the table of potentials: model type (the YAML key `type`, and the name of the
 * type's own mapping in the model file) -> vtable.  A new potential is one folder under
 * potentials/, one entry here and its sources in the CMake lists.
 */
#include <string.h>

#include "internal.h"

extern const nnpops__potential_vt nnpops__ani_vt;
extern const nnpops__potential_vt nnpops__lj_vt;
extern const nnpops__potential_vt nnpops__tensornet_vt;

static const nnpops__potential_vt *const table[] = {
    &nnpops__ani_vt,
    &nnpops__lj_vt,
    &nnpops__tensornet_vt,
};

int nnpops__potential_count(void) { return (int)(sizeof table / sizeof table[0]); }

const nnpops__potential_vt *nnpops__potential_at(int k) {
    return k >= 0 && k < nnpops__potential_count() ? table[k] : NULL;
}

const nnpops__potential_vt *nnpops__potential_find(const char *type) {
    for (int k = 0; type && k < nnpops__potential_count(); k++)
        if (strcmp(table[k]->type, type) == 0) return table[k];
    return NULL;
}

nnpops__nbr_choice nnpops__potential_lists(const nnpops_model *model) {
    nnpops__nbr_choice lists = {.full = 0, .ghost_pairs = 0, .ghost_centers = 0};
    if (model->vt->neighbor_lists) model->vt->neighbor_lists(model, &lists);
    if (!lists.full) lists.ghost_centers = 0;
    if (lists.full) lists.ghost_pairs = lists.ghost_centers;
    return lists;
}
