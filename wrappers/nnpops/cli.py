"""The ``nnpops`` command line (also ``python3 -m nnpops``).

    nnpops convert [MODEL ...] [--source DIR] [--output DIR] ...   NeuroChem files -> nnpops models
    nnpops convert --from-torchmdnet FILE.ckpt [--name NAME] ...   a TensorNet checkpoint -> a model
    nnpops eval --model ani2x [--precision float64|float32] [--device cpu|cuda]
                [--json OUT] [--batch-size K] FILE                 energies and forces of every frame
    nnpops info [MODEL]                                           a model's (or the library's) facts

``eval`` reads every frame of FILE with ``ase.io.read(FILE, index=":")`` (extxyz with Lattice and
pbc, xyz, pdb, ...) and evaluates the frames in batches of K (one library call per batch).  It
prints one line per frame and, with ``--json OUT`` (``-`` for standard output), writes
``{"frames": [{"energy_eV", "forces_eV_per_A", "stress_eV_per_A3", "atomic_energies_eV"}]}``;
the stress (3x3, -W/V) is given for fully periodic frames only, else null.

Exit status: 0 on success, 1 on an error (message on standard error), 2 on a usage error.
"""

import argparse
import json
import sys

__all__ = ["main"]

_PROG = "nnpops"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors: exit status 2
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        raise SystemExit(2)


def _parser():
    p = _Parser(prog=_PROG, description="nnpops: fast ANI potentials (C library + Python front ends)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("convert", add_help=False,
                   help="convert the published NeuroChem ANI files, or a torchmd-net TensorNet "
                        "checkpoint (--from-torchmdnet), into nnpops models "
                        "(see 'nnpops convert --help')")
    e = sub.add_parser("eval", help="energies and forces of every frame of a structure file")
    e.add_argument("file", metavar="FILE", help="structure file readable by ase.io (extxyz, xyz, pdb, ...)")
    e.add_argument("--model", default="ani2x", help="model name or YAML path (default ani2x)")
    e.add_argument("--precision", default="float64", choices=["float64", "float32"])
    e.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    e.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT ('-': stdout)")
    e.add_argument("--batch-size", metavar="K", type=int, default=64,
                   help="frames per library call (default 64)")
    e.add_argument("--format", help="file format for ase.io.read (default: from the name)")
    i = sub.add_parser("info", help="describe a model (or, without MODEL, the library)")
    i.add_argument("model", metavar="MODEL", nargs="?", help="model name or YAML path")
    i.add_argument("--device", default="cpu")
    i.add_argument("--precision", default="float64", choices=["float64", "float32"])
    return p


def _eval(args, out):
    import ase.io
    import numpy as np

    from . import _lib
    from .ase import evaluate_batch, virial_to_stress

    if args.batch_size < 1:
        raise ValueError("--batch-size must be at least 1")
    kw = {"index": ":"}
    if args.format:
        kw["format"] = args.format
    frames = ase.io.read(args.file, **kw)
    if not isinstance(frames, list):
        frames = [frames]
    model = _lib.Model(args.model, device=args.device, precision=args.precision)
    ctx = _lib.Context(model)
    results = []
    for start in range(0, len(frames), args.batch_size):
        chunk = frames[start:start + args.batch_size]
        for atoms in chunk:
            # A frame without a cell (all zero) or with pbc all False is not periodic.
            if not np.any(atoms.pbc) or not np.any(atoms.cell.array):
                atoms.pbc = False
        for k, (atoms, r) in enumerate(zip(chunk, evaluate_batch(chunk, ctx))):
            index = start + k
            forces = np.asarray(r["forces"])
            fmax = float(np.sqrt((forces ** 2).sum(axis=1)).max()) if len(forces) else 0.0
            out.write("frame %d: energy %.10f eV, max |F| %.6f eV/A\n" % (index, r["energy"], fmax))
            stress = None
            if len(atoms) and bool(np.all(atoms.pbc)):
                stress = virial_to_stress(r["virial"], atoms.cell.array).tolist()
            results.append({"energy_eV": r["energy"],
                            "forces_eV_per_A": forces.tolist(),
                            "stress_eV_per_A3": stress,
                            "atomic_energies_eV": np.asarray(r["energies"]).tolist()})
    ctx.close()
    doc = {"model": model.name, "model_path": model.path, "precision": model.precision,
           "device": model.device, "units": {"energy": "eV", "length": "angstrom"},
           "frames": results}
    if args.json == "-":
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0


def _info(args, out):
    from . import _lib
    from . import modelpath

    if args.model is None:
        info = _lib.library_info()
        out.write("library: %s\n" % info["path"])
        out.write("version: %s\n" % info["version"])
        out.write("cuda built: %s\n" % ("yes" if info["cuda_built"] else "no"))
        out.write("cuda devices: %d\n" % info["cuda_devices"])
        out.write("model search path: %s\n" % ":".join(modelpath.model_search_dirs()))
        return 0
    from ase.data import chemical_symbols

    model = _lib.Model(args.model, device=args.device, precision=args.precision)
    symbols = [chemical_symbols[z] if 0 < z < len(chemical_symbols) else str(z)
               for z in model.species]
    out.write("name: %s\n" % model.name)
    out.write("type: %s\n" % model.type)
    out.write("elements: %s\n" % " ".join(symbols))
    out.write("cutoff: %g A\n" % model.cutoff)
    out.write("interaction range: %g A\n" % model.interaction_range)
    out.write("uses charge: %s\n" % ("yes" if model.uses_charge else "no"))
    out.write("ensemble size: %d\n" % model.ensemble_size)
    out.write("path: %s\n" % model.path)
    out.write("device: %s\n" % model.device)
    out.write("precision: %s\n" % model.precision)
    if model.type == "tensornet":
        out.write("tensornet:\n")
        for key, value in _tensornet_keys(model.path):
            out.write("  %s: %s\n" % (key, value))
    return 0


# The hyperparameters `nnpops info` shows for a tensornet model (docs/model-format.md 9.1), in order.
_TENSORNET_SHOWN = ("source", "dtype", "embedding_dimension", "num_layers", "num_rbf", "rbf_type",
                    "trainable_rbf", "activation", "cutoff_lower", "cutoff_upper", "max_z",
                    "equivariance_invariance_group", "output_model", "reduce_op",
                    "output_widths", "mean", "std", "box_vecs", "old_layout_remapped")


def _tensornet_keys(path):
    """(key, value text) of the one-line keys of a model file's `tensornet` mapping, then `priors`
    as the list of prior types.  Reads the file's text (the library has validated it)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    found, priors, inside, in_priors = {}, [], False, False
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            inside = line.rstrip() == "tensornet:"
            continue
        if not inside:
            continue
        if line.startswith("  ") and not line.startswith("   "):
            key, _, value = line.strip().partition(":")
            in_priors = key == "priors"
            if key in _TENSORNET_SHOWN:
                found[key] = value.strip()
        elif in_priors and line.lstrip().startswith("- "):
            item = line.lstrip()[2:].strip().lstrip("{")
            ptype = item.partition(",")[0].partition(":")[2].strip()
            if item.startswith("type:") and ptype:
                priors.append(ptype)
    rows = [(k, found[k]) for k in _TENSORNET_SHOWN if k in found]
    rows.append(("priors", ", ".join(priors) if priors else "none"))
    return rows


def main(argv=None):
    """Run the command line; returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    argv = list(argv)
    if argv and argv[0] == "convert":
        from . import convert
        return int(convert.main(argv[1:]) or 0)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command is None:
        _parser().print_help(sys.stderr)
        return 2
    out = sys.stderr if getattr(args, "json", None) == "-" else sys.stdout
    try:
        if args.command == "eval":
            return _eval(args, out)
        if args.command == "info":
            return _info(args, out)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # every failure is reported the same way: message, status 1
        sys.stderr.write("%s %s: error: %s\n" % (_PROG, args.command, exc or type(exc).__name__))
        return 1
    return 2
