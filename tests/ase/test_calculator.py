"""The ASE calculator's state handling, properties, ensemble results and evaluate_batch."""

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.calculator import PropertyNotImplementedError

import nnpops
from nnpops import structures
from nnpops.ase import NNPOpsCalculator, evaluate_batch


@pytest.fixture(scope="module")
def model():
    return nnpops.Model("ani1x")


@pytest.fixture()
def calc(model):
    return NNPOpsCalculator(model)


def _fresh(atoms, model, prop="energy"):
    a = atoms.copy()
    a.calc = NNPOpsCalculator(model)
    if prop == "stress":
        return a.get_stress()
    if prop == "forces":
        return a.get_forces()
    return a.get_potential_energy()


def test_implemented_properties_is_class_level():
    assert NNPOpsCalculator.implemented_properties == ["energy", "free_energy", "forces",
                                                       "stress", "energies"]
    NNPOpsCalculator("ani1x")
    assert NNPOpsCalculator.implemented_properties == ["energy", "free_energy", "forces",
                                                       "stress", "energies"]


def test_basic_properties(calc):
    atoms = structures.alanine()
    atoms.calc = calc
    e = atoms.get_potential_energy()
    assert atoms.get_potential_energy(force_consistent=True) == e  # free_energy
    assert atoms.get_potential_energies().sum() == pytest.approx(e, abs=1e-9)
    f = atoms.get_forces()
    assert f.shape == (13, 3) and np.allclose(f.sum(axis=0), 0.0, atol=1e-9)
    with pytest.raises(PropertyNotImplementedError):
        atoms.get_stress()  # no cell


def test_positions_change_reuses_context(calc):
    atoms = structures.alanine()
    atoms.calc = calc
    ctx = calc.context
    e0 = atoms.get_potential_energy()
    steps = ctx.stats()["steps"]
    assert atoms.get_potential_energy() == e0
    atoms.get_forces()
    assert ctx.stats()["steps"] == steps  # cached: no new compute
    atoms.positions[0] += [0.05, 0.0, 0.0]
    e1 = atoms.get_potential_energy()
    assert e1 != e0
    assert calc.context is ctx
    assert ctx.stats()["steps"] == steps + 1
    assert e1 == pytest.approx(_fresh(atoms, calc.model), abs=1e-10)


def test_numbers_change(calc, model):
    atoms = structures.water()
    atoms.calc = calc
    e0 = atoms.get_potential_energy()
    atoms.numbers = [7, 1, 1]
    e1 = atoms.get_potential_energy()
    assert e1 != e0
    assert e1 == pytest.approx(_fresh(atoms, model), abs=1e-10)


def test_stale_stress_after_cell_change(calc, model):
    """Regression: the stress must be recomputed after the cell changes."""
    atoms = structures.water_box(2, seed=11)
    atoms.calc = calc
    s0 = atoms.get_stress().copy()
    atoms.set_cell(atoms.cell.array * 1.03, scale_atoms=True)
    s1 = atoms.get_stress()
    assert not np.allclose(s0, s1)
    assert np.allclose(s1, _fresh(atoms, model, "stress"), atol=1e-12)
    # cell only (atoms not moved)
    atoms.set_cell(atoms.cell.array * 1.01, scale_atoms=False)
    s2 = atoms.get_stress()
    assert not np.allclose(s1, s2)
    assert np.allclose(s2, _fresh(atoms, model, "stress"), atol=1e-12)


def test_pbc_change(calc, model):
    atoms = structures.water_box(2, seed=12)
    atoms.calc = calc
    e_periodic = atoms.get_potential_energy()
    atoms.pbc = False
    e_open = atoms.get_potential_energy()
    assert e_open != e_periodic
    assert e_open == pytest.approx(_fresh(atoms, model), abs=1e-10)
    atoms.pbc = [True, True, False]
    e_slab = atoms.get_potential_energy()
    assert e_slab not in (e_open, e_periodic)
    assert e_slab == pytest.approx(_fresh(atoms, model), abs=1e-10)
    assert atoms.get_stress().shape == (6,)  # a complete cell: stress is provided


def test_stress_needs_three_cell_vectors(calc, model):
    """A slab (pbc T T F) or a wire (F F T) may leave the non-periodic cell vectors zero: energy
    and forces are those of any complete cell; the stress is not available."""
    ref = structures.water_box(2, seed=13)
    for pbc, zero in (([True, True, False], [2]), ([False, False, True], [0, 1])):
        atoms = ref.copy()
        atoms.pbc = pbc
        e_full = _fresh(atoms, model)
        f_full = _fresh(atoms, model, "forces")
        cell = atoms.cell.array.copy()
        cell[zero] = 0.0
        atoms.set_cell(cell)
        atoms.calc = calc
        assert atoms.get_potential_energy() == pytest.approx(e_full, abs=1e-9)
        assert np.allclose(atoms.get_forces(), f_full, atol=1e-10)
        with pytest.raises(PropertyNotImplementedError):
            atoms.get_stress()
        r = evaluate_batch([atoms], calc)[0]
        assert r["energy"] == pytest.approx(e_full, abs=1e-9) and r["stress"] is None
    # a zero vector along a periodic axis is an error of the library
    atoms = ref.copy()
    cell = atoms.cell.array.copy()
    cell[1] = 0.0
    atoms.set_cell(cell)
    atoms.calc = calc
    with pytest.raises(nnpops.BadCellError):
        atoms.get_potential_energy()


def test_stress_periodic_matches_virial(calc):
    atoms = structures.water_box(2, seed=14)
    atoms.calc = calc
    s = atoms.get_stress(voigt=False)
    r = calc.context.compute(atoms.numbers, atoms.positions, cells=atoms.cell.array, virial=True)
    w = r["virials"][0]
    assert np.allclose(s, -0.5 * (w + w.T) / atoms.get_volume(), atol=1e-14)


def test_energy_std_and_members(model):
    atoms = structures.alanine()
    calc = NNPOpsCalculator(model)
    atoms.calc = calc
    e = atoms.get_potential_energy()
    members = calc.results["member_energies"]
    assert members.shape == (8,)
    assert members.mean() == pytest.approx(e, abs=1e-9)
    std = calc.get_energy_std()
    assert std == pytest.approx(np.std(members, ddof=1), rel=1e-12)
    assert std > 0
    assert calc.results["qbc"] == pytest.approx(std / np.sqrt(len(atoms)))
    # one member only
    single = NNPOpsCalculator(model, ensemble_member=3)
    a2 = atoms.copy()
    a2.calc = single
    assert a2.get_potential_energy() == pytest.approx(members[3], abs=1e-9)
    # switching the option on an existing calculator clears the results
    calc.set(ensemble_member=5)
    assert calc.results == {}
    assert atoms.get_potential_energy() == pytest.approx(members[5], abs=1e-9)
    calc.set(ensemble_member=-1)
    assert atoms.get_potential_energy() == pytest.approx(e, abs=1e-10)


def test_calculator_options_and_model_change(model):
    atoms = structures.water()
    calc = NNPOpsCalculator("ani1x", min_distance=0.05)
    atoms.calc = calc
    assert calc.context.get_option("min_distance") == pytest.approx(0.05)
    e1x = atoms.get_potential_energy()
    calc.set(model="ani2x")
    assert calc.model.name == "ani2x"
    assert calc.context.get_option("min_distance") == pytest.approx(0.05)
    e2x = atoms.get_potential_energy()
    assert e2x != e1x
    # from a Model object: device and precision are the model's; a new precision reloads it
    calc = NNPOpsCalculator(model)
    assert calc.parameters["precision"] == "float64"
    atoms.calc = calc
    e64 = atoms.get_potential_energy()
    calc.set(precision="float32")
    assert calc.model.precision == "float32" and calc.model.path == model.path
    e32 = atoms.get_potential_energy()
    assert e32 != e64 and e32 == pytest.approx(e64, abs=1e-3)


def test_one_calculator_two_atoms(calc, model):
    a = structures.water()
    b = structures.ethanol()
    a.calc = calc
    b.calc = calc
    ea = a.get_potential_energy()
    eb = b.get_potential_energy()
    assert a.get_potential_energy() == ea
    assert ea == pytest.approx(_fresh(a, model), abs=1e-10)
    assert eb == pytest.approx(_fresh(b, model), abs=1e-10)


def _mixed_structures():
    mol = structures.alanine()
    box = structures.water_box(2, seed=21)
    slab = structures.water_box(2, seed=22)
    slab.pbc = [True, False, True]
    boxed = structures.ethanol()  # a cell but no periodicity
    boxed.set_cell([7.0, 7.0, 7.0])
    boxed.pbc = False
    tri = structures.water_box(2, seed=23)
    tri.set_cell(tri.cell.array + [[0, 0, 0], [0.9, 0, 0], [0.3, -0.4, 0]], scale_atoms=True)
    return [mol, box, slab, boxed, structures.water(), tri]


def test_evaluate_batch_equals_one_by_one(model):
    frames = _mixed_structures()
    calc = NNPOpsCalculator(model)
    steps = calc.context.stats()["steps"]
    batch = evaluate_batch(frames, calc)
    assert calc.context.stats()["steps"] == steps + 1  # one batched compute call
    assert len(batch) == len(frames)
    for atoms, r in zip(frames, batch):
        a = atoms.copy()
        a.calc = NNPOpsCalculator(model)
        assert r["energy"] == pytest.approx(a.get_potential_energy(), rel=1e-12, abs=1e-10)
        assert np.allclose(r["forces"], a.get_forces(), atol=1e-10)
        assert np.allclose(r["energies"], a.get_potential_energies(), atol=1e-10)
        if r["stress"] is None:
            with pytest.raises(PropertyNotImplementedError):
                a.get_stress()
        else:
            assert np.allclose(r["stress"], a.get_stress(), atol=1e-12)
        assert r["energy_std"] == pytest.approx(a.calc.get_energy_std(), rel=1e-8, abs=1e-12)


def test_evaluate_batch_by_name_and_empty():
    frames = [structures.water(), structures.ethanol()]
    r = evaluate_batch(frames, "ani1x", min_distance=0.05)
    assert [len(x["forces"]) for x in r] == [3, 9]
    assert evaluate_batch([], "ani1x") == []


def test_zero_atoms_calculator(calc):
    atoms = Atoms()
    atoms.calc = calc
    assert atoms.get_potential_energy() == 0.0
    assert atoms.get_forces().shape == (0, 3)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_threads_option_same_bits(precision):
    """threads=3 (a keyword argument, the context option): the same energy, forces, stress and
    atomic energies as one thread, and the step ran on 3 threads."""
    atoms = structures.water_box(4)  # 192 atoms: O 64, H 128 -> 3 blocks of atoms
    results = []
    for threads in (1, 3):
        a = atoms.copy()
        a.calc = NNPOpsCalculator("ani1x", precision=precision, threads=threads)
        results.append((a.get_potential_energy(), a.get_forces(), a.get_stress(),
                        a.get_potential_energies()))
        assert a.calc.context.stats()["cpu_threads"] == threads
    for one, three in zip(*results):
        assert np.array_equal(np.asarray(one), np.asarray(three))


def test_charge_keyword_and_info(model):
    """The total charge: the calculator's keyword, overridden by atoms.info["charge"]; zero is
    the neutral result, a nonzero one ANI refuses; a changed info charge is a new calculation."""
    atoms = structures.alanine()
    e_ref = _fresh(atoms, model)
    a = atoms.copy()
    a.calc = NNPOpsCalculator(model, charge=0)
    assert a.get_potential_energy() == e_ref
    a.calc = NNPOpsCalculator(model, charge=1)
    with pytest.raises(nnpops.UnsupportedError, match="does not use a charge"):
        a.get_potential_energy()
    a.info["charge"] = 0  # the atoms' own charge wins over the keyword
    assert a.get_potential_energy() == e_ref
    a.info["charge"] = -1  # not a cached result: ASE does not see info change, the calculator does
    with pytest.raises(nnpops.UnsupportedError, match="total charge -1"):
        a.get_potential_energy()
    b = atoms.copy()
    b.info["charge"] = 0
    c = atoms.copy()
    c.info["charge"] = 2
    with pytest.raises(nnpops.UnsupportedError, match="system 1 has total charge 2"):
        evaluate_batch([b, c], model)
    assert evaluate_batch([b, atoms], model)[0]["energy"] == e_ref
