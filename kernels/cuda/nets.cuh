/*
 * nets.cuh - device helpers shared by the network kernels (mlp.cu, tail.cu): the output layer's
 * backward seed and each member's share of the energies.
 * Include after kernels_cuda.h.
 */
#ifndef NNPOPS_KERNELS_CUDA_NETS_CUH
#define NNPOPS_KERNELS_CUDA_NETS_CUH

namespace {

/* The backward seed dE/dy of member gm's output: 1/ensemble for the mean, 1 or 0 for one member. */
template <typename R>
__device__ __forceinline__ R output_seed(const nnpops__ani_output_args &g, int32_t gm) {
    return g.member < 0 ? (R)(1.0 / (double)g.ensemble) : (gm == g.member ? (R)1 : (R)0);
}

/* Member gm's share of the atom's energy from (a part of) its output y, with `self` the self
 * energy that part carries: y / ensemble for the ensemble mean (member 0 carrying the self
 * energy), y + self for the chosen member, else 0. */
__device__ __forceinline__ double atom_share(const nnpops__ani_output_args &g, int32_t gm, double y,
                                             double self) {
    if (g.member < 0) return y / (double)g.ensemble + (gm == 0 ? self : 0.0);
    return gm == g.member ? y + self : 0.0;
}

/* Member gm's output yv for center c: its member energy, and its share of the atom's energy
 * (atomicAdd; the member holding the self energy adds it). */
__device__ __forceinline__ void output_add_energy(const nnpops__ani_output_args &g, int32_t c,
                                                  int32_t gm, double yv) {
    if (g.member_energy) g.member_energy[(int64_t)c * g.ensemble + gm] = yv + g.self_energy;
    const double add = atom_share(g, gm, yv, g.self_energy);
    if (add != 0.0) atomicAdd(g.atom_energy + c, add);
}

/* A part of member gm's output for center c (a block's rows of the sum; `first`: the part that
 * also holds the output bias, which adds the self energy too), added to the member energy and
 * to the atom's energy as output_add_energy does with the whole output (both zero on entry). */
__device__ __forceinline__ void output_add_partial(const nnpops__ani_output_args &g, int32_t c,
                                                   int32_t gm, double part, bool first) {
    const double self = first ? g.self_energy : 0.0;
    if (g.member_energy) atomicAdd(g.member_energy + (int64_t)c * g.ensemble + gm, part + self);
    const double add = atom_share(g, gm, part, self);
    if (add != 0.0) atomicAdd(g.atom_energy + c, add);
}

} // namespace

#endif /* NNPOPS_KERNELS_CUDA_NETS_CUH */
