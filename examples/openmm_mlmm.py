#!/usr/bin/env python3
"""ML/MM with OpenMM: an ANI ethanol in amber14 TIP3P water, NPT.

    python3 examples/openmm_mlmm.py [--steps 500] [--model ani2x] [--box 2.4] [--platform CPU]
                                    [--device cpu] [--precision float64] [--dcd traj.dcd]

The ligand is nnpops' bundled ethanol (standard bond lengths and angles).  Its internal energy is
the ANI potential's (nnpops.openmm.create_force on the ligand atoms only); everything else, and
the ligand-water interactions (mechanical embedding: fixed charges and Lennard-Jones), is amber14
with TIP3P water under PME.  A zero-energy bond force keeps the ethanol one molecule for the
Monte Carlo barostat and for periodic wrapping.  The script minimises, runs Langevin dynamics at
300 K and 1 bar with a 1 fs step, and prints the ML and total energies, the density and the time
per step.

With openmm-ml installed (and nnpops installed, for its entry points) the same system comes from

    MLPotential("nnpops-ani2x").createMixedSystem(topology, mm_system, ligand, add_bond_force=True)

Needs OpenMM >= 8.6, the converted models (``python3 -m nnpops convert``) and the C library
(NNPOPS_LIBRARY, inside the package, or on the system path).
"""

import argparse
import io
import os
import sys
import time

import numpy as np

try:  # the installed package (pip install .); else the source tree's
    import nnpops  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wrappers"))

import openmm  # noqa: E402
from openmm import app, unit  # noqa: E402

from nnpops import structures  # noqa: E402
from nnpops.openmm import create_force, platform_forces_dtype  # noqa: E402

# Nonbonded MM parameters of the ligand (OPLS-AA-like charges and Lennard-Jones values): they
# act between ligand and water only.  No bonded terms: the ligand's internal energy is ANI's.
LIGAND_XML = """<ForceField>
 <AtomTypes>
  <Type name="eth-CT" class="eth-CT" element="C" mass="12.011"/>
  <Type name="eth-O" class="eth-OH" element="O" mass="15.999"/>
  <Type name="eth-HO" class="eth-HO" element="H" mass="1.008"/>
  <Type name="eth-HC" class="eth-HC" element="H" mass="1.008"/>
 </AtomTypes>
 <Residues>
  <Residue name="ETH">
   <Atom name="C1" type="eth-CT" charge="-0.18"/>
   <Atom name="C2" type="eth-CT" charge="0.145"/>
   <Atom name="O1" type="eth-O" charge="-0.683"/>
   <Atom name="HO" type="eth-HO" charge="0.418"/>
   <Atom name="H11" type="eth-HC" charge="0.06"/>
   <Atom name="H12" type="eth-HC" charge="0.06"/>
   <Atom name="H13" type="eth-HC" charge="0.06"/>
   <Atom name="H21" type="eth-HC" charge="0.06"/>
   <Atom name="H22" type="eth-HC" charge="0.06"/>
   <Bond atomName1="C1" atomName2="C2"/>
   <Bond atomName1="C2" atomName2="O1"/>
   <Bond atomName1="O1" atomName2="HO"/>
   <Bond atomName1="C1" atomName2="H11"/>
   <Bond atomName1="C1" atomName2="H12"/>
   <Bond atomName1="C1" atomName2="H13"/>
   <Bond atomName1="C2" atomName2="H21"/>
   <Bond atomName1="C2" atomName2="H22"/>
  </Residue>
 </Residues>
 <NonbondedForce coulomb14scale="0.8333333333333334" lj14scale="0.5">
  <UseAttributeFromResidue name="charge"/>
  <Atom type="eth-CT" sigma="0.35" epsilon="0.276144"/>
  <Atom type="eth-O" sigma="0.312" epsilon="0.71128"/>
  <Atom type="eth-HO" sigma="0.1" epsilon="0.0"/>
  <Atom type="eth-HC" sigma="0.25" epsilon="0.12552"/>
 </NonbondedForce>
</ForceField>
"""
LIGAND_NAMES = ["C1", "C2", "O1", "HO", "H11", "H12", "H13", "H21", "H22"]  # structures.ethanol()
LIGAND_BONDS = [(0, 1), (1, 2), (2, 3), (0, 4), (0, 5), (0, 6), (1, 7), (1, 8)]
ML_GROUP = 1


def ligand_topology():
    mol = structures.ethanol()
    top = app.Topology()
    res = top.addResidue("ETH", top.addChain())
    atoms = [top.addAtom(name, app.Element.getByAtomicNumber(int(z)), res)
             for name, z in zip(LIGAND_NAMES, mol.numbers)]
    for i, j in LIGAND_BONDS:
        top.addBond(atoms[i], atoms[j])
    return top, (mol.positions / 10.0) * unit.nanometer


def build(args):
    """(topology, positions, system, ligand atom indices)."""
    ff = app.ForceField("amber14-all.xml", "amber14/tip3p.xml", io.StringIO(LIGAND_XML))
    top, pos = ligand_topology()
    modeller = app.Modeller(top, pos)
    modeller.addSolvent(ff, model="tip3p", boxSize=openmm.Vec3(args.box, args.box, args.box),
                        neutralize=False)
    topology = modeller.topology
    ligand = [a.index for a in topology.atoms() if a.residue.name == "ETH"]
    system = ff.createSystem(topology, nonbondedMethod=app.PME,
                             nonbondedCutoff=min(1.0, 0.45 * args.box) * unit.nanometer,
                             constraints=app.HBonds, rigidWater=True)
    # Mechanical embedding: no MM interaction inside the ligand.
    for force in system.getForces():
        if isinstance(force, openmm.NonbondedForce):
            for a in range(len(ligand)):
                for b in range(a):
                    force.addException(ligand[a], ligand[b], 0.0, 1.0, 0.0, True)
    # HBonds found no ligand constraints (its template has no bond parameters); the ML part is
    # unconstrained, hence the 1 fs step.
    numbers = [a.element.atomic_number for a in topology.atoms()]
    forces_dtype = platform_forces_dtype(args.platform,
                                         {"Precision": args.openmm_precision})
    create_force(numbers, model=args.model, atoms=ligand, periodic=True, device=args.device,
                 precision=args.precision, system=system, add_bond_force=True,
                 positions=modeller.positions, force_group=ML_GROUP, forces_dtype=forces_dtype)
    system.addForce(openmm.MonteCarloBarostat(1.0 * unit.bar, args.temperature * unit.kelvin, 25))
    return topology, modeller.positions, system, ligand


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=500, help="MD steps of 1 fs (default 500)")
    p.add_argument("--model", default="ani2x", help="model name or YAML path (default ani2x)")
    p.add_argument("--box", type=float, default=2.4, help="cubic box edge, nm (default 2.4)")
    p.add_argument("--platform", default="CPU", help="OpenMM platform (default CPU)")
    p.add_argument("--openmm-precision", default="mixed",
                   help="Precision property of CUDA/OpenCL platforms (default mixed)")
    p.add_argument("--device", default="cpu", help="nnpops device: cpu, cuda, cuda:N")
    p.add_argument("--precision", default="float64", choices=["float64", "float32"],
                   help="nnpops compute precision (default float64)")
    p.add_argument("--temperature", type=float, default=300.0, help="K (default 300)")
    p.add_argument("--report", type=int, default=100, help="steps between reports (default 100)")
    p.add_argument("--dcd", default=None, help="write a DCD trajectory here")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)

    topology, positions, system, ligand = build(args)
    print("%d atoms: ethanol (%s, ML) in %d TIP3P waters (amber14), box %.2f nm"
          % (topology.getNumAtoms(), args.model, (topology.getNumAtoms() - len(ligand)) // 3,
             args.box))
    integrator = openmm.LangevinMiddleIntegrator(args.temperature * unit.kelvin,
                                                 1.0 / unit.picosecond, 1.0 * unit.femtosecond)
    integrator.setRandomNumberSeed(args.seed)
    platform = openmm.Platform.getPlatformByName(args.platform)
    props = {"Precision": args.openmm_precision} if args.platform in ("CUDA", "OpenCL", "HIP") \
        else {}
    simulation = app.Simulation(topology, system, integrator, platform, props)
    simulation.context.setPositions(positions)

    def energies():
        st_ml = simulation.context.getState(getEnergy=True, groups={ML_GROUP})
        st = simulation.context.getState(getEnergy=True)
        return (st_ml.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole),
                st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole))

    e_ml, e_tot = energies()
    print("initial:   E_ML %.3f kJ/mol   E_total %.3f kJ/mol" % (e_ml, e_tot))
    simulation.minimizeEnergy(maxIterations=200)
    e_ml, e_tot = energies()
    print("minimised: E_ML %.3f kJ/mol   E_total %.3f kJ/mol" % (e_ml, e_tot))
    simulation.context.setVelocitiesToTemperature(args.temperature * unit.kelvin, args.seed)

    if args.dcd:
        simulation.reporters.append(app.DCDReporter(args.dcd, args.report,
                                                    enforcePeriodicBox=True))
    simulation.reporters.append(app.StateDataReporter(
        sys.stdout, args.report, step=True, potentialEnergy=True, temperature=True,
        density=True, speed=True))
    t0 = time.perf_counter()
    simulation.step(args.steps)
    elapsed = time.perf_counter() - t0

    st = simulation.context.getState(getPositions=True, enforcePeriodicBox=True)
    pos = st.getPositions(asNumpy=True).value_in_unit(unit.angstrom)
    bonds = [np.linalg.norm(pos[ligand[i]] - pos[ligand[j]]) for i, j in LIGAND_BONDS]
    e_ml, e_tot = energies()
    print("final:     E_ML %.3f kJ/mol   E_total %.3f kJ/mol" % (e_ml, e_tot))
    print("ethanol bond lengths after wrapping: %.3f-%.3f A (whole molecule)"
          % (min(bonds), max(bonds)))
    print("%.2f ms/step (%d steps)" % (1e3 * elapsed / max(1, args.steps), args.steps))


if __name__ == "__main__":
    main()
