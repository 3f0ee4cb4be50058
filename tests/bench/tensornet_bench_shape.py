"""The shape of the TensorNet benchmark models, as torchmd-net 3.1.0's hyperparameters: an
AceFF-sized TensorNet (128 channels, 2 interaction layers, 32 expnorm radial functions, cutoff
0 .. 5 A, SiLU, O(3), Scalar output summed, no prior).  make_tensornet_bench.py (random weights,
written by nnpops' converter) and make_tensornet_checkpoint.py (a torchmd-net checkpoint) both
start from it, so that the two benchmark models have the same architecture."""


def hyper_parameters(embedding_dimension=128, num_layers=2, num_rbf=32, cutoff_upper=5.0,
                     max_z=128, precision=64):
    """The hyperparameters of a checkpoint's "hyper_parameters" entry (a new dict each call).
    max_num_neighbors 128 covers the densest benchmark structure (liquid water: about 55
    neighbours within 5 A)."""
    return {
        "model": "tensornet", "embedding_dimension": embedding_dimension,
        "num_layers": num_layers, "num_rbf": num_rbf, "rbf_type": "expnorm",
        "trainable_rbf": False, "activation": "silu", "cutoff_lower": 0.0,
        "cutoff_upper": cutoff_upper, "max_z": max_z, "max_num_neighbors": 128,
        "equivariance_invariance_group": "O(3)", "static_shapes": False,
        "output_model": "Scalar", "reduce_op": "sum", "prior_model": None, "derivative": True,
        "atom_filter": -1, "precision": precision, "box_vecs": None, "standardize": False,
    }
