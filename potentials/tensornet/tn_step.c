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
 * Forward: the entries' geometry, the pairs and their radial basis; the embedding's projections
 * (one GEMM, the three stacked; the bias added by the embedding as it reads them); the embedding
 * (sum per center, gates per atom); per layer the edge network up to its last pre-activations
 * (the GEMMs write them without bias; the activations add it as they read), Y per atom, the
 * messages per center (h = act(Z3 + b) fc computed as they read Z3), the update per atom; the
 * readout per atom (and its gradient, seeded with the atom's weight: 1 local, 0 ghost).
 * Backward, layer by layer from the last: the update's backward per atom, the edge network again
 * where the layers share one set of pre-activations (except for the last layer, whose are still
 * there; ts_plan keeps a set per layer where that fits a fixed budget), the messages' (dE/dY
 * gathered per atom over its own entries; per pair dE/dh taken through h to dE/dZ3 and dE/dfc),
 * the edge network's backward to dE/dr per pair; Y's backward to the layer's input.  Then the
 * gates' backward, the projections again (the layers took their place), the embedding's backward
 * per pair (dE/du per entry, dE/dfc and dE/d projections per pair; the projections' backward is
 * a GEMM) into the same dE/dr per pair, and the last op writes each entry's gradient (plus
 * ZBL's) and adds ZBL's and the mean's energies.
 *
 * Two streams (the GPU step, where the plan gives every layer its own pre-activations and the
 * projections a block of their own, and the caller gives a side stream): the edge networks depend
 * on the distances alone, so the side stream computes them (after the atoms per system, which
 * only the last op reads) while the step's stream runs the neighbor pairs, the embedding and each
 * layer's Y; a layer's messages wait for its edge network.  Backward, each
 * layer's edge-network backward (from dE/dZ3 to dE/dphi) runs on the side stream beside Y's
 * backward, the next layer's update backward and the gates' backward; the next messages'
 * backward (which writes dE/dZ3 in the same block) and the embedding's backward wait for it.
 * The same ops with the same operands either way: the results do not change.
 *
 * Work space (REAL unless said), laid out by ts_plan: per entry of capacity the geometry, flags
 * (bytes), dE/du and the pair number; per pair (half the capacity, rounded up to 4) the radial
 * basis and its gradient, the edge network's pre-activations Z1, Z2, Z3 (a set per layer below
 * TS_KEEP_BYTES, else one set reused by every layer; the projections and the backward's G2 in
 * Z3's place) and one block of 3F for the hidden activations, dE/dZ3 and G1 in turn (ts_plan
 * says when each is live); per atom X0, the gates' pre-activations, X per layer, the layers'
 * norms, Y and M components, and the gradients.
 */
#include <stdint.h>
#include <string.h>

#include "potentials/tensornet/tn_ops.h"

#ifdef NNPOPS_HAVE_CUDA
#define TN_HAVE_CUDA 1
#else
#define TN_HAVE_CUDA 0
#endif

/* the budget of the layers' own pre-activations (nnpops__tn_step_keep_bytes; SIZE_MAX:
 * TS_KEEP_BYTES) */
static size_t g_keep_bytes = SIZE_MAX;
void nnpops__tn_step_keep_bytes(size_t bytes) { g_keep_bytes = bytes; }

/* GPU steps that ran the edge networks on the side stream (nnpops__tn_side_steps) */
static int g_side_steps = 0;
int nnpops__tn_side_steps(void) { return g_side_steps; }

#if TN_HAVE_CUDA
/* Work enqueued on `to` after this waits for the work enqueued so far on `from` (through ev,
 * recorded on `from`; inside a capture, `to` joins the graph through it). */
static nnpops_status ts_after(void *to, void *from, void *ev) {
    NNPOPS__CUDA_CALL(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)from));
    NNPOPS__CUDA_CALL(cudaStreamWaitEvent((cudaStream_t)to, (cudaEvent_t)ev, 0));
    return NNPOPS_OK;
}
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
