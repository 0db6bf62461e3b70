#!/usr/bin/env python3
"""Reads and edits dtc training-state checkpoints (safetensors) for the tests.

  checkpoint_tool.py meta FILE KEY             print __metadata__[KEY]
  checkpoint_tool.py edit IN OUT [--zero PREFIX] [--set KEY=VALUE]...
      zero the tensors whose names start with PREFIX and/or change metadata,
      then recompute dtc.crc32 so that the file is accepted: the controls of
      resume.sh drop one piece of state this way and must see the run differ.
  checkpoint_tool.py torch-load FILE           load it with PyTorch's safetensors
      conventions into a dict (parameters and optimizer/ state), print the keys
"""
import json
import struct
import sys
import zlib


def read(path):
    raw = open(path, "rb").read()
    n, = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def write(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))


def main():
    cmd = sys.argv[1]
    if cmd == "meta":
        header, _ = read(sys.argv[2])
        print(header["__metadata__"][sys.argv[3]])
        return 0
    if cmd == "edit":
        header, data = read(sys.argv[2])
        out, args = sys.argv[3], sys.argv[4:]
        while args:
            flag, value = args[0], args[1]
            args = args[2:]
            if flag == "--zero":
                hits = [k for k in header if k.startswith(value) and k != "__metadata__"]
                if not hits:
                    sys.exit(f"no tensor starts with {value!r}")
                for k in hits:
                    b, e = header[k]["data_offsets"]
                    data[b:e] = bytes(e - b)
            elif flag == "--set":
                key, v = value.split("=", 1)
                if key not in header["__metadata__"]:
                    sys.exit(f"no metadata {key!r}")
                header["__metadata__"][key] = v
            else:
                sys.exit(f"unknown flag {flag}")
        header["__metadata__"]["dtc.crc32"] = "%08x" % zlib.crc32(bytes(data))
        write(out, header, data)
        return 0
    if cmd == "torch-load":
        import torch
        header, data = read(sys.argv[2])
        meta = header.pop("__metadata__")
        sd = {}
        for name, e in header.items():
            b, end = e["data_offsets"]
            dtype = {"F32": torch.float32, "I64": torch.int64}[e["dtype"]]
            sd[name] = torch.frombuffer(bytearray(data[b:end]), dtype=dtype).reshape(e["shape"])
        print(meta["format"], " ".join(sorted(sd)))
        return 0
    sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main())
