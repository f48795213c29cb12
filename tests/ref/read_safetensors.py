#!/usr/bin/python3
"""Reads a dtrain checkpoint (safetensors) with NumPy alone.

    python3 read_safetensors.py FILE     prints each tensor's name, shape and sum,
                                         then the metadata keys, as JSON

As a module: load(path) -> (tensors, metadata), tensors a dict of float32
arrays by name ("dense/kernel", "optimizer/dense/kernel/m", ...), metadata a
dict of strings. When the file has dtrain's "crc32" metadata, every tensor's
CRC-32 and the metadata's are checked (zlib, from the standard library).
"""
import json
import struct
import sys
import zlib

import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1"}


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too few for a safetensors header")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if hlen > len(raw) - 8:
        raise ValueError(f"{path}: header length {hlen} exceeds the file")
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    data = raw[8 + hlen:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name!r} has data_offsets beyond the data")
        dtype = np.dtype(DTYPES[t["dtype"]])
        count = int(np.prod(t["shape"], dtype=np.int64))
        if count * dtype.itemsize != end - begin:
            raise ValueError(f"{path}: tensor {name!r}: shape and data_offsets disagree")
        tensors[name] = np.frombuffer(data, dtype, count, begin).reshape(t["shape"])
    if "crc32" in meta:
        crcs = json.loads(meta["crc32"])
        crc = 0
        for key, value in meta.items():
            if key != "crc32":
                crc = zlib.crc32(key.encode() + b"\0" + value.encode() + b"\0", crc)
        if f"{crc:08x}" != crcs["__metadata__"]:
            raise ValueError(f"{path}: the metadata fails its checksum")
        for name, t in header.items():
            begin, end = t["data_offsets"]
            if f"{zlib.crc32(data[begin:end]):08x}" != crcs[name]:
                raise ValueError(f"{path}: tensor {name!r} fails its checksum")
    return tensors, meta


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: read_safetensors.py FILE")
    tensors, meta = load(sys.argv[1])
    out = {"tensors": {n: {"shape": list(a.shape), "sum": float(a.astype(np.float64).sum())}
                       for n, a in tensors.items()},
           "metadata": sorted(meta)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
