/*
 * tensornet_cpu.c - the TensorNet forward pass and hand-written backward on the CPU (see
 * tensornet_cpu.h for the interface, docs/model-format.md section 9 for the maths).
 *
 * The body lives in tensornet_cpu_impl.h and is compiled twice, once per compute precision
 * (REAL = double, suffix _f64; REAL = float, suffix _f32), and so are the CPU twins of the GPU
 * step's ops (tn_ops_cpu_impl.h, declared in potentials/tensornet/tn_ops.h), which use its pieces.
 */
#include "potentials/tensornet/cpu/tensornet_cpu.h"
#include "potentials/tensornet/tn_ops.h"

#include "kernels/cpu/kernels.h"

#include <tgmath.h>
#include <string.h>

#define REAL double
#define SUF _f64
#include "potentials/tensornet/cpu/tensornet_cpu_impl.h"
#include "potentials/tensornet/cpu/tn_ops_cpu_impl.h"
#undef REAL
#undef SUF

#define REAL float
#define SUF _f32
#include "potentials/tensornet/cpu/tensornet_cpu_impl.h"
#include "potentials/tensornet/cpu/tn_ops_cpu_impl.h"
#undef REAL
#undef SUF

void nnpops__tn_count_cpu(int64_t n, int64_t n_systems, const int32_t *batch, int32_t *sys_count) {
    for (int64_t s = 0; s < n_systems; s++) sys_count[s] = 0;
    for (int64_t i = 0; i < n; i++) sys_count[batch[i]]++;
}
