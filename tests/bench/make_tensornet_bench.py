#!/usr/bin/env python3
"""make_tensornet_bench.py OUT_DIR [--f N] [--layers L] [--rbf R] [--cutoff C] [--seed S]

The TensorNet model of the GPU benchmark (tests/bench/bench_gpu.c --tensornet): the shape of an
AceFF-sized model (128 channels, 2 layers, 32 radial functions, cutoff 5 A, O(3), SiLU, readout
128-64-1), random weights (uniform within +-1/sqrt(fan-in), LayerNorms at 1 and 0), elements
H .. S (max_z 17: enough for water and proteins).  Written as OUT_DIR/tn_bench.yaml and
tn_bench.safetensors by the converter's own writers (wrappers/nnpops/convert_tensornet.py), so
the file is what `nnpops convert --from-torchmdnet` makes of such a checkpoint.  Speed does not
depend on the values, only on the shapes."""

import argparse
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "wrappers"))

from nnpops import convert_tensornet as ct  # noqa: E402
from nnpops.convert import _write_atomic  # noqa: E402
from tensornet_bench_shape import hyper_parameters  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--f", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rbf", type=int, default=32)
    ap.add_argument("--cutoff", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--name", default="tn_bench")
    a = ap.parse_args()
    F, L, R, rc, max_z = a.f, a.layers, a.rbf, a.cutoff, 17
    rng = np.random.default_rng(a.seed)
    rm = "representation_model."
    t = {}

    def lin(name, n_out, n_in, bias=True):
        bound = 1.0 / np.sqrt(n_in)
        t[name + ".weight"] = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        if bias:
            t[name + ".bias"] = rng.uniform(-bound, bound, n_out).astype(np.float32)

    start = np.exp(-rc)
    t[rm + "distance_expansion.means"] = np.linspace(start, 1.0, R).astype(np.float32)
    t[rm + "distance_expansion.betas"] = np.full(R, (2.0 / R * (1.0 - start)) ** -2,
                                                 dtype=np.float32)
    te = rm + "tensor_embedding."
    t[te + "emb.weight"] = rng.normal(0.0, 1.0, (max_z, F)).astype(np.float32)
    lin(te + "emb2", F, 2 * F)
    for k in range(3):
        lin(te + "distance_proj%d" % (k + 1), F, R)
        lin(te + "linears_tensor.%d" % k, F, F, bias=False)
    lin(te + "linears_scalar.0", 2 * F, F)
    lin(te + "linears_scalar.1", 3 * F, 2 * F)
    t[te + "init_norm.weight"] = np.ones(F, dtype=np.float32)
    t[te + "init_norm.bias"] = np.zeros(F, dtype=np.float32)
    for ly in range(L):
        p = rm + "layers.%d." % ly
        lin(p + "linears_scalar.0", F, R)
        lin(p + "linears_scalar.1", 2 * F, F)
        lin(p + "linears_scalar.2", 3 * F, 2 * F)
        for k in range(6):
            lin(p + "linears_tensor.%d" % k, F, F, bias=False)
    lin(rm + "linear", F, 3 * F)
    t[rm + "out_norm.weight"] = np.ones(3 * F, dtype=np.float32)
    t[rm + "out_norm.bias"] = np.zeros(3 * F, dtype=np.float32)
    lin("output_model.output_network.layers.0", F // 2, F)
    lin("output_model.output_network.layers.2", 1, F // 2)

    hp = hyper_parameters(F, L, R, rc, max_z=max_z, precision=32)
    ck = ct.TensorNetCheckpoint()
    ck.cfg = ct.check_hyperparameters(hp)
    ck.hyper_parameters = hp
    ck.mean, ck.std = 0.0, 1.0
    ck.tensors = t
    ck.output_widths = [F, F // 2, 1]
    ck.zbl_atomic_number = None
    ck.dtype = "float32"
    ck.old_layout = False

    os.makedirs(a.out_dir, exist_ok=True)
    weights_file = a.name + ".safetensors"
    metadata = {"format": "nnpops", "format_version": str(ct.FORMAT_VERSION), "model": a.name,
                "source": "make_tensornet_bench.py", "type": "tensornet"}
    sha = _write_atomic(os.path.join(a.out_dir, weights_file), ct.safetensors_chunks(t, metadata))
    source_sha = hashlib.sha256(("make_tensornet_bench %d %d %d %g %d" % (F, L, R, rc, a.seed))
                                .encode()).hexdigest()
    text = ct.model_yaml(a.name, ck, ct.parse_units("eV,A"), weights_file, sha,
                         "make_tensornet_bench.py", source_sha)
    _write_atomic(os.path.join(a.out_dir, a.name + ".yaml"), [text])
    print("wrote %s/%s.yaml (F %d, %d layers, %d RBF, cutoff %g A)" % (a.out_dir, a.name, F, L, R,
                                                                        rc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
