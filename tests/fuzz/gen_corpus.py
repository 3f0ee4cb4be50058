#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/fuzz_*.c): valid and broken files.

Usage: gen_corpus.py OUTDIR

    OUTDIR/tiny.safetensors   the fixed weights file of the YAML target (NNPOPS_FUZZ_WEIGHTS):
                              a tiny two-species ANI model, ensemble of 2, AEV length 10
    OUTDIR/yaml/*.yaml        model files: the tiny ANI model (naming tiny.safetensors with its
                              sha256), Lennard-Jones models, and broken variants (syntax errors,
                              deep nesting, aliases, huge numbers, wrong types, unknown keys, ...)
    OUTDIR/safetensors/*      weights files: tiny.safetensors, a file with every dtype, and broken
                              variants (truncations, header length past the end, offsets past the
                              end, overlapping tensors, shapes whose byte count overflows, wrong and
                              unknown dtypes, non-UTF-8 and duplicate names, non-JSON headers)

Everything is generated here from scratch (Python standard library only, deterministic output);
no third-party file is used.  The fuzz harnesses copy tiny.safetensors next to the YAML they
write, so a YAML seed whose `weights` names tiny.safetensors with the right sha256 reaches the
ANI loader.
"""
import hashlib
import json
import os
import struct
import sys

# ---- the tiny ANI model -------------------------------------------------------------------------
SPECIES = ["H", "C"]
WIDTHS = {"H": [10, 3, 1], "C": [10, 2, 1]}  # AEV length 2*2 + 3*2 = 10
ENSEMBLE = 2


def tensor_list():
    """(name, shape) of every tensor of the tiny model, in the converter's order."""
    out = []
    for m in range(ENSEMBLE):
        for el in SPECIES:
            w = WIDTHS[el]
            for layer in range(len(w) - 1):
                out.append((f"m{m}.{el}.l{layer}.weight", [w[layer + 1], w[layer]]))
                out.append((f"m{m}.{el}.l{layer}.bias", [w[layer + 1]]))
    return out


def count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def safetensors(entries, metadata=None, header_len=None, pad=0, extra=b""):
    """entries: list of (name, dtype, shape, data bytes).  Offsets follow the order given."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, blob in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + data + extra


def raw_safetensors(header_text, data, header_len=None):
    """A file with a header written by hand (bytes or str)."""
    if isinstance(header_text, str):
        header_text = header_text.encode("utf-8", "surrogateescape")
    n = len(header_text) if header_len is None else header_len
    return struct.pack("<Q", n) + header_text + data


def tiny_weights():
    entries = []
    k = 0
    for name, shape in tensor_list():
        vals = []
        for _ in range(count(shape)):
            vals.append(((k * 37) % 19 - 9) * 0.01)
            k += 1
        entries.append((name, "F32", shape, struct.pack(f"<{len(vals)}f", *vals)))
    return safetensors(entries, metadata={"format": "nnpops", "model": "tiny"})


def ani_yaml(sha, **over):
    """The tiny ANI model file; keyword arguments replace whole lines by key."""
    lines = {
        "head": "format: nnpops-model\nformat_version: 1\nname: tiny-ani\ntype: ani\n",
        "description": 'description: "fuzz seed: two species, two members"\n',
        "units": "units: {length: angstrom, energy: hartree}\n",
        "species": "species: [H, C]\n",
        "weights": f'weights:\n  file: tiny.safetensors\n  sha256: "{sha}"\n',
        "ani": "ani:\n",
        "radial": "  radial:\n    cutoff: 4.0\n    eta: [16.0]\n    shifts: [0.9, 1.7]\n",
        "angular": ("  angular:\n    cutoff: 3.5\n    eta: [8.0]\n    zeta: [32.0]\n"
                    "    shifts: [0.9]\n    sections: [0.2, 1.2]\n"),
        "self_energies": "  self_energies: [-0.5, -38.0]\n",
        "ensemble_size": f"  ensemble_size: {ENSEMBLE}\n",
        "activation": "  activation: {type: celu, alpha: 0.1}\n",
        "networks": "  networks:\n    H: [10, 3, 1]\n    C: [10, 2, 1]\n",
        "tensors": '  tensors: "m{member}.{element}.l{layer}.{kind}"\n',
    }
    for k, v in over.items():
        lines[k] = v
    return "".join(lines.values())


LJ = """# nnpops model file
format: nnpops-model
format_version: 1
name: lj-argon
type: lj
description: liquid argon
units: {length: angstrom, energy: eV}
species: [Ar]
lj:
  shift: false
  pairs:
    - {elements: [Ar, Ar], epsilon: 0.0104, sigma: 3.40, cutoff: 8.5}
"""

LJ2 = """format: nnpops-model
format_version: 1
name: lj-mix
type: lj
units: {length: nm, energy: kJ/mol}
species: [H, C, "N", O]
lj:
  shift: yes
  pairs:
    - elements: [H, H]
      epsilon: 0.1
      sigma: 0.25
      cutoff: 0.6
    - {elements: [C, "N"], epsilon: 0.3, sigma: 0.33, cutoff: 0.9}
    - {elements: [O, O], epsilon: 0.65, sigma: 0.316, cutoff: 1.0}
"""


def yaml_seeds(sha):
    s = {}
    s["ani_tiny.yaml"] = ani_yaml(sha)
    s["ani_tiny_flow.yaml"] = ani_yaml(
        sha, networks="  networks: {C: [10, 2, 1], H: [10, 3, 1]}\n",
        units="units:\n  length: angstrom\n  energy: hartree\n")
    s["ani_tiny_bohr.yaml"] = ani_yaml(sha, units="units: {length: bohr, energy: eV}\n")
    s["lj.yaml"] = LJ
    s["lj_mix.yaml"] = LJ2
    s["json.yaml"] = json.dumps({
        "format": "nnpops-model", "format_version": 1, "name": "lj-json", "type": "lj",
        "units": {"length": "angstrom", "energy": "eV"}, "species": ["Ar"],
        "lj": {"pairs": [{"elements": ["Ar", "Ar"], "epsilon": 0.01, "sigma": 3.4,
                          "cutoff": 8.0}]}})
    # ---- broken ----
    s["bad_sha.yaml"] = ani_yaml("0" * 64)
    s["bad_sha_short.yaml"] = ani_yaml("abc")
    s["no_weights.yaml"] = ani_yaml(sha, weights="")
    s["weights_dir.yaml"] = ani_yaml(sha, weights=f'weights: {{file: ., sha256: "{sha}"}}\n')
    s["weights_missing.yaml"] = ani_yaml(sha, weights=f'weights: {{file: nope.st, sha256: "{sha}"}}\n')
    s["wrong_width.yaml"] = ani_yaml(sha, networks="  networks:\n    H: [10, 4, 1]\n    C: [10, 2, 1]\n")
    s["wrong_aev.yaml"] = ani_yaml(sha, networks="  networks:\n    H: [11, 3, 1]\n    C: [11, 2, 1]\n")
    s["ensemble_huge.yaml"] = ani_yaml(sha, ensemble_size="  ensemble_size: 99999999999999999999999\n")
    s["ensemble_float.yaml"] = ani_yaml(sha, ensemble_size="  ensemble_size: 1e300\n")
    s["cutoff_huge.yaml"] = ani_yaml(sha, radial="  radial:\n    cutoff: 1e999\n    eta: [16.0]\n    shifts: [0.9, 1.7]\n")
    s["cutoff_nan.yaml"] = ani_yaml(sha, radial="  radial:\n    cutoff: .nan\n    eta: [16.0]\n    shifts: [0.9, 1.7]\n")
    s["many_terms.yaml"] = ani_yaml(sha, radial="  radial:\n    cutoff: 4.0\n    eta: [" + ", ".join(["1.0"] * 40) + "]\n    shifts: [0.9, 1.7]\n")
    s["species_dup.yaml"] = ani_yaml(sha, species="species: [H, H]\n")
    s["species_unknown.yaml"] = ani_yaml(sha, species="species: [H, Xx]\n")
    s["species_33.yaml"] = ani_yaml(sha, species="species: [" + ", ".join(["H"] * 33) + "]\n")
    s["unknown_key.yaml"] = ani_yaml(sha, ani="ani:\n  bogus: 1\n")
    s["version2.yaml"] = ani_yaml(sha, head="format: nnpops-model\nformat_version: 2\nname: x\ntype: ani\n")
    s["deep_block.yaml"] = "a:\n" + "".join("  " * i + "- \n" for i in range(1, 80))
    s["deep_flow.yaml"] = "x: " + "[" * 200 + "]" * 200 + "\n"
    s["deep_flow_unclosed.yaml"] = "x: " + "{a: " * 100
    s["laughs.yaml"] = ("a: &a [x, x, x, x, x, x, x, x, x]\n"
                        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, "
                                  f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))
                        + "species: *i\n")
    s["alias_key.yaml"] = LJ.replace("species: [Ar]", "species: &s [Ar]\nx: *s")
    s["recursive_alias.yaml"] = "a: &a [*a]\n"
    s["undefined_alias.yaml"] = "species: *nope\n"
    s["dup_key.yaml"] = LJ + "species: [Ar]\n"
    s["tags.yaml"] = LJ.replace("format_version: 1", "format_version: !!str 1")
    s["multi_doc.yaml"] = LJ + "---\n" + LJ
    s["huge_number.yaml"] = LJ.replace("epsilon: 0.0104", "epsilon: " + "9" * 400)
    s["huge_exp.yaml"] = LJ.replace("sigma: 3.40", "sigma: 1e-400")
    s["neg_cutoff.yaml"] = LJ.replace("cutoff: 8.5", "cutoff: -8.5")
    s["quoted_number.yaml"] = LJ.replace("epsilon: 0.0104", 'epsilon: "0.0104"')
    s["null_name.yaml"] = LJ.replace("name: lj-argon", "name: ~")
    s["nul_byte.yaml"] = LJ.replace("name: lj-argon", 'name: "lj\\0argon"')
    s["bad_utf8.yaml"] = LJ.replace("liquid argon", "liquid \udcff argon")
    s["bom.yaml"] = "\ufeff" + LJ
    s["utf16.yaml"] = LJ  # written as UTF-16 below
    s["tab_indent.yaml"] = LJ.replace("  shift", "\tshift")
    s["truncated.yaml"] = LJ[: len(LJ) // 2]
    s["empty.yaml"] = ""
    s["null_doc.yaml"] = "~\n"
    s["scalar_doc.yaml"] = "nnpops\n"
    s["long_key.yaml"] = "k" * 1100 + ": 1\n"
    s["many_keys.yaml"] = "".join(f"k{i}: {i}\n" for i in range(300))
    s["lj_both.yaml"] = LJ + "ani: {}\n"
    s["lj_pair_twice.yaml"] = LJ + "    - {elements: [Ar, Ar], epsilon: 0.01, sigma: 3.4, cutoff: 8.5}\n"
    return s


# ---- safetensors seeds ------------------------------------------------------------------------
def st_seeds(tiny):
    s = {}
    f4 = struct.pack("<4f", 0.5, -1.0, 2.25, 3.0)
    s["tiny.safetensors"] = tiny
    s["all_dtypes.safetensors"] = safetensors([
        ("b", "BOOL", [2], b"\x00\x01"), ("u8", "U8", [2], b"\x01\x02"), ("i8", "I8", [1], b"\xff"),
        ("e5", "F8_E5M2", [1], b"\x3c"), ("e4", "F8_E4M3", [1], b"\x38"), ("e8", "F8_E8M0", [1], b"\x7f"),
        ("i16", "I16", [1], b"\x01\x00"), ("u16", "U16", [1], b"\x01\x00"), ("f16", "F16", [1], b"\x00\x3c"),
        ("bf16", "BF16", [1], b"\x80\x3f"), ("i32", "I32", [1], b"\x01\x00\x00\x00"),
        ("u32", "U32", [1], b"\x01\x00\x00\x00"), ("f32", "F32", [2, 2], f4),
        ("f64", "F64", [], struct.pack("<d", 7.5)), ("i64", "I64", [1], struct.pack("<q", -3)),
        ("u64", "U64", [1], struct.pack("<Q", 3)), ("c64", "C64", [1], struct.pack("<2f", 1, 2)),
        ("empty", "F32", [0, 5], b""),
    ], metadata={"k": "v"})
    s["empty_header.safetensors"] = raw_safetensors("{}", b"")
    s["metadata_only.safetensors"] = raw_safetensors('{"__metadata__":{"a":"b"}}', b"")
    s["spaces.safetensors"] = safetensors([("a", "F32", [4], f4)], pad=7)
    s["trailing.safetensors"] = safetensors([("a", "F32", [4], f4)], extra=b"\0" * 16)
    s["gap.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', f4)
    # ---- broken ----
    s["short.safetensors"] = b"\x05\x00\x00"
    s["len_only.safetensors"] = struct.pack("<Q", 0)
    s["header_past_end.safetensors"] = raw_safetensors('{"a":1}', b"", header_len=1 << 40)
    s["header_len_max.safetensors"] = raw_safetensors('{"a":1}', b"", header_len=(1 << 64) - 1)
    s["header_cut.safetensors"] = tiny[: 8 + 40]
    s["data_cut.safetensors"] = tiny[: len(tiny) - 10]
    s["offsets_past_end.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[6],"data_offsets":[0,24]}}', f4)
    s["offsets_huge.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551616]}}', f4)
    s["offsets_reversed.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}', f4)
    s["offsets_negative.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}', f4)
    s["offsets_count.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}', f4)
    s["overlap.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},'
        '"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', f4)
    s["overlap_inside.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
        '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f4)
    s["overflow_bytes.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F64","shape":[1152921504606846976,2],"data_offsets":[0,16]}}', f4)
    s["overflow_count.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"U8","shape":[4294967296,4294967296,4],"data_offsets":[0,4]}}', f4)
    s["overflow_dim.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}}', f4)
    s["ndim9.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}', f4)
    s["shape_float.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', f4)
    s["shape_string.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":"4","data_offsets":[0,16]}}', f4)
    s["dtype_unknown.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}}', f4)
    s["dtype_number.safetensors"] = raw_safetensors(
        '{"a":{"dtype":32,"shape":[1],"data_offsets":[0,4]}}', f4)
    s["dtype_wrong.safetensors"] = tiny.replace(b'"F32"', b'"I32"', 1)
    s["name_non_utf8.safetensors"] = raw_safetensors(
        b'{"a\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f4)
    s["name_surrogate.safetensors"] = raw_safetensors(
        '{"a\\udc00":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f4)
    s["name_nul.safetensors"] = raw_safetensors(
        '{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f4)
    s["name_empty.safetensors"] = raw_safetensors(
        '{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f4)
    s["name_duplicate.safetensors"] = raw_safetensors(
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f4)
    s["not_json.safetensors"] = raw_safetensors("hello world", f4)
    s["json_array.safetensors"] = raw_safetensors("[1, 2, 3]", f4)
    s["entry_not_object.safetensors"] = raw_safetensors('{"a": [0, 4]}', f4)
    s["entry_missing_key.safetensors"] = raw_safetensors('{"a":{"dtype":"F32","shape":[1]}}', f4)
    s["metadata_list.safetensors"] = raw_safetensors('{"__metadata__":[1]}', f4)
    s["deep_header.safetensors"] = raw_safetensors('{"a":' + "[" * 100 + "]" * 100 + "}", f4)
    s["aliases_header.safetensors"] = raw_safetensors(
        'a: &x {"dtype":"F32","shape":[1],"data_offsets":[0,4]}\nb: *x\n', f4)
    s["nan_weights.safetensors"] = tiny.replace(struct.pack("<f", 0.09), struct.pack("<f", float("nan")), 1)
    s["inf_weights.safetensors"] = tiny.replace(struct.pack("<f", 0.09), struct.pack("<f", float("inf")), 1)
    s["tiny_missing_tensor.safetensors"] = safetensors(
        [(n, "F32", sh, b"\0" * 4 * count(sh)) for n, sh in tensor_list()[1:]])
    s["tiny_wrong_shape.safetensors"] = safetensors(
        [(n, "F32", list(reversed(sh)), b"\0" * 4 * count(sh)) for n, sh in tensor_list()])
    return s


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    tiny = tiny_weights()
    sha = hashlib.sha256(tiny).hexdigest()
    for sub in ("yaml", "safetensors"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    with open(os.path.join(out, "tiny.safetensors"), "wb") as f:
        f.write(tiny)
    for name, text in yaml_seeds(sha).items():
        data = text.encode("utf-16") if name == "utf16.yaml" else text.encode("utf-8", "surrogateescape")
        with open(os.path.join(out, "yaml", name), "wb") as f:
            f.write(data)
    for name, data in st_seeds(tiny).items():
        with open(os.path.join(out, "safetensors", name), "wb") as f:
            f.write(data)
    print(f"gen_corpus: wrote {out}/yaml ({len(yaml_seeds(sha))} files), "
          f"{out}/safetensors ({len(st_seeds(tiny))} files), tiny.safetensors sha256 {sha}")


if __name__ == "__main__":
    main()
