/*
 * cuda_arena.c - the context's GPU state (cuda_step.h): the model's device made current around
 * every entry, the stream and its cuBLAS handle, one growing device arena per entry
 * and the pinned staging buffers, and the layout of a step inside the arena (see cuda_step.c for
 * the step itself).  Arena layout (each part 256-byte aligned): [inputs: positions, cells | static
 * inputs: sys_start, species, batch, order, pbc | outputs | member atom
 * energies | device-entry io word | center lists: start, pairs, vectors, pair gradients |
 * neighbor-search work | cuBLAS work space | potential work | deterministic-reduction work].  The
 * arena and the pinned buffers grow by at least 1.5x and never shrink, so a run of same-sized
 * steps allocates nothing after the first.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_step.h"

/* Makes `device` current; *prev receives the caller's. */
nnpops_status nnpops__gpu_enter_device(int device, int *prev) {
    *prev = -1;
    if (cudaGetDevice(prev) != cudaSuccess) {
        (void)cudaGetLastError();
        *prev = -1;
    }
    if (*prev != device) {
        cudaError_t e = cudaSetDevice(device);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return nnpops__fail(NNPOPS_ERROR_NO_DEVICE, "cannot use CUDA device %d: %s", device,
                                cudaGetErrorString(e));
        }
    }
    return NNPOPS_OK;
}

void nnpops__gpu_leave_device(int device, int prev) {
    if (prev >= 0 && prev != device) cudaSetDevice(prev);
}

/* ---- model glue ---------------------------------------------------------------------------- */

nnpops_status nnpops__cuda_model_upload(nnpops_model *m) {
    if (!m->vt->upload || !m->vt->compute_cuda)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "model '%s' of type %s has no GPU implementation; load it on \"cpu\"",
                            m->name, m->type);
    int prev;
    TRY(nnpops__gpu_enter_device(m->device_index, &prev));
    nnpops_status st = m->vt->upload(m);
    nnpops__gpu_leave_device(m->device_index, prev);
    return st;
}

void nnpops__cuda_model_release(nnpops_model *m) {
    if (!m->device_data || !m->vt->release_device) return;
    int prev;
    if (nnpops__gpu_enter_device(m->device_index, &prev) != NNPOPS_OK) return;
    m->vt->release_device(m);
    nnpops__gpu_leave_device(m->device_index, prev);
}

/* ---- context state ------------------------------------------------------------------------- */

static void dev_free(dev_state *v) {
    /* the device entry's work may still run on a caller's stream (cudaFree waits for the device
     * too, but say so) */
    if (v->have_done) cudaEventSynchronize(v->done);
    if (v->dev || v->n_retired || v->persist) cudaDeviceSynchronize();
    if (v->dev) cudaFree(v->dev);
    for (int k = 0; k < v->n_retired; k++) cudaFree(v->retired[k]);
    if (v->persist) cudaFree(v->persist);
    if (v->pin) cudaFreeHost(v->pin);
    if (v->done) cudaEventDestroy(v->done);
    nnpops__buf_free(&v->stage);
    free(v->pbc);
    memset(v, 0, sizeof *v);
}

static void ctx_free(nnpops__cuda_ctx *c) {
    if (c->stream) cudaStreamSynchronize(c->stream);
    dev_free(&c->dv);
    if (c->pot_state && c->pot_release) c->pot_release(c->pot_state);
    if (c->graph_exec) cudaGraphExecDestroy(c->graph_exec);
    if (c->dev) cudaFree(c->dev);
    if (c->pin_in) cudaFreeHost(c->pin_in);
    if (c->pin_out) cudaFreeHost(c->pin_out);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

void nnpops__cuda_ctx_destroy(nnpops__cuda_ctx *c) {
    if (!c) return;
    int prev;
    if (nnpops__gpu_enter_device(c->device, &prev) != NNPOPS_OK) {
        free(c);
        return;
    }
    const int device = c->device;
    ctx_free(c);
    nnpops__gpu_leave_device(device, prev);
    (void)cudaGetLastError();
}

/* A cuBLAS handle bound to `stream`: plain FP32 / FP64 arithmetic (no TF32; the compute type of
 * every GEMM says so too), and the stream set now, since setting a stream resets the handle's
 * work space, which the step binds to the arena before it runs (set_workspace;
 * nnpops__gemm_cuda sets the stream only when it changes).  *h is NULL on failure. */
static nnpops_status new_blas(cublasHandle_t *h, cudaStream_t stream) {
    cublasStatus_t b = cublasCreate(h);
    if (b == CUBLAS_STATUS_SUCCESS) b = cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH);
    if (b == CUBLAS_STATUS_SUCCESS) b = cublasSetStream(*h, stream);
    if (b == CUBLAS_STATUS_SUCCESS) return NNPOPS_OK;
    if (*h) cublasDestroy(*h);
    *h = NULL;
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: creating a cuBLAS handle: %s", __FILE__,
                        __LINE__, cublasGetStatusString(b));
}

/* The cuBLAS work space of the context's handle in the arena at `work` (CUBLAS_WORK_BYTES), so
 * that no GEMM of a step (nor of a captured graph) uses cuBLAS's own pool. */
nnpops_status nnpops__gpu_set_workspace(nnpops__cuda_ctx *c, char *work) {
    const cublasStatus_t b = cublasSetWorkspace(c->blas, work, CUBLAS_WORK_BYTES);
    if (b == CUBLAS_STATUS_SUCCESS) return NNPOPS_OK;
    return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cublasSetWorkspace: %s", __FILE__, __LINE__,
                        cublasGetStatusString(b));
}

nnpops_status nnpops__gpu_ctx_create(int device, nnpops__cuda_ctx **out) {
    nnpops__cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY, "out of memory (GPU context state)");
    c->device = device;
    cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        c->stream = NULL;
        ctx_free(c);
        return nnpops__fail(NNPOPS_ERROR_CUDA, "%s:%d: cudaStreamCreateWithFlags: %s", __FILE__,
                            __LINE__, cudaGetErrorString(e));
    }
    const nnpops_status st = new_blas(&c->blas, c->stream);
    if (st != NNPOPS_OK) {
        ctx_free(c);
        return st;
    }
    *out = c;
    return NNPOPS_OK;
}

/* Grows a device arena to at least `bytes` (1.5x, whole MiB); `stream` is synchronized first (the
 * arena's last user). */
nnpops_status nnpops__gpu_grow_arena(void **p, size_t *have, size_t bytes, cudaStream_t stream,
                                     int device, const char *what) {
    if (bytes <= *have) return NNPOPS_OK;
    size_t want = *have + *have / 2;
    if (want < bytes) want = bytes;
    want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    NNPOPS__CUDA_CALL(cudaStreamSynchronize(stream));
    if (*p) cudaFree(*p);
    *p = NULL;
    *have = 0;
    cudaError_t e = cudaMalloc(p, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return nnpops__fail(e == cudaErrorMemoryAllocation ? NNPOPS_ERROR_OUT_OF_MEMORY
                                                           : NNPOPS_ERROR_CUDA,
                            "%s:%d: cudaMalloc of %zu bytes (%s) on device %d: %s", __FILE__,
                            __LINE__, want, what, device, cudaGetErrorString(e));
    }
    *have = want;
    return NNPOPS_OK;
}

/* The device pointer of pinned host memory h (mapped under unified addressing), or NULL. */
void *nnpops__gpu_pinned_device_pointer(void *h) {
    void *dp = NULL;
    if (cudaHostGetDevicePointer(&dp, h, 0) == cudaSuccess) return dp;
    (void)cudaGetLastError();
    return NULL;
}

/* Grows the pinned buffer *p to at least `bytes` (1.5x at least); *dp receives its device pointer
 * (pinned_device_pointer). */
nnpops_status nnpops__gpu_grow_pinned(void **p, void **dp, size_t *have, size_t bytes,
                                      const char *what) {
    if (bytes <= *have) return NNPOPS_OK;
    size_t want = *have + *have / 2;
    if (want < bytes) want = bytes;
    if (*p) cudaFreeHost(*p);
    *p = NULL;
    *dp = NULL;
    *have = 0;
    cudaError_t e = cudaMallocHost(p, want);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return nnpops__fail(NNPOPS_ERROR_OUT_OF_MEMORY,
                            "%s:%d: cudaMallocHost of %zu bytes (%s): %s", __FILE__, __LINE__, want,
                            what, cudaGetErrorString(e));
    }
    *have = want;
    *dp = nnpops__gpu_pinned_device_pointer(*p);
    return NNPOPS_OK;
}

void nnpops__gpu_layout_of(const step_sizes *z, size_t pot_work, step_layout *L) {
    size_t cur = 0;
#define TAKE(field, bytes)                                                                        \
    do {                                                                                          \
        L->field = cur;                                                                           \
        cur += al((size_t)(bytes) > 0 ? (size_t)(bytes) : 1);                                     \
    } while (0)
    TAKE(pos, sizeof(double) * 3 * z->n);
    TAKE(cells, sizeof(double) * 9 * z->ns);
    TAKE(sys_start, sizeof(int64_t) * (z->ns + 1));
    TAKE(species, sizeof(int32_t) * z->n);
    TAKE(batch, sizeof(int32_t) * z->n);
    TAKE(order, sizeof(int32_t) * z->n);
    TAKE(pbc, 3 * z->ns);
    TAKE(charges, sizeof(double) * z->ns);
    L->in_bytes = cur;
    L->out0 = cur;
    TAKE(status, sizeof(nnpops__dev_status));
    TAKE(energies, sizeof(double) * z->ns);
    TAKE(member_e, z->want_member ? sizeof(double) * z->ns * z->ens : 0);
    TAKE(virials, z->want_virials ? sizeof(double) * 9 * z->ns : 0);
    TAKE(forces, z->want_forces ? sizeof(double) * 3 * z->n : 0);
    TAKE(atom_vir, z->want_atom_vir ? sizeof(double) * 9 * z->n : 0);
    L->d2h_end = cur; /* atom energies come back only when wanted */
    TAKE(atom_e, sizeof(double) * z->n);
    if (z->want_atom_e) L->d2h_end = cur;
    TAKE(member_ae, z->want_member ? sizeof(double) * z->n * z->ens : 0);
    if (z->dev_io)
        TAKE(io, sizeof(nnpops__io_status));
    else
        L->io = cur; /* the host entry has none */
    TAKE(ticket, sizeof(unsigned));
    L->zero_end = cur;
    TAKE(start, sizeof(int64_t) * (z->n_centers + 1));
    TAKE(pairs, sizeof(int32_t) * 2 * z->capacity);
    TAKE(vec, sizeof(double) * 3 * z->capacity);
    TAKE(grad, z->need_grad ? sizeof(double) * 3 * z->capacity : 0);
    L->nbr_work_bytes = nnpops__nbr_cuda_work_bytes(z->n, z->ns, z->n_centers, &z->plan);
    TAKE(nbr_work, L->nbr_work_bytes);
    TAKE(blas_work, CUBLAS_WORK_BYTES); /* set_workspace */
    L->pot_work_bytes = pot_work;
    TAKE(pot_work, pot_work);
    L->det_work_bytes = z->det ? nnpops__center_reduce_det_work_bytes(z->n, z->capacity) : 0;
    TAKE(det_work, L->det_work_bytes);
    L->total = cur;
#undef TAKE
}

/* The layout of a step with the potential's work space for it (vt->cuda_work_bytes). */
void nnpops__gpu_step_layout_of(const nnpops_model *m, const step_sizes *z, const nnpops__dstep *ds,
                                step_layout *L) {
    const size_t pot = m->vt->cuda_work_bytes ? m->vt->cuda_work_bytes(m, ds) : 0;
    nnpops__gpu_layout_of(z, pot, L);
}
