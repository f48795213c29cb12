#!/usr/bin/env python3
"""ckpt_meta.py FILE [KEY | KEY=VALUE | -KEY]...: reads or rewrites the
metadata of a safetensors checkpoint that dtrain wrote, keeping its checksum
valid, as someone editing the file by hand with the format in front of them
would (the resume tests use it to plant bad values that only validation, not
the CRC-32 check, can catch).

  KEY        prints the value of KEY (nothing when absent; exit 1)
  KEY=VALUE  sets KEY to the string VALUE (a new key goes last)
  -KEY       removes KEY

The file is rewritten in place when anything is set or removed: the JSON
header gets the new metadata and the "crc32" entry's checksum of the
metadata is recomputed as core/checkpoint/checkpoint.c computes it (zlib's
CRC-32 over key, NUL, value, NUL of every other entry, in file order); the
tensors' bytes and checksums stay as they were.

Exit status: 0, 1 when a printed key is absent, 2 on a usage error or a
file that is not a safetensors checkpoint.
"""

import json
import struct
import sys
import zlib

META = "__metadata__"
CRC = "crc32"


def fail(msg):
    print(f"ckpt_meta.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(f"'{path}' is too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        fail(f"'{path}': header length {n} past the end of the file")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    return header, blob[8 + n :]


def meta_crc(meta):
    crc = 0
    for key, value in meta.items():
        if key == CRC:
            continue
        crc = zlib.crc32(key.encode("utf-8") + b"\0", crc)
        crc = zlib.crc32(value.encode("utf-8") + b"\0", crc)
    return crc


def write(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main(argv):
    if len(argv) < 2:
        fail("usage: ckpt_meta.py FILE [KEY | KEY=VALUE | -KEY]...")
    path = argv[1]
    header, data = read(path)
    meta = header.get(META)
    if not isinstance(meta, dict):
        fail(f"'{path}' has no {META}")
    changed, status = False, 0
    for arg in argv[2:]:
        if "=" in arg:
            key, value = arg.split("=", 1)
            meta[key] = value
            changed = True
        elif arg.startswith("-"):
            meta.pop(arg[1:], None)
            changed = True
        elif arg in meta:
            print(meta[arg])
        else:
            status = 1
    if changed:
        if CRC in meta:
            crcs = json.loads(meta[CRC])
            crcs[META] = f"{meta_crc(meta):08x}"
            # crc32 stays the last entry, as dtrain writes it
            del meta[CRC]
            meta[CRC] = json.dumps(crcs, separators=(",", ":"))
        write(path, header, data)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
