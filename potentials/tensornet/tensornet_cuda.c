/*
 * tensornet_cuda.c - the GPU hooks of the TensorNet potential (nnpops__tensornet_vt): the model's
 * tables copied to the device at load (nnpops__tn_opmodel_fill: the weights in the compute
 * precision, the embedding's pair terms per species, the self edge's terms), and the step: the
 * ops of tn_ops.h composed by nnpops__tn_step over the step's center lists, every atom a center.
 *
 * One member: an ensemble file (ensemble_size > 1) is refused at load on "cuda".
 *
 * The lists: every atom a center, ghosts too (tn_lists in tensornet.c asks for ghost centers), so
 * the lists are symmetric and a ghost's features feed the local atoms' energies through the
 * layers.  The work space holds every intermediate of the step (nnpops__tn_step_work_bytes, from
 * the atom count and the lists' capacity).  Each entry's gradient and each local atom's energy
 * are written by the step; ghosts' energies stay zero.
 *
 * Per context (vt->cuda_prepare): a side stream with a cuBLAS handle and work space of its own,
 * and the fork and join events, on which the step runs the layers' edge networks beside the
 * per-atom ops (nnpops__tn_step), made by the first step that takes them.
 */
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "potentials/tensornet/tensornet.h"
#include "potentials/tensornet/tn_ops.h"

/* model->device_data: the bound tables (host struct, device arrays). */
typedef struct tn_dev {
    int f32;
    nnpops__tn_opmodel_f32 m32;
    nnpops__tn_opmodel_f64 m64;
    void *arena;    /* device: the tables (REAL) */
    int32_t *zbl_z; /* device: ZBL atomic number per species, or NULL */
} tn_dev;

static nnpops_status tn_cuda_alloc(void **p, size_t bytes, const nnpops_model *model,
                                   const char *what) {
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: cudaMalloc of the TensorNet %s on %s: %s", __FILE__, __LINE__,
                            what, model->device_name, cudaGetErrorString(e));
    }
    return NNPOPS_OK;
}

void nnpops__tn_release_device(nnpops_model *model) {
    tn_dev *d = model->device_data;
    if (!d) return;
    if (d->arena) cudaFree(d->arena);
    if (d->zbl_z) cudaFree(d->zbl_z);
    free(d);
    model->device_data = NULL;
}

nnpops_status nnpops__tn_upload(nnpops_model *model) {
    nnpops__tn_parts parts;
    nnpops__tn_parts_of(model, &parts);
    const nnpops__tn_shape *s = parts.shape;
    /* the GPU step evaluates one set of weights: an ensemble file would silently give member 0 */
    if (parts.n_members > 1)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s': a TensorNet ensemble (%d members) has no GPU path; "
                            "load it on the CPU, or each member's own file on cuda",
                            model->name, (int)parts.n_members);
    if (s->L > NNPOPS__TN_OPS_MAX_LAYERS || s->n_out > 16)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s': TensorNet on the GPU takes at most %d layers and 16 "
                            "readout layers (it has %d and %d)",
                            model->name, NNPOPS__TN_OPS_MAX_LAYERS, (int)s->L, (int)s->n_out);
    /* every species of the model must be in the tables the GPU step reads (the CPU step finds
     * an atom outside them per step; the GPU step cannot, so the load refuses such a model) */
    int32_t zbl_z[NNPOPS__MAX_MODEL_SPECIES];
    for (int k = 0; k < model->n_species; k++) {
        const int32_t z = model->species_z[k];
        const int bad_emb = z < 0 || z >= s->max_z;
        const int bad_ref = parts.w64->atomref && z >= s->atomref_len;
        const int bad_zbl = parts.zbl && (z < 0 || z >= parts.zbl->map_len);
        if (bad_emb || bad_ref || bad_zbl)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                                "model '%s': element Z = %d is outside its %s table: the GPU "
                                "path needs every listed element in every table",
                                model->name, (int)z,
                                bad_emb ? "embedding" : bad_ref ? "Atomref" : "ZBL");
        zbl_z[k] = parts.zbl ? parts.zbl->atomic_number[z] : 0;
    }
    tn_dev *d = calloc(1, sizeof *d);
    if (!d)
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for TensorNet's GPU tables");
    d->f32 = model->precision == NNPOPS_FLOAT32;
    nnpops__tn_oplayout *lay = malloc(sizeof *lay);
    if (!lay) {
        free(d);
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for TensorNet's GPU tables");
    }
    const size_t real = d->f32 ? sizeof(float) : sizeof(double);
    if (d->f32)
        nnpops__tn_opmodel_fill_f32(s, parts.w32, model->n_species, model->species_z, lay, NULL);
    else
        nnpops__tn_opmodel_fill_f64(s, parts.w64, model->n_species, model->species_z, lay, NULL);
    void *host = malloc(real * (lay->total ? lay->total : 1));
    nnpops_status st = NNPOPS_OK;
    if (!host) {
        st = nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory for TensorNet's GPU tables");
        goto out;
    }
    if (d->f32)
        nnpops__tn_opmodel_fill_f32(s, parts.w32, model->n_species, model->species_z, lay, host);
    else
        nnpops__tn_opmodel_fill_f64(s, parts.w64, model->n_species, model->species_z, lay, host);
    if ((st = tn_cuda_alloc(&d->arena, real * lay->total, model, "tables")) != NNPOPS_OK)
        goto out;
    cudaError_t e = cudaMemcpy(d->arena, host, real * lay->total, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && parts.zbl) {
        if ((st = tn_cuda_alloc((void **)&d->zbl_z, sizeof(int32_t) * model->n_species, model,
                                "ZBL table")) != NNPOPS_OK)
            goto out;
        e = cudaMemcpy(d->zbl_z, zbl_z, sizeof(int32_t) * model->n_species,
                       cudaMemcpyHostToDevice);
    }
    if (e != cudaSuccess) {
        st = nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: copying the TensorNet tables to %s: %s",
                          __FILE__, __LINE__, model->device_name, cudaGetErrorString(e));
        goto out;
    }
    const double ell = model->length_to_A;
    if (d->f32)
        nnpops__tn_opmodel_bind_f32(s, lay, d->arena, ((const float *)host)[lay->self_fc],
                                    parts.mean, parts.zbl, d->zbl_z, ell, &d->m32);
    else
        nnpops__tn_opmodel_bind_f64(s, lay, d->arena, ((const double *)host)[lay->self_fc],
                                    parts.mean, parts.zbl, d->zbl_z, ell, &d->m64);
out:
    free(host);
    free(lay);
    model->device_data = d;
    if (st != NNPOPS_OK) nnpops__tn_release_device(model);
    return st;
}

/* The side stream's cuBLAS work space (so that cuBLAS never allocates while a stream captures):
 * the side stream's products are the edge networks of systems whose pre-activations fit the
 * step's budget for them (ts_plan's sep), whose split-K sums need far less than this. */
#define TN_SIDE_BLAS_WORK_BYTES ((size_t)4 << 20)

/* A context's state (vt->cuda_prepare): the side stream, its handle and work space, the events
 * (all NULL until a step takes them) */
typedef struct tn_state {
    cudaStream_t side;
    cublasHandle_t blas;
    void *blas_work;
    cudaEvent_t fork, join;
} tn_state;

/* frees what tn_make_side made (never fails) */
static void tn_free_side(tn_state *S) {
    if (S->side) cudaStreamSynchronize(S->side);
    if (S->blas) cublasDestroy(S->blas);
    if (S->side) cudaStreamDestroy(S->side);
    if (S->fork) cudaEventDestroy(S->fork);
    if (S->join) cudaEventDestroy(S->join);
    if (S->blas_work) cudaFree(S->blas_work);
    memset(S, 0, sizeof *S);
}

void nnpops__tn_cuda_release_state(void *state) {
    tn_state *S = state;
    if (!S) return;
    tn_free_side(S);
    free(S);
}

/* The side stream, its handle and work space, and the events, made the first time a step of the
 * context would take them (a system small enough for the plan's sep): a context of large
 * systems only never holds them. */
static nnpops_status tn_make_side(const nnpops_model *model, tn_state *S) {
    cudaError_t e = cudaMalloc(&S->blas_work, TN_SIDE_BLAS_WORK_BYTES);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&S->side, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&S->fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&S->join, cudaEventDisableTiming);
    cublasStatus_t b = CUBLAS_STATUS_SUCCESS;
    /* plain FP32 / FP64 arithmetic as the context's handle; the stream set before the work
     * space (setting a stream resets a handle's work space) */
    if (e == cudaSuccess) b = cublasCreate(&S->blas);
    if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS)
        b = cublasSetMathMode(S->blas, CUBLAS_DEFAULT_MATH);
    if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS) b = cublasSetStream(S->blas, S->side);
    if (e == cudaSuccess && b == CUBLAS_STATUS_SUCCESS)
        b = cublasSetWorkspace(S->blas, S->blas_work, TN_SIDE_BLAS_WORK_BYTES);
    if (e != cudaSuccess || b != CUBLAS_STATUS_SUCCESS) {
        (void)cudaGetLastError();
        tn_free_side(S);
        if (b != CUBLAS_STATUS_SUCCESS)
            return nnpops__fail(NNPOPS_ERROR_CUDA,
                                "%s:%d: cuBLAS handle of the TensorNet side stream: %s",
                                __FILE__, __LINE__, cublasGetStatusString(b));
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: the TensorNet side stream on %s: %s", __FILE__, __LINE__,
                            model->device_name, cudaGetErrorString(e));
    }
    return NNPOPS_OK;
}

nnpops_status nnpops__tn_cuda_prepare(const nnpops_model *model, nnpops__dstep *step,
                                      void **state) {
    tn_state *S = *state;
    if (!S) {
        S = calloc(1, sizeof *S);
        if (!S) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (TensorNet state)");
        *state = S;
    }
    step->pot_state = S;
    const tn_dev *d = model->device_data;
    const int side =
        d->f32 ? nnpops__tn_step_takes_side_f32(&d->m32, step->n_atoms, step->n_systems,
                                                step->capacity)
               : nnpops__tn_step_takes_side_f64(&d->m64, step->n_atoms, step->n_systems,
                                                step->capacity);
    if (side && !S->side) NNPOPS__TRY(tn_make_side(model, S));
    return NNPOPS_OK;
}

size_t nnpops__tn_cuda_work_bytes(const nnpops_model *model, const nnpops__dstep *step) {
    const tn_dev *d = model->device_data;
    return d->f32 ? nnpops__tn_step_work_bytes_f32(&d->m32, step->n_atoms, step->n_systems,
                                                   step->capacity)
                  : nnpops__tn_step_work_bytes_f64(&d->m64, step->n_atoms, step->n_systems,
                                                   step->capacity);
}

nnpops_status nnpops__tn_compute_cuda(const nnpops_model *model, const nnpops__dstep *step) {
    const tn_dev *d = model->device_data;
    if (step->member > 0)
        return nnpops__fail(NNPOPS_ERROR_INVALID_ARGUMENT,
                            "ensemble_member %d is out of range (a tensornet model has one "
                            "member, 0)",
                            (int)step->member);
    if (step->n_centers != step->n_atoms || !step->lists.ghost_centers)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "tensornet on the GPU: the step has no center lists of every atom");
    nnpops__tn_step_args a;
    memset(&a, 0, sizeof a);
    a.n_atoms = step->n_atoms;
    a.n_local = step->n_local;
    a.n_systems = step->n_systems;
    a.capacity = step->capacity;
    a.start = step->start;
    a.pairs = step->pairs;
    a.vec = step->vec;
    a.species = step->species;
    a.batch = step->batch;
    a.charges = step->charges;
    a.need_grad = step->need_grad;
    a.atom_energy = step->atom_energy;
    a.pair_grad = step->need_grad ? step->pair_grad : NULL;
    a.work = step->work;
    a.blas = step->blas;
    a.stream = step->stream;
    const tn_state *S = step->pot_state;
    if (S && S->side) {
        a.side_stream = S->side, a.side_blas = S->blas;
        a.fork_event = S->fork, a.join_event = S->join;
    }
    NNPOPS__TRY(d->f32 ? nnpops__tn_step_f32(&d->m32, &a, 1) : nnpops__tn_step_f64(&d->m64, &a, 1));
    /* one member: its energies are the atoms' */
    if (step->member_atom_energy)
        NNPOPS__CUDA_CALL(cudaMemcpyAsync(step->member_atom_energy, step->atom_energy,
                                          sizeof(double) * (size_t)step->n_atoms,
                                          cudaMemcpyDeviceToDevice, (cudaStream_t)step->stream));
    return NNPOPS_OK;
}
