#!/usr/bin/env python3
"""Independent reader of one record of a generation-3 .cact, for checking `cact-inspect dump`.

Parses the 196-byte header ('<48If'), the 28 codebook floats and the 44-byte records
('<BBHIIIIQQII') itself, decodes the record (FP16, FP32, or CQ: LSB-first packed codes, FP16
group norms, w = (codebook[code] * norm) @ H with H the normalized Walsh-Hadamard matrix of the
group, as the exporter's docstring specifies) and compares it with the .npy written by the tool.
Usage: cact3_values_oracle.py FILE RECORD_INDEX NPY. Prints the max |difference|; exit 1 when
it exceeds 1e-6 of the record's max |value| (float32 summation order) or a shape differs.
"""
import struct
import sys

import numpy as np

HEADER, RECORD = "<48If", "<BBHIIIIQQII"
CODEBOOK_START = {2: 0, 3: 4, 4: 12}


def walsh(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def decode(raw, index):
    hdr = struct.unpack_from(HEADER, raw, 0)
    assert hdr[0] == 0x05E12A84, "not a Needle 3 file"
    num_tensors, cb_len = hdr[1], hdr[2]
    hsize = struct.calcsize(HEADER)
    codebook = np.frombuffer(raw, np.float32, cb_len, hsize).astype(np.float64)
    pos = hsize + 4 * cb_len + struct.calcsize(RECORD) * index
    assert index < num_tensors
    dtype, ndim, _, s0, s1, s2, s3, offset, nbytes, group, bits = struct.unpack_from(RECORD, raw, pos)
    shape = (s0, s1, s2, s3)[:ndim]
    blob = raw[offset:offset + nbytes]
    if dtype == 1:
        return np.frombuffer(blob, np.float16).astype(np.float64).reshape(shape)
    if dtype == 2:
        return np.frombuffer(blob, np.float32).astype(np.float64).reshape(shape)
    assert dtype == 3 and bits in CODEBOOK_START, (dtype, bits)
    out, cols = shape
    in_pad = -(-cols // group) * group
    row_bytes = in_pad * bits // 8
    packed = np.frombuffer(blob[:out * row_bytes], np.uint8).reshape(out, row_bytes)
    stream = np.unpackbits(packed, axis=1, bitorder="little").reshape(out, in_pad, bits)
    codes = (stream.astype(np.int64) << np.arange(bits)).sum(axis=2)
    norms = np.frombuffer(blob[out * row_bytes:], np.float16).astype(np.float64)
    norms = norms.reshape(out, in_pad // group)
    cb = codebook[CODEBOOK_START[bits]:CODEBOOK_START[bits] + (1 << bits)]
    unit = cb[codes].reshape(out, in_pad // group, group)
    w = (unit * norms[:, :, None]) @ walsh(group)
    return w.reshape(out, in_pad)[:, :cols]


def main():
    path, index, npy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(path, "rb") as f:
        want = decode(f.read(), index)
    got = np.load(npy).astype(np.float64)
    if got.shape != want.shape:
        print(f"shape {got.shape} but the record is {want.shape}")
        return 1
    diff = float(np.max(np.abs(got - want))) if want.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    print(f"max |diff| {diff:.3g} of max |value| {scale:.3g}")
    return 0 if diff <= 1e-6 * max(scale, 1e-30) else 1


if __name__ == "__main__":
    sys.exit(main())
