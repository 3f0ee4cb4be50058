#!/usr/bin/env bash
# Install the build and test dependencies on a Debian 12 (bookworm) machine.
# Idempotent: a second run only checks what is already there and takes about a second.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config libyaml-dev
  libopenmpi-dev openmpi-bin ccache dpkg-dev xz-utils
  clang libclang-rt-14-dev valgrind
)

# --- Debian packages -------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing Debian packages: ${missing[*]}" >&2
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
  "${SUDO[@]}" apt-get update
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${APT_PACKAGES[@]}"
else
  echo "install-deps: Debian packages already installed" >&2
fi

# --- Python packages (for the python3 on PATH) -----------------------------
PY=python3
PIP_PACKAGES=(numpy cffi "ase>=3.23" "openmm>=8.6" pytest)

# Exits 0 when every package imports and meets its minimum version.
py_deps_ok() {
  "$PY" - <<'EOF' 2>/dev/null
import importlib, importlib.metadata as md, re, sys
need = {"numpy": None, "cffi": None, "pytest": None, "ase": (3, 23), "openmm": (8, 6)}
for mod, minver in need.items():
    importlib.import_module(mod)
    if minver:
        ver = tuple(int(x) for x in re.findall(r"\d+", md.version(mod))[:2])
        if ver < minver:
            sys.exit(1)
EOF
}

if py_deps_ok; then
  echo "install-deps: Python packages already installed ($("$PY" --version))" >&2
else
  echo "install-deps: installing Python packages: ${PIP_PACKAGES[*]}" >&2
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
  # pyenv installs need their shims refreshed for new console scripts (pytest).
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
  py_deps_ok || { echo "install-deps: Python packages still not importable" >&2; exit 1; }
fi
