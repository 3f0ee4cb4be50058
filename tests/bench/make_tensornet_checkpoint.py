"""Write the TensorNet checkpoint of the CPU benchmark with torchmd-net (not needed by any test).

    python make_tensornet_checkpoint.py OUT.ckpt

A TensorNet of torchmd-net 3.1.0's create_model with the benchmark's shape: 128 channels, 2
interaction layers, 32 expnorm radial functions, cutoff 0 .. 5 A, silu, O(3), Scalar output (sum),
no prior, float64; weights from torch's default initialisation with seed 20260101, each parameter
then moved by normal noise of 0.1 x its own spread (so LayerNorm scales and zero-initialised
biases are not special values).  Saved the way torchmd-net's checkpoints are ("hyper_parameters",
"state_dict" with the "model." prefix), so that torchmd-net's load_model and
`nnpops convert --from-torchmdnet` read the same file.  The hyperparameters are those of
tensornet_bench_shape.py.
"""

import sys

import torch
from torchmdnet.models.model import create_model

from tensornet_bench_shape import hyper_parameters

HYPER_PARAMETERS = hyper_parameters(max_z=128, precision=64)


def main(out):
    torch.manual_seed(20260101)
    model = create_model(dict(HYPER_PARAMETERS))
    with torch.no_grad():
        for p in model.parameters():
            spread = float(p.std()) if p.numel() > 1 else 0.0
            p.add_(torch.randn_like(p) * 0.1 * (spread if spread > 0 else 1.0))
    state = {"model." + k: v for k, v in model.state_dict().items()}
    torch.save({"hyper_parameters": dict(HYPER_PARAMETERS), "state_dict": state}, out)
    print("wrote %s (%d tensors)" % (out, len(state)))


if __name__ == "__main__":
    main(sys.argv[1])
