/* cooperative_groups.h - the thread block cluster part of cooperative groups that
 * potentials/ani/cuda/tail.cu uses, for the emulated tests: a cluster's blocks run together as fibers,
 * each with its own dynamic shared memory (see cuda_runtime.h, emu.cpp). */
#ifndef EMU_COOPERATIVE_GROUPS_H
#define EMU_COOPERATIVE_GROUPS_H
#include "cuda_runtime.h"
namespace cooperative_groups {
struct cluster_group {
    unsigned block_rank() const { return emu_cluster_rank(); }
    unsigned num_blocks() const { return emu_cluster_size(); }
    void sync() const { emu_barrier(EMU_BAR_CLUSTER, 0); }
    template <typename T> T *map_shared_rank(T *p, int rank) const {
        return (T *)emu_map_shared((void *)p, rank);
    }
};
inline cluster_group this_cluster() { return cluster_group{}; }
} // namespace cooperative_groups
#endif
