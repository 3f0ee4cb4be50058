/*
 * model.c - loading a model (nnpops_model_load) and the nnpops_model_* accessors.
 *
 * Loading runs in this order, and any failure frees everything and leaves *model NULL:
 *  1. arguments: precision (float32 | float64) and device ("cpu" or NULL, "cuda", "cuda:N"; a CUDA
 *     device needs a CUDA build and at least N+1 usable GPUs);
 *  2. resolution of name_or_path: something containing '/' or ending in .yaml / .yml is a path
 *     and must be an existing file; anything else is a model name looked up as NAME.yaml in each
 *     directory of NNPOPS_MODEL_PATH (colon separated, empty entries skipped), then in
 *     ${XDG_CACHE_HOME:-$HOME/.cache}/nnpops/models;
 *  3. the keys every model file has (docs/model-format.md): format: nnpops-model,
 *     format_version (1), name, type (ani | lj | tensornet), units {length, energy}, species,
 *     and the optional weights {file, sha256} (file relative to the YAML's directory), whose
 *     safetensors file is read and checked here;
 *  4. the potential's own keys, through its vtable's load(); the weights are freed afterwards
 *     (the potential copies what it keeps).  If load() fails with model->impl non-NULL, the
 *     vtable's destroy() is called, so a potential must leave impl NULL or destroyable;
 *  5. on a CUDA device (CUDA builds only), the upload of the potential's parameters
 *     (nnpops__cuda_model_upload, which fails with NNPOPS_ERROR_UNSUPPORTED for a potential
 *     without a GPU path); nnpops_model_destroy releases them before the potential's destroy().
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

#define NNPOPS__FORMAT_VERSION 1

static const char *errno_text(int err, char *buf, size_t n) {
    if (strerror_r(err, buf, n) != 0) snprintf(buf, n, "error %d", err);
    return buf;
}

static int ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

static int is_regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* ---- device and precision -------------------------------------------------------------------- */

static nnpops_status parse_device(const char *device, nnpops_model *m) {
    if (!device || strcmp(device, "cpu") == 0) {
        m->device = NNPOPS__CPU;
        m->device_index = 0;
        snprintf(m->device_name, sizeof m->device_name, "cpu");
        return NNPOPS_OK;
    }
    long index = -1;
    if (strcmp(device, "cuda") == 0) {
        index = 0;
    } else if (strncmp(device, "cuda:", 5) == 0) {
        const char *p = device + 5;
        size_t n = strlen(p);
        int ok = n >= 1 && n <= 6;
        for (size_t i = 0; ok && i < n; i++) ok = isdigit((unsigned char)p[i]) != 0;
        if (ok) index = strtol(p, NULL, 10);
    }
    if (index < 0) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "unknown device '%.64s' (expected \"cpu\", \"cuda\" or \"cuda:N\")",
                            device);
    }
    if (!nnpops_cuda_built()) {
        return nnpops__fail(NNPOPS_ERROR_DEVICE_NOT_BUILT,
                            "device '%.64s': this nnpops library was built without CUDA "
                            "(NNPOPS_ENABLE_CUDA=OFF); use device \"cpu\" or rebuild with "
                            "-DNNPOPS_ENABLE_CUDA=ON",
                            device);
    }
    int32_t count = nnpops_cuda_device_count();
    if (count <= index) {
        if (count <= 0) {
            return nnpops__fail(NNPOPS_ERROR_NO_DEVICE,
                                "device '%.64s': no usable CUDA device (no GPU or no driver)",
                                device);
        }
        return nnpops__fail(NNPOPS_ERROR_NO_DEVICE,
                            "device '%.64s': only %d CUDA device%s usable (cuda:0..cuda:%d)",
                            device, (int)count, count == 1 ? " is" : "s are", (int)count - 1);
    }
    m->device = NNPOPS__CUDA;
    m->device_index = (int)index;
    snprintf(m->device_name, sizeof m->device_name, "cuda:%ld", index);
    return NNPOPS_OK;
}

/* ---- resolving a name or path ---------------------------------------------------------------- */

/* Appends `text` to the list `buf` (", " separated), marking truncation with "...". */
static void list_append(char *buf, size_t cap, const char *text) {
    size_t o = strlen(buf);
    if (o + 4 >= cap) return;
    int n = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", text);
    if (n < 0 || (size_t)n >= cap - o) memcpy(buf + cap - 4, "...", 4);
}

/* Looks for dir/NAME.yaml; on success copies it into path. */
static int try_dir(const char *dir, size_t dir_len, const char *name, char *path, size_t cap) {
    int n = snprintf(path, cap, "%.*s/%s.yaml", (int)dir_len, dir, name);
    if (n < 0 || (size_t)n >= cap) return 0;
    return is_regular_file(path);
}

static int looks_like_ani(const char *name) {
    return tolower((unsigned char)name[0]) == 'a' && tolower((unsigned char)name[1]) == 'n' &&
           tolower((unsigned char)name[2]) == 'i';
}

static nnpops_status resolve(const char *name_or_path, nnpops_model *m) {
    char ebuf[128];
    size_t len = strlen(name_or_path);
    if (strchr(name_or_path, '/') || ends_with(name_or_path, ".yaml") ||
        ends_with(name_or_path, ".yml")) {
        if (len >= sizeof m->path) {
            return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "model path too long (%zu bytes)",
                                len);
        }
        struct stat sb;
        if (stat(name_or_path, &sb) != 0) {
            int err = errno;
            return nnpops__fail(NNPOPS_ERROR_IO, "model file '%s' %s: %s", name_or_path,
                                err == ENOENT || err == ENOTDIR ? "not found" : "cannot be read",
                                errno_text(err, ebuf, sizeof ebuf));
        }
        if (!S_ISREG(sb.st_mode)) {
            return nnpops__fail(NNPOPS_ERROR_IO, "model file '%s' is not a regular file",
                                name_or_path);
        }
        memcpy(m->path, name_or_path, len + 1);
        return NNPOPS_OK;
    }

    char searched[1200] = "";
    const char *env = getenv("NNPOPS_MODEL_PATH");
    for (const char *p = env; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (n > 0) {
            if (try_dir(p, n, name_or_path, m->path, sizeof m->path)) return NNPOPS_OK;
            char dir[512];
            snprintf(dir, sizeof dir, "%.*s", (int)(n < 500 ? n : 500), p);
            list_append(searched, sizeof searched, dir);
        }
        if (!colon) break;
        p = colon + 1;
    }
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char cache[4096];
    int have_cache = 0;
    if (xdg && *xdg) {
        have_cache = snprintf(cache, sizeof cache, "%s/nnpops/models", xdg) < (int)sizeof cache;
    } else if (home && *home) {
        have_cache = snprintf(cache, sizeof cache, "%s/.cache/nnpops/models", home) <
                     (int)sizeof cache;
    }
    if (have_cache) {
        if (try_dir(cache, strlen(cache), name_or_path, m->path, sizeof m->path)) {
            return NNPOPS_OK;
        }
        list_append(searched, sizeof searched, cache);
    }
    m->path[0] = '\0';
    if (looks_like_ani(name_or_path)) {
        /* a single member, NAME-mK, is converted with "convert NAME --member K" */
        char command[256];
        const char *dash = strrchr(name_or_path, '-');
        size_t k = dash && dash[1] == 'm' ? strspn(dash + 2, "0123456789") : 0;
        if (k > 0 && dash[2 + k] == '\0') {
            snprintf(command, sizeof command, "%.*s --member %s",
                     (int)(dash - name_or_path < 100 ? dash - name_or_path : 100), name_or_path,
                     dash + 2);
        } else {
            snprintf(command, sizeof command, "%.100s", name_or_path);
        }
        return nnpops__fail(NNPOPS_ERROR_MODEL_NOT_FOUND,
                            "model '%.100s' not found: no %.100s.yaml in %s (NNPOPS_MODEL_PATH, "
                            "then the cache directory); convert it with: python3 -m nnpops "
                            "convert %s",
                            name_or_path, name_or_path, searched[0] ? searched : "(no directory)",
                            command);
    }
    return nnpops__fail(NNPOPS_ERROR_MODEL_NOT_FOUND,
                        "model '%.100s' not found: no %.100s.yaml in %s (NNPOPS_MODEL_PATH, then "
                        "the cache directory); pass the path of its YAML file, or put "
                        "%.100s.yaml in one of the directories of NNPOPS_MODEL_PATH",
                        name_or_path, name_or_path, searched[0] ? searched : "(no directory)",
                        name_or_path);
}

static void set_dir(nnpops_model *m) {
    const char *slash = strrchr(m->path, '/');
    if (!slash) {
        snprintf(m->dir, sizeof m->dir, ".");
    } else if (slash == m->path) {
        snprintf(m->dir, sizeof m->dir, "/");
    } else {
        snprintf(m->dir, sizeof m->dir, "%.*s", (int)(slash - m->path), m->path);
    }
}

/* ---- common keys ----------------------------------------------------------------------------- */

static int valid_model_name(const char *s) {
    if (!*s) return 0;
    for (; *s; s++) {
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-') return 0;
    }
    return 1;
}

static nnpops_status parse_header_keys(nnpops_model *m, const nnpops__cfg *cfg,
                                       nnpops__node root) {
    const char *file = nnpops__cfg_file(cfg);
    nnpops__node n;
    const char *s;
    nnpops_status st;

    if (!nnpops__cfg_is_map(cfg, root)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: not an nnpops model file (the top level is not a mapping)",
                            file, nnpops__cfg_line(cfg, root));
    }
    if ((st = nnpops__cfg_get(cfg, root, "format", 0, &n)) != NNPOPS_OK) return st;
    if (!n) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s: not an nnpops model file (no 'format: nnpops-model' key)", file);
    }
    if ((st = nnpops__cfg_str(cfg, n, "format", &s)) != NNPOPS_OK) return st;
    if (strcmp(s, "nnpops-model") != 0) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: not an nnpops model file (format is '%.64s', expected "
                            "'nnpops-model')",
                            file, nnpops__cfg_line(cfg, n), s);
    }

    int64_t version;
    if ((st = nnpops__cfg_get(cfg, root, "format_version", 1, &n)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_int(cfg, n, "format_version", &version)) != NNPOPS_OK) return st;
    /* the version decides which keys exist, so it is checked before the keys are */
    if (version > NNPOPS__FORMAT_VERSION) {
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "%s:%d: format_version %lld is newer than this library reads (%d); "
                            "upgrade nnpops or convert the model with the matching version",
                            file, nnpops__cfg_line(cfg, n), (long long)version,
                            NNPOPS__FORMAT_VERSION);
    }
    if (version < 1) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: invalid format_version %lld", file,
                            nnpops__cfg_line(cfg, n), (long long)version);
    }

    /* the common keys, then each potential's own mapping, named by its type */
    static const char *const common_keys[] = {"format", "format_version", "name", "type",
                                              "description", "units", "species", "weights"};
    enum { N_COMMON = sizeof common_keys / sizeof common_keys[0], MAX_TOP = N_COMMON + 32 };
    const char *top_keys[MAX_TOP + 1];
    int n_top = 0;
    for (int k = 0; k < N_COMMON; k++) top_keys[n_top++] = common_keys[k];
    for (int k = 0; k < nnpops__potential_count() && n_top < MAX_TOP; k++)
        top_keys[n_top++] = nnpops__potential_at(k)->type;
    top_keys[n_top] = NULL;
    if ((st = nnpops__cfg_check_keys(cfg, root, "the model file", top_keys)) != NNPOPS_OK) {
        return st;
    }

    if ((st = nnpops__cfg_get(cfg, root, "name", 1, &n)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_str(cfg, n, "name", &s)) != NNPOPS_OK) return st;
    if (strlen(s) == 0 || strlen(s) >= sizeof m->name) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: name must have 1 to %d characters, it has %zu", file,
                            nnpops__cfg_line(cfg, n), (int)sizeof m->name - 1, strlen(s));
    }
    if (!valid_model_name(s)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: name '%.64s' may only contain letters, digits, '_', '.' and "
                            "'-'",
                            file, nnpops__cfg_line(cfg, n), s);
    }
    snprintf(m->name, sizeof m->name, "%s", s);

    if ((st = nnpops__cfg_get(cfg, root, "type", 1, &n)) != NNPOPS_OK) return st;
    if ((st = nnpops__cfg_str(cfg, n, "type", &s)) != NNPOPS_OK) return st;
    m->vt = nnpops__potential_find(s);
    if (!m->vt) {
        char known[256] = "";
        for (int k = 0; k < nnpops__potential_count(); k++) {
            const int last = k == nnpops__potential_count() - 1;
            strncat(known, k == 0 ? "" : last ? " or " : ", ", sizeof known - strlen(known) - 1);
            strncat(known, nnpops__potential_at(k)->type, sizeof known - strlen(known) - 1);
        }
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: unknown model type '%.64s' (expected %s)", file,
                            nnpops__cfg_line(cfg, n), s, known);
    }
    snprintf(m->type, sizeof m->type, "%s", s);

    if ((st = nnpops__cfg_get(cfg, root, "description", 0, &n)) != NNPOPS_OK) return st;
    if (n && (st = nnpops__cfg_str(cfg, n, "description", &s)) != NNPOPS_OK) return st;

    /* units */
    nnpops__node units, len_node, energy_node;
    if ((st = nnpops__cfg_get(cfg, root, "units", 1, &units)) != NNPOPS_OK) return st;
    if (!nnpops__cfg_is_map(cfg, units)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: units must be a mapping {length: ..., energy: ...}", file,
                            nnpops__cfg_line(cfg, units));
    }
    static const char *const unit_keys[] = {"length", "energy", NULL};
    if ((st = nnpops__cfg_check_keys(cfg, units, "units", unit_keys)) != NNPOPS_OK) {
        return st;
    }
    if ((st = nnpops__cfg_get(cfg, units, "length", 1, &len_node)) != NNPOPS_OK ||
        (st = nnpops__cfg_get(cfg, units, "energy", 1, &energy_node)) != NNPOPS_OK) {
        return st;
    }
    if ((st = nnpops__cfg_str(cfg, len_node, "units.length", &s)) != NNPOPS_OK) return st;
    if (strcmp(s, "angstrom") == 0) {
        m->length_to_A = 1.0;
    } else if (strcmp(s, "nm") == 0) {
        m->length_to_A = 10.0;
    } else if (strcmp(s, "bohr") == 0) {
        m->length_to_A = 0.52917721092;
    } else {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: unknown length unit '%.64s' (expected angstrom, nm or bohr)",
                            file, nnpops__cfg_line(cfg, len_node), s);
    }
    if ((st = nnpops__cfg_str(cfg, energy_node, "units.energy", &s)) != NNPOPS_OK) return st;
    if (strcmp(s, "hartree") == 0) {
        m->energy_to_eV = 27.211386024367243;
    } else if (strcmp(s, "eV") == 0) {
        m->energy_to_eV = 1.0;
    } else if (strcmp(s, "kcal/mol") == 0) {
        m->energy_to_eV = 1.0 / 23.060547830619;
    } else if (strcmp(s, "kJ/mol") == 0) {
        m->energy_to_eV = 1.0 / 96.48533212331002;
    } else {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: unknown energy unit '%.64s' (expected hartree, eV, kcal/mol "
                            "or kJ/mol)",
                            file, nnpops__cfg_line(cfg, energy_node), s);
    }

    /* species */
    nnpops__node species;
    if ((st = nnpops__cfg_get(cfg, root, "species", 1, &species)) != NNPOPS_OK) return st;
    int64_t ns = nnpops__cfg_len(cfg, species);
    if (!nnpops__cfg_is_seq(cfg, species) || ns < 1 || ns > NNPOPS__MAX_MODEL_SPECIES) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: species must be a list of 1 to %d element symbols", file,
                            nnpops__cfg_line(cfg, species), NNPOPS__MAX_MODEL_SPECIES);
    }
    for (int z = 0; z < 119; z++) m->z_to_species[z] = -1;
    for (int i = 0; i < NNPOPS__MAX_MODEL_SPECIES; i++) m->species_z[i] = -1;
    for (int64_t i = 0; i < ns; i++) {
        nnpops__node item = nnpops__cfg_item(cfg, species, i);
        char what[32];
        snprintf(what, sizeof what, "species[%lld]", (long long)i);
        if ((st = nnpops__cfg_str(cfg, item, what, &s)) != NNPOPS_OK) return st;
        int z = nnpops__element_from_symbol(s);
        if (z <= 0 || z > 118) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: unknown element symbol '%.32s' in species", file,
                                nnpops__cfg_line(cfg, item), s);
        }
        if (m->z_to_species[z] >= 0) {
            return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                                "%s:%d: element '%s' appears twice in species", file,
                                nnpops__cfg_line(cfg, item), s);
        }
        m->z_to_species[z] = (int32_t)i;
        m->species_z[i] = z;
    }
    m->n_species = (int32_t)ns;
    return NNPOPS_OK;
}

/* The optional weights: {file, sha256}; *w stays NULL when the key is absent. */
static nnpops_status load_weights(const nnpops_model *m, const nnpops__cfg *cfg,
                                  nnpops__node root, nnpops__weights **w) {
    const char *file = nnpops__cfg_file(cfg);
    nnpops__node weights, n_file, n_sha;
    const char *wfile, *sha;
    nnpops_status st;
    *w = NULL;
    if ((st = nnpops__cfg_get(cfg, root, "weights", 0, &weights)) != NNPOPS_OK) return st;
    if (!weights) return NNPOPS_OK;
    if (!nnpops__cfg_is_map(cfg, weights)) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: weights must be a mapping {file: ..., sha256: ...}", file,
                            nnpops__cfg_line(cfg, weights));
    }
    static const char *const weight_keys[] = {"file", "sha256", NULL};
    if ((st = nnpops__cfg_check_keys(cfg, weights, "weights", weight_keys)) != NNPOPS_OK) {
        return st;
    }
    if ((st = nnpops__cfg_get(cfg, weights, "file", 1, &n_file)) != NNPOPS_OK ||
        (st = nnpops__cfg_get(cfg, weights, "sha256", 1, &n_sha)) != NNPOPS_OK ||
        (st = nnpops__cfg_str(cfg, n_file, "weights.file", &wfile)) != NNPOPS_OK ||
        (st = nnpops__cfg_str(cfg, n_sha, "weights.sha256", &sha)) != NNPOPS_OK) {
        return st;
    }
    int hex_ok = strlen(sha) == 64;
    char sha_lower[65];
    for (int i = 0; hex_ok && i < 64; i++) {
        hex_ok = isxdigit((unsigned char)sha[i]) != 0;
        sha_lower[i] = (char)tolower((unsigned char)sha[i]);
    }
    if (!hex_ok) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT,
                            "%s:%d: weights.sha256 must be 64 hexadecimal digits", file,
                            nnpops__cfg_line(cfg, n_sha));
    }
    sha_lower[64] = '\0';
    if (!wfile[0]) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: weights.file is empty", file,
                            nnpops__cfg_line(cfg, n_file));
    }
    char path[8192];
    int n = wfile[0] == '/' ? snprintf(path, sizeof path, "%s", wfile)
                            : snprintf(path, sizeof path, "%s/%s", m->dir, wfile);
    if (n < 0 || (size_t)n >= sizeof path) {
        return nnpops__fail(NNPOPS_ERROR_MODEL_FORMAT, "%s:%d: weights.file path is too long",
                            file, nnpops__cfg_line(cfg, n_file));
    }
    st = nnpops__weights_load(path, sha_lower, w);
    if (st != NNPOPS_OK && st != NNPOPS_ERROR_OUT_OF_MEMORY) {
        return nnpops__fail_prefix(st, "%s:%d: weights", file, nnpops__cfg_line(cfg, weights));
    }
    return st;
}

/* ---- public API ------------------------------------------------------------------------------ */

nnpops_status nnpops_model_load(const char *name_or_path, const char *device,
                                nnpops_precision precision, nnpops_model **model) {
    if (!model) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT, "nnpops_model_load: model is NULL");
    }
    *model = NULL;
    if (!name_or_path || !name_or_path[0]) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_model_load: name_or_path is NULL or empty");
    }
    if (precision != NNPOPS_FLOAT32 && precision != NNPOPS_FLOAT64) {
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "nnpops_model_load: precision %d is neither NNPOPS_FLOAT32 (0) nor "
                            "NNPOPS_FLOAT64 (1)",
                            (int)precision);
    }
    nnpops_model *m = calloc(1, sizeof *m);
    if (!m) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for a model");
    m->precision = precision;
    m->ensemble_size = 1;
    m->cutoff = 0.0;

    nnpops__cfg *cfg = NULL;
    nnpops__weights *weights = NULL;
    nnpops_status st = parse_device(device, m);
    if (st == NNPOPS_OK) st = resolve(name_or_path, m);
    if (st == NNPOPS_OK) {
        set_dir(m);
        st = nnpops__cfg_load(m->path, &cfg);
    }
    nnpops__node root = st == NNPOPS_OK ? nnpops__cfg_root(cfg) : 0;
    if (st == NNPOPS_OK) st = parse_header_keys(m, cfg, root);
    if (st == NNPOPS_OK) st = load_weights(m, cfg, root, &weights);
    if (st == NNPOPS_OK) {
        st = m->vt->load(m, cfg, root, weights);
        if (st == NNPOPS_OK && !(m->cutoff > 0.0 && isfinite(m->cutoff))) {
            st = nnpops__fail(NNPOPS_ERROR_INTERNAL, "%s: the %s potential set no valid cutoff",
                              m->path, m->type);
        }
        if (st == NNPOPS_OK && m->interaction_range == 0.0) m->interaction_range = m->cutoff;
        if (st == NNPOPS_OK &&
            !(m->interaction_range >= m->cutoff && isfinite(m->interaction_range))) {
            st = nnpops__fail(NNPOPS_ERROR_INTERNAL,
                              "%s: the %s potential set interaction range %g below its cutoff %g",
                              m->path, m->type, m->interaction_range, m->cutoff);
        }
        if (st == NNPOPS_OK && m->ensemble_size < 1) {
            st = nnpops__fail(NNPOPS_ERROR_INTERNAL, "%s: the %s potential set ensemble size %d",
                              m->path, m->type, (int)m->ensemble_size);
        }
#ifdef NNPOPS_HAVE_CUDA
        if (st == NNPOPS_OK && m->device == NNPOPS__CUDA) {
            st = nnpops__cuda_model_upload(m);
            if (st != NNPOPS_OK) nnpops__cuda_model_release(m);
        }
#endif
        if (st != NNPOPS_OK && m->impl && m->vt->destroy) m->vt->destroy(m);
    }
    nnpops__weights_free(weights);
    nnpops__cfg_free(cfg);
    if (st != NNPOPS_OK) {
        free(m);
        return st;
    }
    *model = m;
    return NNPOPS_OK;
}

void nnpops_model_destroy(nnpops_model *model) {
    if (!model) return;
#ifdef NNPOPS_HAVE_CUDA
    if (model->device == NNPOPS__CUDA) nnpops__cuda_model_release(model);
#endif
    if (model->vt && model->vt->destroy) model->vt->destroy(model);
    free(model);
}

const char *nnpops_model_name(const nnpops_model *model) { return model ? model->name : ""; }

const char *nnpops_model_type(const nnpops_model *model) { return model ? model->type : ""; }

const char *nnpops_model_path(const nnpops_model *model) { return model ? model->path : ""; }

const char *nnpops_model_device(const nnpops_model *model) {
    return model ? model->device_name : "";
}

nnpops_precision nnpops_model_precision(const nnpops_model *model) {
    return model ? model->precision : NNPOPS_FLOAT32;
}

int32_t nnpops_model_num_species(const nnpops_model *model) {
    return model ? model->n_species : 0;
}

int32_t nnpops_model_species(const nnpops_model *model, int32_t i) {
    if (!model || i < 0 || i >= model->n_species) return -1;
    return model->species_z[i];
}

int32_t nnpops_model_ensemble_size(const nnpops_model *model) {
    return model ? model->ensemble_size : 0;
}

double nnpops_model_cutoff(const nnpops_model *model) { return model ? model->cutoff : 0.0; }

double nnpops_model_interaction_range(const nnpops_model *model) {
    return model ? model->interaction_range : 0.0;
}

int32_t nnpops_model_uses_charge(const nnpops_model *model) {
    return model ? model->uses_charge : 0;
}
