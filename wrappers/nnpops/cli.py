"""The ``nnpops`` command line (also ``python3 -m nnpops``).

    nnpops convert [MODEL ...] [--download | --source PATH] ...    NeuroChem files -> nnpops models
    nnpops convert --from-torchmdnet FILE.ckpt [--name NAME] ...   a TensorNet checkpoint -> a model
    nnpops eval FILE [--model ani2x] [--device auto|cpu|cuda|cuda:N] [--precision float64|float32]
                [--charge Q] [--member K] [--xyz OUT] [--json OUT] [--batch-size K]
                [--format FMT] [--quiet]                          energies and forces of every frame
    nnpops info [MODEL]                                           a model's (or the library's) facts
    nnpops analyze MODEL FILE [--plot OUT.png] [--json OUT.json]  per-stage scales and rounding
                                                                  errors (docs/analyze.md)

``eval`` reads the frames of FILE one batch at a time with ``ase.io.iread`` (extxyz with Lattice
and pbc, xyz, pdb, ...; the file is never held in memory whole), evaluates each batch of K frames
in one library call and writes each result as soon as it is known:

* ``--xyz OUT``: extended XYZ, each frame with ``energy`` (eV), ``forces`` (eV/Å), the per-atom
  ``energies`` (eV) and, for fully periodic frames, ``stress`` (eV/Å^3, ASE's sign), readable by
  ``ase.io.read(OUT, index=":")``;
* ``--json OUT``: ``{"model", ..., "frames": [{"energy_eV", "forces_eV_per_A",
  "stress_eV_per_A3" (3x3, -W/V; null unless fully periodic), "atomic_energies_eV"}]}``;

Charge: a frame's total charge is its ``charge`` key (``atoms.info["charge"]``, the extxyz
comment's ``charge=``), else ``--charge`` (default neutral), as the ASE calculator takes it; a
model that does not use a charge (ANI) refuses a nonzero one.  Ensembles (ANI, TensorNet ensembles):
each frame also gets its members' energies and their spread (the standard deviation over the
members, ddof=1, as the ASE calculator's ``energy_std``): JSON ``member_energies_eV`` and
``energy_std_eV``, extended XYZ ``member_energies`` and ``energy_std``; ``--member K`` evaluates
member K only.

``-`` writes to standard output.  Without an output file every frame's energy and largest force
are printed (one line each); with one, a progress line (frames, frames per second) is shown on
standard error when it is a terminal, then a summary.  ``--device auto`` (the default) uses CUDA
when the library has it and a GPU is present.  ``info`` needs neither ASE nor NumPy.

Exit status: 0 on success, 1 on an error (message on standard error), 2 on a usage error.
"""

import argparse
import json
import sys
import time

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
                   help="convert the published NeuroChem ANI files (downloading them with "
                        "--download), or a torchmd-net TensorNet checkpoint "
                        "(--from-torchmdnet), into nnpops models (see 'nnpops convert --help')")
    e = sub.add_parser("eval", help="energies and forces of every frame of a structure file")
    e.add_argument("file", metavar="FILE", help="structure file readable by ase.io (extxyz, xyz, pdb, ...)")
    e.add_argument("--model", default="ani2x", help="model name or YAML path (default ani2x)")
    e.add_argument("--precision", default="float64", choices=["float64", "float32"])
    e.add_argument("--device", default="auto",
                   help="auto, cpu, cuda or cuda:N (default auto: CUDA when built and present)")
    e.add_argument("--charge", metavar="Q", type=float,
                   help="total charge (elementary charges) of frames without their own 'charge' "
                        "key (default neutral)")
    e.add_argument("--member", metavar="K", type=int,
                   help="evaluate ensemble member K only (default: the ensemble mean)")
    e.add_argument("--xyz", metavar="OUT",
                   help="write the frames with their results as extended XYZ to OUT ('-': stdout)")
    e.add_argument("--json", metavar="OUT", help="write the results as JSON to OUT ('-': stdout)")
    e.add_argument("--batch-size", metavar="K", type=int, default=64,
                   help="frames per library call (default 64)")
    e.add_argument("--format", help="file format for ase.io (default: from the name)")
    e.add_argument("--quiet", action="store_true", help="no per-frame lines, progress or summary")
    a = sub.add_parser("analyze", help="per-stage value scales of a model over the frames of a "
                       "structure file, and the energy and force errors of rounding each stage to "
                       "float32, TF32 or bfloat16 (float64 NumPy, CPU)")
    from .analyze import add_arguments
    add_arguments(a)
    i = sub.add_parser("info", help="describe a model (or, without MODEL, the library)")
    i.add_argument("model", metavar="MODEL", nargs="?", help="model name or YAML path")
    i.add_argument("--device", default="auto")
    i.add_argument("--precision", default="float64", choices=["float64", "float32"])
    return p


class _Progress:
    """A one-line frame counter on a terminal (standard error), redrawn at most 10 times a
    second."""

    def __init__(self, stream):
        self.stream = stream
        self.on = hasattr(stream, "isatty") and stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.frames = 0
        self.atoms = 0

    def update(self, frames, atoms, force=False):
        self.frames += frames
        self.atoms += atoms
        now = time.monotonic()
        if self.on and (force or now - self.last >= 0.1):
            self.last = now
            elapsed = max(now - self.start, 1e-9)
            self.stream.write("\r%d frames, %d atoms, %.1f frames/s, %.1f s "
                              % (self.frames, self.atoms, self.frames / elapsed, elapsed))
            self.stream.flush()

    def done(self):
        if self.on:
            self.update(0, 0, force=True)
            self.stream.write("\n")
            self.stream.flush()


def _batches(iterator, size):
    batch = []
    for atoms in iterator:
        batch.append(atoms)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class _JsonWriter:
    """Writes the JSON document frame by frame (a frame's text as soon as it is known)."""

    def __init__(self, f, head):
        self.f = f
        self.first = True
        text = json.dumps(head, indent=1)
        self.f.write(text[:-2] + ',\n "frames": [')

    def frame(self, doc):
        self.f.write(("\n  " if self.first else ",\n  ") + json.dumps(doc))
        self.first = False

    def close(self):
        self.f.write("\n ]\n}\n" if not self.first else "]\n}\n")
        self.f.flush()


def _open_out(path, stack):
    if path == "-":
        return sys.stdout
    return stack.enter_context(open(path, "w", encoding="utf-8"))


def _eval(args, out):
    import contextlib

    import ase.io
    import numpy as np
    from ase.calculators.singlepoint import SinglePointCalculator

    from . import _lib
    from .ase import evaluate_batch, virial_to_stress

    if args.batch_size < 1:
        raise ValueError("--batch-size must be at least 1")
    if args.xyz == "-" and args.json == "-":
        raise ValueError("--xyz - and --json - cannot both write to standard output")
    kw = {"index": ":"}
    if args.format:
        kw["format"] = args.format
    model = _lib.Model(args.model, device=args.device, precision=args.precision)
    ctx = _lib.Context(model, **({} if args.member is None else {"ensemble_member": args.member}))
    ensemble = model.ensemble_size > 1 and args.member is None
    per_frame_lines = not (args.xyz or args.json) and not args.quiet
    progress = _Progress(sys.stderr if not args.quiet and not per_frame_lines else None)
    with contextlib.ExitStack() as stack:
        stack.callback(ctx.close)
        jw = None
        if args.json:
            jw = _JsonWriter(_open_out(args.json, stack),
                             {"model": model.name, "model_path": model.path,
                              "precision": model.precision, "device": model.device,
                              "ensemble_size": model.ensemble_size,
                              "units": {"energy": "eV", "length": "angstrom"}})
        xyz = _open_out(args.xyz, stack) if args.xyz else None
        index = 0
        energy_sum = 0.0
        for chunk in _batches(ase.io.iread(args.file, **kw), args.batch_size):
            for atoms in chunk:
                # A frame without a cell (all zero) or with pbc all False is not periodic.
                if not np.any(atoms.pbc) or not np.any(atoms.cell.array):
                    atoms.pbc = False
                if args.charge is not None and "charge" not in atoms.info:
                    atoms.info["charge"] = args.charge
            for atoms, r in zip(chunk, evaluate_batch(chunk, ctx)):
                forces = np.asarray(r["forces"])
                energies = np.asarray(r["energies"])
                periodic = len(atoms) > 0 and bool(np.all(atoms.pbc))
                stress = virial_to_stress(r["virial"], atoms.cell.array) if periodic else None
                energy_sum += r["energy"]
                if per_frame_lines:
                    fmax = float(np.sqrt((forces ** 2).sum(axis=1)).max()) if len(forces) else 0.0
                    out.write("frame %d: energy %.10f eV%s, max |F| %.6f eV/A\n"
                              % (index, r["energy"],
                                 ", spread %.6f eV" % r["energy_std"] if ensemble else "", fmax))
                if jw is not None:
                    doc = {"energy_eV": r["energy"], "forces_eV_per_A": forces.tolist(),
                           "stress_eV_per_A3": None if stress is None else stress.tolist(),
                           "atomic_energies_eV": energies.tolist()}
                    if ensemble:
                        doc["member_energies_eV"] = np.asarray(r["member_energies"]).tolist()
                        doc["energy_std_eV"] = r["energy_std"]
                    jw.frame(doc)
                if xyz is not None:
                    results = {"energy": r["energy"], "free_energy": r["energy"],
                               "forces": forces, "energies": energies}
                    if stress is not None:
                        results["stress"] = stress
                    if ensemble:
                        atoms.info["member_energies"] = np.asarray(r["member_energies"])
                        atoms.info["energy_std"] = r["energy_std"]
                    atoms.calc = SinglePointCalculator(atoms, **results)
                    ase.io.write(xyz, atoms, format="extxyz")
                index += 1
            progress.update(len(chunk), sum(len(a) for a in chunk))
            if xyz is not None:
                xyz.flush()
        if jw is not None:
            jw.close()
    progress.done()
    if not args.quiet and not per_frame_lines:
        sys.stderr.write("%d frames evaluated with %s (%s, %s)\n"
                         % (index, model.name, model.device, model.precision))
    return 0


def _symbol(z):
    from .convert import _ELEMENTS

    return _ELEMENTS[z - 1] if 0 < z <= len(_ELEMENTS) else str(z)


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
    model = _lib.Model(args.model, device=args.device, precision=args.precision)
    out.write("name: %s\n" % model.name)
    out.write("type: %s\n" % model.type)
    out.write("elements: %s\n" % " ".join(_symbol(z) for z in model.species))
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
                    "output_widths", "mean", "std", "box_vecs", "old_layout_remapped",
                    "ensemble_size")


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
    to_stdout = "-" in (getattr(args, "json", None), getattr(args, "xyz", None))
    out = sys.stderr if to_stdout else sys.stdout
    try:
        if args.command == "eval":
            return _eval(args, out)
        if args.command == "info":
            return _info(args, out)
        if args.command == "analyze":
            from .analyze import run
            return run(args, out)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # every failure is reported the same way: message, status 1
        sys.stderr.write("%s %s: error: %s\n" % (_PROG, args.command, exc or type(exc).__name__))
        return 1
    return 2
