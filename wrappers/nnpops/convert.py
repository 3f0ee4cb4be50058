"""Convert the published NeuroChem ANI parameter files into nnpops model files.

    nnpops convert [--download | --source PATH] [--verify] [--output DIR] [--member K] [--force]
                   [MODEL ...]
    nnpops convert --from-torchmdnet FILE.ckpt [--name NAME] [--output DIR] [--units eV,A]
                   [--force]

MODEL is ``ani2x`` (NeuroChem ``ani-2x_8x``), ``ani1x`` (``ani-1x_8x``) or ``ani1ccx``
(``ani-1ccx_8x``: the ANI-1x architecture with weights transfer-learned to CCSD(T)/CBS); the
default is all three.  Each model becomes ``NAME.yaml`` + ``NAME.safetensors`` (+ a small
``NAME.stamp``) in the output directory.  The format is specified in docs/model-format.md.

The NeuroChem files are read, as listed by ``<archive>.info``, from ``<archive>.tar.xz``, from the
unpacked folder ``<archive>/``, or from a zip archive holding both (the published release); nothing
is extracted to disk.  ``--download`` fetches the published release into the user's cache first
(nnpops/download.py) and checks the sha256 of every file read.  Standard library only.
"""

import argparse
import bz2
import hashlib
import json
import lzma
import os
import posixpath
import re
import struct
import sys
import tarfile
import time
import zipfile
import zlib

try:  # a package module normally; also importable as a top-level module
    from . import modelpath
except ImportError:  # pragma: no cover
    import modelpath  # type: ignore

__all__ = ["main", "convert_model", "load_neurochem", "ConvertError", "MODELS"]

# Command-line name -> (NeuroChem archive base name, human label).
MODELS = {
    "ani2x": ("ani-2x_8x", "ANI-2x"),
    "ani1x": ("ani-1x_8x", "ANI-1x"),
    "ani1ccx": ("ani-1ccx_8x", "ANI-1ccx"),
}
DEFAULT_MODELS = ("ani2x", "ani1x", "ani1ccx")

FORMAT_VERSION = 1
# Bumped whenever the converter's output for the same input changes; part of the .stamp, so a
# newer converter rewrites models that an older one wrote.
CONVERTER_VERSION = 2

CELU_ALPHA = 0.1
ACTIVATION_CELU = 9
ACTIVATION_LINEAR = 6
TENSOR_PATTERN = "m{member}.{element}.l{layer}.{kind}"

_SCALAR_CONSTANTS = ("Rcr", "Rca")
_LIST_CONSTANTS = ("EtaR", "ShfR", "Zeta", "ShfZ", "EtaA", "ShfA")

_ELEMENTS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se "
    "Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy "
    "Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf "
    "Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og"
).split()
_ELEMENT_SET = frozenset(_ELEMENTS)


class ConvertError(Exception):
    """A problem with the input files, the arguments or the output directory."""


# --------------------------------------------------------------------------------------------
# NeuroChem input
# --------------------------------------------------------------------------------------------


def _f32(value, what):
    """Round a Python float to the nearest float32 and return it as a (exactly equal) float."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except (OverflowError, struct.error):
        raise ConvertError("%s: %r does not fit in float32" % (what, value)) from None


def _parse_float(text, what):
    try:
        value = float(text)
    except ValueError:
        raise ConvertError("%s: %r is not a number" % (what, text)) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConvertError("%s: %r is not finite" % (what, text))
    return value


def read_info(path):
    """Parse ``<archive>.info``: constants file, self-energy file, ensemble prefix, size."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConvertError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    return parse_info(data, path)


def parse_info(data, path):
    """Parse the bytes of an ``.info`` file (path: where it came from, for messages)."""
    try:
        lines = [line.strip() for line in data.decode("utf-8").splitlines()]
    except UnicodeDecodeError:
        raise ConvertError("%s: not a text file" % path) from None
    lines = [line for line in lines if line]
    if len(lines) != 4:
        raise ConvertError(
            "%s: expected 4 non-empty lines (constants file, self-energy file, ensemble prefix, "
            "ensemble size), found %d" % (path, len(lines)))
    const_file, sae_file = _member_name(lines[0]), _member_name(lines[1])
    prefix = lines[2]
    while prefix.startswith("./"):
        prefix = prefix[2:]
    try:
        size = int(lines[3])
    except ValueError:
        raise ConvertError("%s: ensemble size %r is not an integer" % (path, lines[3])) from None
    if size < 1:
        raise ConvertError("%s: ensemble size must be at least 1, got %d" % (path, size))
    for name in (const_file, sae_file, prefix):
        if name.startswith("/") or name == ".." or name.startswith("../"):
            raise ConvertError("%s: %r is not a path relative to the archive root" % (path, name))
    return const_file, sae_file, prefix, size


def _member_name(name):
    name = posixpath.normpath(name)
    while name.startswith("./"):
        name = name[2:]
    return name


def read_archive(path, wanted):
    """Read the regular files of a .tar.xz for which ``wanted(name)`` is true, into a dict."""
    files = {}
    try:
        with tarfile.open(path, mode="r:xz") as tar:
            for member in tar:
                if not member.isreg():
                    continue
                name = _member_name(member.name)
                if not wanted(name):
                    continue
                fileobj = tar.extractfile(member)
                data = fileobj.read()
                if len(data) != member.size:
                    raise ConvertError("%s: %s is truncated" % (path, name))
                files[name] = data
    except ConvertError:
        raise
    except FileNotFoundError:
        raise ConvertError("%s: no such file" % path) from None
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError, ValueError) as exc:
        raise ConvertError("cannot read archive %s (corrupt or not a .tar.xz?): %s"
                           % (path, exc)) from None
    return files


def parse_params(text, where):
    """Parse a NeuroChem ``.params`` file into {key: float | [float] | [str]}.

    Only the descriptor keys and Atyp are kept; descriptor values are rounded to float32.
    """
    raw = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConvertError("%s:%d: expected 'Key = value', got %r" % (where, lineno, line))
        raw[key.strip()] = (value.strip(), lineno)
    out = {}
    for key in _SCALAR_CONSTANTS + _LIST_CONSTANTS + ("Atyp",):
        if key not in raw:
            raise ConvertError("%s: missing key %s" % (where, key))
        value, lineno = raw[key]
        what = "%s:%d: %s" % (where, lineno, key)
        is_list = value.startswith("[")
        if is_list:
            if not value.endswith("]"):
                raise ConvertError("%s: unterminated list %r" % (what, value))
            items = [x.strip() for x in value[1:-1].split(",")]
            if not items or any(not x for x in items):
                raise ConvertError("%s: empty list or empty list item in %r" % (what, value))
        else:
            items = [value]
        if key == "Atyp":
            if not is_list:
                raise ConvertError("%s: expected a list of element symbols" % what)
            for sym in items:
                if sym not in _ELEMENT_SET:
                    raise ConvertError("%s: %r is not an element symbol" % (what, sym))
            if len(set(items)) != len(items):
                raise ConvertError("%s: repeated element in %r" % (what, value))
            out[key] = items
        elif key in _SCALAR_CONSTANTS:
            if is_list:
                raise ConvertError("%s: expected a single number, got a list" % what)
            v = _f32(_parse_float(items[0], what), what)
            if not v > 0:
                raise ConvertError("%s: cutoff must be positive" % what)
            out[key] = v
        else:
            out[key] = [_f32(_parse_float(x, what), what) for x in items]
    return out


def parse_sae(text, where, species):
    """Parse ``sae_linfit.dat`` lines ``El,index=value``; returns float64s in species order."""
    found = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        m = re.match(r"^([A-Za-z]+)\s*,\s*(\d+)\s*=\s*(\S+)$", line)
        if not m:
            raise ConvertError("%s:%d: expected 'El,index=value', got %r" % (where, lineno, line))
        sym, index, value = m.group(1), int(m.group(2)), m.group(3)
        what = "%s:%d" % (where, lineno)
        if sym not in species:
            raise ConvertError("%s: element %s is not in Atyp %s" % (what, sym, species))
        if species.index(sym) != index:
            raise ConvertError("%s: %s has index %d, but it is species %d in Atyp"
                               % (what, sym, index, species.index(sym)))
        if sym in found:
            raise ConvertError("%s: %s listed twice" % (what, sym))
        found[sym] = _parse_float(value, what)
    missing = [s for s in species if s not in found]
    if missing:
        raise ConvertError("%s: no self energy for %s" % (where, ", ".join(missing)))
    return [found[s] for s in species]


def aev_length(consts):
    s = len(consts["Atyp"])
    radial = s * len(consts["EtaR"]) * len(consts["ShfR"])
    angular = (s * (s + 1) // 2 * len(consts["EtaA"]) * len(consts["Zeta"])
               * len(consts["ShfA"]) * len(consts["ShfZ"]))
    return radial + angular


def _parse_int(value, what):
    if not re.fullmatch(r"\d+", value):
        raise ConvertError("%s: %r is not a non-negative integer" % (what, value))
    return int(value)


def parse_nnf(data, where):
    """Parse a NeuroChem ``.nnf`` file: returns (inputsize or None, [layer dict, ...]).

    Each layer dict has nodes, activation, blocksize (ints) and weights, biases: (file, count).
    """
    m = re.match(rb"(\d+)=\r?\n", data)
    if not m:
        raise ConvertError("%s: does not start with a '<length>=' header line" % where)
    declared = int(m.group(1))
    try:
        text = bz2.decompress(data[m.end():])
    except (OSError, ValueError, EOFError) as exc:
        raise ConvertError("%s: corrupt bz2 stream: %s" % (where, exc)) from None
    if len(text) != declared:
        raise ConvertError("%s: header says %d bytes, the bz2 stream holds %d"
                           % (where, declared, len(text)))
    try:
        text = text.decode("ascii")
    except UnicodeDecodeError:
        raise ConvertError("%s: layer description is not ASCII text" % where) from None

    inputsize = None
    layers = []
    current = None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        what = "%s (layer description line %d)" % (where, lineno)
        if not line or line == "$":
            continue
        if re.fullmatch(r"layer\s*\[", line):
            if current is not None:
                raise ConvertError("%s: nested 'layer ['" % what)
            current = {"_line": lineno}
            continue
        if line == "]":
            if current is None:
                raise ConvertError("%s: ']' outside a layer block" % what)
            layers.append(current)
            current = None
            continue
        if current is None:
            if line.startswith("atom_net"):
                continue
            key, sep, value = line.rstrip(";").partition("=")
            if sep and key.strip() == "inputsize":
                inputsize = _parse_int(value.strip(), what)
            continue
        for item in line.split(";"):
            item = item.strip()
            if not item:
                continue
            key, sep, value = item.partition("=")
            if not sep:
                raise ConvertError("%s: expected 'key=value;', got %r" % (what, item))
            current[key.strip()] = (value.strip(), lineno)
    if current is not None:
        raise ConvertError("%s: unterminated 'layer [' block" % where)
    if not layers:
        raise ConvertError("%s: no layers" % where)

    parsed = []
    for index, block in enumerate(layers, 1):
        what = "%s layer %d" % (where, index)
        for key in ("nodes", "activation", "blocksize", "weights", "biases"):
            if key not in block:
                raise ConvertError("%s: missing %s" % (what, key))
        layer = {}
        for key in ("nodes", "activation", "blocksize"):
            layer[key] = _parse_int(block[key][0], "%s %s" % (what, key))
        if "type" in block and block["type"][0] != "0":
            raise ConvertError("%s: unsupported layer type %s (only 0, dense, is supported)"
                               % (what, block["type"][0]))
        if "btchnorm" in block and block["btchnorm"][0] != "0":
            raise ConvertError("%s: batch normalisation (btchnorm=%s) is not supported"
                               % (what, block["btchnorm"][0]))
        for key in ("weights", "biases"):
            m = re.fullmatch(r"FILE:([^\[\]/\\]+)\[(\d+)\]", block[key][0])
            if not m:
                raise ConvertError("%s: %s=%r is not 'FILE:name[count]'"
                                   % (what, key, block[key][0]))
            layer[key] = (m.group(1), int(m.group(2)))
        parsed.append(layer)
    return inputsize, parsed


class NeuroChemModel:
    """What load_neurochem() returns.

    species: element symbols; consts: descriptor constants (float32-rounded floats);
    self_energies: float64 per species; widths: {element: [in, h1, ..., 1]};
    members: [ {element: [(weight bytes, bias bytes), ...per layer]} ... ].
    """

    def __init__(self, archive, species, consts, self_energies, widths, members, prefix):
        self.archive = archive
        self.species = species
        self.consts = consts
        self.self_energies = self_energies
        self.widths = widths
        self.members = members
        self.prefix = prefix


class ChecksumError(ConvertError):
    """A NeuroChem file whose sha256 differs from the published file's."""


def _zip_root(zf, archive):
    """The folder of a zip archive that holds ``<archive>.info`` ('' for the top), or None."""
    best = None
    for name in zf.namelist():
        if posixpath.basename(name) == archive + ".info":
            root = posixpath.dirname(name)
            if best is None or len(root) < len(best):
                best = root
    return best


class NeuroChemSource:
    """Where one model's NeuroChem files are: ``<dir>/<archive>.info`` with ``<archive>.tar.xz``
    or with the unpacked folder ``<archive>/``, or a zip archive (such as the published release)
    holding ``<archive>.info`` and ``<archive>/`` in one of its folders.

    kind: 'tar', 'dir' or 'zip'; where: the path named in messages; size: bytes of the archive
    file (None for a folder).  read_info() returns the .info bytes; read_files(wanted) a dict
    {name relative to the archive root: bytes} of the regular files for which wanted(name) holds.
    """

    def __init__(self, kind, path, archive, zip_root=None):
        self.kind = kind
        self.path = path
        self.archive = archive
        self.zip_root = zip_root
        if kind == "tar":
            self.where = os.path.join(path, archive + ".tar.xz")
            self.info_where = os.path.join(path, archive + ".info")
        elif kind == "dir":
            self.where = os.path.join(path, archive)
            self.info_where = os.path.join(path, archive + ".info")
        else:
            self.where = path
            self.info_where = "%s:%s" % (path, posixpath.join(zip_root or "", archive + ".info"))
        self.size = None if kind == "dir" else os.stat(self.where).st_size

    def read_info(self):
        if self.kind != "zip":
            try:
                with open(self.info_where, "rb") as f:
                    return f.read()
            except OSError as exc:
                raise ConvertError("cannot read %s: %s"
                                   % (self.info_where, exc.strerror or exc)) from None
        return self.read_files(lambda name: name == self.archive + ".info").get(
            self.archive + ".info", b"")

    def read_files(self, wanted):
        if self.kind == "tar":
            return read_archive(self.where, wanted)
        if self.kind == "dir":
            return _read_folder(self.path, self.archive, wanted)
        return _read_zip(self.where, self.zip_root, wanted)


def _read_folder(base, archive, wanted):
    files = {}
    top = os.path.join(base, archive)
    for folder, subdirs, names in os.walk(top):
        subdirs.sort()
        for n in sorted(names):
            full = os.path.join(folder, n)
            name = posixpath.join(archive, *os.path.relpath(full, top).split(os.sep))
            if not wanted(name) or not os.path.isfile(full):
                continue
            try:
                with open(full, "rb") as f:
                    files[name] = f.read()
            except OSError as exc:
                raise ConvertError("cannot read %s: %s" % (full, exc.strerror or exc)) from None
    return files


def _read_zip(path, root, wanted):
    files = {}
    prefix = root + "/" if root else ""
    try:
        with zipfile.ZipFile(path) as zf:
            for member in zf.infolist():
                if member.is_dir() or not member.filename.startswith(prefix):
                    continue
                name = _member_name(member.filename[len(prefix):])
                if wanted(name):
                    files[name] = zf.read(member)
    except FileNotFoundError:
        raise ConvertError("%s: no such file" % path) from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise ConvertError("cannot read zip archive %s (corrupt or not a zip?): %s"
                           % (path, exc)) from None
    return files


def _verifier(expected, where):
    """check(name, data): raise ChecksumError unless sha256(data) is expected[name]."""
    def check(name, data):
        if expected is None:
            return
        want = expected.get(name)
        if want is None:
            raise ChecksumError("%s: %s is not one of the published files (no sha256 known)"
                                % (where, name))
        got = hashlib.sha256(data).hexdigest()
        if got != want:
            raise ChecksumError("%s: sha256 of %s is %s, the published file's is %s (a corrupt "
                                "or altered copy)" % (where, name, got, want))
    return check


def load_neurochem(source, archive, expected=None):
    """Read one model's NeuroChem files and check everything.

    source: a NeuroChemSource, or a folder holding ``<archive>.info`` and ``<archive>.tar.xz``.
    expected: {name: sha256 hex} of the published files (download.manifest()); when given, every
    file read must be listed there with that digest (ChecksumError otherwise).
    """
    if not isinstance(source, NeuroChemSource):
        source = NeuroChemSource("tar", source, archive)
    info_path = source.info_where
    tar_path = source.where
    check = _verifier(expected, tar_path)
    info_bytes = source.read_info()
    check(archive + ".info", info_bytes)
    const_file, sae_file, prefix, size = parse_info(info_bytes, info_path)

    def wanted(name):
        return name in (const_file, sae_file) or name.startswith(prefix)

    files = source.read_files(wanted)

    def get(name, why):
        if name not in files:
            raise ConvertError("%s: missing file %s (%s)" % (tar_path, name, why))
        check(name, files[name])
        return files[name]

    def text_of(name, why):
        try:
            return get(name, why).decode("utf-8")
        except UnicodeDecodeError:
            raise ConvertError("%s: %s is not a text file" % (tar_path, name)) from None

    consts = parse_params(text_of(const_file, "descriptor constants, from " + info_path),
                          "%s:%s" % (tar_path, const_file))
    species = consts["Atyp"]
    sae = parse_sae(text_of(sae_file, "self energies, from " + info_path),
                    "%s:%s" % (tar_path, sae_file), species)
    # torchani holds the self energies in a float32 buffer (widened, not re-read, in float64), so
    # the model's self energies are the float32-rounded values (docs/model-format.md, 3.2)
    sae = [_f32(v, "self energy of " + el) for v, el in zip(sae, species)]
    n_aev = aev_length(consts)

    widths = {}
    members = []
    for k in range(size):
        member = {}
        for el in species:
            nnf_name = "%s%d/networks/ANN-%s.nnf" % (prefix, k, el)
            where = "%s:%s" % (tar_path, nnf_name)
            nnf_data = get(nnf_name, "network of %s, member %d" % (el, k))
            inputsize, layers = parse_nnf(nnf_data, where)
            if inputsize is not None and inputsize != n_aev:
                raise ConvertError("%s: inputsize=%d, but the AEV length from %s is %d"
                                   % (where, inputsize, const_file, n_aev))
            net_dir = posixpath.dirname(nnf_name)
            previous = n_aev
            tensors = []
            for li, layer in enumerate(layers, 1):
                what = "%s layer %d" % (where, li)
                last = li == len(layers)
                if layer["blocksize"] != previous:
                    if li == 1:
                        raise ConvertError("%s: blocksize=%d, but the AEV length is %d"
                                           % (what, layer["blocksize"], n_aev))
                    raise ConvertError("%s: blocksize=%d, but the previous layer has %d nodes"
                                       % (what, layer["blocksize"], previous))
                if layer["nodes"] < 1:
                    raise ConvertError("%s: nodes=0" % what)
                act = layer["activation"]
                if act not in (ACTIVATION_CELU, ACTIVATION_LINEAR):
                    raise ConvertError("%s: unsupported activation code %d (supported: %d CELU, "
                                       "%d linear)"
                                       % (what, act, ACTIVATION_CELU, ACTIVATION_LINEAR))
                if last:
                    if layer["nodes"] != 1:
                        raise ConvertError("%s: the output layer has %d nodes, expected 1"
                                           % (what, layer["nodes"]))
                    if act != ACTIVATION_LINEAR:
                        raise ConvertError("%s: the output layer has activation %d, expected %d "
                                           "(linear)" % (what, act, ACTIVATION_LINEAR))
                elif act != ACTIVATION_CELU:
                    raise ConvertError("%s: hidden layer activation %d, expected %d (CELU)"
                                       % (what, act, ACTIVATION_CELU))
                blobs = []
                for key, count in (("weights", layer["nodes"] * layer["blocksize"]),
                                   ("biases", layer["nodes"])):
                    fname, declared = layer[key]
                    full = posixpath.join(net_dir, fname)
                    if declared != count:
                        raise ConvertError("%s: %s %s[%d], expected %d values (%d x %d)"
                                           % (what, key, fname, declared, count, layer["nodes"],
                                              layer["blocksize"] if key == "weights" else 1))
                    blob = get(full, "%s of %s layer %d" % (key, nnf_name, li))
                    if len(blob) != 4 * count:
                        raise ConvertError("%s:%s: %d bytes, expected %d (%d float32 values)"
                                           % (tar_path, full, len(blob), 4 * count, count))
                    blobs.append(blob)
                tensors.append((blobs[0], blobs[1]))
                previous = layer["nodes"]
            w = [n_aev] + [layer["nodes"] for layer in layers]
            if el in widths and widths[el] != w:
                raise ConvertError("%s: layer widths %s differ from member 0's %s"
                                   % (where, w, widths[el]))
            widths[el] = w
            member[el] = tensors
        members.append(member)
    return NeuroChemModel(archive, species, consts, sae, widths, members, prefix)


# --------------------------------------------------------------------------------------------
# Output: safetensors + YAML + stamp
# --------------------------------------------------------------------------------------------


def _open_temp(directory, name):
    """Create a new temporary file next to the destination (mode 0666 & ~umask)."""
    for attempt in range(100):
        token = os.urandom(6).hex()
        path = os.path.join(directory, ".%s.%d.%s.tmp" % (name, os.getpid(), token))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return path, os.fdopen(fd, "wb")
    raise ConvertError("cannot create a temporary file in %s" % directory)


def _write_atomic(path, chunks):
    """Write the byte chunks to path through a temporary file + os.replace; returns sha256 hex."""
    directory, name = os.path.split(path)
    tmp, f = _open_temp(directory or ".", name)
    digest = hashlib.sha256()
    try:
        with f:
            for chunk in chunks:
                digest.update(chunk)
                f.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return digest.hexdigest()


def safetensors_chunks(tensors, metadata):
    """tensors: {name: (shape, bytes)} of float32 data; yields the file's bytes in pieces."""
    header = {"__metadata__": dict(metadata)}
    offset = 0
    names = sorted(tensors)
    for name in names:
        shape, data = tensors[name]
        count = 1
        for n in shape:
            count *= n
        if len(data) != 4 * count:
            raise ValueError("tensor %s: %d bytes for shape %s" % (name, len(data), shape))
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    blob = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    blob += b" " * ((-(8 + len(blob))) % 8)
    yield struct.pack("<Q", len(blob)) + blob
    for name in names:
        yield tensors[name][1]


_YAML11_SPECIAL = frozenset(
    "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF "
    "null Null NULL ~".split())


def yaml_str(value):
    """A YAML 1.1 scalar that reads back as the string ``value`` in block and flow context."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", value) and value not in _YAML11_SPECIAL:
        return value
    return json.dumps(value, ensure_ascii=True)  # a JSON string is a YAML double-quoted scalar


def yaml_float(value):
    """repr() of a finite float, in a form YAML 1.1 also types as float ('1.0e-05', not '1e-05')."""
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("non-finite float %r" % value)
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        if exponent[0] not in "+-":
            exponent = "+" + exponent
        text = mantissa + "e" + exponent
    elif "." not in text:
        text += ".0"
    return text


def _flow(items):
    return "[" + ", ".join(items) + "]"


def model_yaml(name, description, model, weights_file, sha256, ensemble_size):
    c = model.consts
    fl = lambda xs: _flow(yaml_float(x) for x in xs)  # noqa: E731
    lines = [
        "# nnpops model file (format: docs/model-format.md), written by"
        " 'python3 -m nnpops convert'",
        "format: nnpops-model",
        "format_version: %d" % FORMAT_VERSION,
        "name: %s" % yaml_str(name),
        "type: ani",
        "description: %s" % json.dumps(description, ensure_ascii=True),
        "units: {length: angstrom, energy: hartree}",
        "species: %s" % _flow(yaml_str(s) for s in model.species),
        "weights:",
        "  file: %s" % yaml_str(weights_file),
        '  sha256: "%s"' % sha256,
        "ani:",
        "  radial:",
        "    cutoff: %s" % yaml_float(c["Rcr"]),
        "    eta: %s" % fl(c["EtaR"]),
        "    shifts: %s" % fl(c["ShfR"]),
        "  angular:",
        "    cutoff: %s" % yaml_float(c["Rca"]),
        "    eta: %s" % fl(c["EtaA"]),
        "    zeta: %s" % fl(c["Zeta"]),
        "    shifts: %s" % fl(c["ShfA"]),
        "    sections: %s" % fl(c["ShfZ"]),
        "  self_energies: %s" % fl(model.self_energies),
        "  ensemble_size: %d" % ensemble_size,
        "  activation: {type: celu, alpha: %s}" % yaml_float(CELU_ALPHA),
        "  networks:",
    ]
    for el in model.species:
        lines.append("    %s: %s" % (yaml_str(el), _flow(str(n) for n in model.widths[el])))
    lines.append('  tensors: "%s"' % TENSOR_PATTERN)
    return ("\n".join(lines) + "\n").encode("ascii")


def _read_stamp(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_matches_files(stamp, yaml_path, weights_path):
    """The files' part of the stamp rule: the weights file's size and mtime_ns and the YAML's
    sha256 are the ones the stamp records (a file that cannot be read does not match)."""
    try:
        st = os.stat(weights_path)
        if (st.st_size != stamp.get("weights_size")
                or st.st_mtime_ns != stamp.get("weights_mtime_ns")):
            return False
        return _file_sha256(yaml_path) == stamp.get("yaml_sha256")
    except OSError:
        return False


def is_up_to_date(yaml_path, weights_path, stamp_path, source_size=None):
    """The stamp rule (docs/model-format.md): the stamp names this converter version, the YAML's
    sha256 and the weights file's size and mtime_ns; all must match what is on disk now.  When the
    source archive's size is known, it must also match the one recorded."""
    stamp = _read_stamp(stamp_path)
    if stamp is None or stamp.get("converter_version") != CONVERTER_VERSION:
        return False
    if source_size is not None and source_size != stamp.get("source_size"):
        return False
    return _stamp_matches_files(stamp, yaml_path, weights_path)


def source_search_dirs(source=None):
    """Where the NeuroChem files are looked for, in order: --source when given; else each
    NNPOPS_NEUROCHEM_PATH entry, the download cache (``nnpops convert --download`` fills it),
    and, in a source checkout, ``shared/models/neurochem`` beside the repository."""
    if source is not None:
        return [source]
    dirs = [d for d in os.environ.get("NNPOPS_NEUROCHEM_PATH", "").split(os.pathsep) if d]
    dirs.append(_download_cache_dir())
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(repo, "core", "include", "nnpops", "nnpops.h")):
        dirs.append(os.path.join(repo, "..", "shared", "models", "neurochem"))
    seen, out = set(), []
    for d in dirs:
        key = os.path.abspath(d)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _download_cache_dir():
    try:
        from . import download
    except ImportError:  # pragma: no cover
        import download  # type: ignore
    return download.cache_dir()


def source_in(location, archive):
    """The NeuroChemSource for archive at location (a folder or a .zip file), or None."""
    if os.path.isfile(location) and zipfile.is_zipfile(location):
        try:
            with zipfile.ZipFile(location) as zf:
                root = _zip_root(zf, archive)
        except (zipfile.BadZipFile, OSError):
            return None
        return None if root is None else NeuroChemSource("zip", location, archive, root)
    if not os.path.isfile(os.path.join(location, archive + ".info")):
        return None
    if os.path.isfile(os.path.join(location, archive + ".tar.xz")):
        return NeuroChemSource("tar", location, archive)
    if os.path.isdir(os.path.join(location, archive)):
        return NeuroChemSource("dir", location, archive)
    return None


def find_source(archive, source=None):
    """(folder or zip holding the files of archive, or None; the places looked in).

    A folder holds ``<archive>.info`` with ``<archive>.tar.xz`` or the unpacked ``<archive>/``;
    a zip holds both in one of its folders (the published release archive)."""
    found = find_neurochem(archive, source)
    return (found.path if found else None), source_search_dirs(source)


def find_neurochem(archive, source=None):
    for d in source_search_dirs(source):
        found = source_in(d, archive)
        if found is not None:
            return found
    return None


def download_command(model_name):
    """The command that fetches and converts one model (named in error messages)."""
    return "nnpops convert --download %s" % model_name


def convert_model(model_name, output_dir, source=None, member=None, force=False,
                  download=False, verify=None, log=None):
    """Convert one model; returns (status, yaml_path, detail), status 'written' or 'up to date'.

    download: fetch the published files into the cache first when they are not there (network
    unless NNPOPS_OFFLINE); verify: check every file read against the published sha256 (default:
    when the files come from the download cache).
    """
    if model_name not in MODELS:
        raise ConvertError("unknown model %r (known: %s)" % (model_name, ", ".join(MODELS)))
    archive, label = MODELS[model_name]
    if member is not None and member < 0:
        raise ConvertError("--member must be >= 0, got %d" % member)
    name = model_name if member is None else "%s-m%d" % (model_name, member)
    yaml_path = os.path.join(output_dir, name + ".yaml")
    weights_file = name + ".safetensors"
    weights_path = os.path.join(output_dir, weights_file)
    stamp_path = os.path.join(output_dir, name + ".stamp")

    try:
        from . import download as dl
    except ImportError:  # pragma: no cover
        import download as dl  # type: ignore
    if download:
        found = source_in(dl.fetch(archive, log=log), archive)
    else:
        found = find_neurochem(archive, source)
    looked = source_search_dirs(source)
    size_of = found.size if found is not None else None
    if not force and is_up_to_date(yaml_path, weights_path, stamp_path, size_of):
        return "up to date", yaml_path, ""
    if found is None:
        raise ConvertError(
            "cannot find the NeuroChem %s files (%s.info with %s.tar.xz, the unpacked %s/, or a "
            "zip holding them); looked in: %s. Run '%s' to fetch the published files, or pass "
            "the folder or zip that holds them with --source (or set NNPOPS_NEUROCHEM_PATH)"
            % (label, archive, archive, archive, ", ".join(os.path.abspath(d) for d in looked),
               download_command(model_name)))
    if verify is None:
        verify = os.path.abspath(found.path) == os.path.abspath(dl.cache_dir())
    expected = dl.manifest(archive) if verify else None

    model = load_neurochem(found, archive, expected)
    n = len(model.members)
    if member is not None and member >= n:
        raise ConvertError("--member %d: %s has %d members (0..%d)" % (member, archive, n, n - 1))
    chosen = list(range(n)) if member is None else [member]

    tensors = {}
    for out_index, k in enumerate(chosen):
        for el in model.species:
            widths = model.widths[el]
            for li, (wbytes, bbytes) in enumerate(model.members[k][el]):
                base = "m%d.%s.l%d." % (out_index, el, li)
                tensors[base + "weight"] = ([widths[li + 1], widths[li]], wbytes)
                tensors[base + "bias"] = ([widths[li + 1]], bbytes)
    if member is None:
        description = ("%s, %d-member ensemble, converted from NeuroChem files %s"
                       % (label, n, archive))
    else:
        description = ("%s, ensemble member %d of %d (%s%d), converted from NeuroChem files %s"
                       % (label, member, n, posixpath.basename(model.prefix), member, archive))
    metadata = {
        "format": "nnpops",
        "format_version": str(FORMAT_VERSION),
        "model": name,
        "source": archive,
        "members": ",".join(str(k) for k in chosen),
    }

    try:
        os.makedirs(output_dir, exist_ok=True)
        sha256 = _write_atomic(weights_path, safetensors_chunks(tensors, metadata))
        st = os.stat(weights_path)
        text = model_yaml(name, description, model, weights_file, sha256, len(chosen))
        _write_atomic(yaml_path, [text])
        stamp = {
            "converter_version": CONVERTER_VERSION,
            "yaml_sha256": hashlib.sha256(text).hexdigest(),
            "weights_file": weights_file,
            "weights_sha256": sha256,
            "weights_size": st.st_size,
            "weights_mtime_ns": st.st_mtime_ns,
            "source_archive": os.path.basename(found.where),
            "source_size": found.size,
        }
        stamp_text = json.dumps(stamp, indent=1, sort_keys=True) + "\n"
        _write_atomic(stamp_path, [stamp_text.encode("ascii")])
    except OSError as exc:
        raise ConvertError("cannot write %s: %s" % (output_dir, exc)) from None
    return "written", yaml_path, "%s, %d bytes, %d member%s" % (
        weights_file, st.st_size, len(chosen), "" if len(chosen) == 1 else "s")


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ConvertError(message)


def _build_parser():
    p = _Parser(
        prog="nnpops convert",
        description="Convert the published NeuroChem ANI parameter files (ani-2x_8x, ani-1x_8x, "
                    "ani-1ccx_8x) into nnpops model files (NAME.yaml + NAME.safetensors).")
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="ani2x, ani1x and/or ani1ccx (default: all three)")
    p.add_argument("--download", action="store_true",
                   help="fetch the published files (%s, checked against their sha256) into "
                        "the cache ${XDG_CACHE_HOME:-~/.cache}/nnpops/neurochem first, unless "
                        "they are there already; NNPOPS_OFFLINE=1 forbids the network"
                        % "aiqm/ani-model-zoo, tag ani-2x")
    p.add_argument("--source", metavar="PATH",
                   help="folder holding <archive>.info with <archive>.tar.xz or the unpacked "
                        "<archive>/, or a zip holding them such as the release archive (default: "
                        "search NNPOPS_NEUROCHEM_PATH, the download cache, then "
                        "shared/models/neurochem beside a source checkout)")
    p.add_argument("--verify", action="store_true",
                   help="check every file read against the published sha256 (always done for "
                        "downloaded files)")
    p.add_argument("--output", metavar="DIR",
                   help="output directory (default: the first NNPOPS_MODEL_PATH directory, else "
                        "${XDG_CACHE_HOME:-~/.cache}/nnpops/models)")
    p.add_argument("--member", metavar="K", type=int,
                   help="write only ensemble member K, as model NAME-mK")
    p.add_argument("--force", action="store_true", help="convert even if the output is up to date")
    p.add_argument("--from-torchmdnet", metavar="FILE", nargs="+",
                   help="convert a torchmd-net TensorNet checkpoint (.ckpt) instead of the "
                        "NeuroChem files; several checkpoints of one architecture, or "
                        "torchmd-net's zip of checkpoints, become one ensemble model")
    p.add_argument("--name", metavar="NAME",
                   help="with --from-torchmdnet: the model's name (default: the file name "
                        "without .ckpt)")
    p.add_argument("--units", metavar="ENERGY,LENGTH", default="eV,A",
                   help="with --from-torchmdnet: the units the checkpoint was trained in "
                        "(default eV,A; checked against a ZBL prior's scales)")
    return p


def main(argv=None):
    """Entry point of ``python3 -m nnpops convert``; returns the exit status (0 ok, 2 error)."""
    if argv is None:
        argv = sys.argv[1:]
    try:
        args = _build_parser().parse_args(list(argv))
    except ConvertError as exc:
        print("nnpops convert: error: %s" % exc, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    output_dir = args.output if args.output else modelpath.default_output_dir()
    if args.from_torchmdnet is not None:
        return _main_torchmdnet(args, output_dir)
    if args.name is not None or args.units != "eV,A":
        print("nnpops convert: error: --name and --units go with --from-torchmdnet",
              file=sys.stderr)
        return 2
    models = []
    for m in args.models or DEFAULT_MODELS:
        if m not in MODELS:
            print("nnpops convert: error: unknown model %r (choose from %s)"
                  % (m, ", ".join(DEFAULT_MODELS)), file=sys.stderr)
            return 2
        if m not in models:
            models.append(m)
    if args.download and args.source:
        print("nnpops convert: error: --download and --source exclude each other",
              file=sys.stderr)
        return 2
    if args.member is not None and args.member < 0:
        print("nnpops convert: error: --member must be >= 0, got %d" % args.member, file=sys.stderr)
        return 2
    status = 0
    for m in models:
        start = time.monotonic()
        try:
            result, path, detail = convert_model(m, output_dir, source=args.source,
                                                 member=args.member, force=args.force,
                                                 download=args.download,
                                                 verify=True if args.verify else None,
                                                 log=sys.stderr)
        except ConvertError as exc:
            print("nnpops convert: error: %s" % exc, file=sys.stderr)
            status = 2
            continue
        if result == "up to date":
            print("up to date: %s" % path)
        else:
            print("wrote %s (%s; %.1f s)" % (path, detail, time.monotonic() - start))
        sys.stdout.flush()
    return status


def _main_torchmdnet(args, output_dir):
    """``convert --from-torchmdnet FILE [FILE ...]``: one TensorNet checkpoint, or an ensemble of
    several (or of a zip of them) (convert_tensornet.py)."""
    if args.models or args.member is not None or args.source is not None:
        print("nnpops convert: error: --from-torchmdnet takes no MODEL, --member or --source",
              file=sys.stderr)
        return 2
    try:
        from . import convert_tensornet
    except ImportError as exc:  # NumPy missing
        print("nnpops convert: error: --from-torchmdnet needs NumPy (%s)" % exc, file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        result, path, detail = convert_tensornet.convert_tensornet(
            args.from_torchmdnet if len(args.from_torchmdnet) > 1 else args.from_torchmdnet[0],
            output_dir, name=args.name, units=args.units, force=args.force)
    except ConvertError as exc:
        print("nnpops convert: error: %s" % exc, file=sys.stderr)
        return 2
    if result == "up to date":
        print("up to date: %s" % path)
    else:
        print("wrote %s (%s; %.1f s)" % (path, detail, time.monotonic() - start))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
