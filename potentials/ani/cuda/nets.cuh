/*
 * nets.cuh - device helpers shared by ANI's network kernels (networks.cu, tail.cu): the output
 * layer's backward seed and each member's share of the energies, asynchronous global -> shared
 * copies.  Include after potentials/ani/ani_ops.h.
 */
#ifndef NNPOPS_POTENTIALS_ANI_CUDA_NETS_CUH
#define NNPOPS_POTENTIALS_ANI_CUDA_NETS_CUH

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

/* The asynchronous copies below are plain copies, done at once, where the kernels are compiled for
 * the CPU (NNPOPS_CUDA_EMULATION: tests/emu), and their waits and the prefetch nothing. */
#ifdef NNPOPS_CUDA_EMULATION
__device__ __forceinline__ void cp_async4(float *dst, const float *src, bool ok) {
    *dst = ok ? *src : 0.0f;
}
__device__ __forceinline__ void prefetch_l2(const void *) {}
__device__ __forceinline__ void cp_async_commit() {}
__device__ __forceinline__ void cp_async_wait_pending(int) {}
__device__ __forceinline__ void cp_async16(float *dst, const float *src, bool ok) {
    for (int q = 0; q < 4; q++) dst[q] = ok ? src[q] : 0.0f;
}
#else
/* 4-byte asynchronous global -> shared copy; ok == false writes a zero (reads nothing). */
__device__ __forceinline__ void cp_async4(float *dst, const float *src, bool ok) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src),
                 "r"(ok ? 4 : 0)
                 : "memory");
}

__device__ __forceinline__ void prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* Waits until at most n of this thread's committed copy groups are pending (n clamped to 7). */
__device__ __forceinline__ void cp_async_wait_pending(int n) {
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
    }
}

/* 16-byte asynchronous global -> shared copy (both addresses 16-byte aligned); ok == false
 * writes zeros (reads nothing). */
__device__ __forceinline__ void cp_async16(float *dst, const float *src, bool ok) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(ok ? 16 : 0)
                 : "memory");
}
#endif

} // namespace

#endif /* NNPOPS_POTENTIALS_ANI_CUDA_NETS_CUH */
