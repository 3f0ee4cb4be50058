#!/usr/bin/env python3
"""pair_style nnpops in LAMMPS on a GPU: agreement with the CPU pair style and speed.

Run by tests/bench/lammps_gpu.sh (which unpacks the LAMMPS bundle and builds the plugin and
lammps_libstep); standard library only.

    lammps_gpu.py --lmp LMP --mpiexec MPIEXEC --plugin-dir DIR --libstep EXE --models DIR
                  [--device cuda] [--work DIR] [--table FILE]

For each model (ani2x, tn_a; a model whose YAML is missing from --models is skipped and said so),
system (a periodic water box from examples/lammps/make_water.py, WATER_N^3 molecules; ethanol from
make_molecule.py in a shrink-wrapped box), precision (float64, float32) and rank count (1, 2: the
ranks share the GPU, `device cuda` giving each its node-local rank modulo the GPU count):

* single point (run 0) on --device against `device cpu` on 1 rank (the reference): relative
  differences of the energy |dE|/|E|, the forces max|dF|/max|F| (dump of all atoms, by id) and
  the pressure tensor max|dP_ij|/max|P_ij|; they pass below 1e-10 (float64) or 1e-6 (float32);
* MD: MD_STEPS (default 1000) steps of NVT (Nose-Hoover, 300 K, 0.5 fs; MD_INTEGRATOR=none: the
  loop with no integrator, the atoms fixed, e.g. for a model that cannot run MD on the system) on
  --device (CUDA graphs on for cuda), LAMMPS's ns/day and ms/step (its loop time);
* on 1 rank: the CPU's ns/day from a run of CPU_MD_STEPS (default 50; fewer where the CPU's
  single point says they would take over CPU_MD_SECONDS, default 20, but at least 3) on 1 rank
  with threads CPU_THREADS (default: all cores), and the library's own step time on the same system
  (lammps_libstep: energy, forces and virial of the whole system per call, the periodic box as a
  cell, same device, precision and graphs; LIB_STEPS timed steps, default 200).  LAMMPS's ms/step
  minus the library's is the cost of the LAMMPS layer (ghost atoms, packing, integration,
  communication, thermo output).

Environment: MD_STEPS, MD_INTEGRATOR, CPU_MD_STEPS, CPU_MD_SECONDS, WATER_N (default 6: 648 atoms), RANKS ("1 2"),
PRECISIONS ("float64 float32"), MODELS ("ani2x tn_a"), SYSTEMS ("water ethanol"), CPU_THREADS,
LIB_STEPS, RUN_TIMEOUT (seconds per LAMMPS run, default 180). Each LAMMPS run's output is kept
under --work; the summary lines and the table go to standard output, the table also to --table.
Exit status 0 when every single point passed.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "lammps")
TOLERANCE = {"float64": 1e-10, "float32": 1e-6}
DT_PS = 0.0005

# name: (maker, maker arguments, data file, boundary, element per atom type, Z per atom type,
#        periodic cell for the library)
SYSTEMS = {
    "water": ("make_water.py", lambda n: ["--n", str(n)], "water.data", "p p p", "O H", "8 1", 1),
    "ethanol": ("make_molecule.py", lambda n: [], "ethanol.data", "s s s", "H C O", "1 6 8", 0),
}

HEADER = """units metal
atom_style atomic
boundary {boundary}
read_data {data}
pair_style nnpops device {device} precision {precision}{options}
pair_coeff * * {model} {elements}
neighbor 1.0 bin
neigh_modify every 1 delay 0 check yes
"""

SINGLE_POINT = """thermo_style custom step pe press pxx pyy pzz pxy pxz pyz
thermo_modify format float %.17g
dump f all custom 1 {dump} id fx fy fz
dump_modify f sort id format float %.17g
run 0
"""

MD = """velocity all create 300.0 4928459 dist gaussian mom yes rot yes
{integrator}timestep {dt}
thermo {every}
thermo_style custom step temp pe etotal press
run {steps}
"""


# MD_INTEGRATOR: nvt (default), or none: the same loop with no integrator, the atoms where the
# data file puts them (a model that cannot run MD on a system still has its loop timed)
INTEGRATORS = {"nvt": "fix nvt all nvt temp 300.0 300.0 0.05\n", "none": ""}


def env_int(name, default):
    return int(os.environ.get(name, default))


class Runner:
    def __init__(self, args):
        self.args = args
        self.env = dict(os.environ, LAMMPS_PLUGIN_PATH=args.plugin_dir, OMP_NUM_THREADS="1",
                        NNPOPS_MODEL_PATH=args.models)
        self.timeout = env_int("RUN_TIMEOUT", 180)
        self.cpu_threads = env_int("CPU_THREADS", 0) or os.cpu_count() or 1

    def options(self, device, ranks, graphs):
        """pair_style keywords: threads on the CPU (shared by the ranks), cuda_graphs on a GPU."""
        if device == "cpu":
            return " threads %d" % max(1, self.cpu_threads // ranks)
        return " cuda_graphs on" if graphs else ""

    def lammps(self, name, text, ranks):
        """Runs LAMMPS on input text with `ranks` ranks; returns (output, seconds) or raises."""
        work = self.args.work
        path = os.path.join(work, name + ".in")
        with open(path, "w") as f:
            f.write(text)
        cmd = [self.args.lmp, "-in", path, "-log", os.path.join(work, name + ".log"), "-nocite",
               "-screen", "none"]
        if ranks > 1:
            cmd = [self.args.mpiexec, "-n", str(ranks)] + cmd
        t0 = time.time()
        try:
            p = subprocess.run(cmd, cwd=work, env=self.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=self.timeout)
            output, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as exc:
            output, rc = (exc.stdout or b"").decode(errors="replace"), "timeout %d s" % self.timeout
        seconds = time.time() - t0
        try:
            with open(os.path.join(work, name + ".log")) as f:
                output += f.read()
        except OSError:
            pass
        with open(os.path.join(work, name + ".out"), "w") as f:
            f.write(output)
        if rc != 0 or not re.search(r"Loaded \d+ plugins? from", output):
            tail = "\n".join("    " + line for line in output.splitlines()[-25:])
            raise RuntimeError("%s: LAMMPS rc=%s%s\n%s" % (
                name, rc, "" if "plugins from" in output else " (the nnpops plugin was not loaded)",
                tail))
        return output, seconds


def read_single_point(output, dump_path):
    """pe, the pressure tensor (6) from the thermo line of run 0, forces by atom id."""
    lines = output.splitlines()
    for k, line in enumerate(lines):
        if line.split()[:3] == ["Step", "PotEng", "Press"]:
            values = [float(v) for v in lines[k + 1].split()]
            break
    else:
        raise RuntimeError("no thermo line of run 0")
    pe, pressure = values[1], values[3:9]
    forces = {}
    with open(dump_path) as f:
        text = f.read().split("ITEM: ATOMS")[-1].splitlines()[1:]
    for line in text:
        parts = line.split()
        if len(parts) == 4:
            forces[int(parts[0])] = [float(v) for v in parts[1:]]
    return pe, pressure, forces


def relative(test, ref):
    """|dE|/|E|, max|dF|/max|F|, max|dP_ij|/max|P_ij| of two single points."""
    e = abs(test[0] - ref[0]) / max(abs(ref[0]), 1e-300)
    p = max(abs(a - b) for a, b in zip(test[1], ref[1])) / max(max(abs(b) for b in ref[1]), 1e-300)
    if sorted(test[2]) != sorted(ref[2]):
        raise RuntimeError("the dumps hold different atom ids")
    df = max(abs(a - b) for i in ref[2] for a, b in zip(test[2][i], ref[2][i]))
    fmax = max(abs(b) for i in ref[2] for b in ref[2][i])
    return e, df / max(fmax, 1e-300), p


def ns_per_day(ms_per_step):
    return DT_PS * 1e-3 * 86400.0 / (1e-3 * ms_per_step)


def performance(output):
    """(ns/day, ms/step) of the last run, from its loop time (LAMMPS's Performance line gives
    ns/day to 3 decimals only)."""
    loop = re.findall(r"Loop time of ([\d.eE+-]+) on \d+ procs for (\d+) steps", output)
    if not loop or int(loop[-1][1]) < 1:
        raise RuntimeError("no Loop time line")
    ms = 1e3 * float(loop[-1][0]) / int(loop[-1][1])
    return ns_per_day(ms), ms


def gpu_count():
    """GPUs a process sees: CUDA_VISIBLE_DEVICES's entries, else nvidia-smi -L's lines."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip()])
    try:
        p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, text=True, timeout=30)
        return len([line for line in p.stdout.splitlines() if line.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0


def device_check(output, device, ranks, name):
    """The plugin's "device per rank" line against the rule: `device cuda` gives rank r (all on
    one node) cuda:(r mod GPUs); any other device is taken as given."""
    found = re.findall(r"nnpops: device per rank: (.*)", output)
    if device == "cuda":
        count = gpu_count()
        expected = ["cuda:%d" % (r % count) for r in range(ranks)] if count else None
    else:
        expected = [device] * ranks
    got = found[-1].split() if found else None
    ok = got == expected
    verdict = "as expected" if ok else "EXPECTED %s" % (
        " ".join(expected) if expected else "(GPU count unknown)")
    return "%s: device per rank: %s (%s)" % (name, " ".join(got) if got else "no line",
                                             verdict), ok


def fmt(value, spec):
    return "—" if value is None else format(value, spec)


def make_table(rows, device_lines, notes, head, done):
    """The markdown table of the rows so far (done False: a line says the run went on)."""
    device = head.split()[4]
    lines = [head, ""]
    lines.append("| model | system (atoms) | precision | ranks | dE | dF | dP | single point "
                 "| %s ns/day | %s ms/step | CPU ns/day | library ns/day | library ms/step "
                 "| LAMMPS layer ms/step |" % (device, device))
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        err = r["err"] or (None, None, None)
        layer = (r["perf"][1] - r["lib"]) if r["perf"] and r["lib"] is not None else None
        lines.append("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["system"], r["prec"], r["ranks"], fmt(err[0], ".1e"),
            fmt(err[1], ".1e"), fmt(err[2], ".1e"),
            ("pass" if r["passed"] else "FAIL") + " (%g)" % TOLERANCE[r["prec"]],
            fmt(r["perf"] and r["perf"][0], ".4g"), fmt(r["perf"] and r["perf"][1], ".4g"),
            fmt(r["cpu"] and r["cpu"][0], ".4g"),
            fmt(r["lib"] and ns_per_day(r["lib"]), ".4g"), fmt(r["lib"], ".4g"),
            fmt(layer, ".3g")))
    lines.append("")
    lines.append("dE = |dE|/|E|, dF = max|dF|/max|F|, dP = max|dP_ij|/max|P_ij| against device "
                 "cpu on 1 rank (same precision). ns/day from the loop time at 0.5 fs per step; "
                 "LAMMPS layer = LAMMPS's ms/step - the library's (ghost atoms included).")
    if device_lines:
        bad = [line for line, ok in device_lines if not ok]
        lines.append("Device per rank (%d runs on several ranks): %s" % (
            len(device_lines), "; ".join(bad) if bad else
            "every one as expected, e.g. " + device_lines[0][0]))
    lines += notes
    if not done:
        lines.append("INCOMPLETE: the table is written after each model, system and precision; "
                     "the run had not finished")
    return "\n".join(lines) + "\n"


def write_table(path, text):
    """Written whole or not at all (the machine's time limit may stop the run at any point)."""
    if path:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lmp", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--libstep", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--work", default="lammps-runs")
    ap.add_argument("--table")
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    run = Runner(args)
    device = args.device
    md_steps = env_int("MD_STEPS", 1000)
    md_integrator = os.environ.get("MD_INTEGRATOR", "nvt")
    if md_integrator not in INTEGRATORS:
        sys.exit("lammps_gpu.py: MD_INTEGRATOR must be one of %s" % ", ".join(INTEGRATORS))
    integrator = INTEGRATORS[md_integrator]
    cpu_md_steps = env_int("CPU_MD_STEPS", 50)
    cpu_md_seconds = env_int("CPU_MD_SECONDS", 20)
    lib_steps = env_int("LIB_STEPS", 200)
    water_n = env_int("WATER_N", 6)
    ranks_list = [int(r) for r in os.environ.get("RANKS", "1 2").split()]
    precisions = os.environ.get("PRECISIONS", "float64 float32").split()
    systems = os.environ.get("SYSTEMS", "water ethanol").split()
    models = []
    notes = []
    for m in os.environ.get("MODELS", "ani2x tn_a").split():
        path = os.path.join(args.models, m + ".yaml")
        if os.path.isfile(path):
            models.append((m, path))
        else:
            notes.append("%s: NOT RUN, no %s" % (m, path))
            print("== " + notes[-1], flush=True)

    atoms = {}
    for s in systems:
        maker, margs, data, *_ = SYSTEMS[s]
        subprocess.run([sys.executable, os.path.join(EXAMPLES, maker)] + margs(water_n) +
                       ["--output", os.path.join(args.work, data)], check=True,
                       stdout=subprocess.DEVNULL)
        with open(os.path.join(args.work, data)) as f:
            atoms[s] = int(re.search(r"^\s*(\d+)\s+atoms", f.read(), re.M).group(1))

    graphs = ", CUDA graphs on" if device != "cpu" else ""
    kind = "NVT, 0.5 fs" if md_integrator == "nvt" else "no integrator (atoms fixed), 0.5 fs"
    head = ("LAMMPS pair_style nnpops, device %s vs cpu; MD: %d steps %s%s; CPU: up to "
            "%d steps, 1 rank, %d threads; library: lammps_libstep, %d steps (whole system per "
            "call)" % (device, md_steps, kind, graphs, cpu_md_steps, run.cpu_threads, lib_steps))
    rows = []
    device_lines = []
    all_passed = True
    for model, model_path in models:
        for s in systems:
            _, _, data, boundary, elements, zs, periodic = SYSTEMS[s]
            for prec in precisions:
                def header(dev, ranks, graphs):
                    return HEADER.format(boundary=boundary, data=data, device=dev, precision=prec,
                                         options=run.options(dev, ranks, graphs),
                                         model=model_path, elements=elements)
                tag = "%s-%s-%s" % (model, s, prec)
                # the reference: device cpu, 1 rank
                ref = None
                try:
                    name = tag + "-sp-cpu-np1"
                    out, sec = run.lammps(name, header("cpu", 1, False) +
                                          SINGLE_POINT.format(dump=name + ".dump"), 1)
                    ref = read_single_point(out, os.path.join(args.work, name + ".dump"))
                    sp_seconds = sec
                    print("-- %s: E %.12g eV (%.1f s)" % (name, ref[0], sec), flush=True)
                except (RuntimeError, OSError) as exc:
                    print("-- %s" % exc, flush=True)
                cpu_perf = lib_ms = None
                if 1 in ranks_list:
                    # as many steps as fit CPU_MD_SECONDS at the single point's time per step
                    steps = cpu_md_steps
                    if ref is not None:
                        steps = max(3, min(steps, int(cpu_md_seconds / max(sp_seconds, 1e-3))))
                    try:
                        name = tag + "-md-cpu-np1"
                        out, sec = run.lammps(name, header("cpu", 1, False) + MD.format(
                            integrator=integrator, dt=DT_PS, every=max(1, steps // 5),
                            steps=steps), 1)
                        cpu_perf = performance(out)
                        print("-- %s: %.4g ns/day, %.4g ms/step (%d steps, %d threads, %.1f s)" % (
                            name, cpu_perf[0], cpu_perf[1], steps, run.cpu_threads, sec),
                            flush=True)
                    except RuntimeError as exc:
                        print("-- %s" % exc, flush=True)
                    lib_opts = ("cuda_graphs=on" if device != "cpu" else
                                "threads=%d" % run.cpu_threads)
                    cmd = [args.libstep, os.path.join(args.work, data), model_path,
                           "cuda" if device == "cuda" else device, prec, lib_opts,
                           str(lib_steps), str(periodic)] + zs.split()
                    try:
                        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True, env=run.env, timeout=run.timeout)
                        m = re.search(r"([\d.eE+-]+) ms/step", p.stdout)
                        if p.returncode == 0 and m:
                            lib_ms = float(m.group(1))
                        print("-- library alone: %s" % p.stdout.strip(), flush=True)
                    except subprocess.TimeoutExpired:
                        print("-- library alone: timeout %d s" % run.timeout, flush=True)
                for ranks in ranks_list:
                    row = dict(model=model, system="%s (%d)" % (s, atoms[s]), prec=prec,
                               ranks=ranks, err=None, passed=False, perf=None,
                               cpu=cpu_perf if ranks == 1 else None,
                               lib=lib_ms if ranks == 1 else None)
                    try:
                        name = "%s-sp-%s-np%d" % (tag, device, ranks)
                        out, _ = run.lammps(name, header(device, ranks, False) +
                                            SINGLE_POINT.format(dump=name + ".dump"), ranks)
                        if ref is None:
                            raise RuntimeError("%s: no reference" % name)
                        test = read_single_point(out, os.path.join(args.work, name + ".dump"))
                        row["err"] = relative(test, ref)
                        row["passed"] = max(row["err"]) <= TOLERANCE[prec]
                        print("-- %s: dE %.2e dF %.2e dP %.2e: %s" % (
                            name, *row["err"], "pass" if row["passed"] else "FAIL"), flush=True)
                        if ranks > 1:
                            line, ok = device_check(out, device, ranks, name)
                            device_lines.append((line, ok))
                            print("   " + line, flush=True)
                    except (RuntimeError, OSError) as exc:
                        print("-- %s" % exc, flush=True)
                    all_passed = all_passed and row["passed"]
                    try:
                        name = "%s-md-%s-np%d" % (tag, device, ranks)
                        out, sec = run.lammps(name, header(device, ranks, True) + MD.format(
                            integrator=integrator, dt=DT_PS, every=max(1, md_steps // 10),
                            steps=md_steps), ranks)
                        row["perf"] = performance(out)
                        print("-- %s: %.4g ns/day, %.4g ms/step (%.1f s)" % (
                            name, row["perf"][0], row["perf"][1], sec), flush=True)
                    except RuntimeError as exc:
                        print("-- %s" % exc, flush=True)
                    rows.append(row)
                write_table(args.table, make_table(rows, device_lines, notes, head, False))

    table = make_table(rows, device_lines, notes, head, True)
    print(table)
    write_table(args.table, table)
    return 0 if all_passed and rows else 1


if __name__ == "__main__":
    sys.exit(main())
