"""Read a PyTorch zip checkpoint (``torch.save``, the format of every ``.ckpt`` / ``.pt`` written
since torch 1.6) without PyTorch and without executing anything it contains.

    ckpt = load_checkpoint(path)      # nested dicts / lists / tuples, NumPy arrays for tensors

The archive holds ``<prefix>/data.pkl`` (a pickle) and ``<prefix>/data/<key>`` (the raw bytes of
each storage, little-endian when ``<prefix>/byteorder`` says so or is absent).  The pickle is read
by a restricted unpickler: it knows the plain containers, ``collections.OrderedDict``, the typed
storages (``torch.FloatStorage``, ``torch.DoubleStorage``, ``torch.LongStorage``, ...) referenced
through persistent ids, and the tensor rebuild functions (``torch._utils._rebuild_tensor_v2``,
``_rebuild_tensor``, ``_rebuild_parameter``), which it implements itself on NumPy arrays with
every size, stride and offset checked against the storage.  Any other global it meets (a class
written by Lightning or argparse, ``os.system``, ``builtins.eval``, ...) becomes an inert
``Opaque`` placeholder: calling, building or filling it only records what was passed, nothing is
looked up or run.  The caller decides what a placeholder may stand for (``as_mapping``) and
rejects the rest by name (``find_opaque``).

Standard library and NumPy only.
"""

import io
import pickle
import struct
import zipfile

import numpy as np

__all__ = ["CheckpointError", "Opaque", "load_checkpoint", "find_opaque", "as_mapping",
           "MAX_PICKLE_BYTES", "MAX_STORAGE_BYTES"]

# Limits that keep a hostile archive from exhausting memory.
MAX_PICKLE_BYTES = 256 << 20      # data.pkl
MAX_STORAGE_BYTES = 8 << 30       # all storages together
MAX_ELEMENTS = 1 << 34            # one tensor
MAX_DIMS = 16


class CheckpointError(Exception):
    """The file is not a readable PyTorch zip checkpoint, or holds something refused."""


# Storage classes by their global name -> (NumPy dtype, bytes per element).
_STORAGES = {
    "FloatStorage": ("<f4", 4),
    "DoubleStorage": ("<f8", 8),
    "HalfStorage": ("<f2", 2),
    "LongStorage": ("<i8", 8),
    "IntStorage": ("<i4", 4),
    "ShortStorage": ("<i2", 2),
    "CharStorage": ("i1", 1),
    "ByteStorage": ("u1", 1),
    "BoolStorage": ("?", 1),
}


class _StorageType:
    """What ``torch.<X>Storage`` resolves to: a tag, never instantiated."""

    def __init__(self, name):
        self.name = name
        self.dtype, self.itemsize = _STORAGES[name]

    def __repr__(self):
        return "torch.%s" % self.name


class _Storage:
    """A storage read from the archive: a 1-D NumPy array of its elements."""

    def __init__(self, array, name):
        self.array = array
        self.name = name


class Opaque:
    """Stands for a global the reader does not implement, or for what calling it would return.

    ``name`` is ``module.qualname`` of the global; ``args`` the arguments it was called with
    (REDUCE / NEWOBJ), ``state`` what BUILD passed, ``items`` / ``list`` what SETITEMS / APPENDS
    added.  Nothing here calls anything."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self.state = None
        self.items = []
        self.list = []

    def __repr__(self):
        return "<opaque %s>" % self.name

    # The unpickler fills objects through these (SETITEM(S), APPEND(S), BUILD).
    def __setitem__(self, key, value):
        self.items.append((key, value))

    def append(self, value):
        self.list.append(value)

    def extend(self, values):
        self.list.extend(values)

    def __setstate__(self, state):
        self.state = state


class _OpaqueGlobal:
    """A global that is not implemented: calling it gives an Opaque object, nothing else."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        return Opaque(self.name, args)

    def __repr__(self):
        return "<opaque global %s>" % self.name


def _opaque_class(name):
    """A fresh subclass of Opaque for NEWOBJ (which needs a type): its __new__ records."""

    def new(cls, *args, **kwargs):
        obj = object.__new__(cls)
        Opaque.__init__(obj, name, args)
        return obj

    return type("Opaque", (Opaque,), {"__new__": new, "__init__": lambda self, *a, **k: None,
                                      "__module__": __name__})


def _check_shape(size, stride, offset, numel, what):
    """Validate a tensor view of a storage of ``numel`` elements; return the element count."""
    if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride):
        raise CheckpointError("%s: size %r and stride %r do not match" % (what, size, stride))
    if len(size) > MAX_DIMS:
        raise CheckpointError("%s: %d dimensions" % (what, len(size)))
    for v in size + stride + (offset,):
        if type(v) is not int or v < 0:
            raise CheckpointError("%s: size %r, stride %r, offset %r: not non-negative integers"
                                  % (what, size, stride, offset))
    count = 1
    for n in size:
        count *= n
        if count > MAX_ELEMENTS:
            raise CheckpointError("%s: size %r is too large" % (what, size))
    if count == 0:
        return 0
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= numel:
        raise CheckpointError("%s: size %r, stride %r and offset %d reach element %d of a "
                              "storage of %d" % (what, size, stride, offset, last, numel))
    return count


def _rebuild_tensor(storage, offset, size, stride, *rest):
    if not isinstance(storage, _Storage):
        raise CheckpointError("tensor rebuild on %r, not a storage" % (storage,))
    what = "tensor on storage %s" % storage.name
    count = _check_shape(tuple(size) if isinstance(size, (list, tuple)) else size,
                         tuple(stride) if isinstance(stride, (list, tuple)) else stride,
                         offset, storage.array.size, what)
    base = storage.array
    if count == 0:
        return np.zeros(tuple(size), dtype=base.dtype)
    itemsize = base.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(base[offset:], shape=tuple(size),
                                           strides=tuple(s * itemsize for s in stride),
                                           writeable=False)
    return np.array(view, dtype=base.dtype.newbyteorder("="), copy=True)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None, *rest):
    if not isinstance(data, np.ndarray):
        raise CheckpointError("parameter rebuild on %r, not a tensor" % (data,))
    return data


class _OrderedDict(dict):
    """What ``collections.OrderedDict`` gives: a dict (insertion-ordered) that also takes the
    attributes a BUILD may set (torch stores a state dict's ``_metadata`` that way)."""


# (module, name) -> what the unpickler gets for it.
_KNOWN = {
    ("collections", "OrderedDict"): _OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, data, storage_reader):
        super().__init__(io.BytesIO(data))
        self._storage_reader = storage_reader
        self.opaque = []

    def find_class(self, module, name):
        key = (module, name)
        if key in _KNOWN:
            return _KNOWN[key]
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        full = "%s.%s" % (module, name)
        self.opaque.append(full)
        return _opaque_class(full)

    def persistent_load(self, pid):
        if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage"
                or not isinstance(pid[1], _StorageType) or not isinstance(pid[2], str)
                or type(pid[4]) is not int or pid[4] < 0):
            raise CheckpointError("unsupported persistent id %r (only typed storages are read)"
                                  % (pid,))
        return self._storage_reader(pid[1], pid[2], pid[4])


def find_opaque(obj, path="", _depth=0):
    """The first Opaque inside obj (containers searched), as (path, Opaque); None if none."""
    if _depth > 200:
        raise CheckpointError("%s: nesting too deep" % (path or "checkpoint"))
    if isinstance(obj, Opaque):
        return path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, Opaque):
                return "%s[key]" % path, k
            found = find_opaque(v, "%s[%r]" % (path, k), _depth + 1)
            if found:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = find_opaque(v, "%s[%d]" % (path, i), _depth + 1)
            if found:
                return found
    return None


# Classes that Lightning, its predecessors and argparse write for hyperparameter mappings.  An
# Opaque of one of these is read as the mapping it was filled with (never instantiated).
MAPPING_CLASSES = frozenset([
    "argparse.Namespace",
    "lightning.fabric.utilities.data.AttributeDict",
    "lightning_fabric.utilities.data.AttributeDict",
    "pytorch_lightning.utilities.parsing.AttributeDict",
    "lightning.pytorch.utilities.parsing.AttributeDict",
])


def as_mapping(obj, what):
    """A dict for obj: obj itself, or the contents of an Opaque of a MAPPING_CLASSES class."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Opaque) and obj.name in MAPPING_CLASSES:
        out = {}
        if obj.args:
            for a in obj.args:  # dict subclasses: REDUCE(cls, (dict,)) or a dict argument
                if isinstance(a, dict):
                    out.update(a)
        for k, v in obj.items:
            out[k] = v
        state = obj.state
        if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
            state = state[0]
        if isinstance(state, dict):
            out.update(state)
        elif state is not None:
            raise CheckpointError("%s: %s with a state of type %s" % (what, obj.name,
                                                                     type(state).__name__))
        return out
    if isinstance(obj, Opaque):
        raise CheckpointError("%s: an object of class %s, which is not read (only plain "
                              "mappings)" % (what, obj.name))
    raise CheckpointError("%s: expected a mapping, found %s" % (what, type(obj).__name__))


def load_checkpoint(path):
    """Read a torch zip checkpoint; returns its top-level object with NumPy arrays for tensors.

    Raises CheckpointError for anything that is not a well-formed zip checkpoint."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise CheckpointError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    if magic[:2] != b"PK":
        if magic[:1] == b"\x80":
            raise CheckpointError("%s: a legacy (pre-zip) torch file; re-save it with a torch "
                                  "version >= 1.6 (torch.save writes the zip format)" % path)
        raise CheckpointError("%s: not a zip archive (a torch.save checkpoint is one)" % path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CheckpointError("%s: corrupt or truncated zip archive: %s" % (path, exc)) from None
    with zf:
        infos = {}
        for info in zf.infolist():
            if info.filename in infos:
                raise CheckpointError("%s: entry %s appears twice" % (path, info.filename))
            infos[info.filename] = info
        pkl = [n for n in infos if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise CheckpointError("%s: expected exactly one <name>/data.pkl, found %d"
                                  % (path, len(pkl)))
        prefix = pkl[0][: -len("data.pkl")]

        def read(name, limit):
            info = infos.get(name)
            if info is None:
                raise CheckpointError("%s: missing entry %s" % (path, name))
            if info.file_size > limit:
                raise CheckpointError("%s: entry %s is %d bytes, over the limit of %d"
                                      % (path, name, info.file_size, limit))
            try:
                with zf.open(info) as f:
                    data = f.read(limit + 1)
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError,
                    RuntimeError) as exc:
                raise CheckpointError("%s: cannot read entry %s: %s" % (path, name, exc)) from None
            if len(data) != info.file_size:
                raise CheckpointError("%s: entry %s is truncated" % (path, name))
            return data

        byteorder = prefix + "byteorder"
        if byteorder in infos:
            order = read(byteorder, 16).strip()
            if order != b"little":
                raise CheckpointError("%s: byte order %r is not supported (little only)"
                                      % (path, order))

        storages = {}
        budget = [MAX_STORAGE_BYTES]

        def storage_reader(stype, key, numel):
            cache_key = (key, stype.name)
            if cache_key in storages:
                return storages[cache_key]
            if "/" in key or key in ("", ".", ".."):
                raise CheckpointError("%s: bad storage key %r" % (path, key))
            nbytes = numel * stype.itemsize
            if nbytes > budget[0]:
                raise CheckpointError("%s: storages larger than %d bytes in all"
                                      % (path, MAX_STORAGE_BYTES))
            data = read(prefix + "data/" + key, budget[0])
            if len(data) < nbytes:
                raise CheckpointError("%s: storage %s holds %d bytes, shorter than its %d "
                                      "elements of %s" % (path, key, len(data), numel,
                                                          stype.name))
            budget[0] -= len(data)
            arr = np.frombuffer(data, dtype=stype.dtype, count=numel)
            st = _Storage(arr, "%s (%s)" % (key, stype.name))
            storages[cache_key] = st
            return st

        data = read(pkl[0], MAX_PICKLE_BYTES)
        unpickler = _Unpickler(data, storage_reader)
        try:
            obj = unpickler.load()
        except CheckpointError as exc:
            raise CheckpointError("%s: %s" % (path, exc)) from None
        except RecursionError:
            raise CheckpointError("%s: data.pkl nests too deeply" % path) from None
        except (pickle.UnpicklingError, EOFError, TypeError, ValueError, AttributeError,
                IndexError, KeyError, struct.error, MemoryError, OverflowError) as exc:
            raise CheckpointError("%s: cannot read data.pkl: %s: %s"
                                  % (path, type(exc).__name__, exc)) from None
    return obj
