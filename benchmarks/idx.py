"""Reads the MNIST-family IDX files (gzipped) into numpy arrays: the one
reader of the Python reference scripts (benchmarks/, test/parity/)."""
import gzip
import numpy as np

def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
