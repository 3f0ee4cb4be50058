"""The ensemble's energy spread in LAMMPS (ANI-2x, 8 members, 30-atom periodic water box).

compute pair nnpops gives [1] the spread (standard deviation of the members' system energies,
ddof 1), [2] spread / sqrt(N) and [3..10] the members' energies: equal to the library's member
energies of the periodic system, in serial and on 2 ranks (each rank holds its local atoms'
shares; the spread is taken of the sums).  pair extract nnpops/energy_std and nnpops/qbc (the
lammps Python module) give the same values; spread_warning warns once per step above its
threshold (a minimizer's repeated evaluations of a step included) and never below it."""
import os
import subprocess

import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes
from test_reference import prepare, reference

MEMBERS = 8


def library_members(symbols, pos, cell):
    lib = nnpops_ctypes.Model("ani2x")
    assert lib.ensemble_size == MEMBERS
    return lib.compute([ls.ATOMIC_NUMBERS[s] for s in symbols], pos, cell, members=True,
                       per_atom=False)["member_energies"]


def spread_of(members):
    return float(np.std(members, ddof=1))


def water(tmp_path):
    symbols, pos, cell, _ = prepare(reference("ani2x")["water8_pbc"])
    elements = ls.write_data(tmp_path / "data.lmp", symbols, pos, cell)
    return symbols, pos, cell, elements


@pytest.mark.parametrize("np_", [1, 2])
def test_compute_pair_spread(tmp_path, np_):
    ls.require_model("ani2x")
    symbols, pos, cell, elements = water(tmp_path)
    cols = " ".join(f"c_pn[{k}]" for k in range(1, 3 + MEMBERS))
    script = f"""units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops
pair_coeff * * ani2x {' '.join(elements)}
compute pn all pair nnpops
thermo_style custom step pe {cols}
thermo_modify format float %.17g norm no
run 0
"""
    run = ls.run_lammps(tmp_path, script, np_=np_)
    row = ls.last_row(run.thermo()[-1])
    members = library_members(symbols, pos, cell)
    lmp_members = np.array([row[f"c_pn[{k}]"] for k in range(3, 3 + MEMBERS)])
    assert ls.rel_err(lmp_members, members) <= 1e-11, (lmp_members, members)
    # the ensemble energy is the mean of the members
    assert abs(row["PotEng"] - members.mean()) <= 1e-11 * abs(members.mean())
    std = spread_of(members)
    scale = np.abs(members).max()
    print(f"np {np_}: spread {row['c_pn[1]']:.6g} eV (library {std:.6g} eV)")
    assert std > 1e-6    # the members differ
    assert abs(row["c_pn[1]"] - std) <= 1e-11 * scale
    assert abs(row["c_pn[2]"] - std / np.sqrt(len(symbols))) <= 1e-11 * scale


def test_spread_warning(tmp_path):
    ls.require_model("ani2x")
    symbols, pos, cell, elements = water(tmp_path)
    std = spread_of(library_members(symbols, pos, cell))
    logs = {}
    for label, threshold in (("below", 0.5 * std), ("above", 2.0 * std)):
        d = tmp_path / label
        d.mkdir()
        ls.write_data(d / "data.lmp", symbols, pos, cell)
        script = f"""units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops spread_warning {threshold!r}
pair_coeff * * ani2x {' '.join(elements)}
velocity all create 300.0 4928459
timestep 0.0002
fix nve all nve
thermo 1
run 2
minimize 0.0 0.0 3 30
"""
        logs[label] = ls.run_lammps(d, script, np_=2).text
    warned = [l for l in logs["below"].splitlines()
              if l.startswith("WARNING: Pair nnpops: step") and "ensemble energy spread" in l]
    # one warning per step (0, 1, 2 of the run, then the minimizer's iterations, each of several
    # evaluations), from rank 0 only; the log and the screen both carry it
    steps = [int(l.split()[4].rstrip(":")) for l in warned]
    assert sorted(set(steps))[:3] == [0, 1, 2] and max(steps) >= 4, warned
    assert all(steps.count(s) == 2 for s in steps), warned
    assert "ensemble energy spread" not in logs["above"]


def test_extract(tmp_path):
    """pair extract through the lammps Python module of lmp's environment."""
    ls.require_model("ani2x")
    symbols, pos, cell, elements = water(tmp_path)
    members = library_members(symbols, pos, cell)
    python = os.path.join(os.path.dirname(ls.lmp_binary()), "python")
    if not os.access(python, os.X_OK):
        ls.missing(f"no Python next to {ls.lmp_binary()} (the lammps package's environment)")
    plugin = ls.plugin_path()
    # without a plugin file, lmp's own start-up finds the plugin (LAMMPS_PLUGIN_PATH from the
    # lammps.plugins entry points, set when lammps.executable is imported)
    # lmp's launcher (lammps.executable) puts MPICH's library directory on LD_LIBRARY_PATH and
    # the plugins of the lammps.plugins entry points on LAMMPS_PLUGIN_PATH: take both from it
    env = dict(os.environ)
    probe = subprocess.run(
        [python, "-c", "import os, lammps.executable\n"
         "for k in ('LD_LIBRARY_PATH', 'LAMMPS_PLUGIN_PATH'): print(k, os.environ.get(k, ''))"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    for line in probe.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("LD_LIBRARY_PATH", "LAMMPS_PLUGIN_PATH") and value:
            env[key] = value
    head = "import lammps\n"
    head += "L = lammps.lammps(cmdargs=['-nocite', '-log', 'none', '-screen', 'none'])\n"
    if plugin:
        head += f"L.command('plugin load {plugin}')\n"
    program = head + f"""
L.commands_string('''units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops
pair_coeff * * ani2x {' '.join(elements)}
run 0''')
print('@@', repr(L.extract_pair('nnpops/energy_std')), repr(L.extract_pair('nnpops/qbc')),
      repr(L.extract_pair_dimension('nnpops/energy_std')), repr(L.extract_pair('nnpops/nothing')))
L.close()
"""
    p = subprocess.run([python, "-c", program], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    line = [l for l in p.stdout.splitlines() if l.startswith("@@ ")]
    assert p.returncode == 0 and line, p.stdout
    std, qbc, dim, missing = line[-1].split()[1:]
    ref = spread_of(members)
    scale = np.abs(members).max()
    assert abs(float(std) - ref) <= 1e-11 * scale
    assert abs(float(qbc) - ref / np.sqrt(len(symbols))) <= 1e-11 * scale
    assert dim == "0" and missing == "None"
