#!/usr/bin/env python3
"""Writes a PNG-folder copy of Fashion-MNIST for models/fashion_png.yaml.

    python3 models/fashion_png.py [--out DIR] [--source DIR] [--limit N]

reads the IDX files of the Debian package dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist/*.gz) and writes

    DIR/train/<class>/<n>.png    60,000 images (28 x 28, 8-bit grayscale)
    DIR/test/<class>/<n>.png     10,000 images

one folder per class, named as Fashion-MNIST's classes, <n> the image's
index in its IDX file (zero-padded, so that the sorted file names keep the
IDX order). DIR defaults to fashion-png/ at the top of the repository, where
models/fashion_png.yaml looks. --limit N writes only the first N images of
each split (for tests). Standard library only.
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
SPLITS = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
          "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def read_idx(path, ndim):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    if magic != 0x800 + ndim:
        sys.exit(f"{path}: magic 0x{magic:08x}, expected 0x{0x800 + ndim:08x}")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def chunk(kind, body):
    return (struct.pack(">I", len(body)) + kind + body +
            struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff))


def png_gray8(width, height, pixels):
    """A PNG file of 8-bit grayscale pixels (bytes, row-major)."""
    raw = b"".join(b"\0" + pixels[y * width:(y + 1) * width] for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) +
            chunk(b"IEND", b""))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(root, "fashion-png"),
                    help="output directory (default: fashion-png/ at the repository's top)")
    ap.add_argument("--source", default="/usr/share/datasets/fashion-mnist",
                    help="directory of the IDX .gz files")
    ap.add_argument("--limit", type=int, default=0,
                    help="write only the first N images of each split (0: all)")
    args = ap.parse_args()

    for split, (images, labels) in SPLITS.items():
        (n, h, w), pixels = read_idx(os.path.join(args.source, images), 3)
        (nl,), lab = read_idx(os.path.join(args.source, labels), 1)
        if nl != n:
            sys.exit(f"{images} has {n} images but {labels} has {nl} labels")
        if args.limit:
            n = min(n, args.limit)
        for c in CLASSES:
            os.makedirs(os.path.join(args.out, split, c), exist_ok=True)
        for i in range(n):
            path = os.path.join(args.out, split, CLASSES[lab[i]], f"{i:05d}.png")
            with open(path, "wb") as f:
                f.write(png_gray8(w, h, pixels[i * h * w:(i + 1) * h * w]))
        print(f"{split}: {n} images in {os.path.join(args.out, split)}")


if __name__ == "__main__":
    main()
