#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds a consumer against it twice: through the
# CMake package (nnpops::nnpops) and through pkg-config (nnpops.pc); both programs must run.
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
mkdir -p "$prefix/consumer"
cat > "$prefix/consumer/main.c" <<'C'
#include <stdio.h>
#include <nnpops/nnpops.h>
int main(void) {
    if (nnpops_version_number() != NNPOPS_VERSION_NUMBER) return 1;
    printf("nnpops %s\n", nnpops_version_string());
    return 0;
}
C
cat > "$prefix/consumer/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.22)
project(consumer C)
find_package(nnpops REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE nnpops::nnpops)
C
cmake -S "$prefix/consumer" -B "$prefix/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer/build" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libnnpops.so' | head -n1)")
LD_LIBRARY_PATH="$libdir" "$prefix/consumer/build/consumer"
PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$prefix/consumer/main.c" -o "$prefix/consumer/pc" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs nnpops)
LD_LIBRARY_PATH="$libdir" "$prefix/consumer/pc"
echo "install check passed"
