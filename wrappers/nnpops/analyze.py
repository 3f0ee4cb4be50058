"""``nnpops analyze MODEL FILE [--plot OUT.png] [--json OUT.json]``: where a model's numbers live,
and what rounding each stage to float32, TF32 or bfloat16 would cost.

For every frame of FILE (any structure file ``nnpops eval`` reads) the model is evaluated in
float64 NumPy on an instrumented graph (analyze_models, analyze_graph), outside the library:

1. once as is, recording per stage the RMS, the largest magnitude and the fraction of values
   outside the normal range of float32 and bfloat16, for the stage's outputs (forward) and for the
   adjoints dE/d(output) (backward); this evaluation's energy and forces must equal the library's
   (the nnpops Python API, float64, CPU) to 1e-10 relative, or the analysis stops with an error;
2. then once per stage and format, with that stage's outputs and adjoints rounded to the format
   (analyze_round) and everything else float64: the energy error and the largest force error
   (the norm of an atom's force difference) against step 1.

The text table and the JSON report are byte-identical run to run: every number is printed with a
fixed number of significant digits, the JSON keys are sorted, and nothing that varies (time, host,
paths other than the structure file's name) is written.  Threads do not enter: the analysis runs
in one process, its sums are NumPy's own reductions and fixed-order scatter sums, and the only
threaded code, BLAS's matrix products, is checked by the tests to give the same bytes with one
and two threads.
"""

import json
import math
import os
import sys

import numpy as np

from . import analyze_graph as G
from . import analyze_models
from .analyze_round import FORMATS, FORMAT_BITS

__all__ = ["analyze", "analyze_frames", "format_table", "dumps", "plot", "add_arguments", "run",
           "FORCE_BOUND", "VERIFY_RTOL", "AnalyzeError"]

#: Forces within this of the float64 ones (eV/A) count as float32-quality.
FORCE_BOUND = 1e-3
#: The float64 analysis must agree with the library this closely (relative).
VERIFY_RTOL = 1e-10

AnalyzeError = analyze_models.AnalyzeError


def _sig(x, digits=6):
    """x rounded to ``digits`` significant digits (a float with a fixed decimal form)."""
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x
    return float("%.*e" % (digits - 1, x))


class _Verifier:
    """The library's float64 CPU result of a frame, to check the analysis against."""

    def __init__(self, path):
        from . import _lib

        self.model = _lib.Model(path, device="cpu", precision="float64")
        self.ctx = _lib.Context(self.model)

    def compute(self, numbers, positions, cell, pbc, charge):
        kw = {}
        if cell is not None:
            kw["cells"] = cell
            kw["pbc"] = np.asarray(pbc, bool)
        if self.model.uses_charge:
            kw["charges"] = float(charge)
        r = self.ctx.compute(np.asarray(numbers, np.int32), positions, **kw)
        return float(r["energies"][0]), np.array(r["forces"])

    def close(self):
        self.ctx.close()
        self.model.close()


def _frame_inputs(atoms):
    numbers = np.asarray(atoms.numbers, dtype=np.int64)
    pos = np.asarray(atoms.positions, dtype=np.float64)
    cell = None
    pbc = np.zeros(3, bool)
    if np.any(atoms.pbc) and np.any(atoms.cell.array):
        cell = np.asarray(atoms.cell.array, dtype=np.float64)
        pbc = np.asarray(atoms.pbc, bool)
    charge = float(atoms.info.get("charge", 0.0)) if hasattr(atoms, "info") else 0.0
    return numbers, pos, cell, pbc, charge


def _evaluate(model, topo, pos_model, stats=None, rounded=None):
    g = G.Graph(stats=stats, rounded=rounded)
    x = g.input(pos_model)
    e = model.energy(g, x, topo)
    grad = g.gradient(e, x)
    g.release()
    return float(e.value), -grad, g.seen


def analyze_frames(model, frames, model_path=None, verify=True, progress=None, formats=FORMATS):
    """The report (a dict) of ``model`` (an analyze_models model) over ``frames`` (ASE Atoms).
    ``verify``: check every frame against the library (``model_path`` names its YAML file);
    ``formats``: the roundings to evaluate (empty: the scales and the check only)."""
    e_to_ev = analyze_models.ENERGY_TO_EV[model.energy_unit]
    l_to_a = analyze_models.LENGTH_TO_A[model.length_unit]
    f_to_ev_a = e_to_ev / l_to_a
    stats = {}
    order = []
    errors = {}
    n_frames = 0
    n_atoms = 0
    verifier = _Verifier(model_path) if verify else None
    try:
        for atoms in frames:
            numbers, pos, cell, pbc, charge = _frame_inputs(atoms)
            if len(numbers) == 0:
                raise AnalyzeError("frame %d has no atoms" % n_frames)
            pm = pos / l_to_a
            cm = None if cell is None else cell / l_to_a
            topo = model.prepare(numbers, pm, cm, pbc, charge)
            e0, f0, seen = _evaluate(model, topo, pm, stats=stats)
            e0_ev, f0_ev = e0 * e_to_ev, f0 * f_to_ev_a
            if verifier is not None:
                e_lib, f_lib = verifier.compute(numbers, pos, cell, pbc, charge)
                de = abs(e0_ev - e_lib)
                df = float(np.abs(f0_ev - f_lib).max())
                fscale = max(float(np.abs(f_lib).max()), 1e-3)
                if not (de <= VERIFY_RTOL * max(abs(e_lib), 1e-3)
                        and df <= VERIFY_RTOL * fscale):
                    raise AnalyzeError(
                        "frame %d: the float64 analysis differs from the library: energy %.17g "
                        "eV vs %.17g eV (|dE| %.3e), largest force difference %.3e eV/A; the "
                        "analysis would describe another model, so it stops here"
                        % (n_frames, e0_ev, e_lib, de, df))
            for k, name in enumerate(seen):
                if progress is not None:
                    progress(n_frames, k, len(seen))
                if name not in order:
                    order.append(name)
                for fmt in formats:
                    e1, f1, _ = _evaluate(model, topo, pm, rounded=(name, fmt))
                    de = abs(e1 - e0) * e_to_ev
                    df = float(np.sqrt(((f1 - f0) ** 2).sum(-1)).max()) * f_to_ev_a
                    cur = errors.setdefault((name, fmt), [0.0, 0.0, 0.0])
                    cur[0] = max(cur[0], de)
                    cur[1] = max(cur[1], de / len(numbers))
                    cur[2] = max(cur[2], df)
            n_frames += 1
            n_atoms += len(numbers)
    finally:
        if verifier is not None:
            verifier.close()
    if n_frames == 0:
        raise AnalyzeError("the structure file has no frames")
    canonical = model.stage_order()
    order.sort(key=lambda s: (canonical.index(s) if s in canonical else len(canonical), s))
    stages = []
    for name in order:
        row = {"name": name}
        for direction in ("forward", "adjoint"):
            st = stats.get((name, direction))
            summ = st.summary() if st is not None else None
            if summ is not None:
                summ = {k: (v if isinstance(v, int) else _sig(v)) for k, v in summ.items()}
            row[direction] = summ
        row["rounded"] = {}
        for fmt in formats:
            de, dea, df = errors[(name, fmt)]
            row["rounded"][fmt] = {"energy_error_eV": _sig(de),
                                   "energy_error_per_atom_eV": _sig(dea),
                                   "max_force_error_eV_per_A": _sig(df),
                                   "within_force_bound": bool(df <= FORCE_BOUND)}
        stages.append(row)
    verdict = {fmt: {"within_force_bound": [s["name"] for s in stages
                                            if s["rounded"][fmt]["within_force_bound"]],
                     "outside_force_bound": [s["name"] for s in stages
                                             if not s["rounded"][fmt]["within_force_bound"]]}
               for fmt in formats}
    return {
        "analysis": "nnpops analyze",
        "report_version": 1,
        "model": {"name": model.name, "type": model.type, "energy_unit": model.energy_unit,
                  "length_unit": model.length_unit},
        "frames": n_frames,
        "atoms": n_atoms,
        "units": {"energy": "eV", "force": "eV/A", "stage_values": "model units"},
        "formats": {f: {"mantissa_bits": FORMAT_BITS[f][0], "min_exponent": FORMAT_BITS[f][1],
                        "max_exponent": FORMAT_BITS[f][2], "rounding": "nearest, ties to even"}
                    for f in formats},
        "force_bound_eV_per_A": FORCE_BOUND,
        "verified_against_library": {"checked": bool(verify), "relative_tolerance": VERIFY_RTOL,
                                     "frames": n_frames if verify else 0},
        "stages": stages,
        "verdict": verdict,
    }


def _read_frames(path, fmt=None):
    import ase.io

    kw = {"index": ":"}
    if fmt:
        kw["format"] = fmt
    return ase.io.iread(path, **kw)


def resolve_model(name_or_path):
    from . import modelpath

    path = modelpath.find_model(name_or_path)
    if path is None:
        raise AnalyzeError("model %r not found (searched %s)"
                           % (name_or_path, ":".join(modelpath.model_search_dirs())))
    return path


def analyze(model, file, fmt=None, verify=True, progress=None):
    """The report of model (a name or YAML path) over the frames of the structure file.
    ``progress(frame, stage, stages)`` is called before each stage's roundings."""
    path = resolve_model(model)
    m = analyze_models.load(path)
    report = analyze_frames(m, _read_frames(file, fmt), model_path=path, verify=verify,
                            progress=progress)
    report["structure_file"] = os.path.basename(file)
    return report


def dumps(report):
    """The JSON text of a report (sorted keys, fixed layout, newline-terminated)."""
    return json.dumps(report, sort_keys=True, indent=1, ensure_ascii=True) + "\n"


def _l2(x):
    return "%6.1f" % math.log2(x) if x > 0 else "  -inf"


def _pct(x):
    return "%7.3f" % (100.0 * x)


_SHORT = {"float32": "f32", "tf32": "tf32", "bfloat16": "bf16"}


def format_table(report):
    """The text table of a report."""
    out = []
    m = report["model"]
    out.append("nnpops analyze: model %s (%s), %s: %d frame(s), %d atom(s)"
               % (m["name"], m["type"], report.get("structure_file", "-"), report["frames"],
                  report["atoms"]))
    v = report["verified_against_library"]
    out.append("float64 analysis = library (CPU, float64) within %.0e relative on %d frame(s)"
               % (v["relative_tolerance"], v["frames"]) if v["checked"]
               else "not checked against the library")
    out.append("")
    out.append("Scales (stage values in the model's units; log2 of RMS and max |x|; percent of "
               "values outside the normal range)")
    head = "%-30s %-7s %12s %12s %6s %6s %8s %8s" % (
        "stage", "pass", "rms", "max|x|", "l2rms", "l2max", "%out f32", "%out bf16")
    out.append(head)
    out.append("-" * len(head))
    for s in report["stages"]:
        for d in ("forward", "adjoint"):
            st = s[d]
            if st is None:
                continue
            out.append("%-30s %-7s %12.4e %12.4e %6s %6s %8s %8s" % (
                s["name"], d, st["rms"], st["max_abs"], _l2(st["rms"]), _l2(st["max_abs"]),
                _pct(st["outside_float32_fraction"]), _pct(st["outside_bfloat16_fraction"])))
    out.append("")
    out.append("Errors when one stage (forward and adjoint) is rounded, all else float64: "
               "|dE| (eV) and max |dF| (eV/A); * = above the %.0e eV/A force bound"
               % report["force_bound_eV_per_A"])
    head = "%-30s" % "stage" + "".join(" %11s %11s " % ("dE " + _SHORT[f], "dF " + _SHORT[f])
                                       for f in FORMATS)
    out.append(head)
    out.append("-" * len(head))
    for s in report["stages"]:
        line = "%-30s" % s["name"]
        for f in FORMATS:
            r = s["rounded"][f]
            line += " %11.3e %11.3e%s" % (r["energy_error_eV"], r["max_force_error_eV_per_A"],
                                          " " if r["within_force_bound"] else "*")
        out.append(line.rstrip())
    out.append("")
    for f in FORMATS:
        v = report["verdict"][f]
        out.append("%s within the force bound: %s" % (f, ", ".join(v["within_force_bound"])
                                                      or "none"))
        out.append("%s above the force bound: %s" % (f, ", ".join(v["outside_force_bound"])
                                                     or "none"))
    return "\n".join(line.rstrip() for line in out) + "\n"


def plot(report, path):
    """A figure of the report: log2 scales per stage (forward and adjoint) and the force error
    of rounding each stage to each format."""
    try:
        import matplotlib
    except ImportError:
        raise AnalyzeError("--plot needs matplotlib: pip install matplotlib "
                           "(or pip install 'nnpops[analyze]')")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = report["stages"]
    names = [s["name"] for s in stages]
    x = np.arange(len(names))

    def l2(v):
        return math.log2(v) if v and v > 0 else float("nan")

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8.0, 0.32 * len(names) + 3), 8),
                                   sharex=True)
    for d, color in (("forward", "tab:blue"), ("adjoint", "tab:orange")):
        rms = [l2(s[d]["rms"]) if s[d] else float("nan") for s in stages]
        mx = [l2(s[d]["max_abs"]) if s[d] else float("nan") for s in stages]
        ax1.plot(x, rms, "o", color=color, label="%s RMS" % d)
        ax1.plot(x, mx, "^", color=color, alpha=0.6, label="%s max |x|" % d)
    ax1.set_ylabel("log2 |value|")
    ax1.legend(fontsize=7, ncol=2)
    ax1.grid(alpha=0.3)
    for fmt, marker, color in (("float32", "s", "tab:blue"), ("tf32", "D", "tab:orange"),
                               ("bfloat16", "v", "tab:green")):
        y = [l2(s["rounded"][fmt]["max_force_error_eV_per_A"]) for s in stages]
        ax2.plot(x, y, marker, color=color, label="%s max |dF|" % fmt)
        y = [l2(s["rounded"][fmt]["energy_error_eV"]) for s in stages]
        ax2.plot(x, y, marker, color=color, mfc="none", alpha=0.7, label="%s |dE|" % fmt)
    ax2.axhline(math.log2(report["force_bound_eV_per_A"]), color="red", lw=0.8,
                label="%.0e eV/A" % report["force_bound_eV_per_A"])
    ax2.set_ylabel("log2 error (|dF| eV/A, |dE| eV)")
    ax2.legend(fontsize=7, ncol=2)
    ax2.grid(alpha=0.3)
    ax2.set_xticks(x)
    ax2.set_xticklabels(names, rotation=75, fontsize=7)
    m = report["model"]
    fig.suptitle("%s (%s) on %s: stage scales and rounding errors"
                 % (m["name"], m["type"], report.get("structure_file", "-")))
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def add_arguments(p):
    p.add_argument("model", metavar="MODEL", help="model name or YAML path (ani, tensornet, lj)")
    p.add_argument("file", metavar="FILE", help="structure file readable by ase.io")
    p.add_argument("--plot", metavar="OUT.png", help="write the figure (needs matplotlib)")
    p.add_argument("--json", metavar="OUT.json", help="write the report as JSON ('-': stdout)")
    p.add_argument("--format", help="file format for ase.io (default: from the name)")


def run(args, out):
    """The ``analyze`` command (args from add_arguments); returns the exit status."""
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (fail before the work, not after it)
        except ImportError:
            raise AnalyzeError("--plot needs matplotlib: pip install matplotlib "
                               "(or pip install 'nnpops[analyze]')")
    progress = None
    if hasattr(sys.stderr, "isatty") and sys.stderr.isatty():
        def progress(frame, stage, stages):
            sys.stderr.write("\rframe %d: stage %d of %d " % (frame, stage + 1, stages))
            sys.stderr.flush()
    report = analyze(args.model, args.file, fmt=args.format, progress=progress)
    if progress is not None:
        sys.stderr.write("\n")
    out.write(format_table(report))
    if args.json:
        text = dumps(report)
        if args.json == "-":
            sys.stdout.write(text)
        else:
            with open(args.json, "w", encoding="ascii", newline="\n") as f:
                f.write(text)
    if args.plot:
        plot(report, args.plot)
    return 0
