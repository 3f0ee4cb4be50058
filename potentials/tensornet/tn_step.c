/*
 * tn_step.c - TensorNet's step over center lists composed of the ops of tn_ops.h: with the CPU
 * twins (the reference the GPU step is tested against, no GPU needed) or with the CUDA twins (the
 * GPU step, potentials/tensornet/tensornet_cuda.c).  The same sequence of ops either way.
 *
 * Pairs.  What depends on the distance alone is computed once per pair of network edges and used
 * in both directions: tn_pairs numbers the pairs (the entry that holds each, its mirror, and each
 * entry's pair), and the embedding's distance projections and the layers' edge networks (GEMMs
 * and activations) run over the pairs; the embedding's sum and the messages read them through the
 * entry's pair number, their gradients are summed over both directions per pair, and a pair's
 * radial gradient goes to the entry that holds it (the core's reduction gives both atoms their
 * share).  What depends on the direction (the unit vector's terms) stays per entry.
 *
 * Forward: the entries' geometry and radial basis, the pairs; the embedding's projections (one
 * GEMM, the three stacked); the embedding (sum per center, gates per atom); per layer the edge
 * network (h kept for the backward), Y per atom, the messages per center, the update per atom;
 * the readout per atom (and its gradient, seeded with the atom's weight: 1 local, 0 ghost).
 * Backward, layer by layer from the last: the update's backward per atom, the messages' (dE/dh
 * per pair, dE/dY gathered per atom over its own entries), the edge network's (its
 * pre-activations recomputed by the same GEMMs, except for the last layer, whose are still
 * there), to dE/dr per pair; Y's backward to the layer's input.  Then the gates' backward, the
 * embedding's per pair (dE/du per entry, dE/dfc and dE/d projections per pair; the projections'
 * backward is a GEMM) into the same dE/dr per pair, and the last op writes each entry's gradient
 * (plus ZBL's) and adds ZBL's and the mean's energies.
 *
 * Work space (REAL unless said), laid out by ts_plan: per entry of capacity the geometry, flags
 * (bytes), the radial basis, dE/du and the pair number; per pair (half the capacity) the radial
 * basis, the projections, the edge network's pre-activations and activations (one set, reused by
 * every layer; the backward's gradients of the activations take the activations' place once the
 * GEMMs that read them have run), h per layer and the backward's buffers; per atom X0, the gates'
 * pre-activations, X per layer, the layers' norms, Y and M components, and the gradients.
 */
#include <stdint.h>
#include <string.h>

#include "potentials/tensornet/tn_ops.h"

#ifdef NNPOPS_HAVE_CUDA
#define TN_HAVE_CUDA 1
#else
#define TN_HAVE_CUDA 0
#endif

#define REAL float
#define SUF _f32
#include "potentials/tensornet/tn_step_impl.h"
#undef REAL
#undef SUF

#define REAL double
#define SUF _f64
#include "potentials/tensornet/tn_step_impl.h"
#undef REAL
#undef SUF
