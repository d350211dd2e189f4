#!/usr/bin/env python3
"""Writes the golden torch pickles of tests/fixtures/protocols/sglang/tensor_payloads/ without torch.

The payloads are what `pickle.dumps([(name, tensor), ...], protocol=4)` writes for contiguous CPU tensors in torch
2.11, the representation wsb::torch_pickle::encode emits (engine_api/protocols/torch_pickle.hpp says why SGLang's
SafeUnpickler admits it). CPython's own C pickler writes them: stand-in objects registered under torch's real module
and attribute names (`torch._utils._rebuild_tensor_v2`, `torch.storage._load_from_bytes`, `torch.BFloat16Storage`,
`torch.float8_e4m3fn`, ...) reduce exactly as torch's tensors and storages do, so the opcodes, memo indices and frames
are CPython's, not wsbench's. Sources of each step (pytorch/pytorch@v2.11.0):

  - torch/_tensor.py `Tensor._reduce_ex_internal`: `(_rebuild_tensor_v2, (storage, storage_offset, size, stride,
    requires_grad, OrderedDict()))`; dtypes in `torch.storage._new_dtypes()` (float8_*, uint16/32/64) use
    `_rebuild_tensor_v3` with the dtype appended;
  - torch/storage.py `TypedStorage.__reduce__` / `_StorageBase.__reduce__`: `(_load_from_bytes, (bytes,))` where the
    bytes are `torch.save(storage, _use_new_zipfile_serialization=False)`;
  - torch/serialization.py `_legacy_save`: MAGIC_NUMBER, PROTOCOL_VERSION and sys_info pickled at protocol 2, the
    object pickled with persistent ids ("storage", storage_type, key, location, numel, None), the sorted key list,
    then per storage an int64 element count and the raw bytes (`_write_file`).

One deliberate difference from torch's own output: for the `_rebuild_tensor_v3` dtypes torch 2.11 writes the storage
type `torch.storage.UntypedStorage`, which its own `_legacy_load` cannot read back (`storage_type.dtype`:
AttributeError, seen with torch 2.11.0+cu130); these payloads name `torch.ByteStorage` (element size 1, numel = byte
count) instead, which `_legacy_load` reads and `_rebuild_tensor_v3` reinterprets with the dtype argument.

The storage key is "0" where torch writes `str(storage._cdata)` (an address): the key only pairs the persistent id
with the key list inside one `_load_from_bytes` payload.

Tensor bytes follow `pattern(nbytes, seed)`; `tensor_payload_expected.json` lists each file's tensors (name, wsbench
dtype, shape, seed), and tests/engine_api/test_torch_pickle.cpp regenerates the bytes from it.

Usage: python3 tests/interop/torch_pickle_fixtures.py [--out tests/fixtures/protocols/sglang/tensor_payloads]
Needs only the standard library; `torch_pickle_check.py` checks the same representation against real torch.
"""

import argparse
import collections
import io
import json
import os
import pickle
import sys
import types

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
# wsbench dtype -> (torch dtype attribute, legacy storage class or None for the _rebuild_tensor_v3 dtypes, size)
DTYPES = {
    "BOOL": ("bool", "BoolStorage", 1),
    "U8": ("uint8", "ByteStorage", 1),
    "I8": ("int8", "CharStorage", 1),
    "I16": ("int16", "ShortStorage", 2),
    "I32": ("int32", "IntStorage", 4),
    "I64": ("int64", "LongStorage", 8),
    "F16": ("float16", "HalfStorage", 2),
    "BF16": ("bfloat16", "BFloat16Storage", 2),
    "F32": ("float32", "FloatStorage", 4),
    "F64": ("float64", "DoubleStorage", 8),
    "U16": ("uint16", None, 2),
    "U32": ("uint32", None, 4),
    "U64": ("uint64", None, 8),
    "F8_E4M3": ("float8_e4m3fn", None, 1),
    "F8_E5M2": ("float8_e5m2", None, 1),
    "F8_E8M0": ("float8_e8m0fnu", None, 1),
}


def pattern(nbytes, seed):
    """Deterministic tensor bytes; the C++ test computes the same sequence."""
    return bytes(((i * 37 + seed * 11 + 5) & 0xFF) for i in range(nbytes))


def contiguous_strides(shape):
    # c10's contiguous strides multiply by max(size, 1), so empty dimensions still get distinct strides.
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(strides))


def install_stand_ins():
    """Registers stand-in torch modules; returns them. Never call this in a process that imports real torch."""
    if "torch" in sys.modules and not getattr(sys.modules["torch"], "_wsbench_stand_in", False):
        raise RuntimeError("real torch is imported: the stand-ins would shadow it")
    torch = types.ModuleType("torch")
    torch._wsbench_stand_in = True
    torch.__path__ = []
    utils = types.ModuleType("torch._utils")
    storage = types.ModuleType("torch.storage")
    torch._utils, torch.storage = utils, storage

    def _rebuild_tensor_v2(*args):
        raise RuntimeError("stand-in")

    def _rebuild_tensor_v3(*args):
        raise RuntimeError("stand-in")

    def _load_from_bytes(b):
        raise RuntimeError("stand-in")

    for module, fn in ((utils, _rebuild_tensor_v2), (utils, _rebuild_tensor_v3), (storage, _load_from_bytes)):
        fn.__module__, fn.__qualname__ = module.__name__, fn.__name__
        setattr(module, fn.__name__, fn)

    class DType:
        __module__ = "torch"  # one str object for every dtype, as the module name torch's pickling finds

        def __init__(self, name):
            self.name = name

        def __reduce__(self):
            return self.name  # torch.dtype reduces to its attribute name on the torch module

    for _, (attr, legacy, _) in DTYPES.items():
        setattr(torch, attr, DType(attr))
        if legacy:
            cls = type(legacy, (), {"__module__": "torch"})
            setattr(torch, legacy, cls)
    sys.modules.update({"torch": torch, "torch._utils": utils, "torch.storage": storage})
    return torch


class _Storage:
    def __init__(self, torch, storage_class, numel, data):
        self.torch, self.storage_class, self.numel, self.data = torch, storage_class, numel, data

    def __reduce__(self):
        return (self.torch.storage._load_from_bytes, (legacy_save(self),))


def legacy_save(storage):
    """torch.save(storage, f, _use_new_zipfile_serialization=False) of one CPU storage."""
    f = io.BytesIO()
    sys_info = dict(protocol_version=PROTOCOL_VERSION, little_endian=True,
                    type_sizes=dict(short=2, int=4, long=4))
    pickle.dump(MAGIC_NUMBER, f, protocol=2)
    pickle.dump(PROTOCOL_VERSION, f, protocol=2)
    pickle.dump(sys_info, f, protocol=2)

    class LegacyPickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                return ("storage", obj.storage_class, "0", "cpu", obj.numel, None)
            return None

    LegacyPickler(f, protocol=2).dump(storage)
    pickle.dump(["0"], f, protocol=2)
    f.write(storage.numel.to_bytes(8, "little"))
    f.write(storage.data)
    return f.getvalue()


class _Tensor:
    def __init__(self, torch, dtype, shape, data):
        # A new tuple per tensor, as torch's tuple(self.size()): equal constant tuples of this file are one object,
        # which the pickler would memoize once.
        self.torch, self.dtype, self.shape, self.data = torch, dtype, tuple([int(s) for s in shape]), data

    def __reduce_ex__(self, proto):
        attr, legacy, size = DTYPES[self.dtype]
        hooks = collections.OrderedDict()
        stride = contiguous_strides(self.shape)
        if legacy:
            storage = _Storage(self.torch, getattr(self.torch, legacy), len(self.data) // size, self.data)
            return (self.torch._utils._rebuild_tensor_v2, (storage, 0, self.shape, stride, False, hooks))
        storage = _Storage(self.torch, self.torch.ByteStorage, len(self.data), self.data)
        return (self.torch._utils._rebuild_tensor_v3,
                (storage, 0, self.shape, stride, False, hooks, getattr(self.torch, attr)))


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# Each fixture file: its tensors as (name, wsbench dtype, shape, seed).
CASES = {
    "tensor_payload_dtypes.bin": [
        ("model.embed_tokens.weight", "BF16", (4, 3), 1),
        ("model.layers.0.self_attn.q_proj.weight", "F16", (2, 2, 3), 2),
        ("model.norm.weight", "F32", (5,), 3),
        ("model.layers.0.mlp.experts.w13_weight", "F8_E4M3", (2, 3, 4), 4),
        ("model.layers.0.mlp.experts.w13_weight_scale", "F32", (), 5),
        ("model.layers.0.mlp.experts.w2_weight_packed", "U8", (3, 8), 6),
        ("int8.weight", "I8", (7,), 7),
        ("int32.index", "I32", (2, 2), 8),
        ("int64.position", "I64", (3,), 9),
        ("empty.bias", "BF16", (0, 4), 10),
        ("empty.middle", "F32", (2, 0, 3), 11),
        ("f64.weight", "F64", (2,), 12),
        ("i16.weight", "I16", (3,), 13),
        ("bool.mask", "BOOL", (4,), 14),
        ("u16.weight", "U16", (2,), 15),
        ("u32.weight", "U32", (2,), 16),
        ("u64.weight", "U64", (2,), 17),
        ("f8e5m2.weight", "F8_E5M2", (3,), 18),
        ("f8e8m0.scale", "F8_E8M0", (4,), 19),
        ("wide.shape", "U8", (1, 1, 1, 2, 1), 20),
        ("long.dims", "I8", (300, 1), 21),
    ],
    "tensor_payload_single.bin": [("lm_head.weight", "BF16", (3, 4), 22)],
    "tensor_payload_empty_list.bin": [],
    # Past CPython's 64 KiB frame target: many small tensors, one payload written outside frames, more after it.
    "tensor_payload_frames.bin": (
        [(f"layer.{i}.weight", "I8", (200,), 30 + i) for i in range(300)]
        + [("big.weight", "U8", (70000,), 7)]
        + [(f"tail.{i}", "F32", (3,), 400 + i) for i in range(3)]
    ),
}


def bool_bytes(data):
    return bytes(b & 1 for b in data)  # torch.bool holds 0 or 1


def tensor_bytes(dtype, shape, seed):
    data = pattern(numel(shape) * DTYPES[dtype][2], seed)
    return bool_bytes(data) if dtype == "BOOL" else data


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "protocols",
                                                       "sglang", "tensor_payloads"))
    args = parser.parse_args()
    torch = install_stand_ins()
    os.makedirs(args.out, exist_ok=True)
    expected = {}
    for file, tensors in CASES.items():
        objs = [(name, _Tensor(torch, dtype, shape, tensor_bytes(dtype, shape, seed)))
                for name, dtype, shape, seed in tensors]
        with open(os.path.join(args.out, file), "wb") as f:
            f.write(pickle.dumps(objs, protocol=4))
        expected[file] = [{"name": n, "dtype": d, "shape": list(s), "seed": seed} for n, d, s, seed in tensors]
    with open(os.path.join(args.out, "tensor_payload_expected.json"), "w") as f:
        json.dump({"pattern": "byte i = (i * 37 + seed * 11 + 5) & 0xFF; BOOL keeps bit 0",
                   "python": sys.version.split()[0], "files": expected}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(CASES)} payloads to {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
