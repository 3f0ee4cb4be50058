"""The pressure (virial) of pair nnpops agrees with finite differences of the energy under box
deformations (change_box ... remap), at zero velocity so that the kinetic term is 0:
  * isotropic scaling: P = -dE/dV;
  * each of the six box parameters p (lx ly lz xy xz yz) of a triclinic box:
    dE/dp = -sum_ab W_ab eps_ba with eps = (dH/dp) H^-1 (H: lattice vectors as columns).
ANI-1x, 30 atoms."""
import numpy as np

import lammps_support as ls
from test_reference import prepare, reference

H_REL = 1e-5


def box_cmd(L):
    """change_box setting the box with lattice rows L (lower triangular), atoms remapped."""
    return (f"change_box all x final 0 {L[0, 0]:.17g} y final 0 {L[1, 1]:.17g} "
            f"z final 0 {L[2, 2]:.17g} xy final {L[1, 0]:.17g} xz final {L[2, 0]:.17g} "
            f"yz final {L[2, 1]:.17g} remap units box")


def test_pressure_matches_volume_derivative(tmp_path):
    ls.require_model("ani1x")
    symbols, pos, cell, _ = prepare(reference("ani1x")["water8_pbc"])
    # a sheared version of the box (same fractional coordinates), so that off-diagonal terms count
    L0 = np.array(cell, dtype=float)
    frac = pos @ np.linalg.inv(L0)
    L0 = L0 + np.array([[0, 0, 0], [0.9, 0, 0], [-0.6, 0.7, 0]])
    pos = frac @ L0
    elements = ls.write_data(tmp_path / "data.lmp", symbols, pos, L0 + np.diag([0, 0, 0]))
    # deformations: (name, rows of the deformed cell for a step t)
    params = {"lx": (1, 0, 0, 0, 0, 0), "ly": (0, 1, 0, 0, 0, 0), "lz": (0, 0, 1, 0, 0, 0),
              "xy": (0, 0, 0, 1, 0, 0), "xz": (0, 0, 0, 0, 1, 0), "yz": (0, 0, 0, 0, 0, 1)}

    def deformed(dp):
        lx, ly, lz, xy, xz, yz = dp
        return L0 + np.array([[lx, 0, 0], [xy, ly, 0], [xz, yz, lz]])

    h = H_REL * L0[0, 0]
    steps = []
    for s in (1.0 + H_REL, 1.0 - H_REL):
        steps.append((f"iso{'+' if s > 1 else '-'}", L0 * s))
    for name, e in params.items():
        for sign in (1, -1):
            steps.append((f"{name}{'+' if sign > 0 else '-'}", deformed(np.array(e) * sign * h)))
    script = f"""units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops
pair_coeff * * ani1x {' '.join(elements)}
{ls.VIRIAL_SETUP}
run 0
"""
    for key, L in steps:
        script += f"""{box_cmd(L)}
run 0
print "@@ {key} $(pe:%.17g) $(vol:%.17g)"
"""
    run = ls.run_lammps(tmp_path, script)
    base = ls.last_row(run.thermo()[0])
    res = run.results()
    W = ls.virial_from_thermo(base)
    V = base["Volume"]
    assert abs(V - abs(np.linalg.det(L0))) < 1e-9 * V

    # isotropic: P = -dE/dV (bar), no kinetic part
    (ep, vp), (em, vm) = res["iso+"], res["iso-"]
    p_fd = -(ep - em) / (vp - vm) * ls.NKTV2P["metal"]
    print(f"P = {base['Press']:.10g} bar, -dE/dV = {p_fd:.10g} bar")
    assert abs(base["Press"] - p_fd) <= 1e-5 * max(abs(p_fd), 1.0) + 1e-2

    # each box parameter: dE/dp = -sum_ab W_ab eps_ba, eps = dH H^-1, H = rows^T
    H = L0.T
    scale = np.abs(W).max()
    for name, e in params.items():
        dE = (res[name + "+"][0] - res[name + "-"][0]) / (2 * h)
        dH = (deformed(np.array(e, dtype=float)) - L0).T
        eps = dH @ np.linalg.inv(H)
        predicted = -np.sum(W * eps.T)
        print(f"{name}: dE/dp = {dE:.10g}, from the virial {predicted:.10g}")
        assert abs(dE - predicted) <= 1e-6 * scale, name
