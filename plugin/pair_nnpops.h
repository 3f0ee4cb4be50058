/* pair_nnpops.h - LAMMPS pair style "nnpops": ANI, TensorNet (and LJ) potentials evaluated by
 * libnnpops.
 *
 * A thin layer over the C API of core/include/nnpops/nnpops.h.  Each step hands the library the
 * atoms whose type maps to an element in one of two ways (keyword periodic):
 *
 *   ghosts  the local and ghost atoms, with no periodicity (the ghosts are the periodic images);
 *           the library searches neighbours itself (ghost centres and ghost-ghost pairs included
 *           where a message-passing model needs them), returns the energy of the local atoms,
 *           forces on local and ghost atoms (LAMMPS folds the ghost forces back, newton_pair on),
 *           the virial and per-atom terms.  The ghost shell is the model's interaction range
 *           (nnpops_model_interaction_range: the cutoff for ANI, (layers + 1) x cutoff for
 *           TensorNet).
 *   cell    only when one rank holds the whole box: the local atoms and the box as a periodic
 *           cell (rows a = (xprd, 0, 0), b = (xy, yprd, 0), c = (xz, yz, zprd); the pbc flags of
 *           the boundary command per axis, z not periodic in a 2d run); the library finds the periodic images itself, also
 *           when the interaction range exceeds half the box.  Forces, per-atom energies and
 *           virials go to the local atoms only, the virial is the library's.  For a
 *           message-passing model in a small box this is many times fewer atoms (a 15 A range
 *           around a 192-atom box of 12.4 A: 8,040 ghost atoms).
 *
 * The ghost atoms LAMMPS keeps are the same in both modes: the pair cutoff (init_one) stays the
 * interaction range, since other commands read it (compute rdf's default range, pair hybrid's
 * largest cutoff, a later run in the ghosts mode after change_box).  In the cell mode they only
 * cost LAMMPS their communication and receive no force.
 *
 *   pair_style nnpops [device cpu|cuda|cuda:N] [precision float32|float64] [charge Q]
 *                     [spread_warning DE] [periodic auto|cell|ghosts] [NAME VALUE ...]
 *   pair_coeff * * MODEL El1 El2 ... (one element symbol or NULL per atom type)
 *
 * periodic: auto (the default) takes the cell mode on one rank when any axis is periodic, the
 * ghosts mode otherwise; cell insists on it (an error on several ranks); ghosts always passes
 * the ghost atoms.  The log says which mode a run uses ("nnpops: periodic cell: ...").
 *
 * NAME VALUE: any context option of the library by name (cuda_graphs on, min_distance 0.05, ...).
 * spread_warning DE: a LAMMPS warning (rank 0, at most once per step) when the ensemble's energy
 * spread (the standard deviation of the members' energies, ddof 1) exceeds DE (energy units).
 *
 * Per-system constants.  A model's energy may hold a constant per system (TensorNet's `mean`); the
 * library shares it over the atoms of a call, ghosts included, so a rank's local energy holds
 * mean x n_local / (n_local + n_ghost).  The plugin reads the constant once (pair_coeff, through
 * nnpops_context_system_energy) and
 * moves each rank's share to mean x n_local / N (N: the model's atoms over all ranks), so that the
 * ranks add it up once.
 *
 * Ensembles.  compute pair nnpops gives a vector: [1] the energy spread (standard deviation of
 * the members' system energies, ddof 1, as torchani's QBC), [2] that spread / sqrt(N), [3..2+K]
 * the K members' system energies, [3+K] the atoms the library got in the last step, summed over
 * the ranks (local + ghost atoms in the ghosts mode, the local atoms in the cell mode).
 * extract("nnpops/energy_std") and extract("nnpops/qbc") (pair extract, dimension 0) give [1]
 * and [2] of the last step on every rank; extract("nnpops/library_atoms") this rank's atoms
 * handed to the library in the last step (a double).
 *
 * Units: every LAMMPS unit style but lj.  metal, real and electron are the library's own units;
 * si, cgs, micro and nano are converted by the plugin from angstrom and eV (1 eV =
 * 1.602176634e-19 J).
 *
 * NNPOPS_LAMMPS_VERSION (yyyymmdd) selects between API generations of LAMMPS; the build derives it
 * from the LAMMPS_VERSION string of the host tree's version.h (plugin/lammps_version.cmake).
 */
#ifndef NNPOPS_PAIR_NNPOPS_H
#define NNPOPS_PAIR_NNPOPS_H

#ifndef NNPOPS_LAMMPS_VERSION
#error "NNPOPS_LAMMPS_VERSION (yyyymmdd of the LAMMPS tree) must be defined; see plugin/CMakeLists.txt"
#endif

#include "pair.h"

#include <cstdint>
#include <string>
#include <vector>

struct nnpops_model;
struct nnpops_context;

namespace LAMMPS_NS {

class PairNNPOPS : public Pair {
 public:
  explicit PairNNPOPS(class LAMMPS *);
  ~PairNNPOPS() override;

  void compute(int, int) override;
  void settings(int, char **) override;
  void coeff(int, char **) override;
  void init_style() override;
  double init_one(int, int) override;
  void setup() override;
  double memory_usage() override;
  void *extract(const char *, int &) override;

 private:
  // pair_style settings
  std::string device_;      // as given: "cpu", "cuda", "cuda:N"
  int precision_;           // nnpops_precision
  std::vector<std::pair<std::string, std::string>> options_;    // context options by name

  // pair_coeff state
  nnpops_model *model_;
  nnpops_context *context_;
  std::string model_arg_;
  std::string unit_style_;    // LAMMPS unit style the context was set up for
  double cutoff_;             // the model's cutoff (LAMMPS length units)
  double range_;              // the model's interaction range (LAMMPS length units): ghost shell
  double length_to_lib_;      // LAMMPS length -> the context's length unit
  double energy_from_lib_;    // the context's energy unit -> LAMMPS energy
  double spread_warning_;     // pair_style spread_warning (LAMMPS energy), < 0 = none
  int ensemble_size_;         // K
  std::vector<double> system_constant_;    // [1 + K] per-system constant: ensemble, members
  bool has_constant_;                      // any of them nonzero
  double energy_std_;         // the last step's energy spread (LAMMPS energy), every rank
  double qbc_;                // energy_std_ / sqrt(N)
  bigint warned_step_;        // the last step spread_warning warned on (rank 0)
  std::vector<double> pvec_;  // pvector storage [2 + K]
  double charge_;             // pair_style keyword charge: the total charge (elementary charges)
  bool has_charge_;           // charge given (else neutral: no charges passed)
  std::vector<int> type_z_;   // [ntypes+1] atomic number per type, 0 = NULL (not ours)
  int periodic_;              // pair_style periodic: PERIODIC_AUTO, _CELL or _GHOSTS
  bool use_cell_;             // this run passes the local atoms and the cell (init_style)
  int logged_mode_;           // the mode last written to the log (-1: none yet)
  double library_atoms_;      // atoms handed to the library in the last step on this rank

  // per-step buffers (grow, never shrink)
  std::vector<int> index_;           // packed atom -> LAMMPS atom index
  std::vector<int32_t> numbers_;     // packed atomic numbers
  std::vector<double> positions_;    // packed [n][3]
  std::vector<double> forces_;       // [n][3]
  std::vector<double> atom_energy_;  // [n]
  std::vector<double> atom_virial_;  // [n][9]
  std::vector<double> members_;      // [K] this rank's member energies
  std::vector<double> members_all_;  // [K] summed over ranks

  enum { PERIODIC_AUTO, PERIODIC_CELL, PERIODIC_GHOSTS };

  void allocate();
  void release_model();
  std::string resolve_device();
  void log_devices();
  void set_units(const char *unit_style);
  void read_system_constant();
  void ensemble_spread(double n_total);
  bool periodic_z() const;
};

}    // namespace LAMMPS_NS

#endif
