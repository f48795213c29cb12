"""
What the fixture scripts of tests/ref/ share, on numpy alone (the Keras one
runs in a virtual environment without torch): the safetensors writer, the
YAML of a layer, float32 rounding and the command line.
"""
import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save_safetensors(path, tensors, metadata):
    """tensors: list of (name, float32 array) in file order; metadata: dict of str."""
    header = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def yaml_value(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(e)}" for k, e in v.items()) + "}"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(e) for e in v) + "]"
    return str(v)


def yaml_layer(kind, args):
    if not args:
        return kind
    return kind + ": {" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in args.items()) + "}"


def f32(a):
    """Rounds to float32 and back, so torch sees exactly what dtrain reads."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)



def write_cases(description, cases, run_case, summary):
    """The command line of a fixture script: -o DIR, --list, case names.
    run_case(case, seed) gives (tensors, metadata); summary names what a case
    tests (a metadata key) in the line printed for each file."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("-o", "--out", default=HERE, help="output directory (default: tests/ref)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    opt = ap.parse_args()
    names = [c["name"] for c in cases]
    if opt.list:
        print("\n".join(names))
        return
    unknown = [n for n in opt.cases if n not in names]
    if unknown:
        sys.exit(f"unknown case(s): {', '.join(unknown)}; --list shows them")
    os.makedirs(opt.out, exist_ok=True)
    for c in cases:
        if opt.cases and c["name"] not in opt.cases:
            continue
        # Seeded by name: adding or reordering cases leaves the others' files as they are.
        tensors, meta = run_case(c, seed=zlib.crc32(c["name"].encode()))
        path = os.path.join(opt.out, c["name"] + ".safetensors")
        save_safetensors(path, tensors, meta)
        print(f"{path}: {os.path.getsize(path)} bytes  {meta[summary]}")
