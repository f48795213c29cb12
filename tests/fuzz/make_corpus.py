#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses, tests/fuzz/corpus/NAME/,
from small fixtures like those of the tests (standard library only; the
output is checked in, this script says how it was made).

    python3 tests/fuzz/make_corpus.py

Inputs follow each harness's layout (tests/fuzz/fuzz_NAME.c): an option
byte first where the harness takes one, two files joined by fuzz_split
(2 bytes little-endian: the length of the first) where it reads two.
"""
import gzip
import json
import os
import shutil
import struct
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def gz(b):
    return gzip.compress(b, mtime=0)


def split(a, b):
    return struct.pack("<H", len(a)) + a + b


def write(name, fname, data):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data)


def idx_images(n, h, w):
    return struct.pack(">BBBBIII", 0, 0, 8, 3, n, h, w) + bytes((i * 37) % 256 for i in range(n * h * w))


def idx_labels(n):
    return struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(i % 3 for i in range(n))


def npy(descr, shape, data, version=1):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    start = 10 if version == 1 else 12
    h += " " * ((64 - (start + len(h) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h.encode() + data


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))


def png(w, h, bits, ctype, rows, interlace=0, extra=b""):
    """rows: the raw (filtered) scanlines, already with their filter bytes."""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, ctype, 0, 0, interlace))
            + extra + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def png_rows(w, h, bytes_per_pixel, filt=0):
    return b"".join(bytes([filt]) + bytes((x * 31 + y * 17) % 256 for x in range(w * bytes_per_pixel))
                    for y in range(h))


def safetensors(tensors, meta):
    header, data = {}, b""
    for name, shape, values in tensors:
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)

    # config: the model files users copy and those of the CLI tests.
    for d in ("models", "tests/cli/models"):
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if f.endswith(".yaml"):
                with open(os.path.join(ROOT, d, f), "rb") as fh:
                    write("config", d.replace("/", "_") + "_" + f, fh.read())

    # idx: images and labels, raw and gzipped.
    im, lb = idx_images(12, 4, 4), idx_labels(12)
    write("idx", "raw", split(im, lb))
    write("idx", "gz", split(gz(im), gz(lb)))
    write("idx", "idx2", split(struct.pack(">BBBBII", 0, 0, 8, 2, 3, 5) + bytes(15), idx_labels(3)))
    write("idx", "idx4", split(struct.pack(">BBBBIIII", 0, 0, 8, 4, 2, 2, 2, 3) + bytes(range(24)), idx_labels(2)))

    # npy: x and y in several dtypes and versions.
    x = npy("<f4", "(4, 3)", struct.pack("<12f", *range(12)))
    write("npy", "f4_i8", split(x, npy("<i8", "(4,)", struct.pack("<4q", 0, 1, 2, 1))))
    write("npy", "u1_onehot", split(npy("|u1", "(2, 2, 2)", bytes(range(8))),
                                    npy("<f4", "(2, 3)", struct.pack("<6f", 1, 0, 0, 0, 0, 1))))
    write("npy", "gz_f8", split(gz(npy("<f8", "(3,)", struct.pack("<3d", 1.5, 2.5, 3.5))),
                                gz(npy("|b1", "(3,)", b"\x00\x01\x01"))))
    write("npy", "v2", split(npy("<i2", "(2, 2)", struct.pack("<4h", 1, -2, 3, -4), version=2),
                             npy("<u4", "(2,)", struct.pack("<2I", 0, 1), version=3)))

    # csv: an option byte (header, label, delimiter, skip_rows, class map), then the file.
    fruit = b"weight,length,width,color,fruit\n150,7.5,7.1,0.8,apple\n120,18,3.2,0.9,banana\n" \
            b"130,7.2,7.0,0.7,apple\n90,5.1,5.0,0.6,lime\n"
    write("csv", "header", b"\x00" + fruit)
    write("csv", "numbers", b"\x0a" + b"1,2,0\n3,4,1\n5,6,2\n\n7,8,1\n")
    write("csv", "quoted_tab", b"\x11" + b'"a\tb"\t"x""y"\tc\n1\t2\t0\n3\t4\t1\n')
    write("csv", "gz_bom_crlf", b"\x00" + gz(b"\xef\xbb\xbfa,b\r\n1,2\r\n3,4\r\n"))
    write("csv", "skip_map", b"\xc5" + b"# a comment\nx,y,label\n1,2,a\n3,4,c\n5,6,d\n")
    write("csv", "bad_rows", b"\x00" + b"a,b,c\n1,2\n1,x,0\n1,nan,1\n,,\n1,2,3,4\n")

    # png: an option byte (channels, own size or a resize), then the file.
    write("png", "gray8", b"\x00" + png(4, 3, 8, 0, png_rows(4, 3, 1, 1)))
    write("png", "rgb8_own", b"\x05" + png(3, 2, 8, 2, png_rows(3, 2, 3, 4)))
    write("png", "rgba8", b"\x02" + png(2, 2, 8, 6, png_rows(2, 2, 4, 3)))
    write("png", "gray_alpha16", b"\x06" + png(2, 2, 16, 4, png_rows(2, 2, 4, 2)))
    write("png", "gray1", b"\x00" + png(9, 2, 1, 0, b"\x00\xa5\x80\x00\x5a\x00"))
    plte = chunk(b"PLTE", bytes(range(12))) + chunk(b"tRNS", b"\x00\x80")
    write("png", "palette_trns", b"\x02" + png(4, 2, 2, 3, b"\x00\x1b\x00\xe4", extra=plte))
    write("png", "interlaced", b"\x01" + png(8, 8, 8, 0, bytes(9 * 15), interlace=1))
    text = chunk(b"tEXt", b"Comment\x00hello") + chunk(b"zTXt", b"k\x00\x00" + zlib.compress(b"x" * 100))
    write("png", "text", b"\x00" + png(2, 2, 8, 0, png_rows(2, 2, 1), extra=text))

    # cifar: an option byte (cifar10, cifar100 fine or coarse) with the batch, then the names file.
    rec10 = bytes([3]) + bytes((i * 7) % 256 for i in range(3072))
    rec100 = bytes([5, 42]) + bytes((i * 11) % 256 for i in range(3072))
    names10 = b"\n".join(b"class%d" % i for i in range(10)) + b"\n"
    write("cifar", "cifar10", split(b"\x00" + rec10 * 2, names10))
    write("cifar", "cifar100_fine", split(b"\x02" + rec100, b"\n".join(b"f%d" % i for i in range(100))))
    write("cifar", "cifar100_coarse", split(b"\x03" + rec100 * 2, b"\n".join(b"c%d" % i for i in range(20))))

    # safetensors: what dtrain writes (names, metadata), small.
    write("safetensors", "model", safetensors(
        [("dense/kernel", [2, 3], [0.1 * i for i in range(6)]), ("dense/bias", [3], [0, 0.5, 1]),
         ("optimizer/dense/kernel/m", [2, 3], [0] * 6)],
        {"format": "pt", "dtrain_version": "0.1.0", "epoch": "1", "step": "3", "config": "{}"}))
    write("safetensors", "empty", safetensors([], {}))

    # reader: an option byte (format, shape, chunk, training layout), then the input.
    write("reader", "csv3", b"\x04" + b"1,2,3\n4,5,6\n")
    write("reader", "csv_label", b"\x44" + b"a,b,c,d\n0,1,2,3\n1,4,5,6\n")
    write("reader", "csv_gz", b"\x18" + gz(b"1,2,3,4\n5,6,7,8\n"))
    write("reader", "npy", b"\x01" + npy("<f4", "(2, 3)", struct.pack("<6f", *range(6))))
    write("reader", "npy_shape", b"\x05" + gz(npy("|u1", "(3, 3)", bytes(range(9)))))
    write("reader", "idx", b"\x02" + idx_images(3, 2, 2))
    write("reader", "idx_shape", b"\x1e" + idx_images(2, 2, 2))


if __name__ == "__main__":
    main()
