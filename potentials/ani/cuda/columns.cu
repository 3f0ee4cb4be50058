/*
 * columns.cu - the local atoms grouped by species into the networks' columns: twin of
 * nnpops__ani_columns_cpu (potentials/ani/ani_ops.h).
 *
 * One block per species walks the local atoms in tiles of COL_THREADS: each thread tests its atom,
 * the warps' ballots and a scan of the warp counts give each atom of the species its place among
 * the species' atoms so far, so the columns hold them in increasing index, as on the CPU; then the
 * block pads the species' remaining columns with -1.  The ranks (when asked) are a grid-stride
 * loop of every block over all atoms.  Work: n_species passes over the local atoms' species.
 */
#include "kernels/cuda/common.cuh"

extern "C" {
#include "kernels/cuda/kernels_cuda.h"
#include "potentials/ani/ani_ops.h"
}

using namespace nnpops_cuda;

namespace {

const int COL_THREADS = 256;
const int COL_WARPS = COL_THREADS / 32;

__global__ void __launch_bounds__(COL_THREADS)
    columns_kernel(const nnpops__ani_columns_args a, const int32_t *species, int32_t *centers,
                   int32_t *rank) {
    __shared__ int32_t warp_count[COL_WARPS];
    __shared__ int64_t base_sh;
    const int s = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t c0 = a.start[s], c1 = a.start[s + 1];
    if (threadIdx.x == 0) base_sh = 0;
    __syncthreads();
    for (int64_t t0 = 0; t0 < a.n_local; t0 += COL_THREADS) {
        const int64_t i = t0 + threadIdx.x;
        const bool mine = i < a.n_local && species[i] == s;
        const unsigned vote = __ballot_sync(NNPOPS__FULL_MASK, mine);
        if (lane == 0) warp_count[warp] = __popc(vote);
        __syncthreads();
        int64_t before = base_sh;
        for (int w = 0; w < warp; w++) before += warp_count[w];
        before += __popc(vote & ((1u << lane) - 1u));
        if (mine && c0 + before < c1) centers[c0 + before] = (int32_t)i;
        __syncthreads(); /* every thread has read base_sh and the counts */
        if (threadIdx.x == 0) {
            int64_t total = 0;
            for (int w = 0; w < COL_WARPS; w++) total += warp_count[w];
            base_sh += total;
        }
        __syncthreads();
    }
    for (int64_t c = c0 + base_sh + threadIdx.x; c < c1; c += COL_THREADS) centers[c] = -1;
    if (rank)
        for (int64_t i = (int64_t)blockIdx.x * COL_THREADS + threadIdx.x; i < a.n_atoms;
             i += (int64_t)gridDim.x * COL_THREADS)
            rank[i] = a.rank_of[species[i]];
}

} /* namespace */

extern "C" nnpops_status nnpops__ani_columns_cuda(const nnpops__ani_columns_args *a,
                                                  const int32_t *species, int32_t *centers,
                                                  int32_t *rank, void *stream) {
    if (a->n_species <= 0 || (a->start[a->n_species] <= 0 && !rank) || a->n_atoms <= 0)
        return NNPOPS_OK;
    columns_kernel<<<a->n_species, COL_THREADS, 0, as_stream(stream)>>>(*a, species, centers,
                                                                          rank);
    NNPOPS__LAUNCH_CHECK("ani columns kernel");
    return NNPOPS_OK;
}
