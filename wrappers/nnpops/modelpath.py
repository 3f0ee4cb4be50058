"""Where nnpops looks for model files.

A model is named either by a path to its YAML file or by a bare name such as ``ani2x``.  A bare
name NAME is looked up as ``NAME.yaml`` in, in order:

1. each directory of the environment variable ``NNPOPS_MODEL_PATH`` (colon separated; empty
   entries are skipped), then
2. the cache directory ``${XDG_CACHE_HOME:-~/.cache}/nnpops/models``.

The C library implements the same rule independently (see docs/model-format.md).  Standard
library only.
"""

import os

__all__ = ["cache_dir", "model_search_dirs", "default_output_dir", "find_model"]

_YAML_SUFFIXES = (".yaml", ".yml")


def user_cache_dir(name):
    """``${XDG_CACHE_HOME:-~/.cache}/nnpops/NAME`` (unset or empty XDG_CACHE_HOME: ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nnpops", name)


def cache_dir():
    """``${XDG_CACHE_HOME:-~/.cache}/nnpops/models`` (unset or empty XDG_CACHE_HOME: ~/.cache)."""
    return user_cache_dir("models")


def _env_model_dirs():
    value = os.environ.get("NNPOPS_MODEL_PATH", "")
    return [d for d in value.split(os.pathsep) if d]


def model_search_dirs():
    """Directories searched for ``NAME.yaml``, in order: NNPOPS_MODEL_PATH entries, cache dir."""
    dirs = _env_model_dirs()
    dirs.append(cache_dir())
    return dirs


def default_output_dir():
    """Where ``nnpops convert`` writes when no --output is given: the first NNPOPS_MODEL_PATH
    directory if that variable names one, else the cache directory."""
    dirs = _env_model_dirs()
    return dirs[0] if dirs else cache_dir()


def find_model(name):
    """Resolve a model name or path to the path of its YAML file, or None when not found.

    * ``name`` ending in ``.yaml`` or ``.yml`` (case-sensitive): that path if it is an existing
      file, else None (it is not searched for in the model directories).
    * otherwise: the first ``<dir>/<name>.yaml`` that is an existing file, ``<dir>`` running over
      model_search_dirs().
    """
    name = os.fspath(name)
    if not name:
        return None
    if name.endswith(_YAML_SUFFIXES):
        return name if os.path.isfile(name) else None
    for directory in model_search_dirs():
        candidate = os.path.join(directory, name + ".yaml")
        if os.path.isfile(candidate):
            return candidate
    return None
