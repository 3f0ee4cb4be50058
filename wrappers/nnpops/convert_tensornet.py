"""Convert a torchmd-net TensorNet checkpoint into an nnpops model (YAML + safetensors).

    python3 -m nnpops convert --from-torchmdnet FILE.ckpt [--name NAME] [--output DIR]
                              [--units eV,A] [--force]
    python3 -m nnpops convert --from-torchmdnet A.ckpt B.ckpt ... | ENSEMBLE.zip [...]

Several checkpoints (or torchmd-net's zip of checkpoints, whose top-level *.ckpt files are the
members, in name order) become ONE ensemble model: the members must share the architecture and
every hyperparameter that shapes the model (EnsembleMismatchError names the first that differs);
their weights are stored with the prefix ``m{k}.``, their ``mean`` and ``std`` as lists.

The checkpoint is read by ``nnpops.torchzip`` (a restricted unpickler that runs nothing); its
``hyper_parameters`` are checked one by one against what nnpops implements (anything else is an
error naming the hyperparameter), its ``state_dict`` is renamed the way torchmd-net 3.1.0's
``load_model`` renames it (the ``model.`` prefix, the old output-network key names, the row order
of old checkpoints' scalar linears), every tensor is checked against the shapes the
hyperparameters imply, and the model is written as docs/model-format.md, section 8, describes.
Standard library and NumPy only.
"""

import hashlib
import json
import os
import re
import struct
import tempfile
import zipfile

import numpy as np

try:
    from . import torchzip
    from .convert import (ConvertError, _ELEMENTS, _file_sha256, _read_stamp,
                          _stamp_matches_files, _write_atomic, yaml_float, yaml_str)
except ImportError:  # pragma: no cover
    import torchzip  # type: ignore
    from convert import (ConvertError, _ELEMENTS, _file_sha256, _read_stamp,  # type: ignore
                         _stamp_matches_files, _write_atomic, yaml_float, yaml_str)

__all__ = ["convert_tensornet", "read_tensornet", "TensorNetCheckpoint", "parse_units",
           "ACTIVATIONS", "UNITS_ENERGY", "UNITS_LENGTH"]

FORMAT_VERSION = 1
# Part of the stamp: bumped whenever the output for the same input changes.
CONVERTER_VERSION = 1

ACTIVATIONS = ("ssp", "silu", "tanh", "sigmoid", "swish", "mish")
RBF_TYPES = ("expnorm", "gauss")
GROUPS = ("O(3)", "SO(3)")
PRIORS = ("Atomref", "ZBL")

# Energy unit -> (YAML spelling, joules per unit for the ZBL cross-check).
_AVOGADRO = 6.02214076e23
UNITS_ENERGY = {
    "ev": ("eV", 1.602176634e-19),
    "kcal/mol": ("kcal/mol", 4184.0 / _AVOGADRO),
    "kj/mol": ("kJ/mol", 1000.0 / _AVOGADRO),
    "hartree": ("hartree", 4.3597447222071e-18),
}
# Length unit -> (YAML spelling, metres per unit).
UNITS_LENGTH = {
    "a": ("angstrom", 1e-10),
    "angstrom": ("angstrom", 1e-10),
    "nm": ("nm", 1e-9),
    "bohr": ("bohr", 5.29177210903e-11),
}

# Every hyperparameter name the converter knows: those checked in check_hyperparameters, and
# those that only the training loop, the data pipeline or other architectures read (create_model
# ignores them for a TensorNet with a Scalar output, so they are recorded, not used).  Any other
# name is an error.
_KNOWN_HP = frozenset("""
    derivative max_num_neighbors static_shapes standardize check_errors load_model lr lr_factor
    lr_patience lr_min lr_warmup_steps lr_metric lr_schedule weight_decay y_weight neg_dy_weight
    train_loss train_loss_arg ema_alpha_y ema_alpha_neg_dy charge spin remove_ref_energy
    vector_cutoff conf num_epochs batch_size inference_batch_size dataset dataset_root dataset_arg
    coord_files embed_files energy_files force_files dataset_preload_limit splits train_size
    val_size test_size test_interval save_interval seed num_nodes num_workers redirect
    gradient_clipping distributed_backend accelerator ngpus early_stopping_patience log_dir
    wandb_use wandb_name wandb_project wandb_resume_from_id tensorboard_use reset_trainer
    aggr neighbor_embedding attn_activation num_heads distance_influence
    prior_args prior_model output_mlp_num_layers model embedding_dimension num_layers num_rbf
    rbf_type trainable_rbf activation cutoff_lower cutoff_upper max_z
    equivariance_invariance_group output_model reduce_op atom_filter precision box_vecs
    x_dim q_dim q_weights coulomb_cutoff coulomb_max_num_neighbors coulomb_neighbor_strategy
    repulsion wandb_log_gradients checkpoint_monitor early_stopping_monitor load_weights
    lr_cosine_length position_noise_scale denoising_weight denoising_only layernorm_on_vec
    accelerator
""".split())

_REQUIRED = ("model", "embedding_dimension", "num_layers", "num_rbf", "rbf_type",
             "trainable_rbf", "activation", "cutoff_lower", "cutoff_upper", "max_z",
             "equivariance_invariance_group", "output_model", "reduce_op", "precision")


def _err(name, value, why):
    return ConvertError("hyperparameter %s = %r: %s" % (name, value, why))


def parse_units(text):
    """'eV,A' -> (energy YAML name, joules, length YAML name, metres)."""
    parts = [p.strip() for p in (text or "").split(",")]
    if len(parts) != 2:
        raise ConvertError("--units %r: expected ENERGY,LENGTH (e.g. eV,A)" % text)
    e, l = parts[0].lower(), parts[1].lower()
    if e not in UNITS_ENERGY:
        raise ConvertError("--units %r: unknown energy unit %r (eV, kcal/mol, kJ/mol, hartree)"
                           % (text, parts[0]))
    if l not in UNITS_LENGTH:
        raise ConvertError("--units %r: unknown length unit %r (A, angstrom, nm, bohr)"
                           % (text, parts[1]))
    return UNITS_ENERGY[e] + UNITS_LENGTH[l]


def _is_int(v):
    return type(v) is int or (isinstance(v, np.integer))


def _is_num(v):
    return (type(v) in (int, float) or isinstance(v, (np.integer, np.floating))) and \
        np.isfinite(float(v))


def _prior_list(hp):
    """(name, args) of each prior, in order, the way torchmd-net's create_prior_models reads
    prior_model and prior_args."""
    spec = hp.get("prior_model")
    if not spec:
        return []
    if not isinstance(spec, list):
        spec = [spec]
    names, args = [], []
    for item in spec:
        if isinstance(item, dict):
            for key, value in item.items():
                names.append(key)
                args.append({} if value is None else value)
        elif isinstance(item, str):
            names.append(item)
            args.append({})
        else:
            raise _err("prior_model", hp.get("prior_model"), "expected names or mappings")
    pa = hp.get("prior_args")
    if pa is not None:
        args = pa if isinstance(pa, list) else [pa]
    out = []
    for k, name in enumerate(names):
        if not isinstance(name, str) or name not in PRIORS:
            raise _err("prior_model", hp.get("prior_model"),
                       "prior %r is not supported (supported: %s; D2, Coulomb, LearnableAtomref "
                       "and the others are not)" % (name, ", ".join(PRIORS)))
        a = args[k] if k < len(args) else {}
        a = torchzip.as_mapping(a, "hyperparameter prior_args[%d]" % k)
        out.append((name, a))
    return out


def check_hyperparameters(hp):
    """Check every hyperparameter that decides the maths; returns the normalised settings."""
    for key in _REQUIRED:
        if key not in hp:
            raise ConvertError("hyperparameter %s is missing" % key)
    model = hp["model"]
    if model != "tensornet":
        raise _err("model", model, "not supported (supported: tensornet; TensorNet2, the "
                   "equivariant transformer, the transformer and the graph network are not)")
    cfg = {}
    for key in ("embedding_dimension", "num_rbf", "max_z"):
        v = hp[key]
        if not _is_int(v) or v < 1:
            raise _err(key, v, "expected an integer >= 1")
        cfg[key] = int(v)
    v = hp["num_layers"]
    if not _is_int(v) or v < 0:
        raise _err("num_layers", v, "expected an integer >= 0")
    cfg["num_layers"] = int(v)
    if hp["rbf_type"] not in RBF_TYPES:
        raise _err("rbf_type", hp["rbf_type"], "not supported (supported: %s)"
                   % ", ".join(RBF_TYPES))
    cfg["rbf_type"] = hp["rbf_type"]
    if type(hp["trainable_rbf"]) is not bool:
        raise _err("trainable_rbf", hp["trainable_rbf"], "expected true or false")
    cfg["trainable_rbf"] = hp["trainable_rbf"]
    if hp["activation"] not in ACTIVATIONS:
        raise _err("activation", hp["activation"], "not supported (supported: %s)"
                   % ", ".join(ACTIVATIONS))
    cfg["activation"] = hp["activation"]
    lo, hi = hp["cutoff_lower"], hp["cutoff_upper"]
    if not _is_num(lo) or float(lo) < 0:
        raise _err("cutoff_lower", lo, "expected a number >= 0")
    if not _is_num(hi) or float(hi) <= float(lo):
        raise _err("cutoff_upper", hi, "expected a number > cutoff_lower (%r)" % (lo,))
    cfg["cutoff_lower"], cfg["cutoff_upper"] = float(lo), float(hi)
    if hp["equivariance_invariance_group"] not in GROUPS:
        raise _err("equivariance_invariance_group", hp["equivariance_invariance_group"],
                   "not supported (supported: O(3), SO(3))")
    cfg["group"] = hp["equivariance_invariance_group"]
    if hp["output_model"] != "Scalar":
        raise _err("output_model", hp["output_model"], "not supported (supported: Scalar)")
    if hp["reduce_op"] != "sum":
        raise _err("reduce_op", hp["reduce_op"], "not supported (supported: sum)")
    if hp["precision"] not in (32, 64):
        raise _err("precision", hp["precision"], "not supported (supported: 32, 64)")
    cfg["precision"] = int(hp["precision"])
    af = hp.get("atom_filter", -1)
    if af != -1:
        raise _err("atom_filter", af, "not supported (supported: -1, no filter)")
    box = hp.get("box_vecs")
    if box is not None:
        try:
            arr = np.asarray(box, dtype=np.float64)
        except (TypeError, ValueError):
            raise _err("box_vecs", box, "expected a 3x3 matrix of numbers") from None
        if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
            raise _err("box_vecs", box, "expected a 3x3 matrix of finite numbers")
        cfg["box_vecs"] = arr
    else:
        cfg["box_vecs"] = None
    om = hp.get("output_mlp_num_layers", 0)
    if not _is_int(om) or om < 0:
        raise _err("output_mlp_num_layers", om, "expected an integer >= 0")
    cfg["output_mlp_num_layers"] = int(om)
    if hp.get("repulsion"):
        raise _err("repulsion", hp["repulsion"], "not supported (a TensorNet2 option)")
    if hp.get("q_dim"):
        raise _err("q_dim", hp["q_dim"], "not supported (a TensorNet2 option)")
    if hp.get("coulomb_cutoff") is not None:
        raise _err("coulomb_cutoff", hp["coulomb_cutoff"],
                   "not supported (a Coulomb output option)")
    priors = []
    for name, args in _prior_list(hp):
        if name == "Atomref":
            for key in args:
                if key not in ("max_z", "trainable", "enable", "dataset"):
                    raise ConvertError("hyperparameter prior_args of Atomref: unknown key %r"
                                       % key)
            enable = args.get("enable", True)
            if type(enable) is not bool:
                raise ConvertError("hyperparameter prior_args of Atomref: enable = %r, expected "
                                   "true or false" % (enable,))
            priors.append({"type": "Atomref", "enable": enable})
        else:
            for key in ("cutoff_distance", "distance_scale", "energy_scale"):
                if key not in args or not _is_num(args[key]) or float(args[key]) <= 0:
                    raise ConvertError("hyperparameter prior_args of ZBL: %s = %r, expected a "
                                       "number > 0" % (key, args.get(key)))
            for key in args:
                if key not in ("cutoff_distance", "max_num_neighbors", "atomic_number",
                               "distance_scale", "energy_scale", "dataset"):
                    raise ConvertError("hyperparameter prior_args of ZBL: unknown key %r" % key)
            priors.append({"type": "ZBL", "cutoff_distance": float(args["cutoff_distance"]),
                           "distance_scale": float(args["distance_scale"]),
                           "energy_scale": float(args["energy_scale"])})
    if sum(p["type"] == "ZBL" for p in priors) > 1:
        raise _err("prior_model", hp.get("prior_model"), "more than one ZBL prior")
    cfg["priors"] = priors
    for key in hp:
        if key not in _KNOWN_HP:
            raise ConvertError("hyperparameter %s = %r: unknown to this converter (not a "
                               "TensorNet option of torchmd-net 3.1.0)" % (key, hp[key]))
    return cfg


_OLD_OUTPUT = re.compile(r"^output_model\.output_network\.([02])\.(weight|bias)$")


def _remix(w):
    """torchmd-net's compatibility_load: rows (f, c) -> (c, f) of a [3F, ...] linear."""
    a = w.shape[0]
    rest = w.shape[1:]
    return np.ascontiguousarray(w.reshape((a // 3, 3) + rest).swapaxes(0, 1).reshape(w.shape))


class TensorNetCheckpoint:
    """What read_tensornet() returns: cfg (normalised settings), tensors {name: ndarray} in the
    nnpops names, hyper_parameters (as stored), zbl_atomic_number (list or None), mean, std,
    output_widths, dtype ('float32' | 'float64')."""


def read_tensornet(path):
    """Read and check a torchmd-net TensorNet checkpoint."""
    try:
        ckpt = torchzip.load_checkpoint(path)
    except torchzip.CheckpointError as exc:
        raise ConvertError(str(exc)) from None
    try:
        top = torchzip.as_mapping(ckpt, "%s: the checkpoint" % path)
        if "hyper_parameters" not in top:
            raise ConvertError("%s: no hyper_parameters (not a torchmd-net checkpoint?)" % path)
        if "state_dict" not in top:
            raise ConvertError("%s: no state_dict (not a torchmd-net checkpoint?)" % path)
        hp = torchzip.as_mapping(top["hyper_parameters"], "%s: hyper_parameters" % path)
        sd = torchzip.as_mapping(top["state_dict"], "%s: state_dict" % path)
    except torchzip.CheckpointError as exc:
        raise ConvertError(str(exc)) from None
    for what, obj in (("hyper_parameters", hp), ("state_dict", sd)):
        found = torchzip.find_opaque(obj, what)
        if found:
            raise ConvertError("%s: %s holds an object of class %s, which is not read (only "
                               "plain values and tensors are)" % (path, found[0], found[1].name))
    for k in hp:
        if not isinstance(k, str):
            raise ConvertError("%s: hyper_parameters has a key %r that is not a string"
                               % (path, k))
    try:
        cfg = check_hyperparameters(hp)
    except ConvertError as exc:
        raise ConvertError("%s: %s" % (path, exc)) from None

    # torchmd-net's load_model renames: 'model.' prefix, old output-network names.
    state = {}
    for k, v in sd.items():
        if not isinstance(k, str):
            raise ConvertError("%s: state_dict key %r is not a string" % (path, k))
        if not isinstance(v, np.ndarray):
            raise ConvertError("%s: state_dict[%r] is a %s, not a tensor"
                               % (path, k, type(v).__name__))
        name = re.sub(r"^model\.", "", k)
        name = _OLD_OUTPUT.sub(r"output_model.output_network.layers.\1.\2", name)
        if name in state:
            raise ConvertError("%s: state_dict names %s twice" % (path, name))
        state[name] = v

    F, R, L = cfg["embedding_dimension"], cfg["num_rbf"], cfg["num_layers"]
    rm = "representation_model."
    expect = {
        "mean": (), "std": (),
        rm + "tensor_embedding.distance_proj1.weight": (F, R),
        rm + "tensor_embedding.distance_proj1.bias": (F,),
        rm + "tensor_embedding.distance_proj2.weight": (F, R),
        rm + "tensor_embedding.distance_proj2.bias": (F,),
        rm + "tensor_embedding.distance_proj3.weight": (F, R),
        rm + "tensor_embedding.distance_proj3.bias": (F,),
        rm + "tensor_embedding.emb.weight": (cfg["max_z"], F),
        rm + "tensor_embedding.emb2.weight": (F, 2 * F),
        rm + "tensor_embedding.emb2.bias": (F,),
        rm + "tensor_embedding.linears_tensor.0.weight": (F, F),
        rm + "tensor_embedding.linears_tensor.1.weight": (F, F),
        rm + "tensor_embedding.linears_tensor.2.weight": (F, F),
        rm + "tensor_embedding.linears_scalar.0.weight": (2 * F, F),
        rm + "tensor_embedding.linears_scalar.0.bias": (2 * F,),
        rm + "tensor_embedding.linears_scalar.1.weight": (3 * F, 2 * F),
        rm + "tensor_embedding.linears_scalar.1.bias": (3 * F,),
        rm + "tensor_embedding.init_norm.weight": (F,),
        rm + "tensor_embedding.init_norm.bias": (F,),
        rm + "linear.weight": (F, 3 * F),
        rm + "linear.bias": (F,),
        rm + "out_norm.weight": (3 * F,),
        rm + "out_norm.bias": (3 * F,),
    }
    if cfg["rbf_type"] == "expnorm":
        expect[rm + "distance_expansion.means"] = (R,)
        expect[rm + "distance_expansion.betas"] = (R,)
    else:
        expect[rm + "distance_expansion.offset"] = (R,)
        expect[rm + "distance_expansion.coeff"] = ()
    for l in range(L):
        p = rm + "layers.%d." % l
        expect[p + "linears_scalar.0.weight"] = (F, R)
        expect[p + "linears_scalar.0.bias"] = (F,)
        expect[p + "linears_scalar.1.weight"] = (2 * F, F)
        expect[p + "linears_scalar.1.bias"] = (2 * F,)
        expect[p + "linears_scalar.2.weight"] = (3 * F, 2 * F)
        expect[p + "linears_scalar.2.bias"] = (3 * F,)
        for t in range(6):
            expect[p + "linears_tensor.%d.weight" % t] = (F, F)
    # The output MLP: Linear layers at even indices; its depth comes from the keys.
    out_layers = sorted(int(m.group(1)) for m in (
        re.match(r"^output_model\.output_network\.layers\.(\d+)\.weight$", k) for k in state) if m)
    if not out_layers:
        raise ConvertError("%s: state_dict has no output_model.output_network.layers.*.weight "
                           "(not a Scalar output model?)" % path)
    if out_layers != list(range(0, 2 * len(out_layers), 2)):
        raise ConvertError("%s: output network linears at indices %s, expected 0, 2, 4, ..."
                           % (path, out_layers))
    H = F // 2
    if H < 1:
        raise _err("embedding_dimension", F, "the Scalar output needs at least 2 channels")
    n_out = len(out_layers)
    if n_out < 2:
        raise ConvertError("%s: the output network has %d linear layer, expected at least 2"
                           % (path, n_out))
    if "output_mlp_num_layers" in hp and n_out - 2 != cfg["output_mlp_num_layers"]:
        raise _err("output_mlp_num_layers", hp["output_mlp_num_layers"],
                   "the state_dict's output network has %d hidden layers" % (n_out - 2))
    widths = [F] + [H] * (n_out - 1) + [1]
    for k, idx in enumerate(out_layers):
        p = "output_model.output_network.layers.%d." % idx
        expect[p + "weight"] = (widths[k + 1], widths[k])
        expect[p + "bias"] = (widths[k + 1],)

    # Priors: Atomref's embedding (atomref.weight; initial_atomref is only its initial value),
    # ZBL's atomic-number map.
    zbl_map = None
    optional = {rm + "distance.box": (3, 3)}
    for i, prior in enumerate(cfg["priors"]):
        p = "prior_model.%d." % i
        if prior["type"] == "Atomref":
            w = state.get(p + "atomref.weight")
            if w is None or w.ndim != 2 or w.shape[1] != 1 or w.shape[0] < 1:
                raise ConvertError("%s: state_dict %satomref.weight: missing or not [max_z, 1]"
                                   % (path, p))
            expect[p + "atomref.weight"] = w.shape
            optional[p + "initial_atomref"] = w.shape
            prior["tensor"] = p + "atomref.weight"
            prior["max_z"] = int(w.shape[0])
        else:
            an = state.get(p + "atomic_number")
            if an is None or an.ndim != 1 or an.dtype.kind not in "iu" or an.size < 1:
                raise ConvertError("%s: state_dict %satomic_number: missing or not a 1-D "
                                   "integer tensor" % (path, p))
            if an.min() < 0 or an.max() > 200:
                raise ConvertError("%s: state_dict %satomic_number: values outside 0..200"
                                   % (path, p))
            expect[p + "atomic_number"] = an.shape
            optional[p + "distance.box"] = (3, 3)
            zbl_map = [int(x) for x in an]
            prior["atomic_number"] = zbl_map
    for name, shape in list(expect.items()) + list(optional.items()):
        if name not in state:
            if name in optional:
                continue
            raise ConvertError("%s: state_dict has no %s (expected shape %s)"
                               % (path, name, list(shape)))
        if tuple(state[name].shape) != tuple(shape):
            raise ConvertError("%s: state_dict %s has shape %s, expected %s"
                               % (path, name, list(state[name].shape), list(shape)))
    extra = sorted(set(state) - set(expect) - set(optional))
    if extra:
        raise ConvertError("%s: state_dict holds tensors this converter does not know (another "
                           "architecture or option?): %s" % (path, ", ".join(extra[:8])
                                                             + (" ..." if len(extra) > 8 else "")))

    dtypes = set()
    tensors = {}
    for name in expect:
        v = state[name]
        if name.endswith("atomic_number"):
            continue
        if v.dtype not in (np.float32, np.float64):
            raise ConvertError("%s: state_dict %s has dtype %s (float32 or float64 expected)"
                               % (path, name, v.dtype))
        if not np.all(np.isfinite(v)):
            raise ConvertError("%s: state_dict %s holds non-finite values" % (path, name))
        dtypes.add(v.dtype)
        tensors[name] = np.ascontiguousarray(v).reshape(v.shape)
    if len(dtypes) != 1:
        raise ConvertError("%s: the state_dict mixes float32 and float64 tensors" % path)

    # Old checkpoints ([N, F, 3, 3] tensor layout, recognised by 'check_errors'): torchmd-net's
    # row remap of the embedding's second and each layer's third scalar linear.
    if "check_errors" in hp:
        names = [rm + "tensor_embedding.linears_scalar.1."]
        names += [rm + "layers.%d.linears_scalar.2." % l for l in range(L)]
        for base in names:
            tensors[base + "weight"] = _remix(tensors[base + "weight"])
            tensors[base + "bias"] = _remix(tensors[base + "bias"])

    ck = TensorNetCheckpoint()
    ck.cfg = cfg
    ck.hyper_parameters = hp
    ck.mean = float(tensors.pop("mean").reshape(-1)[0])
    ck.std = float(tensors.pop("std").reshape(-1)[0])
    if cfg["rbf_type"] == "gauss":
        c = rm + "distance_expansion.coeff"
        tensors[c] = tensors[c].reshape(1)
    ck.tensors = tensors
    ck.output_widths = widths
    ck.zbl_atomic_number = zbl_map
    ck.dtype = "float64" if np.dtype(np.float64) in dtypes else "float32"
    ck.old_layout = "check_errors" in hp
    return ck


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

_ST_DTYPES = {np.dtype(np.float32): ("F32", "<f4"), np.dtype(np.float64): ("F64", "<f8")}


def safetensors_chunks(tensors, metadata):
    """tensors: {name: ndarray (float32 or float64)}; the file's bytes in pieces, with the layout
    guarantees of docs/model-format.md section 4 (sorted, contiguous, 8-byte aligned header)."""
    header = {"__metadata__": dict(metadata)}
    offset = 0
    names = sorted(tensors)
    blobs = []
    for name in names:
        a = tensors[name]
        code, le = _ST_DTYPES[a.dtype]
        data = np.ascontiguousarray(a, dtype=le).tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    blob = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    blob += b" " * ((-(8 + len(blob))) % 8)
    yield struct.pack("<Q", len(blob)) + blob
    for data in blobs:
        yield data


def _yaml_value(v):
    """A flow-style YAML rendering of a hyperparameter value (plain data only)."""
    if v is None:
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if _is_int(v):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f or f in (float("inf"), float("-inf")):
            return json.dumps(repr(f))
        return yaml_float(f)
    if isinstance(v, str):
        return yaml_str(v) if v else '""'
    if isinstance(v, np.ndarray):
        return _yaml_value(v.tolist())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (_yaml_value(str(k)), _yaml_value(x))
                               for k, x in v.items()) + "}"
    return json.dumps(repr(v))


def model_yaml(name, ck, units, weights_file, sha256, source_name, source_sha256, members=None):
    """The model file's text.  members: for an ensemble, [(checkpoint, file name, sha256)] of
    every member in order (ck is member 0's); None for one checkpoint."""
    cfg = ck.cfg
    e_name, _, l_name, _ = units
    maxz = min(cfg["max_z"] - 1, len(_ELEMENTS))
    species = _ELEMENTS[:maxz]
    description = ("TensorNet %s, %d layers, %d channels, converted from torchmd-net checkpoint %s"
                   % (cfg["group"], cfg["num_layers"], cfg["embedding_dimension"], source_name))
    if members:
        description = ("TensorNet ensemble of %d, %s, %d layers, %d channels, converted from "
                       "torchmd-net checkpoints %s"
                       % (len(members), cfg["group"], cfg["num_layers"],
                          cfg["embedding_dimension"], ", ".join(m[1] for m in members)))
    if members:
        source_line = "  source: [%s]" % ", ".join(
            "{file: %s, sha256: \"%s\"}" % (yaml_str(m[1]), m[2]) for m in members)
        mean_line = "  mean: [%s]" % ", ".join(yaml_float(m[0].mean) for m in members)
        std_line = "  std: [%s]" % ", ".join(yaml_float(m[0].std) for m in members)
    else:
        source_line = "  source: {file: %s, sha256: \"%s\"}" % (yaml_str(source_name),
                                                              source_sha256)
        mean_line = "  mean: %s" % yaml_float(ck.mean)
        std_line = "  std: %s" % yaml_float(ck.std)
    lines = [
        "# nnpops model file (format: docs/model-format.md), written by"
        " 'python3 -m nnpops convert --from-torchmdnet'",
        "format: nnpops-model",
        "format_version: %d" % FORMAT_VERSION,
        "name: %s" % yaml_str(name),
        "type: tensornet",
        "description: %s" % json.dumps(description, ensure_ascii=True),
        "units: {length: %s, energy: %s}" % (l_name, yaml_str(e_name)),
        "species: [%s]" % ", ".join(yaml_str(s) for s in species),
        "weights:",
        "  file: %s" % yaml_str(weights_file),
        '  sha256: "%s"' % sha256,
        "tensornet:",
        source_line,
        "  dtype: %s" % ck.dtype,
        "  embedding_dimension: %d" % cfg["embedding_dimension"],
        "  num_layers: %d" % cfg["num_layers"],
        "  num_rbf: %d" % cfg["num_rbf"],
        "  rbf_type: %s" % cfg["rbf_type"],
        "  trainable_rbf: %s" % ("true" if cfg["trainable_rbf"] else "false"),
        "  activation: %s" % cfg["activation"],
        "  cutoff_lower: %s" % yaml_float(cfg["cutoff_lower"]),
        "  cutoff_upper: %s" % yaml_float(cfg["cutoff_upper"]),
        "  max_z: %d" % cfg["max_z"],
        "  equivariance_invariance_group: %s" % yaml_str(cfg["group"]),
        "  output_model: Scalar",
        "  reduce_op: sum",
        "  output_widths: [%s]" % ", ".join(str(w) for w in ck.output_widths),
        mean_line,
        std_line,
        "  box_vecs: %s" % ("null" if cfg["box_vecs"] is None
                            else _yaml_value(cfg["box_vecs"].tolist())),
        "  old_layout_remapped: %s" % ("true" if (any(m[0].old_layout for m in members)
                                                  if members else ck.old_layout) else "false"),
    ]
    if members:
        lines.append("  ensemble_size: %d" % len(members))
    if not cfg["priors"]:
        lines.append("  priors: []")
    else:
        lines.append("  priors:")
        for p in cfg["priors"]:
            if p["type"] == "Atomref":
                lines.append("    - {type: Atomref, enable: %s, max_z: %d, tensor: %s}"
                             % ("true" if p["enable"] else "false", p["max_z"],
                                yaml_str(p["tensor"])))
            else:
                lines.append("    - {type: ZBL, cutoff_distance: %s, distance_scale: %s, "
                             "energy_scale: %s,"
                             % (yaml_float(p["cutoff_distance"]), yaml_float(p["distance_scale"]),
                                yaml_float(p["energy_scale"])))
                lines.append("       atomic_number: [%s]}"
                             % ", ".join(str(z) for z in p["atomic_number"]))
    lines.append("  hyper_parameters:")
    for key in ck.hyper_parameters:
        lines.append("    %s: %s" % (yaml_str(key), _yaml_value(ck.hyper_parameters[key])))
    return ("\n".join(lines) + "\n").encode("ascii")


def _sanitize_name(text):
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", text)
    return name.strip(".") or "tensornet"


# The settings that make two checkpoints the same architecture (members of one ensemble must
# agree on all of them; training options such as the seed or the learning rate may differ).
_ARCHITECTURE = ("embedding_dimension", "num_layers", "num_rbf", "rbf_type", "trainable_rbf",
                 "activation", "cutoff_lower", "cutoff_upper", "max_z", "group", "box_vecs",
                 "priors")
_MAX_MEMBERS = 64


class EnsembleMismatchError(ConvertError):
    """Checkpoints given as one ensemble that differ in architecture or hyperparameters."""


def _architecture(ck):
    """(key, value) pairs that must agree between ensemble members."""
    cfg = ck.cfg
    rows = []
    for key in _ARCHITECTURE:
        v = cfg[key]
        if key == "box_vecs" and v is not None:
            v = np.asarray(v).tolist()
        if key == "priors":
            v = [{k: x for k, x in p.items()} for p in v]
        rows.append((key, v))
    rows.append(("output_widths", list(ck.output_widths)))
    rows.append(("dtype", ck.dtype))
    return rows


def check_ensemble(members):
    """members: [(checkpoint, name)]; raises EnsembleMismatchError naming the first setting in
    which a member differs from the first one."""
    first, first_name = members[0]
    arch = _architecture(first)
    for ck, name in members[1:]:
        for (key, a), (_, b) in zip(arch, _architecture(ck)):
            if a != b:
                raise EnsembleMismatchError(
                    "ensemble members must share the architecture and hyperparameters: %s has "
                    "%s = %s, %s has %s" % (first_name, key, _yaml_value(a), name,
                                            _yaml_value(b)))


def _ensemble_zip_members(path):
    """The top-level *.ckpt files of a zip that holds checkpoints (torchmd-net's ensemble
    archive, as its load_ensemble reads it), sorted by name; None when the file is not such a
    zip (a torch checkpoint is a zip too, with its pickle under a folder)."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    found = sorted(n for n in names if n.endswith(".ckpt") and "/" not in n.rstrip("/"))
    return found or None


_ZIP_MEMBER_LIMIT = 8 << 30


def _extract_members(path, names, tmpdir):
    """Copies the named zip members into tmpdir (each at most 8 GiB); returns their paths."""
    out = []
    try:
        with zipfile.ZipFile(path) as zf:
            for name in names:
                info = zf.getinfo(name)
                if info.file_size > _ZIP_MEMBER_LIMIT:
                    raise ConvertError("%s: member %s is larger than 8 GiB" % (path, name))
                dest = os.path.join(tmpdir, "%03d.ckpt" % len(out))
                copied = 0
                with zf.open(info) as src, open(dest, "wb") as dst:
                    for chunk in iter(lambda: src.read(1 << 20), b""):
                        copied += len(chunk)
                        if copied > _ZIP_MEMBER_LIMIT:
                            raise ConvertError("%s: member %s is larger than 8 GiB"
                                               % (path, name))
                        dst.write(chunk)
                out.append(dest)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise ConvertError("%s: cannot read the zip of checkpoints: %s" % (path, exc)) from None
    return out


def _default_name(path):
    base = os.path.basename(path)
    for ext in (".ckpt", ".pt", ".pth", ".zip"):
        if base.endswith(ext):
            base = base[: -len(ext)]
            break
    return _sanitize_name(base)


def convert_tensornet(ckpt_path, output_dir, name=None, units="eV,A", force=False):
    """Convert one checkpoint, or an ensemble into one model: ckpt_path a list of checkpoints
    (two or more) or a zip of checkpoints (torchmd-net's ensemble archive).  Returns (status,
    yaml_path, detail) like convert_model."""
    paths = [ckpt_path] if isinstance(ckpt_path, (str, os.PathLike)) else list(ckpt_path)
    if not paths:
        raise ConvertError("no checkpoint given")
    unit_info = parse_units(units)
    if name is None:
        name = _default_name(paths[0])
    elif not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ConvertError("--name %r: only letters, digits, '_', '.' and '-' are allowed" % name)
    for path in paths:
        if not os.path.isfile(path):
            raise ConvertError("%s: no such file" % path)
    yaml_path = os.path.join(output_dir, name + ".yaml")
    weights_file = name + ".safetensors"
    weights_path = os.path.join(output_dir, weights_file)
    stamp_path = os.path.join(output_dir, name + ".stamp")
    try:
        shas = [_file_sha256(path) for path in paths]
    except OSError as exc:
        raise ConvertError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    source_sha256 = shas[0] if len(paths) == 1 else hashlib.sha256(
        "".join(shas).encode("ascii")).hexdigest()
    if not force and _up_to_date(yaml_path, weights_path, stamp_path, source_sha256, units):
        return "up to date", yaml_path, ""

    zip_names = _ensemble_zip_members(paths[0]) if len(paths) == 1 else None
    with tempfile.TemporaryDirectory(prefix="nnpops-ensemble-") as tmpdir:
        if zip_names:
            if len(zip_names) > _MAX_MEMBERS:
                raise ConvertError("%s holds %d checkpoints; at most %d ensemble members"
                                   % (paths[0], len(zip_names), _MAX_MEMBERS))
            files = _extract_members(paths[0], zip_names, tmpdir)
            members = []
            for f, zname in zip(files, zip_names):
                try:
                    ck = read_tensornet(f)
                except ConvertError as exc:
                    raise ConvertError(str(exc).replace(f, "%s:%s" % (paths[0], zname))) from None
                members.append((ck, zname, _file_sha256(f)))
        else:
            if len(paths) > _MAX_MEMBERS:
                raise ConvertError("%d checkpoints; at most %d ensemble members"
                                   % (len(paths), _MAX_MEMBERS))
            members = [(read_tensornet(path), os.path.basename(path), sha)
                       for path, sha in zip(paths, shas)]
    if len(members) > 1:
        check_ensemble([(m[0], m[1]) for m in members])
    ck = members[0][0]
    e_name, joules, l_name, metres = unit_info
    for p in ck.cfg["priors"]:
        if p["type"] != "ZBL":
            continue
        if abs(p["energy_scale"] / joules - 1) > 1e-3 or abs(p["distance_scale"] / metres - 1) > 1e-3:
            raise ConvertError(
                "%s: the ZBL prior's energy_scale %r J and distance_scale %r m say the model's "
                "units are not %s and %s (%r J, %r m); pass the right --units"
                % (paths[0], p["energy_scale"], p["distance_scale"], e_name, l_name, joules,
                   metres))

    if len(members) > 1:
        tensors = {"m%d.%s" % (k, t): a for k, m in enumerate(members)
                   for t, a in m[0].tensors.items()}
    else:
        tensors = ck.tensors
    source_names = ", ".join(m[1] for m in members) if not zip_names else (
        "%s (%s)" % (os.path.basename(paths[0]), ", ".join(zip_names)))
    metadata = {"format": "nnpops", "format_version": str(FORMAT_VERSION), "model": name,
                "source": source_names, "type": "tensornet"}
    if len(members) > 1:
        metadata["ensemble_size"] = str(len(members))
    try:
        os.makedirs(output_dir, exist_ok=True)
        sha256 = _write_atomic(weights_path, safetensors_chunks(tensors, metadata))
        st = os.stat(weights_path)
        text = model_yaml(name, ck, unit_info, weights_file, sha256,
                          os.path.basename(paths[0]), source_sha256,
                          members if len(members) > 1 else None)
        _write_atomic(yaml_path, [text])
        stamp = {
            "converter_version": CONVERTER_VERSION,
            "type": "tensornet",
            "yaml_sha256": hashlib.sha256(text).hexdigest(),
            "weights_file": weights_file,
            "weights_sha256": sha256,
            "weights_size": st.st_size,
            "weights_mtime_ns": st.st_mtime_ns,
            "source_file": ", ".join(os.path.basename(p) for p in paths),
            "source_sha256": source_sha256,
            "units": units,
        }
        _write_atomic(stamp_path, [(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
                                   .encode("ascii")])
    except OSError as exc:
        raise ConvertError("cannot write %s: %s" % (output_dir, exc)) from None
    detail = "%s, %d bytes, %d tensors, %s" % (weights_file, st.st_size, len(tensors), ck.dtype)
    if len(members) > 1:
        detail += ", ensemble of %d" % len(members)
    return "written", yaml_path, detail


def _up_to_date(yaml_path, weights_path, stamp_path, source_sha256, units):
    stamp = _read_stamp(stamp_path)
    if (stamp is None or stamp.get("converter_version") != CONVERTER_VERSION
            or stamp.get("type") != "tensornet" or stamp.get("source_sha256") != source_sha256
            or stamp.get("units") != units):
        return False
    return _stamp_matches_files(stamp, yaml_path, weights_path)
