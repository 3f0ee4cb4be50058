/* pair_nnpops.h - LAMMPS pair style "nnpops": ANI (and LJ) potentials evaluated by libnnpops.
 *
 * A thin layer over the C API of core/include/nnpops/nnpops.h.  Each step hands the library the
 * local and ghost atoms whose type maps to an element, with no periodicity (the ghosts are the
 * periodic images); the library searches neighbours itself, returns the energy of the local atoms,
 * forces on local and ghost atoms (LAMMPS folds the ghost forces back, newton_pair on), the virial
 * and per-atom terms.  The LAMMPS neighbour list is requested only because LAMMPS expects one.
 *
 *   pair_style nnpops [device cpu|cuda|cuda:N] [precision float32|float64] [NAME VALUE ...]
 *   pair_coeff * * MODEL El1 El2 ... (one element symbol or NULL per atom type)
 *
 * NAME VALUE: any context option of the library by name (cuda_graphs on, min_distance 0.05, ...).
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
  double cutoff_;             // angstrom (metal and real both use angstrom)
  double range_;              // the model's interaction range (angstrom): the ghost shell
  double charge_;             // pair_style keyword charge: the total charge (elementary charges)
  bool has_charge_;           // charge given (else neutral: no charges passed)
  std::vector<int> type_z_;   // [ntypes+1] atomic number per type, 0 = NULL (not ours)

  // per-step buffers (grow, never shrink)
  std::vector<int> index_;           // packed atom -> LAMMPS atom index
  std::vector<int32_t> numbers_;     // packed atomic numbers
  std::vector<double> positions_;    // packed [n][3]
  std::vector<double> forces_;       // [n][3]
  std::vector<double> atom_energy_;  // [n]
  std::vector<double> atom_virial_;  // [n][9]

  void allocate();
  void release_model();
  std::string resolve_device();
};

}    // namespace LAMMPS_NS

#endif
