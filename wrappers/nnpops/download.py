"""Fetch the published NeuroChem ANI files into the user's cache, verified file by file.

The ANI developers publish the parameter files of ANI-2x, ANI-1x and ANI-1ccx in one zip archive:
the ``ani-2x`` tag of the GitHub repository ``aiqm/ani-model-zoo`` (the archive torchani itself
downloads), whose folder ``resources/`` holds ``<archive>.info`` and ``<archive>/`` for each model.
:data:`RELEASE_URL` names that tag, a fixed revision.  Every file the converter reads is checked
against the sha256 listed in ``neurochem.sha256`` (next to this module), computed from the
published files; a file that differs is refused (:class:`ChecksumError`) and nothing is kept.

Cache: ``${XDG_CACHE_HOME:-~/.cache}/nnpops/neurochem`` holds ``<archive>.info`` and the unpacked
``<archive>/`` of each fetched model, plus the downloaded zip (so the other models need no second
download).  Writers take an exclusive lock on ``.lock`` there, unpack into a private staging
folder and move the result into place, the ``.info`` file last: a model is present exactly when
its ``.info`` is.  A model already present touches no network.

Environment: ``NNPOPS_OFFLINE=1`` forbids the network (a model not in the cache is then an
error); ``NNPOPS_NEUROCHEM_URL`` replaces :data:`RELEASE_URL` (any URL urllib opens, including
``file://``, e.g. a copy of the release on a machine without internet access).

The project's CI machines cannot reach RELEASE_URL; the tests (tests/model/test_download.py) serve
a zip laid out like the release, made from the same published files, from 127.0.0.1 and as
``file://``.  The C library never downloads anything; this module is used by ``nnpops convert
--download``.  Standard library only.
"""

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile

try:
    from .convert import ChecksumError, ConvertError, _zip_root
    from .modelpath import user_cache_dir
except ImportError:  # pragma: no cover
    from convert import ChecksumError, ConvertError, _zip_root  # type: ignore
    from modelpath import user_cache_dir  # type: ignore

__all__ = ["RELEASE_URL", "cache_dir", "manifest", "fetch", "is_cached", "offline",
           "ChecksumError", "DownloadError"]

RELEASE_URL = "https://github.com/aiqm/ani-model-zoo/archive/ani-2x.zip"
_ZIP_NAME = "ani-model-zoo-ani-2x.zip"
_MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "neurochem.sha256")


class DownloadError(ConvertError):
    """The release archive could not be fetched (network, offline mode, missing file)."""


def cache_dir():
    """``${XDG_CACHE_HOME:-~/.cache}/nnpops/neurochem``."""
    return user_cache_dir("neurochem")


def offline():
    """True when NNPOPS_OFFLINE is set to anything but '', '0', 'no', 'false', 'off'."""
    return os.environ.get("NNPOPS_OFFLINE", "").strip().lower() not in ("", "0", "no", "false",
                                                                        "off")


def manifest(archive=None):
    """{name: sha256} of the published files (of one archive when given: its ``.info`` and the
    files below ``<archive>/``)."""
    out = {}
    with open(_MANIFEST, "r", encoding="ascii") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            digest, name = line.split(None, 1)
            if archive is None or name == archive + ".info" or name.startswith(archive + "/"):
                out[name] = digest
    return out


def is_cached(archive, directory=None):
    return os.path.isfile(os.path.join(directory or cache_dir(), archive + ".info"))


@contextlib.contextmanager
def _locked(directory):
    import fcntl

    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _progress(stream, done, total):
    if total:
        width = 30
        filled = int(width * done / total)
        stream.write("\r  [%s%s] %5.1f%% of %.1f MB" % ("#" * filled, "." * (width - filled),
                                                       100.0 * done / total, total / 1e6))
    else:
        stream.write("\r  %.1f MB" % (done / 1e6))
    stream.flush()


def _download(url, directory, log):
    """Fetch url into a temporary file in directory; returns its path."""
    if offline():
        raise DownloadError(
            "NNPOPS_OFFLINE is set, so the NeuroChem files cannot be downloaded from %s; copy "
            "the release archive here and pass it with --source FILE.zip (or point "
            "NNPOPS_NEUROCHEM_URL at a local copy and unset NNPOPS_OFFLINE)" % url)
    fd, tmp = tempfile.mkstemp(prefix=".download-", suffix=".zip", dir=directory)
    show = log is not None and hasattr(log, "isatty") and log.isatty()
    try:
        with os.fdopen(fd, "wb") as out:
            if log is not None:
                log.write("downloading %s\n" % url)
            with urllib.request.urlopen(url, timeout=60) as response:
                total = int(response.headers.get("Content-Length") or 0)
                done = 0
                while True:
                    chunk = response.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
                    done += len(chunk)
                    if show:
                        _progress(log, done, total)
            if show:
                log.write("\n")
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, (urllib.error.URLError, OSError, ValueError)):
            raise DownloadError("cannot download %s: %s" % (url, getattr(exc, "reason", exc))) \
                from None
        raise
    return tmp


def _unpack(zip_path, archive, expected, directory):
    """Unpack the files of one model from the release zip into directory (staging, then moved);
    every file is checked against expected before anything is moved into place."""
    staging = tempfile.mkdtemp(prefix=".staging-", dir=directory)
    try:
        try:
            with zipfile.ZipFile(zip_path) as zf:
                root = _zip_root(zf, archive)
                if root is None:
                    raise DownloadError("%s holds no %s.info: not the NeuroChem release archive"
                                        % (zip_path, archive))
                for name in sorted(expected):
                    member = (root + "/" if root else "") + name
                    try:
                        data = zf.read(member)
                    except KeyError:
                        raise DownloadError("%s: missing %s (one of the published files)"
                                            % (zip_path, member)) from None
                    got = hashlib.sha256(data).hexdigest()
                    if got != expected[name]:
                        raise ChecksumError(
                            "%s: sha256 of %s is %s, the published file's is %s (a corrupt or "
                            "altered download; nothing was kept)"
                            % (zip_path, name, got, expected[name]))
                    target = os.path.join(staging, *name.split("/"))
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with open(target, "wb") as f:
                        f.write(data)
        except zipfile.BadZipFile as exc:
            raise DownloadError("%s is not a zip archive: %s" % (zip_path, exc)) from None
        final = os.path.join(directory, archive)
        if os.path.exists(final):  # left by an interrupted writer (no .info): replace it
            shutil.rmtree(final)
        os.rename(os.path.join(staging, archive), final)
        os.replace(os.path.join(staging, archive + ".info"),
                   os.path.join(directory, archive + ".info"))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch(archive, url=None, directory=None, log=sys.stderr):
    """Make ``<cache>/<archive>.info`` and ``<cache>/<archive>/`` present and verified; returns
    the cache folder.  Touches no network when the model is cached already, nor when the release
    zip from an earlier download is still in the cache."""
    directory = directory or cache_dir()
    expected = manifest(archive)
    if not expected:
        raise ConvertError("no published files are known for %s" % archive)
    if is_cached(archive, directory):
        return directory
    url = url or os.environ.get("NNPOPS_NEUROCHEM_URL") or RELEASE_URL
    with _locked(directory):
        if is_cached(archive, directory):  # another process fetched it meanwhile
            return directory
        kept = os.path.join(directory, _ZIP_NAME)
        if os.path.isfile(kept):
            try:
                _unpack(kept, archive, expected, directory)
                return directory
            except ConvertError:
                os.unlink(kept)  # unusable: fetch it again
        tmp = _download(url, directory, log)
        try:
            _unpack(tmp, archive, expected, directory)
            os.replace(tmp, kept)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return directory
