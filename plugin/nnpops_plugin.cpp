/* nnpops_plugin.cpp - registers pair style "nnpops" with LAMMPS's PLUGIN package.
 *
 *   plugin load /path/to/nnpopsplugin.so
 */
#include "lammpsplugin.h"
#include "version.h"

#include "pair_nnpops.h"

#include "nnpops/nnpops.h"

using namespace LAMMPS_NS;

#define NNPOPS_STR_(x) #x
#define NNPOPS_STR(x) NNPOPS_STR_(x)
#define NNPOPS_PLUGIN_VERSION_STRING                                                           \
  NNPOPS_STR(NNPOPS_VERSION_MAJOR) "." NNPOPS_STR(NNPOPS_VERSION_MINOR) "." NNPOPS_STR(         \
      NNPOPS_VERSION_PATCH)

namespace {

Pair *create_pair_nnpops(LAMMPS *lmp)
{
  return new PairNNPOPS(lmp);
}

}    // namespace

extern "C" __attribute__((visibility("default"))) void lammpsplugin_init(void *lmp, void *handle,
                                                                          void *regfunc)
{
  lammpsplugin_t plugin;
  lammpsplugin_regfunc register_plugin = (lammpsplugin_regfunc) regfunc;

  plugin.version = LAMMPS_VERSION;    // LAMMPS logs a note when it differs from its own
  plugin.style = "pair";
  plugin.name = "nnpops";
  plugin.info = "nnpops: ANI neural-network and LJ potentials evaluated by libnnpops "
                NNPOPS_PLUGIN_VERSION_STRING;
  plugin.author = "nnpops developers";
  plugin.creator.v1 = (lammpsplugin_factory1 *) &create_pair_nnpops;
  plugin.handle = handle;
  (*register_plugin)(&plugin, lmp);
}
