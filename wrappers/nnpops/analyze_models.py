"""The models of `nnpops analyze`, written on the evaluation graph (analyze_graph) in float64.

Each model reads its YAML file and weights itself (docs/model-format.md) and evaluates the same
maths as the library (sections 3, 5 and 9 there), with named stages:

* ``lj``: ``distances`` (r of every ordered pair), ``lj.inverse6`` ((sigma/r)^6), ``lj.pair_energy``
  (each ordered pair's energy; the total is half their sum).
* ``ani``: ``distances``, ``aev.radial``, ``aev.angular`` (the two AEV blocks of every atom),
  ``EL.layerK`` (layer K's output of species EL's networks, all ensemble members: after the
  activation for hidden layers, the atomic energy for the last).
* ``tensornet``: ``distances``, ``rbf``, ``embedding.edge_features`` (the three per-edge factors),
  ``embedding.X`` (I + A + S summed over edges), ``embedding.gates``, ``embedding.out``; per layer
  L ``layerL.edge_net`` (the three edge factors h), ``layerL.normalised`` (X / (|X|^2 + 1)),
  ``layerL.Y``, ``layerL.messages`` (M), ``layerL.product`` (C), ``layerL.product_normalised``
  (C / (|C|^2 + 1)), ``layerL.dX``, ``layerL.out`` (X + dX + dX dX); ``readout.features``
  (the 3F invariants), ``readout.hidden``, ``readout.mlpK``, ``readout.atom_energy``, and
  ``zbl.pair_energy`` with a ZBL prior.

Energies are in the model's energy unit, positions in its length unit.
"""

import json
import math
import os
import struct

import numpy as np

from . import analyze_graph as G

__all__ = ["load", "ELEMENTS", "ENERGY_TO_EV", "LENGTH_TO_A"]

ELEMENTS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se "
    "Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy "
    "Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf "
    "Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og").split()

# The library's unit factors (core/src/model.c), so that both sides convert alike.
ENERGY_TO_EV = {"hartree": 27.211386024367243, "eV": 1.0, "kcal/mol": 1.0 / 23.060547830619,
                "kJ/mol": 1.0 / 96.48533212331002}
LENGTH_TO_A = {"angstrom": 1.0, "nm": 10.0, "bohr": 0.52917721092}

LN2_F32 = float(np.log(np.float32(2.0)))  # ShiftedSoftplus' shift: float32 log 2, widened


class AnalyzeError(Exception):
    """A model or input that the analysis cannot handle."""


# ---- files ---------------------------------------------------------------------------------------

def _read_yaml(path):
    try:
        import yaml
    except ImportError:
        raise AnalyzeError("nnpops analyze reads model files with PyYAML: pip install pyyaml")
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def read_safetensors(path):
    """{name: float64 array} of a weights file (F32 or F64 tensors)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise AnalyzeError("%s: not a safetensors file" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": "<f4", "F64": "<f8"}.get(t["dtype"])
        if dt is None:
            raise AnalyzeError("%s: tensor %s has dtype %s" % (path, name, t["dtype"]))
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(blob[base + b:base + e], dtype=dt).astype(np.float64).reshape(
            t["shape"])
    return out


def _symbol(s):
    # PyYAML reads a plain No (nobelium) as false; the converter quotes such symbols.
    return "No" if s is False else str(s)


def load(path):
    """The analysis model of the YAML file ``path``."""
    cfg = _read_yaml(path)
    if not isinstance(cfg, dict) or cfg.get("format") != "nnpops-model":
        raise AnalyzeError("%s: not an nnpops model file" % path)
    kind = cfg.get("type")
    tensors = None
    if "weights" in cfg:
        wpath = cfg["weights"]["file"]
        if not os.path.isabs(wpath):
            wpath = os.path.join(os.path.dirname(path), wpath)
        tensors = read_safetensors(wpath)
    if kind == "lj":
        return LJModel(cfg)
    if kind == "ani":
        return AniModel(cfg, tensors)
    if kind == "tensornet":
        return TensorNetModel(cfg, tensors)
    raise AnalyzeError("%s: model type %r is not supported by nnpops analyze" % (path, kind))


# ---- neighbors -----------------------------------------------------------------------------------

def neighbor_pairs(pos, cell, pbc, cutoff, lower=0.0):
    """Ordered pairs (i, j), i != j or j a periodic image of i, with lower <= r < cutoff.
    Returns i, j, the constant shift to add to x_j - x_i (the image's cell vector and the
    wrapping of both atoms into the cell), and r."""
    pos = np.asarray(pos, dtype=np.float64)
    n = len(pos)
    periodic = cell is not None and bool(np.any(pbc))
    wrap = np.zeros((n, 3))
    shifts = [np.zeros(3)]
    if periodic:
        cell = np.asarray(cell, dtype=np.float64)
        inv = np.linalg.inv(cell)
        frac = pos @ inv
        off = np.where(np.asarray(pbc, bool)[None, :], np.floor(frac), 0.0)
        wrap = off @ cell
        reps = [int(math.ceil(cutoff * np.linalg.norm(inv[:, k]))) + 1 if pbc[k] else 0
                for k in range(3)]
        shifts = [a * cell[0] + b * cell[1] + c * cell[2]
                  for a in range(-reps[0], reps[0] + 1)
                  for b in range(-reps[1], reps[1] + 1)
                  for c in range(-reps[2], reps[2] + 1)]
    w = pos - wrap
    I, J, S = [], [], []
    chunk = max(1, 4_000_000 // max(n, 1))
    for s in shifts:
        zero = not np.any(s)
        for i0 in range(0, n, chunk):
            d = w[None, :, :] + s - w[i0:i0 + chunk, None, :]
            r2 = (d * d).sum(-1)
            ok = (r2 < cutoff * cutoff) & (r2 >= lower * lower)
            if zero:
                k = np.arange(i0, min(i0 + chunk, n))
                ok[k - i0, k] = False
            ii, jj = np.nonzero(ok)
            I.append(ii + i0)
            J.append(jj)
            S.append(np.broadcast_to(s, (len(ii), 3)) - wrap[jj] + wrap[ii + i0])
    i = np.concatenate(I).astype(np.int64)
    j = np.concatenate(J).astype(np.int64)
    shift = np.concatenate(S).reshape(-1, 3)
    order = np.lexsort((j, i))  # by center, then neighbor: a fixed order
    i, j, shift = i[order], j[order], shift[order]
    v = pos[j] - pos[i] + shift
    return i, j, shift, np.sqrt((v * v).sum(-1))


def _vectors(x, i, j, shift):
    return G.gather(x, j) - G.gather(x, i) + shift


def _norm(v):
    return G.sqrt(G.total(v * v, axis=-1))


class _Model:
    def species_index(self, numbers):
        idx = np.full(max(self.zmax, int(np.max(numbers, initial=0))) + 1, -1, dtype=np.int64)
        for k, z in enumerate(self.numbers):
            idx[z] = k
        s = idx[np.asarray(numbers, dtype=np.int64)]
        bad = sorted(set(int(z) for z in np.asarray(numbers)[s < 0]))
        if bad:
            raise AnalyzeError("element(s) %s not in the model's species (%s)"
                               % (", ".join(ELEMENTS[z - 1] if 0 < z <= 118 else str(z)
                                            for z in bad), ", ".join(self.symbols)))
        return s


def _common(model, cfg):
    model.name = str(cfg["name"])
    model.type = str(cfg["type"])
    model.energy_unit = cfg["units"]["energy"]
    model.length_unit = cfg["units"]["length"]
    model.symbols = [_symbol(s) for s in cfg["species"]]
    model.numbers = [ELEMENTS.index(s) + 1 for s in model.symbols]
    model.zmax = max(model.numbers)


# ---- Lennard-Jones -------------------------------------------------------------------------------

class LJModel(_Model):
    def __init__(self, cfg):
        _common(self, cfg)
        lj = cfg["lj"]
        self.shift = bool(lj.get("shift", False))
        s = len(self.symbols)
        self.eps = np.zeros((s, s))
        self.sigma = np.ones((s, s))
        self.rc = np.zeros((s, s))
        for p in lj["pairs"]:
            a, b = (self.symbols.index(_symbol(e)) for e in p["elements"])
            for x, y in ((a, b), (b, a)):
                self.eps[x, y] = float(p["epsilon"])
                self.sigma[x, y] = float(p["sigma"])
                self.rc[x, y] = float(p["cutoff"])
        self.cutoff = float(self.rc.max())

    def stage_order(self):
        return ["distances", "lj.inverse6", "lj.pair_energy"]

    def prepare(self, numbers, pos, cell, pbc, charge):
        s = self.species_index(numbers)
        i, j, shift, r = neighbor_pairs(pos, cell, pbc, self.cutoff)
        keep = r < self.rc[s[i], s[j]]
        i, j, shift = i[keep], j[keep], shift[keep]
        return {"i": i, "j": j, "shift": shift, "eps": self.eps[s[i], s[j]],
                "sigma": self.sigma[s[i], s[j]], "rc": self.rc[s[i], s[j]]}

    def energy(self, g, x, t):
        if len(t["i"]) == 0:
            return G.total(x * 0.0)
        r = g.stage("distances", _norm(_vectors(x, t["i"], t["j"], t["shift"])))
        u = t["sigma"] * G.reciprocal(r)
        u2 = u * u
        u6 = g.stage("lj.inverse6", u2 * u2 * u2)
        e = 4.0 * t["eps"] * (u6 * u6 - u6)
        if self.shift:
            sc = (t["sigma"] / t["rc"]) ** 6
            e = e - 4.0 * t["eps"] * (sc * sc - sc)
        e = g.stage("lj.pair_energy", e)
        return 0.5 * G.total(e)


# ---- ANI -----------------------------------------------------------------------------------------

def _fc(r, rc):
    return 0.5 * G.cos(r * (math.pi / rc)) + 0.5


class AniModel(_Model):
    def __init__(self, cfg, t):
        _common(self, cfg)
        a = cfg["ani"]
        rad, ang = a["radial"], a["angular"]
        self.rcr = float(rad["cutoff"])
        self.eta_r = np.array(rad["eta"], dtype=np.float64)
        self.shf_r = np.array(rad["shifts"], dtype=np.float64)
        self.rca = float(ang["cutoff"])
        self.eta_a = np.array(ang["eta"], dtype=np.float64)
        self.zeta = np.array(ang["zeta"], dtype=np.float64)
        self.shf_a = np.array(ang["shifts"], dtype=np.float64)
        self.sections = np.array(ang["sections"], dtype=np.float64)
        self.self_energies = np.array(a["self_energies"], dtype=np.float64)
        self.members = int(a["ensemble_size"])
        self.alpha = float(a["activation"]["alpha"])
        self.cutoff = self.rcr
        pattern = a["tensors"]
        self.layers = {}
        for el in self.symbols:
            widths = a["networks"][el]
            ws, bs = [], []
            for l in range(len(widths) - 1):
                name = lambda m, k: pattern.format(member=m, element=el, layer=l, kind=k)
                ws.append(np.stack([t[name(m, "weight")].T for m in range(self.members)]))
                bs.append(np.stack([t[name(m, "bias")][None, :] for m in range(self.members)]))
            self.layers[el] = (ws, bs)

    def stage_order(self):
        out = ["distances", "aev.radial", "aev.angular"]
        for el in self.symbols:
            out += ["%s.layer%d" % (el, l) for l in range(len(self.layers[el][0]))]
        return out

    def prepare(self, numbers, pos, cell, pbc, charge):
        s = self.species_index(numbers)
        n = len(s)
        i, j, shift, r = neighbor_pairs(pos, cell, pbc, self.rcr)
        keep = r <= self.rcr
        i, j, shift, r = i[keep], j[keep], shift[keep], r[keep]
        # angular: unordered pairs of distinct neighbor entries of each center within Rca
        ap = np.nonzero(r <= self.rca)[0]  # already ordered by center
        ci = i[ap]
        starts = np.searchsorted(ci, np.arange(n))
        ends = np.searchsorted(ci, np.arange(n), side="right")
        tj, tk = [], []
        cache = {}
        for c in range(n):
            k = int(ends[c] - starts[c])
            if k < 2:
                continue
            if k not in cache:
                cache[k] = np.triu_indices(k, 1)
            a, b = cache[k]
            tj.append(ap[starts[c] + a])
            tk.append(ap[starts[c] + b])
        tj = np.concatenate(tj) if tj else np.zeros(0, np.int64)
        tk = np.concatenate(tk) if tk else np.zeros(0, np.int64)
        ns = len(self.symbols)
        sj, sk = np.minimum(s[j[tj]], s[j[tk]]), np.maximum(s[j[tj]], s[j[tk]])
        pair = sj * ns - sj * (sj - 1) // 2 + (sk - sj)
        return {"n": n, "s": s, "i": i, "j": j, "shift": shift, "tj": tj, "tk": tk,
                "tcenter": i[tj], "tpair": pair}

    def energy(self, g, x, t):
        n, s = t["n"], t["s"]
        ns = len(self.symbols)
        er, rr = len(self.eta_r), len(self.shf_r)
        ea, za, ha, da = len(self.eta_a), len(self.zeta), len(self.shf_a), len(self.sections)
        npair = ns * (ns + 1) // 2
        v = _vectors(x, t["i"], t["j"], t["shift"])
        r = g.stage("distances", _norm(v))
        # radial block: [pairs, E_R, R] -> rows i * S + s_j
        d = G.reshape(r, (-1, 1, 1)) - self.shf_r[None, None, :]
        term = 0.25 * G.exp(d * d * (-self.eta_r[None, :, None])) * G.reshape(
            _fc(r, self.rcr), (-1, 1, 1))
        term = G.reshape(term, (-1, er * rr))
        rad = G.scatter(term, t["i"] * ns + s[t["j"]], n * ns)
        rad = g.stage("aev.radial", G.reshape(rad, (n, ns * er * rr)))
        # angular block: [triplets, E, Z, H, D] -> rows i * P + pair
        tj, tk = t["tj"], t["tk"]
        if len(tj):
            vj, vk = G.gather(v, tj), G.gather(v, tk)
            rj, rk = G.gather(r, tj), G.gather(r, tk)
            cosang = G.total(vj * vk, axis=-1) * G.reciprocal(rj * rk)
            theta = G.acos(0.95 * cosang)
            f1 = (1.0 + G.cos(G.reshape(theta, (-1, 1)) - self.sections[None, :])) * 0.5
            f1 = G.power(G.reshape(f1, (-1, 1, da)), self.zeta[None, :, None])  # [T, Z, D]
            ravg = G.reshape((rj + rk) * 0.5, (-1, 1, 1)) - self.shf_a[None, None, :]
            f2 = G.exp(ravg * ravg * (-self.eta_a[None, :, None]))  # [T, E, H]
            fcc = _fc(rj, self.rca) * _fc(rk, self.rca)
            term = (G.reshape(f1, (-1, 1, za, 1, da)) * G.reshape(f2, (-1, ea, 1, ha, 1))
                    * G.reshape(fcc * 2.0, (-1, 1, 1, 1, 1)))
            term = G.reshape(term, (-1, ea * za * ha * da))
            ang = G.scatter(term, t["tcenter"] * npair + t["tpair"], n * npair)
        else:
            ang = g.input(np.zeros((n * npair, ea * za * ha * da)))
        ang = g.stage("aev.angular", G.reshape(ang, (n, npair * ea * za * ha * da)))
        aev = G.concat([rad, ang], axis=1)
        # Each species' networks are one composite operation: value and gradient with respect to
        # its AEV rows come from a graph of their own (the same stages, statistics and rounding).
        # Where neither the AEV nor that species' layers are rounded, they equal the unrounded
        # evaluation's, which the frame's cache holds: rounding one species' layer recomputes
        # only that species' networks.
        cache = t.setdefault("networks", {})
        rounded = g.rounded[0] if g.rounded is not None else None
        upstream = rounded in ("distances", "aev.radial", "aev.angular")
        e = None
        for k, el in enumerate(self.symbols):
            idx = np.nonzero(s == k)[0]
            if len(idx) == 0:
                continue
            x = G.gather(aev, idx)
            mine = rounded is not None and rounded.startswith(el + ".")
            if rounded is None or upstream or mine or el not in cache:
                value, grad = self._networks(g, el, x.value)
                if rounded is None:
                    cache[el] = (value, grad)
            else:
                value, grad = cache[el]
                for l in range(len(self.layers[el][0])):
                    name = "%s.layer%d" % (el, l)
                    if name not in g.seen:
                        g.seen.append(name)
            term = G.Var(g, np.asarray(value), ((x, lambda gr, d=grad: gr * d),))
            e = term if e is None else e + term
        return e + float(np.sum(self.self_energies[s]))

    def _networks(self, g, el, aev_rows):
        """(sum over the atoms of species el of the ensemble mean of their networks' outputs,
        its gradient with respect to aev_rows), on a graph sharing g's stages and rounding."""
        sub = G.Graph(stats=g.stats, rounded=g.rounded)
        sub.seen = g.seen
        x = sub.input(aev_rows)
        h = x
        ws, bs = self.layers[el]
        for l, (w, b) in enumerate(zip(ws, bs)):
            h = G.linear(h, w, b)
            if l < len(ws) - 1:
                h = G.celu(h, self.alpha)
            h = sub.stage("%s.layer%d" % (el, l), h)
        out = G.total(h) * (1.0 / self.members)
        return float(out.value), sub.gradient(out, x)


# ---- TensorNet -----------------------------------------------------------------------------------

_EYE = np.eye(3)[None, :, :, None]
# skew(v) w = v x w: matrix entry (a, c) = sum_b eps[a, b, c] v_b, as a [3, 9] map of v.
_SKEW = np.zeros((3, 9))
for _a, _b, _c, _s in ((0, 1, 2, 1), (1, 2, 0, 1), (2, 0, 1, 1), (0, 2, 1, -1), (2, 1, 0, -1),
                       (1, 0, 2, -1)):
    _SKEW[_b, _a * 3 + _c] = _s


class TensorNetModel(_Model):
    def __init__(self, cfg, t):
        _common(self, cfg)
        c = cfg["tensornet"]
        self.t = t
        self.F = int(c["embedding_dimension"])
        self.L = int(c["num_layers"])
        self.rbf_type = c["rbf_type"]
        self.act_name = c["activation"]
        self.lo = float(c["cutoff_lower"])
        self.hi = float(c["cutoff_upper"])
        self.group = str(c["equivariance_invariance_group"])
        self.widths = [int(w) for w in c["output_widths"]]
        self.mean = float(c["mean"])
        self.std = float(c["std"])
        self.atomref = None
        self.zbl = None
        for p in c.get("priors") or []:
            if p["type"] == "Atomref" and p.get("enable", True):
                self.atomref = t[p["tensor"]].reshape(-1)
            elif p["type"] == "ZBL":
                self.zbl = {"cutoff": float(p["cutoff_distance"]),
                            "dscale": float(p["distance_scale"]),
                            "escale": float(p["energy_scale"]),
                            "map": np.array(p["atomic_number"], dtype=np.int64)}
        self.cutoff = self.hi

    def stage_order(self):
        out = ["distances", "rbf", "embedding.edge_features", "embedding.X", "embedding.gates",
               "embedding.out"]
        for l in range(self.L):
            out += ["layer%d.%s" % (l, k) for k in ("edge_net", "normalised", "Y", "messages",
                                                     "product", "product_normalised", "dX",
                                                     "out")]
        out += ["readout.features", "readout.hidden"]
        out += ["readout.mlp%d" % k for k in range(len(self.widths) - 2)]
        out += ["readout.atom_energy", "zbl.pair_energy"]
        return out

    def prepare(self, numbers, pos, cell, pbc, charge):
        self.species_index(numbers)
        z = np.asarray(numbers, dtype=np.int64)
        n = len(z)
        i, j, shift, _ = neighbor_pairs(pos, cell, pbc, self.hi, self.lo)
        t = {"n": n, "z": z, "i": i, "j": j, "shift": shift, "q": float(charge)}
        if self.zbl is not None:
            zi, zj, zs, _ = neighbor_pairs(pos, cell, pbc, self.zbl["cutoff"])
            t["zbl"] = (zi, zj, zs)
        return t

    # pieces
    def act(self, x):
        a = self.act_name
        if a in ("silu", "swish"):
            return x * G.sigmoid(x)
        if a == "ssp":
            return G.softplus(x) - LN2_F32
        if a == "tanh":
            return G.tanh(x)
        if a == "sigmoid":
            return G.sigmoid(x)
        if a == "mish":
            return x * G.tanh(G.softplus(x))
        raise AnalyzeError("activation %r" % a)

    def lin(self, name, x, bias=True):
        return G.linear(x, self.t[name + ".weight"].T, self.t[name + ".bias"] if bias else None)

    def layer_norm(self, name, x):
        m = x.shape[-1]
        mu = G.total(x, axis=-1, keepdims=True) * (1.0 / m)
        d = x - mu
        var = G.total(d * d, axis=-1, keepdims=True) * (1.0 / m)
        return d * G.reciprocal(G.sqrt(var + 1e-5)) * self.t[name + ".weight"] + \
            self.t[name + ".bias"]

    def cutoff_fn(self, r, rv):
        """The layers' cosine cutoff of r (a graph value; rv its numbers, for the mask)."""
        if self.lo > 0:
            mask = ((rv < self.hi) & (rv > self.lo)).astype(np.float64)
            arg = (r - self.lo) * (2.0 * math.pi / (self.hi - self.lo)) + math.pi
            return (G.cos(arg) + 1.0) * 0.5 * mask
        return (G.cos(r * (math.pi / self.hi)) + 1.0) * 0.5 * (rv < self.hi).astype(np.float64)

    @staticmethod
    def decompose(X):
        Xt = G.transpose(X, (0, 2, 1, 3))
        A = (X - Xt) * 0.5
        I = (X[:, 0, 0] + X[:, 1, 1] + X[:, 2, 2]) * (1.0 / 3.0)
        S = (X + Xt) * 0.5 - G.reshape(I, (I.shape[0], 1, 1, -1)) * _EYE
        return I, A, S

    @staticmethod
    def compose(I, A, S):
        return G.reshape(I, (I.shape[0], 1, 1, -1)) * _EYE + A + S

    @staticmethod
    def tnorm(X):
        return G.total(X * X, axis=(1, 2))

    def chan(self, name, X):
        return G.linear(X, self.t[name + ".weight"].T)

    @staticmethod
    def per_channel(h, X):
        """h [N, F] times X [N, 3, 3, F]."""
        return G.reshape(h, (h.shape[0], 1, 1, -1)) * X

    def energy(self, g, x, t):
        F, n, z = self.F, t["n"], t["z"]
        ne = len(t["i"])
        i = np.concatenate([t["i"], np.arange(n)])
        j = np.concatenate([t["j"], np.arange(n)])
        if ne:
            v = _vectors(x, t["i"], t["j"], t["shift"])
            rn = g.stage("distances", _norm(v))
            r = G.concat([rn, g.input(np.zeros(n))], axis=0)
            u = G.concat([v * G.reshape(G.reciprocal(rn), (-1, 1)), g.input(np.zeros((n, 3)))],
                         axis=0)
        else:
            r = g.input(np.zeros(n))
            u = g.input(np.zeros((n, 3)))
        rv = r.value
        tt = self.t
        p = "representation_model.distance_expansion."
        rr = G.reshape(r, (-1, 1))
        if self.rbf_type == "expnorm":
            alpha = 5.0 / (self.hi - self.lo)
            fc0 = (G.cos(rr * (math.pi / self.hi)) + 1.0) * 0.5 * \
                (rv < self.hi).astype(np.float64)[:, None]
            d = G.exp((self.lo - rr) * alpha) - tt[p + "means"]
            phi = fc0 * G.exp(d * d * (-tt[p + "betas"]))
        else:
            d = rr - tt[p + "offset"]
            phi = G.exp(d * d * tt[p + "coeff"][0])
        phi = g.stage("rbf", phi)
        fc = G.reshape(self.cutoff_fn(r, rv), (-1, 1))
        # embedding
        pe = "representation_model.tensor_embedding."
        Z = tt[pe + "emb.weight"][z]
        zij = np.concatenate([Z[i], Z[j]], axis=1) @ tt[pe + "emb2.weight"].T + tt[pe + "emb2.bias"]
        C = fc * zij
        f1 = g.stage("embedding.edge_features", C * self.lin(pe + "distance_proj1", phi))
        f2 = g.stage("embedding.edge_features", C * self.lin(pe + "distance_proj2", phi))
        f3 = g.stage("embedding.edge_features", C * self.lin(pe + "distance_proj3", phi))
        I = G.scatter(f1, i, n)
        Av = G.scatter(G.reshape(f2, (-1, 1, F)) * G.reshape(u, (-1, 3, 1)), i, n)  # [N, 3, F]
        A = G.transpose(G.reshape(G.linear(G.transpose(Av, (0, 2, 1)), _SKEW), (n, F, 3, 3)),
                        (0, 2, 3, 1))
        uu = G.reshape(u, (-1, 3, 1)) * G.reshape(u, (-1, 1, 3))
        uu = uu - G.reshape(G.total(u * u, axis=-1) * (1.0 / 3.0), (-1, 1, 1)) * np.eye(3)
        S = G.scatter(G.reshape(f3, (-1, 1, 1, F)) * G.reshape(uu, (-1, 3, 3, 1)), i, n)
        X = g.stage("embedding.X", self.compose(I, A, S))
        I, A, S = self.decompose(X)
        gt = self.layer_norm(pe + "init_norm", self.tnorm(X))
        gt = self.act(self.lin(pe + "linears_scalar.0", gt))
        gt = self.act(self.lin(pe + "linears_scalar.1", gt))
        gt = g.stage("embedding.gates", G.reshape(gt, (n, 3, F)))
        I = self.chan(pe + "linears_tensor.0", I) * gt[:, 0]
        A = self.per_channel(gt[:, 1], self.chan(pe + "linears_tensor.1", A))
        S = self.per_channel(gt[:, 2], self.chan(pe + "linears_tensor.2", S))
        X = g.stage("embedding.out", self.compose(I, A, S))
        qf = 1.0 + 0.1 * t["q"]
        for l in range(self.L):
            pl = "representation_model.layers.%d." % l
            h = phi
            for k in range(3):
                h = self.act(self.lin(pl + "linears_scalar.%d" % k, h))
            h = g.stage("layer%d.edge_net" % l, G.reshape(h * fc, (-1, 3, F)))
            X = g.stage("layer%d.normalised" % l,
                        X * G.reshape(G.reciprocal(self.tnorm(X) + 1.0), (n, 1, 1, F)))
            I, A, S = self.decompose(X)
            I = self.chan(pl + "linears_tensor.0", I)
            A = self.chan(pl + "linears_tensor.1", A)
            S = self.chan(pl + "linears_tensor.2", S)
            Y = g.stage("layer%d.Y" % l, self.compose(I, A, S))
            I, A, S = self.decompose(Y)
            Im = G.scatter(h[:, 0] * G.gather(I, j), i, n)
            Am = G.scatter(self.per_channel(h[:, 1], G.gather(A, j)), i, n)
            Sm = G.scatter(self.per_channel(h[:, 2], G.gather(S, j)), i, n)
            M = g.stage("layer%d.messages" % l, self.compose(Im, Am, Sm))
            if self.group == "O(3)":
                Cm = (G.einsum("nikf,nkjf->nijf", M, Y) + G.einsum("nikf,nkjf->nijf", Y, M)) * qf
            else:
                Cm = G.einsum("nikf,nkjf->nijf", Y, M) * 2.0
            Cm = g.stage("layer%d.product" % l, Cm)
            Cn = g.stage("layer%d.product_normalised" % l,
                         Cm * G.reshape(G.reciprocal(self.tnorm(Cm) + 1.0), (n, 1, 1, F)))
            I, A, S = self.decompose(Cn)
            I = self.chan(pl + "linears_tensor.3", I)
            A = self.chan(pl + "linears_tensor.4", A)
            S = self.chan(pl + "linears_tensor.5", S)
            dX = g.stage("layer%d.dX" % l, self.compose(I, A, S))
            X = g.stage("layer%d.out" % l, X + dX + G.einsum("nikf,nkjf->nijf", dX, dX) * qf)
        I, A, S = self.decompose(X)
        feats = g.stage("readout.features",
                        G.concat([I * I * 3.0, self.tnorm(A), self.tnorm(S)], axis=1))
        h = self.layer_norm("representation_model.out_norm", feats)
        h = g.stage("readout.hidden", self.act(self.lin("representation_model.linear", h)))
        nl = len(self.widths) - 1
        for k in range(nl):
            h = self.lin("output_model.output_network.layers.%d" % (2 * k), h)
            if k < nl - 1:
                h = g.stage("readout.mlp%d" % k, self.act(h))
        h = h[:, 0] * self.std
        if self.atomref is not None:
            h = h + self.atomref[z]
        h = g.stage("readout.atom_energy", h)
        e = G.total(h) + self.mean
        if self.zbl is not None and len(t["zbl"][0]):
            e = e + self.zbl_energy(g, x, t)
        return e

    def zbl_energy(self, g, x, t):
        zb = self.zbl
        zi_, zj_, zs = t["zbl"]
        zmap = zb["map"][t["z"]]
        zi, zj = zmap[zi_], zmap[zj_]
        r = _norm(_vectors(x, zi_, zj_, zs))
        # the screening length in float32 from the integer charges (torchmd-net's arithmetic)
        pw = (np.arange(int(zmap.max()) + 1, dtype=np.float64) ** 0.23).astype(np.float32)
        a = ((np.float32(1.0) / (pw[zi] + pw[zj])) * np.float32(0.8854 * 5.29177210903e-11))
        d = r * (zb["dscale"] / a.astype(np.float64))
        f = (0.1818 * G.exp(d * -3.2) + 0.5099 * G.exp(d * -0.9423)
             + 0.2802 * G.exp(d * -0.4029) + 0.02817 * G.exp(d * -0.2016))
        f = f * ((G.cos(r * (math.pi / zb["cutoff"])) + 1.0) * 0.5)
        e = g.stage("zbl.pair_energy",
                    f * (zi * zj).astype(np.float64) * G.reciprocal(r)
                    * (0.5 * 2.30707755e-28 / zb["escale"] / zb["dscale"]))
        return G.total(e)
