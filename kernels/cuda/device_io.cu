/*
 * device_io.cu - the two kernels of the device-pointer entry (nnpops_compute_device) that touch the
 * caller's arrays: input preparation before the step and output finishing after it (see the
 * "device entry" section of kernels_cuda.h; the entry is core/src/cuda_device.c).
 *
 *   prepare: a thread per atom (positions, species, batch) and per cell entry; thread 0 also
 *            compares the plan generation.  Flags go to the step's io word with atomicOr; the first
 *            offending atom of each kind with atomicMax on a packed key (smallest index wins, so
 *            the report does not depend on thread timing).
 *   finish:  every thread reads the step's flags (the status word of the neighbor search and the
 *            AEV kernels, and the io word) and writes the caller's outputs scaled to its units, or
 *            NaN everywhere when a flag is set; thread 0 of block 0 adds the step to the sticky
 *            record (kernels of one stream run in order, so the record needs no atomics); a step
 *            of a stale plan records only that it was stale.
 * Also the host entry's staging kernel (nnpops__stage_cuda): 16-byte copies and zeroing in
 * grid-stride loops, the tails byte by byte.
 */
#include <math.h>
#include <stdint.h>

#include "common.cuh"

extern "C" {
#include "kernels_cuda.h"
}

using namespace nnpops_cuda;

namespace {

__device__ __forceinline__ unsigned long long io_key(int64_t n, int64_t atom, int32_t value) {
    return ((unsigned long long)(n - atom) << 32) | (unsigned long long)(uint32_t)value;
}

__global__ void io_prepare_kernel(const nnpops__io_prep_args a) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    nnpops__io_status *io = a.io;
    if (t == 0 && a.generation && *a.generation != a.expected_generation)
        atomicOr((unsigned *)&io->flags, NNPOPS__IO_STALE);
    if (t < a.n_atoms) {
        const int64_t i = t;
        bool finite = true;
        for (int k = 0; k < 3; k++) {
            const double x = a.positions[3 * i + k];
            const bool ok = isfinite(x);
            finite = finite && ok;
            a.pos_out[3 * i + k] = ok ? x * a.to_A : 0.0;
        }
        if (!finite) {
            atomicOr((unsigned *)&io->flags, NNPOPS__IO_BAD_POSITION);
            atomicMax(&io->bad_position, io_key(a.n_atoms, i, 0));
        }
        const int32_t z = a.atomic_numbers[i];
        const int32_t s = (z >= 1 && z <= 118) ? a.z_to_species[z] : -1;
        if (s < 0 || s != a.species[i]) {
            atomicOr((unsigned *)&io->flags, NNPOPS__IO_SPECIES);
            atomicMax(&io->bad_species, io_key(a.n_atoms, i, z));
        }
        const int32_t b = a.batch ? a.batch[i] : 0;
        if (b < 0 || (int64_t)b >= a.n_systems) {
            atomicOr((unsigned *)&io->flags, NNPOPS__IO_BATCH_RANGE);
            atomicMax(&io->bad_batch_range, io_key(a.n_atoms, i, b));
        } else if (b != a.plan_batch[i]) {
            atomicOr((unsigned *)&io->flags, NNPOPS__IO_BATCH);
            atomicMax(&io->bad_batch, io_key(a.n_atoms, i, b));
        }
    }
    if (t < 9 * a.n_systems) a.cells_out[t] = a.cells ? a.cells[t] * a.to_A : 0.0;
}

__global__ void io_finish_kernel(const nnpops__io_finish_args a) {
    const nnpops__dev_status *st = a.status;
    const uint32_t sflags = st->flags & ~NNPOPS__ST_GEOM_SET;
    uint32_t iflags = a.io->flags;
    if (a.max_pairs > 0 && st->n_half > a.max_pairs) iflags |= NNPOPS__IO_MAX_NEIGHBORS;
    const bool bad = (sflags | iflags) != 0;
    const double nan = __longlong_as_double(0x7ff8000000000000ll);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a.out_forces)
        for (int64_t k = first; k < 3 * a.n_atoms; k += stride)
            a.out_forces[k] = bad ? nan : a.forces[k] * a.f_factor;
    if (a.out_energies)
        for (int64_t k = first; k < a.n_systems; k += stride)
            a.out_energies[k] = bad ? nan : a.energies[k] * a.e_factor;
    if (a.out_virials)
        for (int64_t k = first; k < 9 * a.n_systems; k += stride)
            a.out_virials[k] = bad ? nan : a.virials[k] * a.e_factor;
    if (first == 0 && a.sticky) {
        nnpops__io_sticky *r = a.sticky;
        r->steps++;
        r->last_n_half = st->n_half;
        r->last_n_entries = st->n_entries;
        if (bad && (iflags & NNPOPS__IO_STALE)) {
            /* a graph of an earlier plan: only that is reported (its own overflow, say, must not
             * grow and re-plan the current plan, which would invalidate the current graphs) */
            r->flagged_steps++;
            r->io_flags |= NNPOPS__IO_STALE;
        } else if (bad) {
            const nnpops__io_status *io = a.io;
            if ((sflags & NNPOPS__ST_GEOMETRY) && !(r->step_flags & NNPOPS__ST_GEOMETRY))
                r->geometry = *st;
            if ((sflags & NNPOPS__ST_OVERFLOW) && st->n_entries > r->max_entries)
                r->max_entries = st->n_entries;
            if ((iflags & NNPOPS__IO_MAX_NEIGHBORS) && st->n_half > r->max_half)
                r->max_half = st->n_half;
            if ((sflags & NNPOPS__ST_POT_CAPACITY) && st->pot_need > r->pot_need)
                r->pot_need = st->pot_need;
            if (!r->bad_position) r->bad_position = io->bad_position;
            if (!r->bad_species) r->bad_species = io->bad_species;
            if (!r->bad_batch) r->bad_batch = io->bad_batch;
            if (!r->bad_batch_range) r->bad_batch_range = io->bad_batch_range;
            r->flagged_steps++;
            r->step_flags |= sflags;
            r->io_flags |= iflags;
        }
    }
}

__global__ void stage_kernel(char *dst, const char *src, size_t nc, char *z, size_t nz) {
    pdl_trigger();
    pdl_wait(); /* (launched programmatically: the kernel before must be done) */
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    copy_bytes<false>(dst, src, nc, t, stride);
    zero_bytes(z, nz, t, stride);
}

} /* namespace */

extern "C" nnpops_status nnpops__stage_cuda(void *dst, const void *src, size_t copy_bytes,
                                            void *zdst, size_t zero_bytes, void *stream) {
    const size_t units = ((copy_bytes > zero_bytes ? copy_bytes : zero_bytes) + 15) >> 4;
    unsigned grid = grid_for((int64_t)(units > 0 ? units : 1), 256);
    if (grid > 1024) grid = 1024; /* grid-stride loops */
    return launch_chain(stage_kernel, dim3(grid), dim3(256), 0, as_stream(stream), "stage_kernel",
                      (char *)dst, (const char *)src, copy_bytes, (char *)zdst, zero_bytes);
}

extern "C" nnpops_status nnpops__io_prepare_cuda(const nnpops__io_prep_args *args, void *stream) {
    int64_t items = args->n_atoms;
    if (9 * args->n_systems > items) items = 9 * args->n_systems;
    if (items < 1) items = 1;
    io_prepare_kernel<<<grid_for(items, 256), 256, 0, as_stream(stream)>>>(*args);
    NNPOPS__LAUNCH_CHECK("io_prepare_kernel");
    return NNPOPS_OK;
}

extern "C" nnpops_status nnpops__io_finish_cuda(const nnpops__io_finish_args *args, void *stream) {
    int64_t items = 3 * args->n_atoms;
    if (9 * args->n_systems > items) items = 9 * args->n_systems;
    if (items < 1) items = 1;
    unsigned grid = grid_for(items, 256);
    if (grid > 4096) grid = 4096; /* grid-stride loops */
    io_finish_kernel<<<grid, 256, 0, as_stream(stream)>>>(*args);
    NNPOPS__LAUNCH_CHECK("io_finish_kernel");
    return NNPOPS_OK;
}
