/*
 * tensornet_cpu.c - the TensorNet forward pass and hand-written backward on the CPU (see
 * tensornet_cpu.h for the interface, docs/model-format.md section 9 for the maths).
 *
 * The body lives in tensornet_cpu_impl.h and is compiled twice, once per compute precision
 * (REAL = double, suffix _f64; REAL = float, suffix _f32).
 */
#include "potentials/tensornet/cpu/tensornet_cpu.h"

#include "kernels/cpu/kernels.h"

#include <tgmath.h>
#include <string.h>

#define REAL double
#define SUF _f64
#include "potentials/tensornet/cpu/tensornet_cpu_impl.h"
#undef REAL
#undef SUF

#define REAL float
#define SUF _f32
#include "potentials/tensornet/cpu/tensornet_cpu_impl.h"
#undef REAL
#undef SUF
