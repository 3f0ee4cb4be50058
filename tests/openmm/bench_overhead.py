#!/usr/bin/env python3
"""Per-call overhead of the OpenMM layer over a bare library call (CPU).

    PYTHONPATH=wrappers python3 tests/openmm/bench_overhead.py [--model ani2x] [--threads 2]
                                                             [--sizes 13,1000,10000]

For 13 atoms (alanine, not periodic) and periodic water boxes of about 1,000 and 10,000 atoms it
times (median of repeats):

  bare      nnpops.Context.compute with preallocated outputs, nm and kJ/mol: the library call
            through the cffi binding, which the OpenMM layer wraps
  getState  openmm.Context.getState(getEnergy, getForces) on a System holding only the force,
            CPU platform: State creation, the PythonForce callable, OpenMM copying the forces
  step      one VerletIntegrator step (one force evaluation plus integration)

and the overhead of the OpenMM layer measured directly, with the library call replaced by a stub
that returns the preallocated outputs at once (so that the library's own run-to-run spread does
not hide it):

  call-ovh  NNPOpsComputation.__call__ with a real State, minus nothing (stubbed library)
  state-ovh getState with the stubbed computation
  step-ovh  one integrator step with the stubbed computation

Not a test (not registered in CTest).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "wrappers"))

import openmm  # noqa: E402
from openmm import app  # noqa: E402

import nnpops  # noqa: E402
from nnpops import openmm as nom  # noqa: E402
from nnpops import structures  # noqa: E402


def timeit(fn, min_time=1.0, min_reps=3, max_reps=5000, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    t_start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - t_start < min_time
                                    and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class _StubContext:
    """Stands in for nnpops.Context: returns the caller's output buffers untouched."""

    def compute(self, numbers, positions, cells=None, pbc=None, forces=True, out=None, **kw):
        return out


def _system(numbers, cell, computation):
    system = openmm.System()
    for z in numbers:
        system.addParticle(app.Element.getByAtomicNumber(int(z)).mass)
    if cell is not None:
        system.setDefaultPeriodicBoxVectors(*[openmm.Vec3(*r) for r in cell])
    force = openmm.PythonForce(computation)
    force.setUsesPeriodicBoundaryConditions(cell is not None)
    system.addForce(force)
    return system


def _openmm_context(system, pos, threads):
    integ = openmm.VerletIntegrator(1e-6)
    ctx = openmm.Context(system, integ, openmm.Platform.getPlatformByName("CPU"),
                         {"Threads": str(threads)})
    ctx.setPositions(pos)
    return ctx, integ


def case(label, atoms, model, threads, full):
    numbers = atoms.numbers.copy()
    pos = atoms.positions / 10.0
    periodic = bool(atoms.pbc.any())
    cell = np.asarray(atoms.cell[:]) / 10.0 if periodic else None
    n = len(numbers)
    row = {"label": label, "n": n}

    # The bare library call (through the binding), outputs preallocated.
    lib_ctx = nnpops.Context(nom.shared_model(model), length_unit="nm", energy_unit="kJ/mol")
    z = numbers.astype(np.int32)
    out = {"energies": np.zeros(1), "forces": np.zeros((n, 3))}
    big = n > 5000
    row["bare"] = timeit(lambda: lib_ctx.compute(z, pos, cells=cell,
                                                 pbc=True if periodic else None, out=out),
                         min_reps=2 if big else 5, warmup=1 if big else 2)

    # The OpenMM layer with the library stubbed out: its own cost.
    stub = nom.NNPOpsComputation(numbers, model=model, periodic=periodic)
    stub._context = _StubContext()
    ctx, integ = _openmm_context(_system(numbers, cell, stub), pos, threads)
    state = ctx.getState(getPositions=True)  # has the box vectors, as the force's State
    row["call_ovh"] = timeit(lambda: stub(state), min_time=0.5)
    row["state_ovh"] = timeit(lambda: ctx.getState(getEnergy=True, getForces=True), min_time=0.5)
    row["step_ovh"] = timeit(lambda: integ.step(1), min_time=0.5)
    del ctx, integ

    if full:  # the real thing end to end
        system = _system(numbers, cell, nom.NNPOpsComputation(numbers, model=model,
                                                              periodic=periodic))
        ctx, integ = _openmm_context(system, pos, threads)
        row["state"] = timeit(lambda: ctx.getState(getEnergy=True, getForces=True),
                              min_reps=2 if big else 5, warmup=1 if big else 2)
        row["step"] = timeit(lambda: integ.step(1), min_reps=2 if big else 5,
                             warmup=1 if big else 2)
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="ani2x")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sizes", default="13,1000,10000")
    p.add_argument("--no-full", action="store_true",
                   help="skip the end-to-end getState/step timings with the real library")
    args = p.parse_args()
    print("model %s, CPU platform with %d threads; times per call" % (args.model, args.threads))
    print("%-8s %6s %11s %11s %11s | %10s %10s %10s" % (
        "system", "atoms", "bare", "getState", "step", "call-ovh", "state-ovh", "step-ovh"))
    for size in (int(s) for s in args.sizes.split(",")):
        if size <= 13:
            atoms, label = structures.alanine(), "alanine"
        else:
            side = max(1, round((size / 3) ** (1 / 3)))
            atoms, label = structures.water_box(side, seed=0), "water"
        r = case(label, atoms, args.model, args.threads, not args.no_full)
        print("%-8s %6d %8.3f ms %8s ms %8s ms | %7.1f us %7.1f us %7.1f us" % (
            r["label"], r["n"], 1e3 * r["bare"],
            "%.3f" % (1e3 * r["state"]) if "state" in r else "-",
            "%.3f" % (1e3 * r["step"]) if "step" in r else "-",
            1e6 * r["call_ovh"], 1e6 * r["state_ovh"], 1e6 * r["step_ovh"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
