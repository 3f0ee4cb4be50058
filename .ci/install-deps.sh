#!/usr/bin/env bash
# Install the build and test dependencies on a Debian 12 (bookworm) machine.
# Idempotent: a second run only checks what is already there and takes about a second.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config libyaml-dev
  libopenmpi-dev openmpi-bin ccache dpkg-dev xz-utils python3-venv
  clang libclang-rt-14-dev llvm-14 valgrind
)

# --- Debian packages -------------------------------------------------------
# One dpkg-query call; packages it does not know are missing from its output.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null || true)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  grep -qx "$pkg installed" <<<"$installed" || missing+=("$pkg")
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
PIP_PACKAGES=(numpy cffi "ase>=3.23" "openmm>=8.6" openmmml pytest matplotlib pyyaml)

# Exits 0 when every package is importable and meets its minimum version. Uses find_spec and the
# installed metadata instead of importing (importing openmm and ase takes seconds).
py_deps_ok() {
  "$PY" - <<'EOF' 2>/dev/null
import importlib.util, importlib.metadata as md, re, sys
need = {"numpy": None, "cffi": None, "pytest": None, "ase": (3, 23), "openmm": (8, 6),
        "openmmml": None, "matplotlib": None, "yaml": None}
for mod, minver in need.items():
    if importlib.util.find_spec(mod) is None:
        sys.exit(1)
    if minver:
        ver = tuple(int(x) for x in re.findall(r"\d+", md.version(mod))[:2])
        if ver < minver:
            sys.exit(1)
EOF
}

if py_deps_ok; then
  echo "install-deps: Python packages already installed" >&2
else
  echo "install-deps: installing Python packages: ${PIP_PACKAGES[*]}" >&2
  PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
  # pyenv installs need their shims refreshed for new console scripts (pytest).
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
  py_deps_ok || { echo "install-deps: Python packages still not importable" >&2; exit 1; }
fi
