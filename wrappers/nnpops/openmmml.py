"""openmm-ml plugin: nnpops potentials for ``openmmml.MLPotential``.

Registered through the entry point group ``openmmml.potentials`` (see pyproject.toml):

    nnpops-ani2x = "nnpops.openmmml:NNPOpsPotentialImplFactory"
    nnpops-ani1x = "nnpops.openmmml:NNPOpsPotentialImplFactory"
    nnpops-ani1ccx = "nnpops.openmmml:NNPOpsPotentialImplFactory"
    nnpops-tensornet = "nnpops.openmmml:NNPOpsPotentialImplFactory"

so that, once the package is installed,

    from openmmml import MLPotential
    potential = MLPotential("nnpops-ani2x")                  # or device="cuda", precision=...
    system = potential.createSystem(topology)
    mixed = potential.createMixedSystem(topology, mm_system, ml_atoms)

A model file (a TensorNet model converted from a torchmd-net checkpoint, or any other) goes by
``nnpops-tensornet`` with its path, the way openmm-ml's own ``torchmdnet`` potential takes one, and
the total charge of the ML atoms as openmm-ml's charged potentials take it:

    potential = MLPotential("nnpops-tensornet", modelPath="models/aceff.yaml")
    system = potential.createSystem(topology, charge=-1)

Without installing the package, register the factory by hand:

    MLPotential.registerImplFactory("nnpops-ani2x", NNPOpsPotentialImplFactory())

openmm-ml imports every registered entry point while it is itself being imported: this module
only imports OpenMM (and NumPy through nnpops.openmm); the C library is opened when a System is
built.

Arguments (to ``MLPotential(...)`` or, overriding those, to ``createSystem`` /
``createMixedSystem``): ``device`` ("cpu", "cuda", "cuda:N"), ``precision`` ("float64",
"float32"), ``model`` or ``modelPath`` (another model name or YAML path; ``nnpops-tensornet``
needs one), ``charge`` (the total charge of the ML atoms, elementary charges; default neutral; a
model that does not use a charge refuses a nonzero one), ``modelIndex`` (one ensemble member, as
openmm-ml's own ANI potential takes it), ``periodic`` (default: the Topology has a box or the
System is periodic), ``forces_dtype``, ``add_bond_force`` (a zero-energy bond force over the
Topology's bonds between ML atoms, so that MonteCarloBarostat keeps the ML molecules whole),
``bonds``, and any library context option (``min_distance``, ``ensemble_member``, ...).
"""

try:  # the abstract bases of openmm-ml (a partially imported module is fine: they come first)
    from openmmml.mlpotential import MLPotentialImpl, MLPotentialImplFactory
except ImportError:  # openmm-ml absent: the classes still work by duck typing
    MLPotentialImpl = object
    MLPotentialImplFactory = object

__all__ = ["NNPOpsPotentialImplFactory", "NNPOpsPotentialImpl", "MODEL_OF_NAME",
           "MODEL_FILE_NAMES", "ENTRY_POINTS", "register"]

#: openmm-ml potential name -> nnpops model name.
MODEL_OF_NAME = {"nnpops-ani2x": "ani2x", "nnpops-ani1x": "ani1x",
                 "nnpops-ani1ccx": "ani1ccx"}

#: openmm-ml potential names that evaluate the model file given as ``modelPath`` (or ``model``).
MODEL_FILE_NAMES = ("nnpops-tensornet",)

#: The entry points of group ``openmmml.potentials`` that the package declares.
ENTRY_POINTS = {name: "nnpops.openmmml:NNPOpsPotentialImplFactory"
                for name in list(MODEL_OF_NAME) + list(MODEL_FILE_NAMES)}

# Arguments that openmm-ml's embeddings pass on to addForces and that are not ours.
_OPENMMML_ARGS = frozenset(["mlLongRange", "linkAtomDistances"])


class NNPOpsPotentialImplFactory(MLPotentialImplFactory):
    """Creates :class:`NNPOpsPotentialImpl` objects for the names ``nnpops-<model>``."""

    def createImpl(self, name, **args):
        return NNPOpsPotentialImpl(name, **args)


class NNPOpsPotentialImpl(MLPotentialImpl):
    """An nnpops model (ANI-2x, ANI-1x, ANI-1ccx, or a model file such as a converted TensorNet)
    evaluated through :func:`nnpops.openmm.create_force`."""

    def __init__(self, name, model=None, modelPath=None, **args):
        self.name = name
        if model is None:
            model = modelPath
        elif modelPath is not None and modelPath != model:
            raise ValueError("model=%r and modelPath=%r disagree: give one" % (model, modelPath))
        if model is None:
            if name in MODEL_FILE_NAMES:
                raise ValueError("potential %r evaluates a model file: pass modelPath= (the "
                                 "model's YAML path or name)" % name)
            if name in MODEL_OF_NAME:
                model = MODEL_OF_NAME[name]
            elif name.startswith("nnpops-"):
                model = name[len("nnpops-"):]
            else:
                raise ValueError("unknown nnpops potential %r (known: %s; or pass model=)"
                                 % (name, ", ".join(sorted(MODEL_OF_NAME))))
        self.model = model
        self.args = dict(args)

    def addForces(self, topology, system, atoms, forceGroup, **args):
        from .openmm import create_force

        kw = dict(self.args)
        kw.update(args)
        for key in _OPENMMML_ARGS:
            kw.pop(key, None)
        model = kw.pop("model", None) or kw.pop("modelPath", None) or self.model
        kw.pop("modelPath", None)
        device = kw.pop("device", "cpu")
        precision = kw.pop("precision", "float64")
        model_index = kw.pop("modelIndex", None)
        if model_index is not None:
            kw["ensemble_member"] = int(model_index)
        periodic = kw.pop("periodic", None)
        if periodic is None:
            periodic = (topology.getPeriodicBoxVectors() is not None
                        or system.usesPeriodicBoundaryConditions())
        add_bond_force = bool(kw.pop("add_bond_force", False))
        bonds = kw.pop("bonds", None)
        positions = kw.pop("positions", None)

        all_atoms = list(topology.atoms())
        for atom in all_atoms:
            if atom.element is None:
                raise ValueError("atom %d (%s) of the Topology has no element"
                                 % (atom.index, atom.name))
        numbers = [atom.element.atomic_number for atom in all_atoms]
        atom_list = None if atoms is None else [int(i) for i in atoms]

        if add_bond_force and bonds is None:
            ml = set(range(len(numbers))) if atom_list is None else set(atom_list)
            bonds = [(b.atom1.index, b.atom2.index) for b in topology.bonds()
                     if b.atom1.index in ml and b.atom2.index in ml]
            if not bonds:
                if positions is None:
                    raise ValueError("add_bond_force: the Topology has no bonds between the ML "
                                     "atoms; pass positions= (nm) to find them by distance")
                bonds = None  # create_force finds them from the positions
        if atom_list is not None:  # the ML atoms' numbers, in the order of atom_list
            numbers = [numbers[i] for i in atom_list]
        create_force(numbers, model=model, atoms=atom_list, periodic=periodic,
                     precision=precision, device=device, bonds=bonds,
                     add_bond_force=add_bond_force, positions=positions, system=system,
                     force_group=forceGroup, **kw)

    def getMLLongRange(self):
        # nnpops' models end at their interaction range (ANI: the 5.2 angstrom cutoff;
        # TensorNet: (layers + 1) cutoffs): no long-range part.
        return False


def register(names=None):
    """Register the factory with openmm-ml by hand (what the entry points do once installed)."""
    from openmmml.mlpotential import MLPotential

    factory = NNPOpsPotentialImplFactory()
    for name in (names or list(MODEL_OF_NAME) + list(MODEL_FILE_NAMES)):
        MLPotential.registerImplFactory(name, factory)
    return factory
