/*
 * reduce.cu - per-system reductions and the force scatter on the GPU: twins of kernels/cpu/reduce.c.
 *
 * Pair reduction (force scatter and virials): a thread per pair p = (i, j) with vector r_p and
 * gradient g_p = dE/dr_p (all double):
 *     forces[i] += g_p, forces[j] -= g_p                      ([n_atoms][3])
 *     virials[batch[i]] -= r_p (x) g_p                        ([n_systems][9], row-major)
 *     atomic_virials[i], [j] each -= 0.5 r_p (x) g_p          ([n_atoms][9])
 * Consecutive pairs usually share their first atom (center lists: a center's entries are
 * contiguous) and their system, so the i-side terms and the virials are first summed over runs of
 * equal keys inside a warp (warp_runs in common.cuh) and the first lane of each run issues the
 * atomicAdd; the j-side terms are one atomicAdd per pair.
 * Energy reduction: energies[s][w] += atom_energy[i][w] over the atoms i of system s, a thread per
 * atom with the same run summation over batch indices.  Sums are double; their order depends on
 * the atomics, so results match the CPU to rounding, not bitwise.
 * The GPU step runs its pair reduction and its energy reductions as one launch (a block range per
 * part, nnpops__reduce_cuda), and may hand it the host entry's output staging: the block that
 * finishes last (a ticket) copies the output block into the pinned buffer, so that the step ends
 * one kernel earlier.
 * Deterministic reductions (option deterministic, nnpops__center_reduce_det_cuda, end of the file):
 * no float atomics; forces and per-atom virials are gathered per atom (own entries, then a reverse
 * index of the entries whose neighbor is the atom, built by a stable radix sort of the entries by
 * neighbor), energies and virials per system by a block per system with a fixed-order tree.
 */
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

const int RED_TB = 256; /* threads per block of the reductions */

/* The pair reduction of pair p (all threads of the warp call it; p past the count adds nothing). */
__device__ __forceinline__ void pair_body(const nnpops__reduce_args &a, int64_t p) {
    int64_t np = a.n_pairs;
    if (a.n_pairs_dev) {
        const int64_t d = *a.n_pairs_dev;
        np = d < np ? d : np;
    }
    const bool valid = p < np;
    int32_t i = -1, j = -1;
    double g[3] = {0, 0, 0}, r[3] = {0, 0, 0};
    if (valid) {
        i = a.pairs[2 * p];
        j = a.pairs[2 * p + 1];
        for (int x = 0; x < 3; x++) {
            g[x] = a.grad[3 * p + x];
            r[x] = a.vec[3 * p + x];
        }
    }
    const warp_runs ri(valid ? (int64_t)i : -1 - (int64_t)(threadIdx.x & 31));
    if (a.forces) {
        for (int x = 0; x < 3; x++) {
            const double s = ri.sum(g[x]);
            if (valid && ri.head) atomic_add_f64(a.forces + 3 * (int64_t)i + x, s);
            if (valid) atomic_add_f64(a.forces + 3 * (int64_t)j + x, -g[x]);
        }
    }
    if (a.virials || a.atomic_virials) {
        double w[9];
        for (int u = 0; u < 3; u++)
            for (int v = 0; v < 3; v++) w[3 * u + v] = -r[u] * g[v];
        if (a.virials) {
            const int64_t key = valid ? (int64_t)a.batch[i] : -1 - (int64_t)(threadIdx.x & 31);
            const warp_runs rs(key);
            for (int k = 0; k < 9; k++) {
                const double s = rs.sum(w[k]);
                if (valid && rs.head) atomic_add_f64(a.virials + 9 * key + k, s);
            }
        }
        if (a.atomic_virials) {
            for (int k = 0; k < 9; k++) {
                const double s = ri.sum(0.5 * w[k]);
                if (valid && ri.head) atomic_add_f64(a.atomic_virials + 9 * (int64_t)i + k, s);
                if (valid) atomic_add_f64(a.atomic_virials + 9 * (int64_t)j + k, 0.5 * w[k]);
            }
        }
    }
}

/* The energy reduction of atom i (out[s][w] += e[i][w], w < width, s = batch[i]). */
__device__ __forceinline__ void energy_body(const nnpops__reduce_args &a, const double *e,
                                            int64_t width, double *out, int64_t i) {
    const bool valid = i < a.n_atoms;
    const int64_t key = valid ? (int64_t)a.batch[i] : -1 - (int64_t)(threadIdx.x & 31);
    const warp_runs rs(key);
    for (int64_t w = 0; w < width; w++) {
        const double s = rs.sum(valid ? e[i * width + w] : 0.0);
        if (valid && rs.head) atomic_add_f64(out + key * width + w, s);
    }
}

/* Blocks of each part of a launch: pairs, atom energies, member energies. */
struct red_split {
    int64_t pair, energy, member;
};
red_split split_of(const nnpops__reduce_args &a) {
    red_split b = {0, 0, 0};
    const int64_t atom_blocks = (a.n_atoms + RED_TB - 1) / RED_TB;
    if (a.n_pairs > 0 && a.grad && (a.forces || a.virials || a.atomic_virials))
        b.pair = (a.n_pairs + RED_TB - 1) / RED_TB;
    if (a.atom_energy && a.energies) b.energy = atom_blocks;
    if (a.member_atom_energy && a.member_energies && a.ensemble > 0) b.member = atom_blocks;
    return b;
}

/* A block per RED_TB pairs, then per RED_TB atoms of each energy; with a staging tail, the block
 * that finishes last copies the staged bytes: every thread fences its atomics, thread 0 takes a
 * ticket after the block's barrier, and the block holding the last ticket fences again and reads
 * through L2 (ld.global.cg), so it sees every other block's sums. */
__global__ void reduce_kernel(const nnpops__reduce_args a, const red_split n) {
    pdl_trigger();
    pdl_wait(); /* everything it reads comes from the kernels before */
    int64_t b = blockIdx.x;
    const int64_t t = threadIdx.x;
    if (b < n.pair) {
        pair_body(a, b * RED_TB + t);
    } else if ((b -= n.pair) < n.energy) {
        energy_body(a, a.atom_energy, 1, a.energies, b * RED_TB + t);
    } else if ((b -= n.energy) < n.member) {
        energy_body(a, a.member_atom_energy, a.ensemble, a.member_energies, b * RED_TB + t);
    }
    if (!a.stage_bytes) return;
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (t == 0) last = atomicAdd(a.ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    copy_bytes<true>((char *)a.stage_dst, (const char *)a.stage_src, a.stage_bytes, (size_t)t,
                     RED_TB);
}

nnpops_status reduce_launch(const nnpops__reduce_args &a, void *stream) {
    const red_split n = split_of(a);
    const int64_t blocks = n.pair + n.energy + n.member;
    if (blocks == 0 && !a.stage_bytes) return NNPOPS_OK;
    if (a.stage_bytes && !a.ticket)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL, "reductions: a staging tail without a ticket");
    /* programmatic launch: its start overlaps the kernel before (it waits for it first) */
    return launch_chain(reduce_kernel, dim3(grid_for(blocks, 1)), dim3(RED_TB), 0,
                        as_stream(stream), "reductions", a, n);
}

/* Zeroes the outputs of a (the overwriting entries). */
nnpops_status zero_outputs(const nnpops__reduce_args &a, void *stream) {
    cudaStream_t st = as_stream(stream);
    const size_t d = sizeof(double);
    if (a.forces) NNPOPS__CUDA_CALL(cudaMemsetAsync(a.forces, 0, d * 3 * (size_t)a.n_atoms, st));
    if (a.virials)
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.virials, 0, d * 9 * (size_t)a.n_systems, st));
    if (a.atomic_virials)
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.atomic_virials, 0, d * 9 * (size_t)a.n_atoms, st));
    if (a.energies)
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.energies, 0, d * (size_t)a.n_systems, st));
    if (a.member_energies)
        NNPOPS__CUDA_CALL(cudaMemsetAsync(a.member_energies, 0,
                                          d * (size_t)(a.n_systems * a.ensemble), st));
    return NNPOPS_OK;
}

nnpops_status energy_reduce(int64_t n_atoms, int64_t n_systems, const int32_t *batch,
                            const double *atom_energy, int64_t width, double *energies,
                            void *stream, bool zero) {
    if (width <= 0) return NNPOPS_OK;
    nnpops__reduce_args a;
    memset(&a, 0, sizeof a);
    a.n_atoms = n_atoms;
    a.n_systems = n_systems;
    a.batch = batch;
    /* width 1 is the energy part, any other the member part (the same body) */
    if (width == 1) {
        a.atom_energy = atom_energy;
        a.energies = energies;
    } else {
        a.member_atom_energy = atom_energy;
        a.member_energies = energies;
        a.ensemble = width;
    }
    if (zero) NNPOPS__TRY(zero_outputs(a, stream));
    return reduce_launch(a, stream);
}

} /* namespace */

extern "C" nnpops_status nnpops__pair_reduce_cuda(int64_t n_atoms, int64_t n_systems,
                                                  const int32_t *batch, int64_t n_pairs,
                                                  const int32_t *pairs, const double *pair_vec,
                                                  const double *pair_grad, double *forces,
                                                  double *virials, double *atomic_virials,
                                                  const int64_t *n_pairs_dev, void *stream) {
    nnpops__reduce_args a;
    memset(&a, 0, sizeof a);
    a.n_atoms = n_atoms;
    a.n_systems = n_systems;
    a.batch = batch;
    a.n_pairs = n_pairs;
    a.n_pairs_dev = n_pairs_dev;
    a.pairs = pairs;
    a.vec = pair_vec;
    a.grad = pair_grad;
    a.forces = forces;
    a.virials = virials;
    a.atomic_virials = atomic_virials;
    NNPOPS__TRY(zero_outputs(a, stream));
    return reduce_launch(a, stream);
}

extern "C" nnpops_status nnpops__energy_reduce_cuda(int64_t n_atoms, int64_t n_systems,
                                                    const int32_t *batch,
                                                    const double *atom_energy, int64_t width,
                                                    double *energies, void *stream) {
    return energy_reduce(n_atoms, n_systems, batch, atom_energy, width, energies, stream, true);
}

extern "C" nnpops_status nnpops__energy_reduce_cuda_acc(int64_t n_atoms, int64_t n_systems,
                                                        const int32_t *batch,
                                                        const double *atom_energy, int64_t width,
                                                        double *energies, void *stream) {
    return energy_reduce(n_atoms, n_systems, batch, atom_energy, width, energies, stream, false);
}

extern "C" nnpops_status nnpops__reduce_cuda(const nnpops__reduce_args *args, void *stream) {
    return reduce_launch(*args, stream);
}

/* ---- deterministic reductions over center lists (option deterministic) ---------------------- *
 * Work space: keys and values of the reverse index before and after a stable radix sort (int32,
 * capacity each), the reverse starts (int64, n_atoms + 1) and the sort's temporary storage. */

namespace {

const int DET_THREADS = 256;

struct det_layout {
    size_t keys_in, keys_out, vals_in, vals_out, rstart, tmp, tmp_bytes, total;
};

det_layout det_layout_of(int64_t n_atoms, int64_t capacity) {
    det_layout L;
    memset(&L, 0, sizeof L);
    size_t cur = 0;
    auto take = [&](size_t bytes) {
        const size_t o = cur;
        cur += align256(bytes ? bytes : 1);
        return o;
    };
    const int cap = capacity > 0 ? (int)capacity : 1;
    L.keys_in = take(sizeof(int32_t) * (size_t)cap);
    L.keys_out = take(sizeof(int32_t) * (size_t)cap);
    L.vals_in = take(sizeof(int32_t) * (size_t)cap);
    L.vals_out = take(sizeof(int32_t) * (size_t)cap);
    L.rstart = take(sizeof(int64_t) * (size_t)(n_atoms + 1));
    size_t t = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, t, (const int32_t *)nullptr, (int32_t *)nullptr,
                                    (const int32_t *)nullptr, (int32_t *)nullptr, cap, 0, 32);
    L.tmp_bytes = t;
    L.tmp = take(t);
    L.total = cur;
    return L;
}

__device__ __forceinline__ int64_t valid_entries(const int64_t *start, int64_t n_local,
                                                 int64_t capacity) {
    const int64_t n = start[n_local];
    return n < capacity ? n : capacity;
}

__global__ void det_keys_kernel(int64_t n_atoms, int64_t n_local, const int64_t *start,
                                int64_t capacity, const int32_t *pairs, int32_t *keys,
                                int32_t *vals) {
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= capacity) return;
    const int64_t ne = valid_entries(start, n_local, capacity);
    keys[e] = e < ne ? pairs[2 * e + 1] : (int32_t)n_atoms;
    vals[e] = (int32_t)e;
}

/* rstart[a] = first sorted position whose key is >= a (keys sorted, the sentinel key n_atoms). */
__global__ void det_rstart_kernel(int64_t n_atoms, int64_t capacity, const int32_t *keys,
                                  int64_t *rstart) {
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= capacity) return;
    const int64_t key = keys[k];
    const int64_t prev = k > 0 ? (int64_t)keys[k - 1] : -1;
    for (int64_t a = prev + 1; a <= key && a <= n_atoms; a++) rstart[a] = k;
    if (k == capacity - 1)
        for (int64_t a = key + 1; a <= n_atoms; a++) rstart[a] = capacity;
}

__global__ void det_atoms_kernel(int64_t n_atoms, int64_t n_local, const int64_t *start,
                                 int64_t capacity, const double *vec, const double *grad,
                                 const int64_t *rstart, const int32_t *rev, double *forces,
                                 double *atomic_virials) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_atoms) return;
    double f[3] = {0, 0, 0}, w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (i < n_local) {
        const int64_t ne = valid_entries(start, n_local, capacity);
        int64_t e1 = start[i + 1];
        if (e1 > ne) e1 = ne;
        for (int64_t e = start[i]; e < e1; e++) {
            for (int x = 0; x < 3; x++) f[x] += grad[3 * e + x];
            if (atomic_virials)
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++)
                        w[3 * a + b] -= 0.5 * vec[3 * e + a] * grad[3 * e + b];
        }
    }
    if (rstart) {
        for (int64_t k = rstart[i]; k < rstart[i + 1]; k++) {
            const int64_t e = rev[k];
            for (int x = 0; x < 3; x++) f[x] -= grad[3 * e + x];
            if (atomic_virials)
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++)
                        w[3 * a + b] -= 0.5 * vec[3 * e + a] * grad[3 * e + b];
        }
    }
    if (forces)
        for (int x = 0; x < 3; x++) forces[3 * i + x] = f[x];
    if (atomic_virials)
        for (int k = 0; k < 9; k++) atomic_virials[9 * i + k] = w[k];
}

/* Fixed-order block sum (DET_THREADS threads); the result is valid in thread 0. */
__device__ double det_block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = DET_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    const double r = sh[0];
    __syncthreads();
    return r;
}

__global__ void det_systems_kernel(int64_t n_local, const int64_t *sys_start, const int32_t *order,
                                   const int64_t *start, int64_t capacity, const double *vec,
                                   const double *grad, const double *atom_energy,
                                   const double *member_atom_energy, int64_t ensemble,
                                   double *virials, double *energies, double *member_energies) {
    __shared__ double sh[DET_THREADS];
    const int64_t s = blockIdx.x;
    const int64_t a0 = sys_start[s], a1 = sys_start[s + 1];
    if (virials) {
        double w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
        const int64_t ne = valid_entries(start, n_local, capacity);
        for (int64_t k = a0 + threadIdx.x; k < a1; k += DET_THREADS) {
            const int64_t i = order[k];
            if (i >= n_local) continue;
            int64_t e1 = start[i + 1];
            if (e1 > ne) e1 = ne;
            for (int64_t e = start[i]; e < e1; e++)
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++) w[3 * a + b] -= vec[3 * e + a] * grad[3 * e + b];
        }
        for (int q = 0; q < 9; q++) {
            const double t = det_block_sum(w[q], sh);
            if (threadIdx.x == 0) virials[9 * s + q] = t;
        }
    }
    if (energies) {
        double v = 0;
        for (int64_t k = a0 + threadIdx.x; k < a1; k += DET_THREADS) v += atom_energy[order[k]];
        const double t = det_block_sum(v, sh);
        if (threadIdx.x == 0) energies[s] = t;
    }
    if (member_energies) {
        for (int64_t m = 0; m < ensemble; m++) {
            double v = 0;
            for (int64_t k = a0 + threadIdx.x; k < a1; k += DET_THREADS)
                v += member_atom_energy[(int64_t)order[k] * ensemble + m];
            const double t = det_block_sum(v, sh);
            if (threadIdx.x == 0) member_energies[s * ensemble + m] = t;
        }
    }
}

} /* namespace */

extern "C" size_t nnpops__center_reduce_det_work_bytes(int64_t n_atoms, int64_t capacity) {
    return det_layout_of(n_atoms, capacity).total;
}

extern "C" nnpops_status nnpops__center_reduce_det_cuda(
    int64_t n_atoms, int64_t n_local, int64_t n_systems, const int64_t *sys_start,
    const int32_t *order, const int64_t *start, int64_t capacity, const int32_t *pairs,
    const double *vec, const double *grad, const double *atom_energy,
    const double *member_atom_energy, int64_t ensemble, double *forces, double *virials,
    double *atomic_virials, double *energies, double *member_energies, void *work,
    size_t work_bytes, void *stream) {
    cudaStream_t st = as_stream(stream);
    if (capacity > INT32_MAX - 1 || n_atoms > INT32_MAX - 1)
        return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED,
                            "deterministic reduction: %lld entries is too many",
                            (long long)capacity);
    const det_layout L = det_layout_of(n_atoms, capacity);
    if (work_bytes < L.total)
        return nnpops__fail(NNPOPS_ERROR_INTERNAL,
                            "deterministic reduction: work space of %zu bytes, %zu needed",
                            work_bytes, L.total);
    char *w = (char *)work;
    const bool have_grad = grad && n_local > 0 && capacity > 0;
    if (n_atoms > 0 && (forces || atomic_virials)) {
        int64_t *rstart = nullptr;
        const int32_t *rev = nullptr;
        if (have_grad) {
            int32_t *kin = (int32_t *)(w + L.keys_in), *kout = (int32_t *)(w + L.keys_out);
            int32_t *vin = (int32_t *)(w + L.vals_in), *vout = (int32_t *)(w + L.vals_out);
            rstart = (int64_t *)(w + L.rstart);
            det_keys_kernel<<<grid_for(capacity, DET_THREADS), DET_THREADS, 0, st>>>(
                n_atoms, n_local, start, capacity, pairs, kin, vin);
            NNPOPS__LAUNCH_CHECK("deterministic reduction (keys)");
            int end_bit = 1;
            while (end_bit < 32 && ((int64_t)1 << end_bit) <= n_atoms) end_bit++;
            size_t tb = L.tmp_bytes;
            NNPOPS__CUDA_CALL(cub::DeviceRadixSort::SortPairs(w + L.tmp, tb, kin, kout, vin, vout,
                                                              (int)capacity, 0, end_bit, st));
            det_rstart_kernel<<<grid_for(capacity, DET_THREADS), DET_THREADS, 0, st>>>(
                n_atoms, capacity, kout, rstart);
            NNPOPS__LAUNCH_CHECK("deterministic reduction (reverse starts)");
            rev = vout;
        }
        if (have_grad || forces || atomic_virials) {
            det_atoms_kernel<<<grid_for(n_atoms, DET_THREADS), DET_THREADS, 0, st>>>(
                n_atoms, have_grad ? n_local : 0, start, capacity, vec, grad, rstart, rev, forces,
                atomic_virials);
            NNPOPS__LAUNCH_CHECK("deterministic reduction (atoms)");
        }
    }
    if (n_systems > 0 && ((virials && have_grad) || energies || member_energies)) {
        if (n_systems > 0x7fffffff)
            return nnpops__fail(NNPOPS_ERROR_UNSUPPORTED, "deterministic reduction: %lld systems",
                                (long long)n_systems);
        det_systems_kernel<<<(unsigned)n_systems, DET_THREADS, 0, st>>>(
            n_local, sys_start, order, start, capacity, vec, grad, atom_energy,
            member_atom_energy, ensemble, have_grad ? virials : nullptr, energies,
            member_energies);
        NNPOPS__LAUNCH_CHECK("deterministic reduction (systems)");
    }
    return NNPOPS_OK;
}
