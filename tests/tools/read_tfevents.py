#!/usr/bin/env python3
"""Reads TensorBoard event files without TensorFlow, independently of dtrain.

Usage: read_tfevents.py FILE...

Checks each TFRecord frame (uint64 length, masked CRC-32C of it, data, masked
CRC-32C of the data) and decodes the protobuf Event messages by their wire
format. Prints one JSON object per event:
{"file": ..., "wall_time": ..., "step": ..., "file_version": ...} or
{"file": ..., "wall_time": ..., "step": ..., "values": {tag: simple_value}}.
Exits 1 on a bad frame, CRC or message.
"""
import json
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(buf):
    """(field number, wire type, value) of a message; value: int or bytes."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        if i > len(buf):
            raise ValueError("field %d runs past the message" % num)
        yield num, wire, v


def event(data):
    e = {}
    for num, wire, v in fields(data):
        if num == 1 and wire == 1:
            e["wall_time"] = struct.unpack("<d", v)[0]
        elif num == 2 and wire == 0:
            e["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 3 and wire == 2:
            e["file_version"] = v.decode()
        elif num == 5 and wire == 2:
            values = {}
            for vn, vw, value in fields(v):
                if vn != 1 or vw != 2:
                    raise ValueError("Summary field %d" % vn)
                tag, simple = None, None
                for fn, fw, f in fields(value):
                    if fn == 1 and fw == 2:
                        tag = f.decode()
                    elif fn == 2 and fw == 5:
                        simple = struct.unpack("<f", f)[0]
                if tag is None or simple is None:
                    raise ValueError("a Value without tag or simple_value")
                values[tag] = simple
            e["values"] = values
        else:
            raise ValueError("Event field %d (wire type %d)" % (num, wire))
    e.setdefault("step", 0)
    return e


def read(path):
    with open(path, "rb") as f:
        buf = f.read()
    i = 0
    while i < len(buf):
        if i + 12 > len(buf):
            raise ValueError("%s: a truncated header at byte %d" % (path, i))
        head = buf[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (crc,) = struct.unpack("<I", buf[i + 8:i + 12])
        if crc != masked(crc32c(head)):
            raise ValueError("%s: bad length CRC at byte %d" % (path, i))
        data = buf[i + 12:i + 12 + n]
        if len(data) != n or i + 16 + n > len(buf):
            raise ValueError("%s: a truncated record at byte %d" % (path, i))
        (crc,) = struct.unpack("<I", buf[i + 12 + n:i + 16 + n])
        if crc != masked(crc32c(data)):
            raise ValueError("%s: bad data CRC at byte %d" % (path, i))
        e = event(data)
        e["file"] = path
        yield e
        i += 16 + n


def main():
    try:
        for path in sys.argv[1:]:
            for e in read(path):
                print(json.dumps(e))
    except (ValueError, IndexError, UnicodeDecodeError) as err:
        print("read_tfevents: %s" % err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
