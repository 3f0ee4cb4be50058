"""The layers of the source tree depend downwards only, as the #include lines show:

    kernels/     includes nothing of core/src/ or potentials/ (the public header is allowed)
    potentials/  includes of core/ only the interface header core/src/potential_api.h

and the core stays readable: no source file under core/ is longer than CORE_MAX_LINES lines.

A quoted include is resolved against the including file's folder, then the source root (the
build's include path); system includes (<...>) are not checked.  Usage:

    check_includes.py SOURCE_ROOT      check the tree (exit 1 listing every violation)
    check_includes.py --self-test      the rules on made-up files (each kind of violation found)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cpp")
INTERFACE = "core/src/potential_api.h"
CORE_MAX_LINES = 900


def resolve(root, rel_file, target, exists):
    """The include's path relative to root (its folder first, then root), or None."""
    here = os.path.normpath(os.path.join(os.path.dirname(rel_file), target))
    if exists(here):
        return here
    there = os.path.normpath(target)
    if exists(there):
        return there
    public = os.path.normpath(os.path.join("core/include", target))
    if exists(public):
        return public
    return None


def violation(rel_file, included):
    """Why rel_file may not include `included` (both relative to the root), or None."""
    if rel_file.startswith("kernels/"):
        if included.startswith("core/src/") or included.startswith("potentials/"):
            return "kernels/ is the ground floor: it may not include " + included
    if rel_file.startswith("potentials/"):
        if included.startswith("core/") and included != INTERFACE \
                and not included.startswith("core/include/"):
            return "a potential includes of core/ only %s, not %s" % (INTERFACE, included)
    return None


def check(root, files, read, exists):
    problems = []
    for rel in files:
        text = read(rel)
        lines = text.count("\n")
        if rel.startswith("core/") and lines > CORE_MAX_LINES:
            problems.append("%s: %d lines: a core file holds at most %d (split it by concern)"
                            % (rel, lines, CORE_MAX_LINES))
        for target in INCLUDE.findall(text):
            inc = resolve(root, rel, target, exists)
            if inc is None:
                continue  # generated or system-provided (nnpops/version.h, emulation headers)
            why = violation(rel, inc)
            if why:
                problems.append("%s: #include \"%s\": %s" % (rel, target, why))
    return problems


def tree_files(root):
    out = []
    for top in ("kernels", "potentials", "core"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith(SOURCE_EXT):
                    out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def self_test():
    tree = {
        "core/src/internal.h": "",
        "core/src/potential_api.h": '#include "kernels/base.h"\n',
        "core/include/nnpops/nnpops.h": "",
        "kernels/base.h": '#include "nnpops/nnpops.h"\n',
        "kernels/cpu/ok.c": '#include "kernels/base.h"\n#include <stdio.h>\n',
        "kernels/cpu/bad_core.c": '#include "core/src/internal.h"\n',
        "kernels/cuda/bad_pot.cu": '#include "../../potentials/x/x.h"\n',
        "potentials/x/x.h": '#include "core/src/potential_api.h"\n#include "kernels/base.h"\n',
        "potentials/x/bad.c": '#include "x.h"\n#include "core/src/internal.h"\n',
        "core/src/long.c": "int x;\n" * (CORE_MAX_LINES + 1),
        "core/src/short.c": "int y;\n" * CORE_MAX_LINES,
    }
    problems = check("", sorted(tree), lambda p: tree[p], lambda p: p in tree)
    bad = sorted(p.split(":")[0] for p in problems)
    expected = ["core/src/long.c", "kernels/cpu/bad_core.c", "kernels/cuda/bad_pot.cu",
                "potentials/x/bad.c"]
    if bad != expected:
        print("self-test: found", bad, "expected", expected)
        return 1
    print("self-test: the four violations were found, nothing else")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    root = argv[1]

    def read(rel):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            return f.read()

    files = tree_files(root)
    problems = check(root, files, read, lambda rel: os.path.isfile(os.path.join(root, rel)))
    for p in problems:
        print(p)
    print("%d files checked, %d violations" % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
