#!/usr/bin/env python3
"""launches.py IN.cu OUT.cpp - a CUDA source for the emulated tests: every kernel launch
kernel<<<grid, block, smem, stream>>>(args) becomes EMU_LAUNCH(kernel, grid, block, smem,
stream)(args) (include/cuda_runtime.h), an `extern __shared__` array a pointer to the launch's
dynamic shared memory, a static `__shared__` variable a reference to storage of the running block;
compiled as C++ with the stand-in headers."""
import os
import re
import sys

src = open(sys.argv[1]).read()
out = re.sub(r"([A-Za-z_][A-Za-z_0-9]*(?:<[^<>;()]*>)?)<<<(.+?)>>>", r"EMU_LAUNCH(\1, \2)", src,
             flags=re.S)
# dynamic shared memory: extern __shared__ [__align__(n)] T name[];  ->  T *const name = ...
DYN = r"extern __shared__ (?:__align__\(\d+\) )?([A-Za-z_][A-Za-z_0-9 ]*?) ([A-Za-z_0-9]+)\[\];"
out = re.sub(DYN, r"\1 *const \2 = (\1 *)emu_dynamic_smem();", out)
# static shared memory: [__align__(n)] T name[dims];  ->  per-block storage of the running block
# (emu_block_shared: fresh for every block, as on the GPU, and its own for each block of a
# cluster; a static variable per declaration, and so per template instantiation, is the key)
STAT = (r"^([ \t]*)__shared__ (?:__align__\(\d+\) )?([A-Za-z_][A-Za-z_0-9:<>, ]*?) "
        r"([A-Za-z_][A-Za-z_0-9]*)((?:\[[^\]\n]+\])*);")
out = re.sub(STAT, r"\1static char emu_sk_\3; auto &\3 = emu_block_shared<\2\4>(&emu_sk_\3);",
             out, flags=re.M)
if re.search(r"\b__shared__\b", out):
    sys.exit(f"{sys.argv[1]}: a __shared__ declaration that launches.py cannot rewrite")
if "<<<" in out:
    sys.exit(f"{sys.argv[1]}: a launch that launches.py cannot rewrite")
os.makedirs(os.path.dirname(os.path.abspath(sys.argv[2])), exist_ok=True)
with open(sys.argv[2], "w") as f:
    f.write(f'#line 1 "{sys.argv[1]}"\n' + out)
