"""Helpers of the OpenMM tests: platforms, reference evaluations, an ethanol ligand in TIP3P."""

import io
import os
import sys

import numpy as np
import pytest

openmm = pytest.importorskip("openmm")
if not hasattr(openmm, "PythonForce") or not hasattr(openmm.PythonForce, "setParticles"):
    pytest.skip("OpenMM %s has no PythonForce.setParticles (needs >= 8.6)" % openmm.__version__,
                allow_module_level=True)

from openmm import app, unit  # noqa: E402

import nnpops  # noqa: E402
from nnpops.openmm import EV_IN_KJ_PER_MOL  # noqa: E402

#: 1 eV/angstrom in kJ/mol/nm.
EV_PER_A_IN_KJ_PER_MOL_NM = EV_IN_KJ_PER_MOL * 10.0

_models = {}


def model(name):
    """One nnpops.Model per name for the whole test session (CPU, float64)."""
    if name not in _models:
        _models[name] = nnpops.Model(name)
    return _models[name]


def platform(name):
    """(Platform, properties): CPU limited to 2 threads."""
    plat = openmm.Platform.getPlatformByName(name)
    props = {"Threads": "2"} if name == "CPU" else {}
    return plat, props


def context(system, positions_nm, platform_name="Reference", integrator=None, box=None):
    integrator = integrator or openmm.VerletIntegrator(0.0005)
    plat, props = platform(platform_name)
    ctx = openmm.Context(system, integrator, plat, props)
    if box is not None:
        ctx.setPeriodicBoxVectors(*[openmm.Vec3(*row) for row in np.asarray(box)])
    ctx.setPositions(np.asarray(positions_nm))
    return ctx


def energy_forces(ctx, groups=-1):
    """(energy kJ/mol, forces kJ/mol/nm as float64 array) of an OpenMM Context."""
    st = ctx.getState(getEnergy=True, getForces=True, groups=groups)
    e = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    f = st.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
    return e, np.asarray(f)


def library_reference(model_name, numbers, positions_nm, box_nm=None):
    """A direct library call in the library's default units (angstrom, eV), converted here to
    kJ/mol and kJ/mol/nm: (energy, forces)."""
    ctx = nnpops.Context(model(model_name))
    pos_a = np.asarray(positions_nm, dtype=np.float64) * 10.0
    cell = None if box_nm is None else np.asarray(box_nm, dtype=np.float64) * 10.0
    res = ctx.compute(np.asarray(numbers), pos_a, cells=cell,
                      pbc=True if cell is not None else None)
    return float(res["energies"][0]) * EV_IN_KJ_PER_MOL, res["forces"] * EV_PER_A_IN_KJ_PER_MOL_NM


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def system_of(numbers, box_nm=None):
    """An OpenMM System holding only particles with the masses of these elements."""
    system = openmm.System()
    for z in numbers:
        system.addParticle(app.Element.getByAtomicNumber(int(z)).mass)
    if box_nm is not None:
        system.setDefaultPeriodicBoxVectors(*[openmm.Vec3(*row) for row in np.asarray(box_nm)])
    return system


def atoms_nm(atoms):
    """(atomic numbers, positions nm, cell nm or None) of an ASE Atoms."""
    cell = None
    if atoms.pbc.any():
        cell = np.asarray(atoms.cell[:], dtype=np.float64) / 10.0
    return atoms.numbers.copy(), atoms.positions / 10.0, cell


# ------------------------------------------------------------------------------------------------
# Ethanol (ML) in TIP3P water (MM)
# ------------------------------------------------------------------------------------------------

# The ethanol ligand of examples/openmm_mlmm.py (one source for the example and the tests): atom
# names of nnpops.structures.ethanol() in its order, its bonds, and an MM template with nonbonded
# parameters only (its internal energy is the ML potential's; 1-4 scale factors as amber14's).
_examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")
sys.path.insert(0, _examples)
import openmm_mlmm  # noqa: E402

sys.path.remove(_examples)
ETHANOL_NAMES = openmm_mlmm.LIGAND_NAMES
ETHANOL_BONDS = openmm_mlmm.LIGAND_BONDS


def ethanol_topology():
    """(Topology, positions Quantity nm) of one ethanol built by nnpops.structures."""
    return openmm_mlmm.ligand_topology()


def forcefield():
    return app.ForceField("amber14-all.xml", "amber14/tip3p.xml",
                          io.StringIO(openmm_mlmm.LIGAND_XML))


def solvated_ethanol(box_nm=2.0):
    """(Topology, positions nm array, ligand atom indices): ethanol solvated in TIP3P by
    Modeller.addSolvent in a cubic box of edge box_nm."""
    top, pos = ethanol_topology()
    ff = forcefield()
    modeller = app.Modeller(top, pos)
    modeller.addSolvent(ff, model="tip3p", boxSize=openmm.Vec3(box_nm, box_nm, box_nm),
                        neutralize=False)
    ligand = [a.index for a in modeller.topology.atoms() if a.residue.name == "ETH"]
    positions = np.asarray(modeller.getPositions().value_in_unit(unit.nanometer))
    return modeller.topology, positions, ligand


def mm_system(topology):
    """The all-MM System (PME, 0.8 nm cutoff, rigid water, no other constraints)."""
    return forcefield().createSystem(topology, nonbondedMethod=app.PME,
                                     nonbondedCutoff=0.8 * unit.nanometer, constraints=None,
                                     rigidWater=True)


def remove_internal_mm(system, ligand):
    """Mechanical embedding by hand: no MM interaction between two ligand atoms (the ligand
    template has no bonded terms; every intra-ligand nonbonded pair becomes a zero exception)."""
    for force in system.getForces():
        if isinstance(force, openmm.NonbondedForce):
            for a in range(len(ligand)):
                for b in range(a):
                    force.addException(ligand[a], ligand[b], 0.0, 1.0, 0.0, True)
        elif isinstance(force, (openmm.HarmonicBondForce, openmm.HarmonicAngleForce,
                                openmm.PeriodicTorsionForce)):
            lig = set(ligand)
            n = (force.getNumBonds() if isinstance(force, openmm.HarmonicBondForce)
                 else force.getNumAngles() if isinstance(force, openmm.HarmonicAngleForce)
                 else force.getNumTorsions())
            for k in range(n):
                if isinstance(force, openmm.HarmonicBondForce):
                    p = force.getBondParameters(k)[:2]
                elif isinstance(force, openmm.HarmonicAngleForce):
                    p = force.getAngleParameters(k)[:3]
                else:
                    p = force.getTorsionParameters(k)[:4]
                assert not set(p) <= lig, "the ligand template should have no bonded terms"
    return system


def numbers_of(topology):
    return np.array([a.element.atomic_number for a in topology.atoms()])
