"""The shared library exports exactly the functions declared in the public header, and the header
preprocesses into declarations cffi can parse."""
import re
import subprocess
import sys


def header_functions(path):
    text = open(path).read()
    body = text.split("/* cdef-begin */")[1].split("/* cdef-end */")[0]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return set(re.findall(r"\b(nnpops_[a-z0-9_]+)\s*\(", body))


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines()
            if line.split() and line.split()[-2] in ("T", "W")}


def main():
    header, lib = sys.argv[1], sys.argv[2]
    declared, have = header_functions(header), exported(lib)
    missing, extra = declared - have, have - declared
    print(f"{len(declared)} declared, {len(have)} exported")
    if missing:
        print("declared but not exported:", sorted(missing))
    if extra:
        print("exported but not declared:", sorted(extra))
    try:
        import cffi
    except ImportError:
        cffi = None
    if cffi is not None:
        body = open(header).read().split("/* cdef-begin */")[1].split("/* cdef-end */")[0]
        ffi = cffi.FFI()
        ffi.cdef("\n".join(l for l in body.splitlines() if not l.lstrip().startswith("#")))
        print("cffi parsed the header")
    return 1 if (missing or extra) else 0


if __name__ == "__main__":
    sys.exit(main())
