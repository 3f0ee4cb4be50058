/* pair_nnpops.cpp - LAMMPS pair style "nnpops" over the C API of libnnpops (see pair_nnpops.h).
 *
 * One step:
 *   pack     the local atoms, then (ghosts mode) the ghost atoms, whose type maps to an element
 *            (the local ones come first because LAMMPS orders local before ghost); keep
 *            packed -> LAMMPS indices
 *   compute  nnpops_compute, ghosts mode: cells = pbc = NULL (the ghosts are the periodic
 *            images), n_local = packed local atoms: energy of local atoms, forces on all packed
 *            atoms; cell mode: the box as the cell and the boundary's pbc flags, every packed
 *            atom local
 *   scatter  forces added into atom->f (ghost forces are folded back by LAMMPS, newton_pair on);
 *            energy into eng_vdwl; the library's 3x3 virial into virial[6] (no f.r virial);
 *            per-atom energies / virials into eatom / vatom, ghosts included (ghosts mode; LAMMPS
 *            reverse-communicates them when newton is on)
 *
 *   correct  each rank's share of a per-system constant (TensorNet's mean) from
 *            n_local / (packed atoms) to n_local / N, N = the model's atoms over all ranks
 *   ensemble the member energies summed over ranks: spread, QBC, pvector, spread_warning
 *
 * Units: metal, real and electron through the library's unit options; si, cgs, micro and nano
 * through the library's angstrom and eV and the plugin's own factors (set_units).
 */
#include "pair_nnpops.h"

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "memory.h"
#include "neigh_list.h"
#if NNPOPS_LAMMPS_VERSION < 20220324
#include "neigh_request.h"    // requests are configured through it before add_request()
#endif
#include "neighbor.h"
#include "update.h"
#include "utils.h"

#include "nnpops/nnpops.h"

#include <mpi.h>

#include <cmath>
#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <regex>

using namespace LAMMPS_NS;

namespace {

// Element symbols by atomic number (index 0 unused).
const char *const kSymbols[] = {
    "",   "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si",
    "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu",
    "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru",
    "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr",
    "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",
    "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac",
    "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf",
    "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};
constexpr int kNumSymbols = static_cast<int>(sizeof(kSymbols) / sizeof(kSymbols[0]));

// Atomic number of a symbol ("O", "Cl"), 0 for "NULL", -1 when unknown.
int atomic_number(const char *symbol)
{
  if (std::strcmp(symbol, "NULL") == 0) return 0;
  for (int z = 1; z < kNumSymbols; ++z)
    if (std::strcmp(symbol, kSymbols[z]) == 0) return z;
  return -1;
}

std::string library_message(nnpops_status status)
{
  const char *detail = nnpops_last_error();
  std::string msg = nnpops_status_name(status);
  if (detail && *detail) msg += std::string(": ") + detail;
  return msg;
}

// The library names atoms by their index in the arrays it was given (the plugin packs local
// atoms first, then ghosts); `tag_of(p)` gives the LAMMPS atom ID of packed atom p.  Appends the
// IDs of the atoms a message names ("atom N", "atoms N and M"); the message is returned unchanged
// when it names none or an index is out of range.
template <typename TagOf>
std::string with_atom_ids(const std::string &msg, long long n_packed, TagOf tag_of)
{
  static const std::regex atoms_re("\\batoms? ([0-9]{1,18})(?: and ([0-9]{1,18}))?");
  std::smatch m;
  if (!std::regex_search(msg, m, atoms_re)) return msg;
  std::string ids;
  for (int g = 1; g <= 2; ++g) {
    if (!m[g].matched) continue;
    const long long p = std::stoll(m[g].str());
    if (p < 0 || p >= n_packed) return msg;
    if (!ids.empty()) ids += " and ";
    ids += std::to_string(tag_of(p));
  }
  return msg + " [the numbers are indices in this rank's packed atoms; LAMMPS atom ID" +
      (m[2].matched ? "s " : " ") + ids + "]";
}

}    // namespace

/* ---------------------------------------------------------------------- */

PairNNPOPS::PairNNPOPS(LAMMPS *lmp) :
    Pair(lmp), device_("cpu"), precision_(NNPOPS_FLOAT64), model_(nullptr), context_(nullptr),
    cutoff_(0.0), range_(0.0), length_to_lib_(1.0), energy_from_lib_(1.0), spread_warning_(-1.0),
    ensemble_size_(1), has_constant_(false), energy_std_(0.0), qbc_(0.0), warned_step_(-1),
    charge_(0.0), has_charge_(false), periodic_(PERIODIC_AUTO), use_cell_(false),
    logged_mode_(-1), library_atoms_(0.0)
{
  single_enable = 0;
  restartinfo = 0;
  one_coeff = 1;
  manybody_flag = 1;
  no_virial_fdotr_compute = 1;    // the library returns the virial itself
  reinitflag = 0;
#if NNPOPS_LAMMPS_VERSION >= 20200630
  centroidstressflag = CENTROID_AVAIL;    // from the library's nine per-atom components
#endif
}

PairNNPOPS::~PairNNPOPS()
{
  if (copymode) return;
  release_model();
  if (allocated) {
    memory->destroy(setflag);
    memory->destroy(cutsq);
  }
}

void PairNNPOPS::release_model()
{
  nnpops_context_destroy(context_);
  context_ = nullptr;
  nnpops_model_destroy(model_);
  model_ = nullptr;
}

void PairNNPOPS::allocate()
{
  allocated = 1;
  const int n = atom->ntypes;
  memory->create(setflag, n + 1, n + 1, "pair:setflag");
  memory->create(cutsq, n + 1, n + 1, "pair:cutsq");
  for (int i = 0; i <= n; ++i)
    for (int j = 0; j <= n; ++j) {
      setflag[i][j] = 0;
      cutsq[i][j] = 0.0;
    }
}

/* ----------------------------------------------------------------------
   pair_style nnpops [device D] [precision P] [charge Q] [NAME VALUE ...]
------------------------------------------------------------------------- */

void PairNNPOPS::settings(int narg, char **arg)
{
  // The plugin speaks the C API of the header it was compiled with; the patch level may differ.
  if (nnpops_version_number() / 100 != NNPOPS_VERSION_NUMBER / 100)
    error->all(FLERR, "Pair style nnpops: the plugin was built for libnnpops " +
                          std::to_string(NNPOPS_VERSION_MAJOR) + "." +
                          std::to_string(NNPOPS_VERSION_MINOR) + ".x but loaded libnnpops " +
                          std::string(nnpops_version_string()));

  std::string device = "cpu";
  int precision = NNPOPS_FLOAT64;
  double charge = 0.0;
  bool has_charge = false;
  double spread_warning = -1.0;
  int periodic = PERIODIC_AUTO;
  std::vector<std::pair<std::string, std::string>> options;

  if (narg % 2 != 0)
    error->all(FLERR,
               std::string("Illegal pair_style nnpops command: keywords come in pairs "
                           "(device cpu|cuda|cuda:N, precision float32|float64, charge Q, "
                           "spread_warning DE, periodic auto|cell|ghosts, or a context option "
                           "NAME VALUE)"));
  for (int i = 0; i < narg; i += 2) {
    const std::string key = arg[i], value = arg[i + 1];
    if (key == "device") {
      if (value != "cpu" && value != "cuda" && value.rfind("cuda:", 0) != 0)
        error->all(FLERR, "Pair style nnpops: device must be cpu, cuda or cuda:N, not '" + value +
                              "'");
      device = value;
    } else if (key == "charge") {
      char *end = nullptr;
      charge = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !std::isfinite(charge))
        error->all(FLERR, "Pair style nnpops: charge must be a number (the total charge in "
                          "elementary charges), not '" + value + "'");
      has_charge = true;
    } else if (key == "spread_warning") {
      char *end = nullptr;
      spread_warning = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !std::isfinite(spread_warning) ||
          spread_warning < 0.0)
        error->all(FLERR, "Pair style nnpops: spread_warning must be a number >= 0 (an energy "
                          "in the units of the units command), not '" + value + "'");
    } else if (key == "periodic") {
      if (value == "auto")
        periodic = PERIODIC_AUTO;
      else if (value == "cell")
        periodic = PERIODIC_CELL;
      else if (value == "ghosts")
        periodic = PERIODIC_GHOSTS;
      else
        error->all(FLERR,
                   "Pair style nnpops: periodic must be auto, cell or ghosts, not '" + value + "'");
    } else if (key == "precision") {
      if (value == "float32")
        precision = NNPOPS_FLOAT32;
      else if (value == "float64")
        precision = NNPOPS_FLOAT64;
      else
        error->all(FLERR,
                   "Pair style nnpops: precision must be float32 or float64, not '" + value + "'");
    } else {
      nnpops_option option;
      if (nnpops_option_from_name(key.c_str(), &option) != NNPOPS_OK) {
        std::string known = "device, precision, charge, spread_warning, periodic";
        for (int o = 0; o < NNPOPS_OPTION_COUNT_; ++o) {
          const char *name = nnpops_option_name(static_cast<nnpops_option>(o));
          if (name && *name) known += std::string(", ") + name;
        }
        error->all(FLERR, "Pair style nnpops: unknown keyword '" + key + "' (known: " + known + ")");
      }
      if (option == NNPOPS_OPTION_LENGTH_UNIT || option == NNPOPS_OPTION_ENERGY_UNIT)
        error->all(FLERR, "Pair style nnpops: '" + key + "' is set from the LAMMPS units command");
      options.emplace_back(key, value);
    }
  }

  // New settings take effect with the next pair_coeff: drop the model and its coefficients.
  device_ = device;
  precision_ = precision;
  options_ = options;
  charge_ = charge;
  has_charge_ = has_charge;
  spread_warning_ = spread_warning;
  periodic_ = periodic;
  logged_mode_ = -1;
  release_model();
  if (allocated) {
    const int n = atom->ntypes;
    for (int i = 0; i <= n; ++i)
      for (int j = 0; j <= n; ++j) setflag[i][j] = 0;
  }
}

/* ----------------------------------------------------------------------
   "cuda" (no index): this rank's GPU is its node-local rank modulo the GPU count
------------------------------------------------------------------------- */

std::string PairNNPOPS::resolve_device()
{
  if (device_ != "cuda") return device_;
  int local_rank = comm->me;
#if defined(MPI_VERSION) && MPI_VERSION >= 3
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm->me, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
#endif
  const int count = nnpops_cuda_device_count();
  if (count <= 0) return "cuda";    // the library says why (not built, no driver, no GPU)
  return "cuda:" + std::to_string(local_rank % count);
}

/* ----------------------------------------------------------------------
   pair_coeff * * MODEL El1 El2 ... (NULL for types left to other pair styles)
------------------------------------------------------------------------- */

void PairNNPOPS::coeff(int narg, char **arg)
{
  if (!allocated) allocate();
  const int ntypes = atom->ntypes;
  if (narg != 3 + ntypes)
    error->all(FLERR, "Incorrect args for pair coefficients: pair_coeff * * MODEL followed by " +
                          std::to_string(ntypes) +
                          " element symbols (one per atom type, NULL for types not handled by "
                          "nnpops), got " +
                          std::to_string(narg - 3));
  if (std::strcmp(arg[0], "*") != 0 || std::strcmp(arg[1], "*") != 0)
    error->all(FLERR, std::string("Incorrect args for pair coefficients: nnpops needs pair_coeff * *"));

  std::vector<int> type_z(ntypes + 1, 0);
  for (int t = 1; t <= ntypes; ++t) {
    const int z = atomic_number(arg[2 + t]);
    if (z < 0)
      error->all(FLERR, "Pair coeff nnpops: '" + std::string(arg[2 + t]) + "' (atom type " +
                            std::to_string(t) + ") is not an element symbol or NULL");
    type_z[t] = z;
  }

  const char *unit_style = update->unit_style;
  if (std::strcmp(unit_style, "lj") == 0)
    error->all(FLERR, std::string("Pair style nnpops does not support units lj (a model has "
                                  "physical units; use metal, real, electron, si, cgs, micro or "
                                  "nano)"));

  release_model();
  model_arg_ = arg[2];
  const std::string device = resolve_device();
  nnpops_status st = nnpops_model_load(model_arg_.c_str(), device.c_str(),
                                       static_cast<nnpops_precision>(precision_), &model_);
  if (st != NNPOPS_OK)
    error->all(FLERR, "Pair coeff nnpops: cannot load model '" + model_arg_ + "' on " + device +
                          ": " + library_message(st));
  st = nnpops_context_create(model_, &context_);
  if (st != NNPOPS_OK)
    error->all(FLERR, "Pair coeff nnpops: cannot create a context: " + library_message(st));
  set_units(unit_style);
  for (const auto &kv : options_) {
    st = nnpops_context_set_option_by_name(context_, kv.first.c_str(), kv.second.c_str());
    if (st != NNPOPS_OK)
      error->all(FLERR, "Pair style nnpops: option " + kv.first + " " + kv.second + ": " +
                            library_message(st));
  }
  unit_style_ = unit_style;

  // Each element once through the library (one isolated atom): an element the model does not
  // describe is refused here, with the library's own message, instead of at the first step.
  std::vector<int> checked;
  for (int t = 1; t <= ntypes; ++t) {
    const int32_t z = type_z[t];
    if (z == 0) continue;
    bool seen = false;
    for (int c : checked) seen = seen || c == z;
    if (seen) continue;
    checked.push_back(z);
    const double position[3] = {0.0, 0.0, 0.0};
    double energy = 0.0;
    nnpops_inputs in;
    std::memset(&in, 0, sizeof(in));
    in.struct_size = sizeof(in);
    in.n_atoms = 1;
    in.n_local = 1;
    in.n_systems = 1;
    in.atomic_numbers = &z;
    in.positions = position;
    in.charges = has_charge_ ? &charge_ : nullptr;    // a model that cannot use it says so here
    nnpops_outputs out;
    std::memset(&out, 0, sizeof(out));
    out.struct_size = sizeof(out);
    out.energies = &energy;
    st = nnpops_compute(context_, &in, &out);
    if (st != NNPOPS_OK)
      error->all(FLERR, "Pair coeff nnpops: element " + std::string(arg[2 + t]) + " (atom type " +
                            std::to_string(t) + ") with model '" + model_arg_ +
                            "': " + library_message(st));
  }

  read_system_constant();

  // compute pair nnpops: [1] spread, [2] spread / sqrt(N), [3..2+K] member energies, [3+K] the
  // atoms handed to the library (a compute pair keeps the length it found when it was made: the
  // storage never shrinks).
  ensemble_size_ = std::max(1, static_cast<int>(nnpops_model_ensemble_size(model_)));
  nextra = 3 + ensemble_size_;
  if (pvec_.size() < static_cast<size_t>(nextra)) pvec_.resize(nextra);
  std::fill(pvec_.begin(), pvec_.end(), 0.0);
  pvector = pvec_.data();
  members_.assign(ensemble_size_, 0.0);
  members_all_.assign(ensemble_size_, 0.0);

  type_z_ = type_z;
  int count = 0;
  for (int i = 1; i <= ntypes; ++i)
    for (int j = i; j <= ntypes; ++j) {
      setflag[i][j] = (type_z_[i] > 0 && type_z_[j] > 0) ? 1 : 0;
      count += setflag[i][j];
    }
  if (count == 0)
    error->all(FLERR, std::string("Pair coeff nnpops: every atom type is NULL"));

  if (comm->me == 0) {
    char line[512];
    std::snprintf(line, sizeof(line),
                  "nnpops: model %s (%s, %s), %d species, cutoff %.4g A, interaction range "
                  "%.4g A, device %s, %s, units %s, library %s\n",
                  nnpops_model_name(model_), nnpops_model_type(model_), nnpops_model_path(model_),
                  (int) nnpops_model_num_species(model_), nnpops_model_cutoff(model_),
                  nnpops_model_interaction_range(model_), nnpops_model_device(model_),
                  nnpops_model_precision(model_) == NNPOPS_FLOAT32 ? "float32" : "float64",
                  unit_style, nnpops_version_string());
    std::string msg(line);
    if (!options_.empty()) { // the keywords given to pair_style, as the context received them
      msg.pop_back();
      msg += ", options:";
      for (const auto &kv : options_) msg += " " + kv.first + " " + kv.second;
      msg += "\n";
    }
    utils::logmesg(lmp, msg);
  }
  log_devices();
}

/* ----------------------------------------------------------------------
   On several ranks: the device of every rank in the log (rank 0), so that the GPU each rank took
   ("device cuda": its node-local rank modulo the GPU count) can be checked.  Up to 32 ranks one
   by one, beyond that the number of ranks per device.
------------------------------------------------------------------------- */

void PairNNPOPS::log_devices()
{
  if (comm->nprocs < 2) return;
  constexpr int width = 32;
  char mine[width] = {0};
  std::snprintf(mine, sizeof(mine), "%s", nnpops_model_device(model_));
  std::vector<char> all(comm->me == 0 ? static_cast<size_t>(width) * comm->nprocs : 1);
  MPI_Gather(mine, width, MPI_CHAR, all.data(), width, MPI_CHAR, 0, world);
  if (comm->me != 0) return;
  std::string msg = "nnpops: device per rank:";
  if (comm->nprocs <= 32) {
    for (int r = 0; r < comm->nprocs; ++r)
      msg += std::string(" ") + &all[static_cast<size_t>(width) * r];
  } else {
    std::vector<std::pair<std::string, int>> counts;
    for (int r = 0; r < comm->nprocs; ++r) {
      const std::string d = &all[static_cast<size_t>(width) * r];
      bool found = false;
      for (auto &c : counts)
        if (c.first == d) { ++c.second; found = true; }
      if (!found) counts.emplace_back(d, 1);
    }
    for (const auto &c : counts) msg += " " + c.first + " x" + std::to_string(c.second);
  }
  utils::logmesg(lmp, msg + "\n");
}

/* ----------------------------------------------------------------------
   Units of the context and the plugin's own factors.  The library speaks angstrom, nm, bohr and
   eV, kcal/mol, kJ/mol, hartree; the other LAMMPS styles go through angstrom and eV.
------------------------------------------------------------------------- */

void PairNNPOPS::set_units(const char *unit_style)
{
  constexpr double kEV = 1.602176634e-19;    // J (exact, SI 2019)
  struct Style {
    const char *name;
    int length_unit, energy_unit;    // the context's options
    double length_to_lib;            // LAMMPS length -> the context's length unit
    double energy_from_lib;          // the context's energy -> LAMMPS energy
  };
  const Style styles[] = {
      {"metal", 0, 0, 1.0, 1.0},                // angstrom, eV
      {"real", 0, 1, 1.0, 1.0},                 // angstrom, kcal/mol
      {"electron", 2, 3, 1.0, 1.0},             // bohr, hartree
      {"si", 0, 0, 1.0e10, kEV},                // m, J
      {"cgs", 0, 0, 1.0e8, kEV / 1.0e-7},       // cm, erg
      {"micro", 0, 0, 1.0e4, kEV / 1.0e-15},    // um, pg um^2 / us^2
      {"nano", 0, 0, 10.0, kEV / 1.0e-21},      // nm, ag nm^2 / ns^2
  };
  const Style *found = nullptr;
  for (const Style &u : styles)
    if (std::strcmp(unit_style, u.name) == 0) found = &u;
  if (!found)
    error->all(FLERR, "Pair style nnpops does not support units '" + std::string(unit_style) +
                          "' (metal, real, electron, si, cgs, micro, nano)");
  nnpops_status st =
      nnpops_context_set_option(context_, NNPOPS_OPTION_LENGTH_UNIT, found->length_unit);
  if (st == NNPOPS_OK)
    st = nnpops_context_set_option(context_, NNPOPS_OPTION_ENERGY_UNIT, found->energy_unit);
  if (st != NNPOPS_OK)
    error->all(FLERR, "Pair coeff nnpops: cannot set units " + std::string(unit_style) + ": " +
                          library_message(st));
  length_to_lib_ = found->length_to_lib;
  energy_from_lib_ = found->energy_from_lib;
  // The model's lengths are in angstrom; one LAMMPS length unit is this many angstrom.
  const double angstrom_per_unit =
      found->length_unit == 2 ? 0.52917721092 : found->length_to_lib;    // the library's bohr
  cutoff_ = nnpops_model_cutoff(model_) / angstrom_per_unit;
  range_ = nnpops_model_interaction_range(model_) / angstrom_per_unit;
}

/* ----------------------------------------------------------------------
   The model's constant energy per system (TensorNet's `mean`; 0 for ANI and LJ), for the ensemble
   and each member, in the context's energy unit (nnpops_context_system_energy).  The library
   shares it over the atoms of a call, ghosts included in the count; compute() moves each rank's
   share to n_local / N of it, N the atoms over all ranks, so that it is added once.
------------------------------------------------------------------------- */

void PairNNPOPS::read_system_constant()
{
  const int ens = std::max(1, static_cast<int>(nnpops_model_ensemble_size(model_)));
  system_constant_.assign(1 + ens, 0.0);
  has_constant_ = false;
  for (int m = -1; m < (ens > 1 ? ens : 0); ++m) {
    const nnpops_status st = nnpops_context_system_energy(context_, m, &system_constant_[1 + m]);
    if (st != NNPOPS_OK)
      error->all(FLERR, "Pair coeff nnpops: model '" + model_arg_ +
                            "': its energy per system: " + library_message(st));
  }
  for (double c : system_constant_) has_constant_ = has_constant_ || c != 0.0;
}

/* ----------------------------------------------------------------------
   Whether z is periodic for the library: a 2d box is periodic in z by LAMMPS's rule, but LAMMPS
   makes no images along z there (its thickness is arbitrary), so neither does the cell mode.
------------------------------------------------------------------------- */

bool PairNNPOPS::periodic_z() const
{
  return domain->dimension == 3 && domain->zperiodic;
}

/* ---------------------------------------------------------------------- */

void PairNNPOPS::init_style()
{
  if (force->newton_pair == 0)
    error->all(FLERR, std::string("Pair style nnpops requires newton pair on"));
  if (!model_ || !context_)
    error->all(FLERR, std::string("Pair style nnpops: pair_coeff * * MODEL ... is needed after "
                                  "pair_style"));
  if (unit_style_ != update->unit_style)
    error->all(FLERR, "Pair style nnpops: units changed from " + unit_style_ + " to " +
                          std::string(update->unit_style) + " after pair_coeff");

#if NNPOPS_LAMMPS_VERSION >= 20220324
  // The library finds neighbours itself: no LAMMPS list is requested (a full list out to the
  // interaction range of a message-passing model would hold thousands of pairs per atom for
  // nothing).  The ghost shell follows the pair cutoff (init_one) all the same.
#else
  // This LAMMPS generation expects a list: ask for a full one (unused).
  const int irequest = neighbor->request(this, instance_me);
  neighbor->requests[irequest]->half = 0;
  neighbor->requests[irequest]->full = 1;
#endif

  // Which atoms the library gets in this run.  Neither the rank count nor the box's periodicity
  // can change within a run (change_box is a command between runs, and init follows it).
  const bool any_periodic = domain->xperiodic || domain->yperiodic || periodic_z();
  if (periodic_ == PERIODIC_CELL && comm->nprocs > 1)
    error->all(FLERR, "Pair style nnpops: periodic cell needs the whole box on one rank (this run "
                      "has " + std::to_string(comm->nprocs) + " ranks); use periodic auto or "
                      "ghosts");
  use_cell_ = periodic_ == PERIODIC_CELL ||
      (periodic_ == PERIODIC_AUTO && comm->nprocs == 1 && any_periodic);
  const int mode = use_cell_ ? PERIODIC_CELL : PERIODIC_GHOSTS;
  if (comm->me == 0 && mode != logged_mode_) {
    char line[256];
    if (use_cell_)
      std::snprintf(line, sizeof(line),
                    "nnpops: periodic cell: the library gets the local atoms and the box as its "
                    "cell (pbc %d %d %d), no ghost atoms\n",
                    domain->xperiodic, domain->yperiodic, periodic_z() ? 1 : 0);
    else
      std::snprintf(line, sizeof(line),
                    "nnpops: periodic ghosts: the library gets the local and ghost atoms (ghost "
                    "shell %.6g), no cell\n", range_);
    utils::logmesg(lmp, std::string(line));
  }
  logged_mode_ = mode;
}

double PairNNPOPS::init_one(int i, int j)
{
  if (setflag[i][j] == 0) error->all(FLERR, std::string("All pair coeffs are not set"));
  // The library finds its own pairs; what LAMMPS must provide is ghost atoms out to the model's
  // interaction range (the cutoff for ANI; longer for a message-passing model), and the ghost
  // shell follows the largest pair cutoff.
  return range_;
}

// Ghost atoms must cover the model's interaction range around every local atom (ghosts mode; the
// cell mode uses no ghost atoms).
void PairNNPOPS::setup()
{
  if (use_cell_) return;
  const double comm_cutoff = std::max(comm->cutghostuser, neighbor->cutneighmax);
  if (comm_cutoff < range_)
    error->all(FLERR, "Pair style nnpops: communication cutoff " + std::to_string(comm_cutoff) +
                          " is shorter than the model's interaction range " +
                          std::to_string(range_));
}

/* ---------------------------------------------------------------------- */

void PairNNPOPS::compute(int eflag, int vflag)
{
  ev_init(eflag, vflag);

  const int nlocal = atom->nlocal;
  // the cell mode hands over the local atoms only
  const int nall = use_cell_ ? nlocal : nlocal + atom->nghost;
  const int *const type = atom->type;
  double **const x = atom->x;
  double **const f = atom->f;
  const int ens = ensemble_size_;
  const bool want_members = ens > 1;
#if NNPOPS_LAMMPS_VERSION >= 20200630
  const bool want_centroid = cvflag_atom != 0;
#else
  const bool want_centroid = false;
#endif

  // Pack the atoms nnpops handles: local ones first (LAMMPS stores local before ghost).  In the
  // cell mode the positions may lie outside the box between re-neighbourings: the library wraps
  // them along the periodic axes.
  index_.clear();
  numbers_.clear();
  positions_.clear();
  int64_t n_local = 0;
  for (int i = 0; i < nall; ++i) {
    const int z = type_z_[type[i]];
    if (z <= 0) continue;
    if (i < nlocal) ++n_local;
    index_.push_back(i);
    numbers_.push_back(z);
    positions_.push_back(x[i][0] * length_to_lib_);
    positions_.push_back(x[i][1] * length_to_lib_);
    positions_.push_back(x[i][2] * length_to_lib_);
  }
  const int64_t n = static_cast<int64_t>(index_.size());
  library_atoms_ = n_local > 0 ? static_cast<double>(n) : 0.0;    // none: no call (below)

  // The box as the cell (rows a, b, c in LAMMPS's triclinic convention; an orthogonal box has no
  // tilt), and the boundary command's periodic flags: a non-periodic axis keeps its row, which
  // only makes the cell non-singular (the library's rule for mixed periodicity).
  double cell[9];
  uint8_t pbc[3];
  if (use_cell_) {
    const bool tri = domain->triclinic != 0;
    const double rows[9] = {domain->xprd, 0.0, 0.0,
                            tri ? domain->xy : 0.0, domain->yprd, 0.0,
                            tri ? domain->xz : 0.0, tri ? domain->yz : 0.0, domain->zprd};
    for (int k = 0; k < 9; ++k) cell[k] = rows[k] * length_to_lib_;
    pbc[0] = domain->xperiodic ? 1 : 0;
    pbc[1] = domain->yperiodic ? 1 : 0;
    pbc[2] = periodic_z() ? 1 : 0;
  }

  // The model's atoms over all ranks: the per-system constant's share and the QBC's sqrt(N).
  double n_total = static_cast<double>(n_local);
  if (has_constant_ || want_members) {
    const double mine = static_cast<double>(n_local);
    MPI_Allreduce(&mine, &n_total, 1, MPI_DOUBLE, MPI_SUM, world);
  }

  double energy = 0.0;
  double w[9] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  std::fill(members_.begin(), members_.end(), 0.0);

  // No local atom here: no energy, and nothing acts on the ghosts either (the ensemble's sums
  // below still need this rank).
  if (n_local > 0) {
    if (forces_.size() < static_cast<size_t>(3 * n)) forces_.resize(3 * n);
    if (eflag_atom && atom_energy_.size() < static_cast<size_t>(n)) atom_energy_.resize(n);
    if ((vflag_atom || want_centroid) && atom_virial_.size() < static_cast<size_t>(9 * n))
      atom_virial_.resize(9 * n);

    nnpops_inputs in;
    std::memset(&in, 0, sizeof(in));
    in.struct_size = sizeof(in);
    in.n_atoms = n;
    in.n_local = n_local;
    in.n_systems = 1;
    in.atomic_numbers = numbers_.data();
    in.positions = positions_.data();
    in.batch = nullptr;
    in.cells = use_cell_ ? cell : nullptr;    // ghosts mode: the ghosts are the images
    in.pbc = use_cell_ ? pbc : nullptr;
    in.charges = has_charge_ ? &charge_ : nullptr;    // the whole system's total charge

    nnpops_outputs out;
    std::memset(&out, 0, sizeof(out));
    out.struct_size = sizeof(out);
    out.energies = &energy;
    out.forces = forces_.data();
    out.virials = vflag_global ? w : nullptr;
    out.atomic_energies = eflag_atom ? atom_energy_.data() : nullptr;
    out.atomic_virials = (vflag_atom || want_centroid) ? atom_virial_.data() : nullptr;
    out.member_energies = want_members ? members_.data() : nullptr;

    const nnpops_status st = nnpops_compute(context_, &in, &out);
    if (st != NNPOPS_OK) {
      std::string detail = library_message(st);
      if (atom->tag_enable && atom->tag)
        detail = with_atom_ids(detail, static_cast<long long>(n), [this](long long p) {
          return static_cast<long long>(atom->tag[index_[p]]);
        });
      const std::string atoms = use_cell_
          ? std::to_string(n_local) + " local atoms and the periodic cell"
          : std::to_string(n_local) + " local, " + std::to_string(n - n_local) + " ghost atoms";
      error->one(FLERR, "Pair nnpops: compute failed on rank " + std::to_string(comm->me) + " (" +
                            atoms + "): " + detail);
    }

    // The library gave each local atom constant / n; its share is constant / N.
    const double share = has_constant_ ? 1.0 / n_total - 1.0 / static_cast<double>(n) : 0.0;
    if (has_constant_) {
      energy += system_constant_[0] * share * static_cast<double>(n_local);
      for (int m = 0; m < ens && want_members; ++m)
        members_[m] += system_constant_[1 + m] * share * static_cast<double>(n_local);
    }

    const double ef = energy_from_lib_, ff = energy_from_lib_ * length_to_lib_;
    for (int64_t p = 0; p < n; ++p) {
      double *fi = f[index_[p]];
      fi[0] += ff * forces_[3 * p + 0];
      fi[1] += ff * forces_[3 * p + 1];
      fi[2] += ff * forces_[3 * p + 2];
    }
    if (eflag_global) eng_vdwl += ef * energy;
    if (vflag_global) {
      // row-major 3x3 (row: position, column: force) -> LAMMPS Voigt order xx yy zz xy xz yz
      virial[0] += ef * w[0];
      virial[1] += ef * w[4];
      virial[2] += ef * w[8];
      virial[3] += ef * w[1];
      virial[4] += ef * w[2];
      virial[5] += ef * w[5];
    }
    if (eflag_atom)
      for (int64_t p = 0; p < n; ++p) {
        const double constant = p < n_local ? system_constant_[0] * share : 0.0;
        eatom[index_[p]] += ef * (atom_energy_[p] + constant);
      }
    if (vflag_atom)
      for (int64_t p = 0; p < n; ++p) {
        const double *v = &atom_virial_[9 * p];
        double *va = vatom[index_[p]];
        va[0] += ef * v[0];
        va[1] += ef * v[4];
        va[2] += ef * v[8];
        va[3] += ef * v[1];
        va[4] += ef * v[2];
        va[5] += ef * v[5];
      }
#if NNPOPS_LAMMPS_VERSION >= 20200630
    if (want_centroid)
      // LAMMPS's order: xx yy zz xy xz yz yx zx zy (first index: position, second: force)
      for (int64_t p = 0; p < n; ++p) {
        const double *v = &atom_virial_[9 * p];
        double *cv = cvatom[index_[p]];
        static const int from[9] = {0, 4, 8, 1, 2, 5, 3, 6, 7};
        for (int k = 0; k < 9; ++k) cv[k] += ef * v[from[k]];
      }
#endif
  }

  if (want_members) {
    ensemble_spread(n_total);
  } else {
    // one member: no spread, and its energy is the model's (this rank's share; compute pair sums)
    pvec_[2] = energy_from_lib_ * energy;
  }
  pvec_[2 + ens] = library_atoms_;    // compute pair sums it over the ranks
}

/* ----------------------------------------------------------------------
   The members' system energies summed over ranks: the spread (standard deviation, ddof 1),
   QBC = spread / sqrt(N), pvector, and the spread_warning check
------------------------------------------------------------------------- */

void PairNNPOPS::ensemble_spread(double n_total)
{
  const int ens = ensemble_size_;
  for (int m = 0; m < ens; ++m) members_[m] *= energy_from_lib_;
  MPI_Allreduce(members_.data(), members_all_.data(), ens, MPI_DOUBLE, MPI_SUM, world);
  double mean = 0.0;
  for (int m = 0; m < ens; ++m) mean += members_all_[m];
  mean /= ens;
  double sq = 0.0;
  for (int m = 0; m < ens; ++m) sq += (members_all_[m] - mean) * (members_all_[m] - mean);
  energy_std_ = std::sqrt(sq / (ens - 1));
  qbc_ = n_total > 0.0 ? energy_std_ / std::sqrt(n_total) : 0.0;

  // compute pair sums pvector over the ranks: the spread on rank 0, each rank's member shares
  pvec_[0] = comm->me == 0 ? energy_std_ : 0.0;
  pvec_[1] = comm->me == 0 ? qbc_ : 0.0;
  for (int m = 0; m < ens; ++m) pvec_[2 + m] = members_[m];

  // at most once per step (a minimizer's line search evaluates a step several times)
  if (spread_warning_ >= 0.0 && energy_std_ > spread_warning_ && comm->me == 0 &&
      update->ntimestep != warned_step_) {
    warned_step_ = update->ntimestep;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "Pair nnpops: step " BIGINT_FORMAT ": ensemble energy spread %.6g exceeds "
                  "spread_warning %.6g (QBC %.6g per sqrt(atom), %d members)",
                  update->ntimestep, energy_std_, spread_warning_, qbc_, ens);
    error->warning(FLERR, std::string(line));
  }
}

/* ----------------------------------------------------------------------
   extract: "nnpops/energy_std", "nnpops/qbc", "nnpops/library_atoms" (dimension 0, the last
   step's values)
------------------------------------------------------------------------- */

void *PairNNPOPS::extract(const char *name, int &dim)
{
  dim = 0;
  if (std::strcmp(name, "nnpops/energy_std") == 0) return static_cast<void *>(&energy_std_);
  if (std::strcmp(name, "nnpops/qbc") == 0) return static_cast<void *>(&qbc_);
  if (std::strcmp(name, "nnpops/library_atoms") == 0) return static_cast<void *>(&library_atoms_);
  return nullptr;
}

/* ---------------------------------------------------------------------- */

double PairNNPOPS::memory_usage()
{
  double bytes = Pair::memory_usage();
  bytes += index_.capacity() * sizeof(int) + numbers_.capacity() * sizeof(int32_t);
  bytes += (positions_.capacity() + forces_.capacity() + atom_energy_.capacity() +
            atom_virial_.capacity() + members_.capacity() + members_all_.capacity()) *
      sizeof(double);
  return bytes;
}
