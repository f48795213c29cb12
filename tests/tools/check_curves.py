#!/usr/bin/env python3
"""Checks a picture of `dtrain plot` against the data, without dtrain's code.

Usage:
  check_curves.py size PNG                       prints "WIDTH HEIGHT"
  check_curves.py curves PNG LAYOUT HISTORY...   checks every point
  check_curves.py legend PNG LAYOUT              checks the legend's colours

The PNG is decoded here (zlib, the five row filters; 8-bit RGB only).
LAYOUT is the JSON line of `dtrain plot --json`: each run's colour, each
panel's plot area in pixels and the data at its edges. `curves` maps each
value of each history.csv (run i has colour i) to its pixel, the epoch from 1
on x, and requires the run's colour within 2 pixels of it, in the panel of
the column (val_X in X's panel). `legend` requires every run's colour under
the lowest panel. Exits 1 with the first point that fails.
"""
import csv
import json
import math
import struct
import sys
import zlib


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("%s: not a PNG file" % path)
    i, idat = 8, b""
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0]:
            raise SystemExit("%s: bad CRC in chunk %r" % (path, kind))
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color != 2 or interlace:
                raise SystemExit("%s: not 8-bit RGB without interlace" % path)
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * 3, [], bytearray(w * 3)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - 3] if x >= 3 else 0
            b, c = prev[x], prev[x - 3] if x >= 3 else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, rows


def color_near(rows, w, h, x, y, rgb, r=2):
    for yy in range(max(0, y - r), min(h, y + r + 1)):
        for xx in range(max(0, x - r), min(w, x + r + 1)):
            if tuple(rows[yy][3 * xx:3 * xx + 3]) == rgb:
                return True
    return False


def rgb_of(hexcolor):
    return tuple(int(hexcolor[i:i + 2], 16) for i in (1, 3, 5))


def main():
    what, path = sys.argv[1], sys.argv[2]
    w, h, rows = read_png(path)
    if what == "size":
        print(w, h)
        return 0
    layout = json.load(open(sys.argv[3]))
    colors = [rgb_of(r["color"]) for r in layout["runs"]]
    if what == "legend":
        bottom = max(p["box"][1] + p["box"][3] for p in layout["panels"]) + 40
        for c in colors:
            if not any(color_near(rows, w, h, x, y, c, 0) for y in range(bottom, h) for x in range(w)):
                raise SystemExit("no legend entry in colour %s" % (c,))
        return 0
    panels = {p["metric"]: p for p in layout["panels"]}
    checked = 0
    for run, hist in enumerate(sys.argv[4:]):
        for row in csv.DictReader(open(hist)):
            for col, value in row.items():
                if col == "epoch" or value == "" or not math.isfinite(float(value)):
                    continue
                p = panels[col[4:] if col.startswith("val_") else col]
                bx, by, bw, bh = p["box"]
                (x0, x1), (y0, y1) = p["x"], p["y"]
                x = round(bx + (int(row["epoch"]) + 1 - x0) / (x1 - x0) * (bw - 1))
                y = round(by + (y1 - float(value)) / (y1 - y0) * (bh - 1))
                if not (bx <= x < bx + bw and by <= y < by + bh):
                    raise SystemExit("%s epoch %s %s=%s maps outside its panel" % (hist, row["epoch"], col, value))
                if not color_near(rows, w, h, x, y, colors[run]):
                    raise SystemExit("%s epoch %s %s=%s: no %s pixel near (%d, %d)"
                                     % (hist, row["epoch"], col, value, layout["runs"][run]["color"], x, y))
                checked += 1
    print("%d points" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
