"""A float64 NumPy implementation of the TensorNet forward pass (torchmd-net 3.1.0's maths), for
the tests: it reads a converted model (NAME.yaml + NAME.safetensors, docs/model-format.md
section 8) and gives energies and per-atom terms, so that the converted weights can be checked
against torchmd-net's own values.  A test helper, not part of the package; written from the
definitions, vectorised over edges, no autograd.

    model = load_model("tn_a.yaml")
    e = energy(model, numbers, positions, cell=None, charge=0.0)
    e["energy"], e["atomic"], e["zbl"]

Edge convention: an edge (i, j) adds its message to atom i and carries r_ij = x_j - x_i (+ the
image shift of j), nnpops' convention; every atom has a self edge (i, i) with r = 0 and a zero
unit vector.  The embedding's antisymmetric part of atom i is the sum over its edges of
f_A(r_ij) skew(r_ij / r) with skew(v) w = v x w.  This is what torchmd-net 3.1.0 computes with its
default (warp) kernels: its neighbor list stores x_i - x_j for the pair (i, j), and its warp
embedding kernel builds the antisymmetric part with the opposite sign to its pure-PyTorch
fallback (vector_to_skewtensor), so the two signs cancel.  O(3) energies cannot tell the signs
apart; SO(3) energies can, and the SO(3) reference values fix it.
"""

import json
import math
import re
import struct

import numpy as np

LN2_F32 = float(np.log(np.float32(2.0)))  # ShiftedSoftplus' shift: float32 log 2, widened


def read_safetensors(path):
    """{name: float64 ndarray} of an nnpops weights file (F32 or F64 tensors)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "F64": "<f8"}[t["dtype"]]
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(blob[base + b:base + e], dtype=dt).astype(np.float64).reshape(
            t["shape"])
    return out


def _scalar(text, key):
    m = re.search(r"^  %s: (.*)$" % re.escape(key), text, re.M)
    if not m:
        raise KeyError(key)
    return m.group(1).strip()


def load_model(yaml_path):
    """The settings and tensors of a converted TensorNet model (the converter's own YAML layout
    is read with regular expressions, so PyYAML is not needed)."""
    with open(yaml_path, "r", encoding="ascii") as f:
        text = f.read()
    m = {}
    m["F"] = int(_scalar(text, "embedding_dimension"))
    m["layers"] = int(_scalar(text, "num_layers"))
    m["rbf_type"] = _scalar(text, "rbf_type")
    m["activation"] = _scalar(text, "activation")
    m["lo"] = float(_scalar(text, "cutoff_lower"))
    m["hi"] = float(_scalar(text, "cutoff_upper"))
    m["group"] = _scalar(text, "equivariance_invariance_group").strip('"')
    m["mean"] = float(_scalar(text, "mean"))
    m["std"] = float(_scalar(text, "std"))
    m["widths"] = [int(x) for x in _scalar(text, "output_widths").strip("[]").split(",")]
    m["atomref"] = None
    m["zbl"] = None
    a = re.search(r"\{type: Atomref, enable: (true|false), max_z: (\d+), tensor: ([^}]+)\}", text)
    wfile = re.search(r"^weights:\n  file: (.*)$", text, re.M).group(1).strip().strip('"')
    import os
    t = read_safetensors(os.path.join(os.path.dirname(yaml_path), wfile))
    m["t"] = t
    if a and a.group(1) == "true":
        m["atomref"] = t[a.group(3).strip()].reshape(-1)
    z = re.search(r"\{type: ZBL, cutoff_distance: ([^,]+), distance_scale: ([^,]+), "
                  r"energy_scale: ([^,]+),\s*atomic_number: \[([^\]]*)\]\}", text)
    if z:
        m["zbl"] = {"cutoff": float(z.group(1)), "dscale": float(z.group(2)),
                    "escale": float(z.group(3)),
                    "map": np.array([int(x) for x in z.group(4).split(",")], dtype=np.int64)}
    return m


# ---- edges -------------------------------------------------------------------------------------

def edges(pos, cell, lo, hi, self_edges=True):
    """All ordered pairs (i, j) with lo <= r < hi over periodic images (cell rows a, b, c, or
    None), plus the self edge (i, i) with r = 0.  Returns i, j, vec = x_j + shift - x_i, r."""
    pos = np.asarray(pos, dtype=np.float64)
    n = len(pos)
    shifts = [np.zeros(3)]
    if cell is not None:
        cell = np.asarray(cell, dtype=np.float64)
        inv = np.linalg.inv(cell)
        # planes' spacings: 1 / |column k of inv(cell)|
        reps = [int(math.ceil(hi * np.linalg.norm(inv[:, k]))) + 1 for k in range(3)]
        shifts = [a * cell[0] + b * cell[1] + c * cell[2]
                  for a in range(-reps[0], reps[0] + 1)
                  for b in range(-reps[1], reps[1] + 1)
                  for c in range(-reps[2], reps[2] + 1)]
    I, J, V = [], [], []
    d0 = pos[None, :, :] - pos[:, None, :]  # [i, j] = x_j - x_i
    for s in shifts:
        d = d0 + s
        r2 = (d * d).sum(-1)
        ok = (r2 < hi * hi) & (r2 >= lo * lo)
        if not np.any(s):
            np.fill_diagonal(ok, False)
        ii, jj = np.nonzero(ok)
        I.append(ii)
        J.append(jj)
        V.append(d[ii, jj])
    if self_edges:
        I.append(np.arange(n))
        J.append(np.arange(n))
        V.append(np.zeros((n, 3)))
    i = np.concatenate(I)
    j = np.concatenate(J)
    v = np.concatenate(V).reshape(-1, 3)
    r = np.sqrt((v * v).sum(-1))
    return i, j, v, r


# ---- pieces ------------------------------------------------------------------------------------

def act(name, x):
    if name == "silu" or name == "swish":
        return x / (1.0 + np.exp(-x))
    if name == "ssp":
        return np.logaddexp(0.0, x) - LN2_F32
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "mish":
        return x * np.tanh(np.logaddexp(0.0, x))
    raise ValueError(name)


def cosine_cutoff(r, lo, hi):
    if lo > 0:
        c = 0.5 * (np.cos(math.pi * (2 * (r - lo) / (hi - lo) + 1.0)) + 1.0)
        return c * (r < hi) * (r > lo)
    return 0.5 * (np.cos(r * math.pi / hi) + 1.0) * (r < hi)


def rbf(m, r):
    t = m["t"]
    p = "representation_model.distance_expansion."
    if m["rbf_type"] == "expnorm":
        alpha = 5.0 / (m["hi"] - m["lo"])
        rr = r[:, None]
        return cosine_cutoff(rr, 0.0, m["hi"]) * np.exp(
            -t[p + "betas"] * (np.exp(alpha * (-rr + m["lo"])) - t[p + "means"]) ** 2)
    return np.exp(t[p + "coeff"][0] * (r[:, None] - t[p + "offset"]) ** 2)


def linear(t, name, x, bias=True):
    y = x @ t[name + ".weight"].T
    if bias:
        y = y + t[name + ".bias"]
    return y


def layer_norm(t, name, x):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * t[name + ".weight"] + t[name + ".bias"]


def skew(v):
    """[N, 3, F] -> [N, 3, 3, F] with skew(v) w = v x w."""
    z = np.zeros_like(v[:, 0])
    return np.stack([np.stack([z, -v[:, 2], v[:, 1]], 1),
                     np.stack([v[:, 2], z, -v[:, 0]], 1),
                     np.stack([-v[:, 1], v[:, 0], z], 1)], 1)


def decompose(X):
    """X [N, 3, 3, F] -> I [N, F], A, S [N, 3, 3, F]."""
    Xt = X.transpose(0, 2, 1, 3)
    A = 0.5 * (X - Xt)
    I = (X[:, 0, 0] + X[:, 1, 1] + X[:, 2, 2]) / 3.0
    S = 0.5 * (X + Xt) - I[:, None, None, :] * np.eye(3)[None, :, :, None]
    return I, A, S


def compose(I, A, S):
    return I[:, None, None, :] * np.eye(3)[None, :, :, None] + A + S


def tnorm(X):
    return (X ** 2).sum((1, 2))


def chan(t, name, X):
    """A bias-free linear over the channel (last) axis of [N, ..., F]."""
    return X @ t[name + ".weight"].T


def matmul(X, Y):
    """Per-channel 3x3 product of [N, 3, 3, F] tensors."""
    return np.einsum("nikf,nkjf->nijf", X, Y)


# ---- the model ---------------------------------------------------------------------------------

def atom_terms(m, numbers, pos, cell=None, charge=0.0):
    """Per-atom terms (x * std + atomref) of one system, with the given total charge."""
    t = m["t"]
    F = m["F"]
    z = np.asarray(numbers, dtype=np.int64)
    n = len(z)
    i, j, v, r = edges(pos, cell, m["lo"], m["hi"])
    u = v / np.where(i == j, 1.0, r)[:, None]
    e = rbf(m, r)
    # embedding
    pe = "representation_model.tensor_embedding."
    Z = t[pe + "emb.weight"][z]
    Zij = linear(t, pe + "emb2", np.concatenate([Z[i], Z[j]], axis=1))
    C = cosine_cutoff(r, m["lo"], m["hi"])[:, None] * Zij
    f1 = C * linear(t, pe + "distance_proj1", e)
    f2 = C * linear(t, pe + "distance_proj2", e)
    f3 = C * linear(t, pe + "distance_proj3", e)
    I = np.zeros((n, F))
    np.add.at(I, i, f1)
    Av = np.zeros((n, 3, F))
    np.add.at(Av, i, f2[:, None, :] * u[:, :, None])
    Sr = np.zeros((n, 3, 3, F))
    np.add.at(Sr, i, f3[:, None, None, :] * (u[:, :, None] * u[:, None, :])[..., None])
    A = skew(Av)
    S = 0.5 * (Sr + Sr.transpose(0, 2, 1, 3))
    S = S - ((Sr[:, 0, 0] + Sr[:, 1, 1] + Sr[:, 2, 2]) / 3.0)[:, None, None, :] * \
        np.eye(3)[None, :, :, None]
    X = compose(I, A, S)
    g = layer_norm(t, pe + "init_norm", tnorm(X))
    g = act(m["activation"], linear(t, pe + "linears_scalar.0", g))
    g = act(m["activation"], linear(t, pe + "linears_scalar.1", g))
    g = g.reshape(n, 3, F)
    I = chan(t, pe + "linears_tensor.0", I) * g[:, 0]
    A = chan(t, pe + "linears_tensor.1", A) * g[:, 1][:, None, None, :]
    S = chan(t, pe + "linears_tensor.2", S) * g[:, 2][:, None, None, :]
    X = compose(I, A, S)
    qf = 1.0 + 0.1 * charge
    # interaction layers
    for l in range(m["layers"]):
        pl = "representation_model.layers.%d." % l
        h = e
        for k in range(3):
            h = act(m["activation"], linear(t, pl + "linears_scalar.%d" % k, h))
        h = (h * cosine_cutoff(r, m["lo"], m["hi"])[:, None]).reshape(-1, 3, F)
        X = X / (tnorm(X) + 1.0)[:, None, None, :]
        I, A, S = decompose(X)
        I = chan(t, pl + "linears_tensor.0", I)
        A = chan(t, pl + "linears_tensor.1", A)
        S = chan(t, pl + "linears_tensor.2", S)
        Y = compose(I, A, S)
        Im = np.zeros((n, F))
        np.add.at(Im, i, h[:, 0] * I[j])
        Am = np.zeros((n, 3, 3, F))
        np.add.at(Am, i, h[:, 1][:, None, None, :] * A[j])
        Sm = np.zeros((n, 3, 3, F))
        np.add.at(Sm, i, h[:, 2][:, None, None, :] * S[j])
        msg = compose(Im, Am, Sm)
        if m["group"] == "O(3)":
            Cm = qf * (matmul(msg, Y) + matmul(Y, msg))
        else:
            Cm = 2.0 * matmul(Y, msg)
        I, A, S = decompose(Cm)
        np1 = tnorm(Cm) + 1.0
        I = chan(t, pl + "linears_tensor.3", I / np1)
        A = chan(t, pl + "linears_tensor.4", A / np1[:, None, None, :])
        S = chan(t, pl + "linears_tensor.5", S / np1[:, None, None, :])
        dX = compose(I, A, S)
        X = X + dX + qf * matmul(dX, dX)
    # readout
    I, A, S = decompose(X)
    x = np.concatenate([3 * I ** 2, tnorm(A), tnorm(S)], axis=1)
    x = layer_norm(t, "representation_model.out_norm", x)
    x = act(m["activation"], linear(t, "representation_model.linear", x))
    nl = len(m["widths"]) - 1
    for k in range(nl):
        x = linear(t, "output_model.output_network.layers.%d" % (2 * k), x)
        if k < nl - 1:
            x = act(m["activation"], x)
    x = x[:, 0] * m["std"]
    if m["atomref"] is not None:
        x = x + m["atomref"][z]
    return x


def f32(x):
    return np.float32(x)


def zbl_energy(m, numbers, pos, cell=None):
    """The ZBL prior of one system (torchmd-net's formula: the screening length is computed in
    float32 there, from the integer atomic numbers, and so it is here)."""
    zb = m["zbl"]
    if zb is None:
        return 0.0
    z = zb["map"][np.asarray(numbers, dtype=np.int64)]
    i, j, v, r = edges(pos, cell, 0.0, zb["cutoff"], self_edges=False)
    if len(i) == 0:
        return 0.0
    zi, zj = z[i], z[j]
    # torch: integer ** 0.23 in float32 (correctly rounded here: the float64 power, rounded),
    # then 0.8854 a0 / s as reciprocal(s) * constant, both in float32.
    p = (np.arange(int(z.max()) + 1, dtype=np.float64) ** 0.23).astype(np.float32)
    s = p[zi] + p[zj]
    a = (np.float32(1.0) / s) * np.float32(0.8854 * 5.29177210903e-11)
    d = r * zb["dscale"] / a.astype(np.float64)
    f = (0.1818 * np.exp(-3.2 * d) + 0.5099 * np.exp(-0.9423 * d)
         + 0.2802 * np.exp(-0.4029 * d) + 0.02817 * np.exp(-0.2016 * d))
    f = f * cosine_cutoff(r, 0.0, zb["cutoff"])
    e = f * zi * zj / r
    return 0.5 * (2.30707755e-28 / zb["escale"] / zb["dscale"]) * e.sum()


def energy(m, numbers, pos, cell=None, charge=0.0):
    atomic = atom_terms(m, numbers, pos, cell, charge)
    zbl = zbl_energy(m, numbers, pos, cell)
    return {"energy": atomic.sum() + m["mean"] + zbl, "atomic": atomic, "zbl": zbl}
