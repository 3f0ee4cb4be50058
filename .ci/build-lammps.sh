#!/usr/bin/env bash
# Build LAMMPS 29 Sep 2021 Update 2 (Debian bookworm's `lammps` source package) with plugin and
# MPI support, cached under ${NNPOPS_CACHE_DIR:-$HOME/.cache/nnpops-ci}.
#
#   .ci/build-lammps.sh                   build (or reuse) LAMMPS; prints LAMMPS_SRC= and LAMMPS_LMP=
#   .ci/build-lammps.sh --trixie-source   fetch only the source of Debian trixie's `lammps`;
#                                         prints LAMMPS_TRIXIE_SRC=
#
# Progress goes to stderr; stdout carries only the final KEY=path lines, so
# `eval "$(.ci/build-lammps.sh)"` works. The system's apt configuration is never changed:
# sources are fetched through a private apt configuration kept in the cache directory.
# Needs the packages from .ci/install-deps.sh.
set -euo pipefail

MODE=build
case "${1:-}" in
  "") ;;
  --trixie-source) MODE=trixie ;;
  -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-lammps: unknown argument: $1" >&2; exit 2 ;;
esac

CACHE_DIR=${NNPOPS_CACHE_DIR:-$HOME/.cache/nnpops-ci}
mkdir -p "$CACHE_DIR"
CACHE_DIR=$(cd "$CACHE_DIR" && pwd -P)
JOBS=2

# Keep stdout for the result lines only.
exec 3>&1 1>&2

log() { echo "build-lammps: $*" >&2; }
die() { echo "build-lammps: error: $*" >&2; exit 1; }

for tool in apt-get dpkg-source; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run .ci/install-deps.sh first)"
done

# fetch_source SUITE SOURCES_FILE_CONTENT DEST
# Runs `apt-get source lammps` for SUITE through a private apt configuration and unpacks it into
# DEST (a directory that will contain exactly one lammps-* source tree).
fetch_source() {
  local suite=$1 sources=$2 dest=$3
  local aptdir="$CACHE_DIR/apt-$suite"
  local apt_opts=(
    -o Dir::Etc::SourceList=/dev/null
    -o Dir::Etc::SourceParts="$aptdir"
    -o Dir::State::Lists="$aptdir/lists"
    -o Dir::Cache="$aptdir/cache"
    # The cache dir may be private to this user: download without switching to '_apt'.
    -o APT::Sandbox::User="$(id -un)"
  )
  rm -rf "$aptdir"
  mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial"
  printf '%s\n' "$sources" > "$aptdir/debian.sources"
  log "apt-get update (private deb-src configuration for $suite)"
  apt-get "${apt_opts[@]}" update --error-on=any >&2 || return 1

  local tmp="$dest.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  # File names and checksums, for the fallback below.
  (cd "$tmp" && apt-get "${apt_opts[@]}" source --print-uris lammps) > "$tmp/uris.txt" \
    || { rm -rf "$tmp"; return 1; }
  log "apt-get source lammps ($suite)"
  if ! (cd "$tmp" && apt-get "${apt_opts[@]}" source lammps) >&2; then
    # Some mirrors lack the .dsc file while serving the tarballs: unpack those by hand.
    log "apt-get source failed; unpacking the downloaded tarballs without the .dsc"
    unpack_without_dsc "$tmp" || { rm -rf "$tmp"; return 1; }
  fi
  rm -f "$tmp"/*.tar.* "$tmp"/*.dsc "$tmp/uris.txt"   # keep only the unpacked tree
  rm -rf "$dest"
  mv "$tmp" "$dest"
  rm -rf "$aptdir"   # the package lists are not needed any more
}

# unpack_without_dsc DIR: DIR holds the orig and debian tarballs of a "3.0 (quilt)" source package
# and uris.txt (from `apt-get source --print-uris`). Checks their SHA256 sums against the signed
# index, unpacks the upstream tree as DIR/lammps-<version>/ and applies debian/patches.
unpack_without_dsc() {
  local dir=$1 url file size sum orig="" deb=""
  while read -r url file size sum; do
    [[ $file == *.dsc ]] && continue
    [[ -f "$dir/$file" ]] || { log "missing $file"; return 1; }
    echo "${sum#SHA256:}  $dir/$file" | sha256sum --quiet -c - || return 1
    case $file in
      *.orig.tar.*) orig=$file ;;
      *.debian.tar.*) deb=$file ;;
    esac
  done < <(grep "^'" "$dir/uris.txt")
  [[ -n $orig && -n $deb ]] || { log "orig or debian tarball not found"; return 1; }
  local version=${orig#lammps_}
  version=${version%.orig.tar.*}
  local tree="$dir/lammps-$version"
  mkdir -p "$tree"
  tar -xf "$dir/$orig" -C "$tree" --strip-components=1
  tar -xf "$dir/$deb" -C "$tree"
  local p opt
  while read -r p opt; do
    [[ -z $p || $p == \#* ]] && continue
    patch -d "$tree" -s -N ${opt:--p1} < "$tree/debian/patches/$p" || return 1
  done < "$tree/debian/patches/series"
}

# The only source tree (lammps-*/ with a src/ directory) under DIR.
source_tree() {
  local d
  for d in "$1"/lammps-*/; do
    [[ -d "$d/src" ]] && { (cd "$d" && pwd -P); return 0; }
  done
  return 1
}

# ---------------------------------------------------------------------------------------------
if [[ $MODE == trixie ]]; then
  TDIR="$CACHE_DIR/lammps-trixie"
  if ! tree=$(source_tree "$TDIR/source" 2>/dev/null) || [[ ! -f "$TDIR/source.ok" ]]; then
    # A deb-src entry for trixie on the system's Debian mirror; a source-only fetch works from
    # a bookworm machine.
    mirror=$(awk '/^URIs:/ && !/security/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources \
             2>/dev/null || true)
    sources="Types: deb-src
URIs: ${mirror:-http://deb.debian.org/debian}
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    mkdir -p "$TDIR"
    rm -f "$TDIR/source.ok"
    fetch_source trixie "$sources" "$TDIR/source" \
      || die "could not fetch the source of Debian trixie's lammps package"
    tree=$(source_tree "$TDIR/source") || die "no lammps source tree after fetching trixie's source"
    touch "$TDIR/source.ok"
  else
    log "trixie source already in $TDIR/source"
  fi
  echo "export LAMMPS_TRIXIE_SRC=$tree/src" > "$TDIR/env.sh"
  echo "LAMMPS_TRIXIE_SRC=$tree/src" >&3
  exit 0
fi

# ---------------------------------------------------------------------------------------------
LDIR="$CACHE_DIR/lammps"
BUILD="$LDIR/build"
STAMP="$LDIR/build.stamp"

CMAKE_OPTS=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=on
  -DBUILD_MPI=on
  -DPKG_PLUGIN=on
  -DPKG_EXTRA-FIX=on
  -DPKG_MOLECULE=on
  -DWITH_JPEG=off
  -DWITH_PNG=off
  -DWITH_FFMPEG=off
  -DCMAKE_BUILD_RPATH_USE_ORIGIN=on
  -DCMAKE_C_COMPILER_LAUNCHER=ccache
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
)
# The stamp records what was built; any change to it triggers a rebuild.
STAMP_TEXT="lammps bookworm 29Sep2021-update2 ${CMAKE_OPTS[*]}"

print_result() {
  local src=$1
  printf 'export LAMMPS_SRC=%s\nexport LAMMPS_LMP=%s\n' "$src" "$BUILD/lmp" > "$LDIR/env.sh"
  printf 'LAMMPS_SRC=%s\nLAMMPS_LMP=%s\n' "$src" "$BUILD/lmp" >&3
}

# Fast path: already built with the same configuration.
if [[ -x "$BUILD/lmp" && -f "$STAMP" && "$(cat "$STAMP")" == "$STAMP_TEXT" ]] \
   && tree=$(source_tree "$LDIR/source" 2>/dev/null); then
  log "LAMMPS already built in $BUILD"
  print_result "$tree/src"
  exit 0
fi

for tool in cmake ccache mpicxx; do
  command -v "$tool" >/dev/null || die "'$tool' not found (run .ci/install-deps.sh first)"
done

mkdir -p "$LDIR"
rm -f "$STAMP"

# 1. Source of bookworm's lammps package (kept once unpacked).
if ! tree=$(source_tree "$LDIR/source" 2>/dev/null) || [[ ! -f "$LDIR/source.ok" ]]; then
  rm -f "$LDIR/source.ok"
  # Copy of the system's Debian sources with the type switched to deb-src.
  [[ -f /etc/apt/sources.list.d/debian.sources ]] \
    || die "/etc/apt/sources.list.d/debian.sources not found"
  sources=$(sed -E 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources)
  fetch_source bookworm "$sources" "$LDIR/source" \
    || die "could not fetch the source of Debian bookworm's lammps package"
  tree=$(source_tree "$LDIR/source") || die "no lammps source tree after fetching the source"
  touch "$LDIR/source.ok"
fi
grep -q '"29 Sep 2021"' "$tree/src/version.h" \
  || die "unexpected LAMMPS version in $tree/src/version.h: $(cat "$tree/src/version.h")"

# 2. Configure and build with ccache.
export CCACHE_DIR="$CACHE_DIR/ccache"
mkdir -p "$CCACHE_DIR"
ccache --max-size=2G >/dev/null
log "configuring $tree/cmake in $BUILD"
cmake -S "$tree/cmake" -B "$BUILD" "${CMAKE_OPTS[@]}" >&2
log "building with $JOBS jobs"
cmake --build "$BUILD" -j"$JOBS" >&2
ccache --show-stats >&2 || true

# 3. Check the binary: it must run and include the PLUGIN package.
"$BUILD/lmp" -h > "$LDIR/lmp-help.txt" 2>&1 || die "$BUILD/lmp -h failed"
grep -qw PLUGIN "$LDIR/lmp-help.txt" || die "$BUILD/lmp lacks the PLUGIN package"

echo "$STAMP_TEXT" > "$STAMP"
print_result "$tree/src"
