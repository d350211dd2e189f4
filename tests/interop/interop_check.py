#!/usr/bin/env python3
"""Interop check of wsbench against the reference implementations.

wsbench implements safetensors I/O and the E4M3 / E8M0 / E2M1 / BF16 codecs itself (there is no C++ safetensors
library to use). This script checks, value by value, that it agrees with the reference `safetensors` library and
torch's float8 / float4 dtypes:

  (a) structure: `wsbench publish` the tiny presets, load every shard of the FULL v0 publication with
      safetensors (safe_open / load_file): names, dtypes, shapes, files, __metadata__ and the sha256 of every
      tensor's bytes equal `wsbench inspect --json`;
  (b) decode: every tensor's values decoded by torch (float8_e4m3fn, float8_e8m0fnu, the E2M1 path, bf16/f16/f32,
      integers) equal `wsbench inspect --values` bit for bit (NaN as NaN);
  (c) tables: torch's decode of all 256 E4M3 / E5M2 / E8M0 codes, the 16 E2M1 codes and a list of BF16 / F16
      codes, and torch's casts of probe values, equal `wsbench codecs`;
  (d) reverse: checkpoints written by safetensors.torch.save_file (one file, and an index + 2 shards) read back by
      `wsbench inspect --values` with identical names, shapes, dtypes, files, sha256 and values.

Exit codes: 0 every comparison agreed; 1 a mismatch (or wsbench failed); 2 torch / safetensors not importable.
`--self-test` runs the same checks with a pure-stdlib reference (its own safetensors reader/writer and decoders),
so the comparison machinery can be exercised where torch is absent, and then checks that the comparison helpers
catch planted mismatches. See tests/interop/README.md.
"""

import argparse
import fractions
import hashlib
import json
import math
import os
import platform
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

EXIT_PASS, EXIT_MISMATCH, EXIT_UNAVAILABLE = 0, 1, 2
PRESETS = ["glm-tiny-fp8", "kimi-tiny-nvfp4", "gpt-oss-tiny-mxfp4", "llama-tiny-bf16"]
MAX_EXAMPLES = 10
INDEX_NAME = "model.safetensors.index.json"
FLOAT_KINDS = {"e4m3", "e5m2", "e8m0", "e2m1", "bf16", "f16", "f32", "f64"}
# The E2M1 magnitudes of the OCP Microscaling Formats (MX) v1.0 spec, section 5.3.3 (code 0..7; bit 3 is the sign).
OCP_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "U16": 2, "I16": 2, "F16": 2,
              "BF16": 2, "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}


# ---------------------------------------------------------------------------------------------------------------
# Value helpers (stdlib only)

def value_from_json(v):
    """A wsbench JSON value as a Python number: numbers as they are, "nan" / "inf" / "-inf" as floats."""
    if isinstance(v, str):
        if v in ("nan", "inf", "-inf"):
            return float(v)
        raise ValueError(f"unexpected value string {v!r}")
    return v


def value_to_json(v):
    """A Python number in wsbench's JSON spelling (for mismatch examples)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def same_value(wsbench_value, reference_value):
    """Bit-exact equality of one decoded value: floats by their binary64 bits (so -0.0 != 0.0), NaN equals NaN
    whatever its payload (JSON spells every NaN "nan"), integers exactly. An int never equals a float: an integer
    kind must decode to integers on both sides."""
    a = value_from_json(wsbench_value)
    b = reference_value
    if isinstance(a, bool) or isinstance(b, bool):
        a, b = int(a), int(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return struct.pack("<d", a) == struct.pack("<d", b)


def f32_from_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def f32_bits(value):
    return struct.unpack("<I", struct.pack("<f", value))[0]


def parse_hex_bits(text):
    return int(text, 16)


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


class Check:
    """One row of the report: what was compared, how many tensors and values, the mismatches (first 10 kept)."""

    def __init__(self, part, name, method=""):
        self.part = part
        self.name = name
        self.method = method
        self.tensors = 0
        self.values = 0
        self.mismatches = 0
        self.examples = []
        self.notes = []
        self.skipped = 0

    def mismatch(self, **example):
        self.mismatches += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({k: value_to_json(v) for k, v in example.items()})

    def expect_equal(self, what, wsbench_value, reference_value, **where):
        """A structural field (name set, dtype, shape, sha256, ...): exact equality."""
        if wsbench_value != reference_value:
            self.mismatch(field=what, wsbench=wsbench_value, reference=reference_value, **where)

    def compare_values(self, tensor, wsbench_values, reference_values):
        """Element-wise same_value over two value lists of one tensor."""
        self.tensors += 1
        if len(wsbench_values) != len(reference_values):
            self.mismatch(tensor=tensor, field="values_count", wsbench=len(wsbench_values),
                          reference=len(reference_values))
            return
        self.values += len(reference_values)
        for i, (w, r) in enumerate(zip(wsbench_values, reference_values)):
            if not same_value(w, r):
                self.mismatch(tensor=tensor, index=i, wsbench=w, reference=r)

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    @property
    def passed(self):
        return self.mismatches == 0

    def to_json(self):
        return {"part": self.part, "check": self.name, "method": self.method, "tensors": self.tensors,
                "values": self.values, "skipped": self.skipped, "mismatches": self.mismatches,
                "mismatch_examples": self.examples, "notes": self.notes,
                "result": "pass" if self.passed else "fail"}


# ---------------------------------------------------------------------------------------------------------------
# wsbench

class WsbenchError(RuntimeError):
    pass


class Wsbench:
    def __init__(self, path, profiles=None):
        self.path = path
        self.profiles = profiles

    def run(self, *args):
        cmd = [self.path] + (["--profiles", self.profiles] if self.profiles else []) + [str(a) for a in args]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise WsbenchError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def inspect(self, checkpoint, json_path, values=True, decode=()):
        args = ["inspect", checkpoint, "--json", json_path] + (["--values"] if values else [])
        for request in decode:
            args += ["--decode", request]
        self.run(*args)
        return load_inspection(json_path)

    def codecs(self, json_path):
        self.run("codecs", "--json", json_path)
        return load_codecs(json_path)

    def publish_full(self, model, store):
        self.run("publish", "--model", model, "--store", store, "--versions", "0", "--seed", "11")
        return os.path.join(store, "updates", "weight_v000000")


def load_inspection(path):
    """Parses `wsbench inspect --json` and checks its shape, so a schema change fails loudly here."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("format") != "wsbench-inspect/1":
        raise ValueError(f"{path}: format {data.get('format')!r}, expected wsbench-inspect/1")
    for key in ("files", "tensors", "indexed", "total_size"):
        if key not in data:
            raise ValueError(f"{path}: missing field {key!r}")
    for t in data["tensors"]:
        for key in ("name", "dtype", "shape", "file", "offset", "bytes", "sha256", "decode"):
            if key not in t:
                raise ValueError(f"{path}: tensor {t.get('name')!r} lacks {key!r}")
        if "values" in t and len(t["values"]) != t.get("values_count"):
            raise ValueError(f"{path}: tensor {t['name']!r}: values_count {t.get('values_count')} but "
                             f"{len(t['values'])} values")
    return data


def load_codecs(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("format") != "wsbench-codecs/1":
        raise ValueError(f"{path}: format {data.get('format')!r}, expected wsbench-codecs/1")
    for kind, table in data["decode"].items():
        if not len(table["codes"]) == len(table["values"]) == len(table["f32_bits"]):
            raise ValueError(f"{path}: decode table {kind} has unequal list lengths")
    return data


# ---------------------------------------------------------------------------------------------------------------
# Reference implementations. Both expose: versions(), read_file(path) -> (metadata, {name: RefTensor}),
# write_file(path, [(name, dtype, shape, bytes)], metadata), can_write(dtype), decode(tensor, kind) ->
# (values, method), decode_codes(kind, codes) -> (values, bits or None, method), encode(kind, input_bits) ->
# (codes or None, method).

class RefTensor:
    def __init__(self, dtype, shape, data, handle=None):
        self.dtype = dtype      # safetensors spelling, as the reference reader reports it
        self.shape = list(shape)
        self.data = data        # the stored bytes
        self.handle = handle    # the reference's own object (a torch tensor)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def unpack_nibbles(data):
    """Packed E2M1 codes, element 2k in the low nibble of byte k (OCP MX / torch float4_e2m1fn_x2 convention)."""
    out = []
    for b in data:
        out.append(b & 0xF)
        out.append(b >> 4)
    return out


class StdlibReference:
    """Pure-Python reference for --self-test: its own safetensors reader/writer (safetensors spec) and decoders
    written from the format specs (OFP8 rev 1.0, OCP MX v1.0, IEEE 754). Independent of wsbench's C++, but not of
    this script's author; the torch run is the real oracle."""

    name = "stdlib (self-test)"

    def versions(self):
        return {"python": platform.python_version(), "reference": self.name}

    def read_file(self, path):
        with open(path, "rb") as f:
            blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n].decode("utf-8"))
        base = 8 + n
        metadata = header.pop("__metadata__", {}) or {}
        tensors = {}
        for name, e in header.items():
            begin, end = e["data_offsets"]
            tensors[name] = RefTensor(e["dtype"], e["shape"], blob[base + begin:base + end])
        return metadata, tensors

    def can_write(self, dtype):
        return dtype in DTYPE_SIZE

    def write_file(self, path, tensors, metadata):
        header = {}
        if metadata:
            header["__metadata__"] = metadata
        offset = 0
        for name, dtype, shape, data in tensors:
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))

    # -- decoders from the format specs
    @staticmethod
    def e4m3(code):  # OFP8 E4M3: bias 7, no infinity, S.1111.111 NaN
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 7
        if e == 0xF and m == 7:
            return math.nan
        return sign * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))

    @staticmethod
    def e8m0(code):  # MX E8M0: 2^(code-127), 0xFF NaN
        return math.nan if code == 0xFF else 2.0 ** (code - 127)

    @staticmethod
    def e2m1(code):
        v = OCP_E2M1[code & 7]
        return -v if code & 8 else v

    @staticmethod
    def f16(code):
        return struct.unpack("<e", struct.pack("<H", code))[0]

    @staticmethod
    def bf16(code):
        return struct.unpack("<f", struct.pack("<I", code << 16))[0]

    def decode(self, tensor, kind):
        data = tensor.data
        n = len(data)
        if kind == "e4m3":
            return [self.e4m3(b) for b in data], "OFP8 spec formula"
        if kind == "e5m2":  # E5M2 is the upper byte of a binary16
            return [self.f16(b << 8) for b in data], "binary16 upper byte"
        if kind == "e8m0":
            return [self.e8m0(b) for b in data], "2^(code-127)"
        if kind == "e2m1":
            return [self.e2m1(c) for c in unpack_nibbles(data)], "OCP MX table"
        if kind == "bf16":
            return [self.bf16(c) for c in struct.unpack(f"<{n // 2}H", data)], "struct"
        if kind == "f16":
            return list(struct.unpack(f"<{n // 2}e", data)), "struct"
        if kind == "f32":
            return list(struct.unpack(f"<{n // 4}f", data)), "struct"
        if kind == "f64":
            return list(struct.unpack(f"<{n // 8}d", data)), "struct"
        if kind == "int":
            fmt = {"BOOL": "B", "U8": "B", "I8": "b", "U16": "H", "I16": "h", "U32": "I", "I32": "i", "U64": "Q",
                   "I64": "q"}[tensor.dtype]
            return list(struct.unpack(f"<{n // DTYPE_SIZE[tensor.dtype]}{fmt}", data)), "struct"
        raise ValueError(f"no stdlib decoder for {kind}")

    def decode_codes(self, kind, codes):
        fn = {"e4m3": self.e4m3, "e8m0": self.e8m0, "e2m1": self.e2m1, "bf16": self.bf16, "f16": self.f16,
              "e5m2": lambda c: self.f16(c << 8)}[kind]
        values = [fn(c) for c in codes]
        return values, None, "stdlib decoder"

    def encode(self, kind, input_bits):
        inputs = [f32_from_bits(b) for b in input_bits]
        if kind == "e4m3":
            # Round to nearest, ties to the even code, over the finite E4M3 values plus a virtual 480 on code 0x7F:
            # what lands there (|v| > 464) or is NaN/inf is the NaN code (torch's non-saturating cast).
            grid = [(self.e4m3(c), c) for c in range(0x7F)] + [(480.0, 0x7F)]
            out = []
            for v in inputs:
                if math.isnan(v) or math.isinf(v):
                    out.append(0x7F | (0x80 if math.copysign(1, v) < 0 else 0))
                    continue
                out.append(nearest_even(abs(v), grid) | (0x80 if math.copysign(1, v) < 0 else 0))
            return out, "nearest-even over the E4M3 grid"
        if kind == "e2m1":
            grid = [(m, c) for c, m in enumerate(OCP_E2M1)]
            out = []
            for v in inputs:
                if math.isnan(v):
                    out.append(None)
                    continue
                code = 7 if abs(v) >= 6 else nearest_even(abs(v), grid)
                out.append(code | (8 if math.copysign(1, v) < 0 else 0))
            return out, "nearest-even over the E2M1 grid, saturating"
        if kind == "bf16":
            # The two bf16 codes around |v| (truncation and its successor; past the largest finite code the
            # successor is infinity, weighted as 2^128 like the next binade) and nearest-even between them.
            out = []
            for bits in input_bits:
                sign, mag = bits & 0x80000000, bits & 0x7FFFFFFF
                if mag > 0x7F800000:
                    out.append(None)  # NaN: any NaN code is right (compared apart)
                    continue
                lo = mag >> 16
                if mag & 0xFFFF == 0 or lo == 0x7F80:
                    code = lo
                else:
                    grid = [(self.bf16(c) if c != 0x7F80 else 2.0 ** 128, c) for c in (lo, lo + 1)]
                    code = nearest_even(f32_from_bits(mag), grid)
                out.append(code | (sign >> 16))
            return out, "nearest-even between the two neighbouring bf16 codes"
        return None, "no stdlib encoder"


def nearest_even(x, grid):
    """Code of the grid value nearest to x (exact rational distances), ties to the even code."""
    best = None
    xf = fractions.Fraction(x)
    for value, code in grid:
        d = abs(fractions.Fraction(value) - xf)
        if best is None or d < best[0] or (d == best[0] and code % 2 == 0):
            best = (d, code)
    return best[1]


class TorchReference:
    """torch + safetensors: the reference library reads and writes the files, torch's dtypes decode the codes."""

    name = "torch + safetensors"

    def __init__(self):
        import safetensors  # noqa: F401  (imported here so a missing library becomes exit code 2)
        import safetensors.torch
        import torch
        self.torch = torch
        self.safetensors = safetensors
        self.st_torch = safetensors.torch
        self.safe_open = safetensors.safe_open
        t = torch
        self.dtypes = {"BOOL": t.bool, "U8": t.uint8, "I8": t.int8, "I16": t.int16, "I32": t.int32, "I64": t.int64,
                       "F16": t.float16, "BF16": t.bfloat16, "F32": t.float32, "F64": t.float64,
                       "F8_E4M3": t.float8_e4m3fn, "F8_E5M2": t.float8_e5m2}
        for name, attr in (("U16", "uint16"), ("U32", "uint32"), ("U64", "uint64"), ("F8_E8M0", "float8_e8m0fnu")):
            if hasattr(t, attr):
                self.dtypes[name] = getattr(t, attr)
        self.has_e8m0 = hasattr(t, "float8_e8m0fnu")
        self.e2m1_method, self._e2m1_decode = self._pick_e2m1_decoder()
        self.notes = []
        if not self.has_e8m0:
            self.notes.append("torch lacks float8_e8m0fnu: E8M0 decoded as 2^(x-127) computed in torch (float64)")
        self.notes.append(f"E2M1 decode path: {self.e2m1_method}")

    def versions(self):
        return {"python": platform.python_version(), "torch": self.torch.__version__,
                "safetensors": getattr(self.safetensors, "__version__", "unknown"), "reference": self.name,
                "cuda": getattr(self.torch.version, "cuda", None)}

    # -- bytes of a tensor as the reference holds them
    def tensor_bytes(self, t):
        flat = t.detach().reshape(-1).contiguous().view(self.torch.uint8)
        try:
            return flat.numpy().tobytes()
        except Exception:  # torch without numpy
            return bytes(flat.tolist())

    def read_file(self, path):
        loaded = self.st_torch.load_file(path)
        tensors = {}
        with self.safe_open(path, framework="pt") as f:
            metadata = f.metadata() or {}
            keys = list(f.keys())
            if sorted(keys) != sorted(loaded):
                raise RuntimeError(f"{path}: safe_open and load_file disagree on the tensor names")
            for name in keys:
                sl = f.get_slice(name)
                t = loaded[name]
                tensors[name] = RefTensor(sl.get_dtype(), list(sl.get_shape()), self.tensor_bytes(t), t)
        return metadata, tensors

    def can_write(self, dtype):
        return dtype in self.dtypes

    def _from_bytes(self, dtype, shape, data):
        torch = self.torch
        if numel(shape) == 0:
            return torch.empty(shape, dtype=self.dtypes[dtype])
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return raw.view(self.dtypes[dtype]).reshape(shape).clone()

    def write_file(self, path, tensors, metadata):
        self.st_torch.save_file({name: self._from_bytes(dtype, shape, data) for name, dtype, shape, data in tensors},
                                path, metadata=metadata)

    # -- decoding
    def _as(self, tensor, dtype):
        t = tensor.handle.reshape(-1)
        return t if t.dtype == dtype else t.view(dtype)

    def _pick_e2m1_decoder(self):
        """torch's float4_e2m1fn_x2 if it converts to float32 (it does not in torch 2.11, per the fixture notes),
        else torch's own reference decoder in torch.testing._internal.common_quantized, else the OCP table."""
        torch = self.torch
        probe = torch.arange(256, dtype=torch.uint8)
        expected = [SOFT_E2M1[c] for c in unpack_nibbles(bytes(range(256)))]
        if hasattr(torch, "float4_e2m1fn_x2"):
            try:
                got = probe.view(torch.float4_e2m1fn_x2).to(torch.float32).reshape(-1).tolist()
                if len(got) == 512 and all(same_value(a, b) for a, b in zip(got, expected)):
                    def native(codes_u8):
                        return codes_u8.view(torch.float4_e2m1fn_x2).to(torch.float32).reshape(-1).tolist()
                    return "torch.float4_e2m1fn_x2 -> float32", native
            except Exception:
                pass
        try:
            from torch.testing._internal.common_quantized import _floatx_unpacked_to_f32

            def internal(codes_u8):
                low = codes_u8 & 0xF
                high = codes_u8 >> 4
                nibbles = torch.stack([low, high], dim=-1).reshape(-1)
                return _floatx_unpacked_to_f32(nibbles, 2, 1).tolist()
            return ("torch.testing._internal.common_quantized._floatx_unpacked_to_f32 (torch's float4_e2m1fn_x2 "
                    "has no float conversion)"), internal
        except Exception as e:  # e.g. the internal module's test-only imports are absent
            reason = f"{type(e).__name__}: {e}"

        def table(codes_u8):
            return [SOFT_E2M1[c] for c in unpack_nibbles(self.tensor_bytes(codes_u8))]
        return (f"OCP MX E2M1 table in this script (torch has no E2M1 float conversion; torch's reference decoder "
                f"not importable: {reason})"), table

    def _e8m0(self, codes_u8):
        torch = self.torch
        if self.has_e8m0:
            return codes_u8.view(torch.float8_e8m0fnu).to(torch.float32).tolist(), "torch.float8_e8m0fnu"
        v = torch.pow(torch.tensor(2.0, dtype=torch.float64), codes_u8.to(torch.float64) - 127)
        v = torch.where(codes_u8 == 0xFF, torch.tensor(float("nan"), dtype=torch.float64), v)
        return v.to(torch.float32).tolist(), "fallback 2^(x-127) in torch (torch lacks float8_e8m0fnu)"

    def decode(self, tensor, kind):
        torch = self.torch
        if kind == "e4m3":
            return self._as(tensor, torch.float8_e4m3fn).to(torch.float32).tolist(), "torch.float8_e4m3fn"
        if kind == "e5m2":
            return self._as(tensor, torch.float8_e5m2).to(torch.float32).tolist(), "torch.float8_e5m2"
        if kind == "e8m0":
            return self._e8m0(self._as(tensor, torch.uint8))
        if kind == "e2m1":
            return self._e2m1_decode(self._as(tensor, torch.uint8)), self.e2m1_method
        if kind in ("bf16", "f16", "f32", "f64"):
            dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}[kind]
            return self._as(tensor, dt).to(torch.float64).tolist(), f"torch.{str(dt).split('.')[-1]}"
        if kind == "int":
            t = tensor.handle.reshape(-1)
            if t.dtype == torch.bool:
                t = t.to(torch.uint8)
            if t.dtype in (getattr(torch, "uint16", None), getattr(torch, "uint32", None)):
                t = t.to(torch.int64)
            return [int(x) for x in t.tolist()], "torch integer tensor"
        raise ValueError(f"no torch decoder for {kind}")

    def decode_codes(self, kind, codes):
        torch = self.torch
        if kind in ("e4m3", "e5m2", "e8m0", "e2m1"):
            u8 = torch.tensor(codes, dtype=torch.uint8)
            if kind == "e2m1":  # pack two codes per byte, low nibble first
                packed = [codes[i] | ((codes[i + 1] if i + 1 < len(codes) else 0) << 4) for i in range(0, len(codes), 2)]
                values = self._e2m1_decode(torch.tensor(packed, dtype=torch.uint8))[:len(codes)]
                return values, [f32_bits(v) if not math.isnan(v) else None for v in values], self.e2m1_method
            if kind == "e8m0" and not self.has_e8m0:
                values, method = self._e8m0(u8)
                return values, None, method
            dt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e8m0": getattr(torch, "float8_e8m0fnu", None)}[kind]
            f = u8.view(dt).to(torch.float32)
        else:
            signed = [c - 0x10000 if c >= 0x8000 else c for c in codes]
            dt = torch.bfloat16 if kind == "bf16" else torch.float16
            f = torch.tensor(signed, dtype=torch.int16).view(dt).to(torch.float32)
        bits = [b & 0xFFFFFFFF for b in f.view(torch.int32).tolist()]
        return f.tolist(), bits, f"torch.{str(dt).split('.')[-1]} -> float32"

    def encode(self, kind, input_bits):
        torch = self.torch
        signed = [b - 0x100000000 if b >= 0x80000000 else b for b in input_bits]
        x = torch.tensor(signed, dtype=torch.int32).view(torch.float32)
        if kind == "e4m3":
            return x.to(torch.float8_e4m3fn).view(torch.uint8).tolist(), "float32 -> torch.float8_e4m3fn"
        if kind == "e8m0":
            if not self.has_e8m0:
                return None, "torch lacks float8_e8m0fnu"
            try:
                return x.to(torch.float8_e8m0fnu).view(torch.uint8).tolist(), "float32 -> torch.float8_e8m0fnu"
            except Exception as e:
                return None, f"torch cannot cast float32 -> float8_e8m0fnu: {type(e).__name__}: {e}"
        if kind == "bf16":
            return [c & 0xFFFF for c in x.to(torch.bfloat16).view(torch.int16).tolist()], "float32 -> torch.bfloat16"
        if kind == "e2m1":
            try:
                from torch.testing._internal.common_quantized import _f32_to_floatx_unpacked
            except Exception as e:
                codes, _ = StdlibReference().encode("e2m1", input_bits)
                return codes, (f"nearest-even over the OCP E2M1 grid in this script (torch has no float32 -> E2M1 "
                               f"cast; its reference encoder is not importable: {type(e).__name__})")
            return (_f32_to_floatx_unpacked(x, 2, 1).tolist(),
                    "torch.testing._internal.common_quantized._f32_to_floatx_unpacked (no float32 -> E2M1 cast)")
        return None, f"no torch encoder for {kind}"


SOFT_E2M1 = [StdlibReference.e2m1(c) for c in range(16)]


# ---------------------------------------------------------------------------------------------------------------
# (a) + (b): published presets

def expected_files(checkpoint_dir):
    index = os.path.join(checkpoint_dir, INDEX_NAME)
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            return sorted(set(json.load(f)["weight_map"].values()))
    return ["model.safetensors"]


def compare_checkpoint(label, part, ref, checkpoint_dir, inspection, expected=None):
    """Structure check of one checkpoint (names, dtypes, shapes, files, metadata, sha256) and value checks per
    decode kind. `expected` ({name: (dtype, shape, bytes, kind)}) adds what the writer meant to store.
    Returns the check rows."""
    structure = Check(part, f"{label}: names, dtypes, shapes, files, sha256")
    by_kind = {}
    ws_tensors = {t["name"]: t for t in inspection["tensors"]}
    ws_files = {f["file"]: f for f in inspection["files"]}
    files = expected_files(checkpoint_dir)
    structure.expect_equal("files", sorted(ws_files), files)
    seen = set()
    for file in files:
        metadata, tensors = ref.read_file(os.path.join(checkpoint_dir, file))
        if file in ws_files:
            structure.expect_equal("__metadata__", ws_files[file]["metadata"], metadata, file=file)
            structure.expect_equal("tensor_count", ws_files[file]["tensors"], len(tensors), file=file)
        for name, rt in sorted(tensors.items()):
            seen.add(name)
            structure.tensors += 1
            w = ws_tensors.get(name)
            if w is None:
                structure.mismatch(field="name", tensor=name, wsbench="absent", reference=file)
                continue
            structure.expect_equal("file", w["file"], file, tensor=name)
            structure.expect_equal("dtype", w["dtype"], rt.dtype, tensor=name)
            structure.expect_equal("shape", w["shape"], rt.shape, tensor=name)
            structure.expect_equal("bytes", w["bytes"], len(rt.data), tensor=name)
            structure.expect_equal("sha256", w["sha256"], sha256_hex(rt.data), tensor=name)
            if expected is not None:
                dtype, shape, data, kind = expected[name]
                structure.expect_equal("written dtype", rt.dtype, dtype, tensor=name)
                structure.expect_equal("written shape", rt.shape, shape, tensor=name)
                structure.expect_equal("written sha256", sha256_hex(rt.data), sha256_hex(data), tensor=name)
                structure.expect_equal("decode kind", w["decode"], kind, tensor=name)
            kind = w["decode"]
            if kind == "none" or "values" not in w:
                continue
            check = by_kind.get(kind)
            if check is None:
                check = by_kind[kind] = Check(part, f"{label}: {kind} values")
            try:
                values, method = ref.decode(rt, kind)
            except Exception as e:
                check.mismatch(tensor=name, field="reference decode", error=f"{type(e).__name__}: {e}")
                continue
            check.method = method if not check.method or check.method == method else check.method + "; " + method
            check.compare_values(name, w["values"], values)
    for name in sorted(set(ws_tensors) - seen):
        structure.mismatch(field="name", tensor=name, wsbench=ws_tensors[name]["file"], reference="absent")
    structure.values = 0
    return [structure] + [by_kind[k] for k in sorted(by_kind)]


def check_presets(ws, ref, work, models):
    rows = []
    for model in models:
        store = os.path.join(work, "stores", model)
        try:
            ckpt = ws.publish_full(model, store)
            inspection = ws.inspect(ckpt, os.path.join(work, f"inspect-{model}.json"))
        except (WsbenchError, ValueError) as e:
            row = Check("a", f"{model}: publish + inspect")
            row.mismatch(error=str(e))
            rows.append(row)
            continue
        for row in compare_checkpoint(model, "a", ref, ckpt, inspection):
            if row.name.endswith("values"):
                row.part = "b"
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# (c): tables

def check_tables(ws, ref, work, fixture_tables=None):
    rows = []
    try:
        codecs = ws.codecs(os.path.join(work, "codecs.json"))
    except (WsbenchError, ValueError) as e:
        row = Check("c", "wsbench codecs")
        row.mismatch(error=str(e))
        return [row]
    for kind in ("e4m3", "e5m2", "e8m0", "e2m1", "bf16", "f16"):
        table = codecs["decode"].get(kind)
        check = Check("c", f"{kind} decode table")
        if table is None:
            check.mismatch(field="table", wsbench="absent")
            rows.append(check)
            continue
        values, bits, method = ref.decode_codes(kind, table["codes"])
        check.method = method
        check.tensors = 1
        nan_bits_differ = 0
        for i, code in enumerate(table["codes"]):
            check.values += 1
            w = table["values"][i]
            if not same_value(w, values[i]):
                check.mismatch(code=code, wsbench=w, reference=values[i])
            elif bits is not None and bits[i] is not None and parse_hex_bits(table["f32_bits"][i]) != bits[i]:
                if math.isnan(values[i]):
                    nan_bits_differ += 1  # NaN equals NaN; the payload is reported, not failed
                else:
                    check.mismatch(code=code, field="f32_bits", wsbench=table["f32_bits"][i],
                                   reference=f"0x{bits[i]:08x}")
        if nan_bits_differ:
            check.note(f"{nan_bits_differ} NaN code(s) decode to a NaN with another payload than torch's")
        rows.append(check)
    for kind in ("e4m3", "e8m0", "e2m1", "bf16"):
        enc = codecs["encode"].get(kind)
        check = Check("c", f"{kind} encoder (float32 -> code)")
        if enc is None:
            check.mismatch(field="encoder", wsbench="absent")
            rows.append(check)
            continue
        bits = [parse_hex_bits(b) for b in enc["input_bits"]]
        codes, method = ref.encode(kind, bits)
        check.method = method
        if codes is None:
            check.skipped = len(bits)
            check.note(f"not compared: {method}")
            rows.append(check)
            continue
        check.tensors = 1
        for i, (w, r) in enumerate(zip(enc["codes"], codes)):
            x = f32_from_bits(bits[i])
            if w is None:  # wsbench refuses the input (NaN has no E2M1 code)
                check.skipped += 1
                check.note(f"wsbench refuses {value_to_json(x)}: {enc['errors'][i]}")
                continue
            if kind == "bf16" and math.isnan(x):  # any NaN code is right; torch keeps the payload differently
                check.values += 1
                if not ((w & 0x7F80) == 0x7F80 and w & 0x7F and (r & 0x7F80) == 0x7F80 and r & 0x7F):
                    check.mismatch(input=x, input_bits=enc["input_bits"][i], wsbench=w, reference=r)
                continue
            check.values += 1
            if w != r:
                check.mismatch(input=x, input_bits=enc["input_bits"][i], wsbench=w, reference=r)
        rows.append(check)
    if fixture_tables is not None:
        rows.append(check_fixture_tables(codecs, fixture_tables))
    return rows


def check_fixture_tables(codecs, fixture):
    """wsbench's tables against the torch 2.11 tables stored in tests/fixtures/dtypes (usable without torch)."""
    check = Check("c", "decode tables vs tests/fixtures/dtypes (torch 2.11)", fixture.get("source", ""))
    check.tensors = 3
    for kind, key in (("e4m3", "float8_e4m3fn_to_f32_bits"), ("e8m0", "float8_e8m0fnu_to_f32_bits")):
        for code, expected in enumerate(fixture[key]):
            check.values += 1
            got = parse_hex_bits(codecs["decode"][kind]["f32_bits"][code])
            if got != expected:
                check.mismatch(kind=kind, code=code, wsbench=f"0x{got:08x}", reference=f"0x{expected:08x}")
    for code, expected in enumerate(fixture["e2m1_to_f32"]):
        check.values += 1
        if not same_value(codecs["decode"]["e2m1"]["values"][code], float(expected)):
            check.mismatch(kind="e2m1", code=code, wsbench=codecs["decode"]["e2m1"]["values"][code], reference=expected)
    return check


# ---------------------------------------------------------------------------------------------------------------
# (d): checkpoints written by the reference

def write_set(rng, ref):
    """Tensors of every dtype wsbench reads, odd shapes, special values; deterministic bytes. Returns
    [(name, dtype, shape, bytes, expected decode kind)]. Float payloads are random bit patterns (every exponent,
    subnormals, infinities and NaNs included) plus forced special codes."""
    def rand_bytes(n):
        return bytes(rng.getrandbits(8) for _ in range(n))

    def codes16(n, specials):
        vals = list(specials) + [rng.getrandbits(16) for _ in range(n - len(specials))]
        return struct.pack(f"<{n}H", *vals[:n])

    def codes32(n, specials):
        vals = list(specials) + [rng.getrandbits(32) for _ in range(n - len(specials))]
        return struct.pack(f"<{n}I", *vals[:n])

    out = [
        ("attn.bf16_odd", "BF16", [3, 5, 7], codes16(105, [0x7F80, 0xFF80, 0x7FC0, 0x8000, 0x0001, 0x3F80]), "bf16"),
        ("attn.f32_vec", "F32", [13], codes32(13, [0x7F800000, 0x80000000, 0x00000001, 0x3DCCCCCD]), "f32"),
        ("attn.f16_cube", "F16", [2, 3, 3], codes16(18, [0x7C00, 0xFC00, 0x0001, 0x8000, 0x3C00]), "f16"),
        ("fp8.all_codes", "F8_E4M3", [16, 16], bytes(range(256)), "e4m3"),
        ("fp8.odd", "F8_E4M3", [5, 3], rand_bytes(15), "e4m3"),
        ("e5m2.all_codes", "F8_E5M2", [8, 32], bytes(range(256)), "e5m2"),
        ("misc.u8_bytes", "U8", [11], rand_bytes(11), "int"),
        ("misc.i32_block", "I32", [3, 1, 5], rand_bytes(60), "int"),
        ("misc.i64_pair", "I64", [2, 2], struct.pack("<4q", -2**63, 2**62 + 1, -1, 2**53 + 1), "int"),
        ("misc.bool_flags", "BOOL", [3], bytes([1, 0, 1]), "int"),
        ("misc.f64_few", "F64", [3], struct.pack("<3d", math.pi, -0.0, 1e-310), "f64"),
        ("misc.scalar_f32", "F32", [], struct.pack("<f", 3.5), "f32"),
        ("misc.empty_bf16", "BF16", [0, 4], b"", "bf16"),
        ("mlp.experts.gate_up_proj_blocks", "U8", [4, 3], rand_bytes(12), "e2m1"),
        ("mlp.experts.gate_up_proj_scales", "U8", [5], bytes([0, 127, 254, 255, 1]), "e8m0"),
        ("layers.0.mlp.experts.0.down_proj.weight", "U8", [2, 5], rand_bytes(10), "e2m1"),
        ("layers.0.mlp.experts.0.down_proj.weight_scale", "F8_E4M3", [2, 1], bytes([0x38, 0xB0]), "e4m3"),
        ("mx.native_scales", "F8_E8M0", [7], bytes([0, 1, 126, 127, 128, 254, 255]), "e8m0"),
    ]
    kept = [t for t in out if ref.can_write(t[1])]
    skipped = [t[0] for t in out if not ref.can_write(t[1])]
    return kept, skipped


def check_written(ws, ref, work, seed):
    rows = []
    rng = random.Random(seed)
    tensors, skipped = write_set(rng, ref)
    expected = {name: (dtype, shape, data, kind) for name, dtype, shape, data, kind in tensors}
    single = os.path.join(work, "written-single")
    sharded = os.path.join(work, "written-sharded")
    os.makedirs(single)
    os.makedirs(sharded)
    plain = [(n, d, s, b) for n, d, s, b, _ in tensors]
    ref.write_file(os.path.join(single, "model.safetensors"), plain, {"format": "pt", "writer": "interop_check"})
    half = len(plain) // 2
    shards = {"model-00001-of-00002.safetensors": plain[:half], "model-00002-of-00002.safetensors": plain[half:]}
    weight_map = {}
    for file, part in shards.items():
        ref.write_file(os.path.join(sharded, file), part, {"format": "pt"})
        weight_map.update({n: file for n, _, _, _ in part})
    total = sum(len(b) for _, _, _, b in plain)
    with open(os.path.join(sharded, INDEX_NAME), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    for label, ckpt in (("written single file", single), ("written index + 2 shards", sharded)):
        try:
            inspection = ws.inspect(ckpt, os.path.join(work, f"inspect-{os.path.basename(ckpt)}.json"))
        except (WsbenchError, ValueError) as e:
            row = Check("d", f"{label}: inspect")
            row.mismatch(error=str(e))
            rows.append(row)
            continue
        got = compare_checkpoint(label, "d", ref, ckpt, inspection, expected)
        got[0].expect_equal("total_size", inspection["total_size"], total)
        got[0].expect_equal("indexed", inspection["indexed"], ckpt == sharded)
        if skipped:
            got[0].note(f"not written (the reference has no such dtype): {', '.join(skipped)}")
        rows.extend(got)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# Report

def write_report(out_dir, rows, versions, notes, wsbench_path, seconds):
    ok = all(r.passed for r in rows)
    report = {"tool": "tests/interop/interop_check.py", "wsbench": wsbench_path, "versions": versions,
              "host": platform.node(), "platform": platform.platform(), "seconds": round(seconds, 2),
              "notes": notes, "checks": [r.to_json() for r in rows], "result": "pass" if ok else "fail"}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "interop.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    lines = ["# wsbench interop check", "",
             "Reference: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None), "",
             "| check | tensors | values compared | mismatches | result |", "|---|---:|---:|---:|---|"]
    for r in rows:
        result = "pass" if r.passed else "**FAIL**"
        if r.skipped:
            result += f" ({r.skipped} skipped)"
        lines.append(f"| ({r.part}) {r.name} | {r.tensors} | {r.values} | {r.mismatches} | {result} |")
    lines += ["", f"Result: **{'PASS' if ok else 'FAIL'}** ({len(rows)} checks, "
              f"{sum(r.values for r in rows)} values compared).", ""]
    methods = sorted({(r.name, r.method) for r in rows if r.method})
    if methods or notes:
        lines.append("Notes:")
        lines += [f"- {n}" for n in notes]
        lines += [f"- {name}: {method}" for name, method in methods]
        for r in rows:
            lines += [f"- {r.name}: {n}" for n in r.notes]
        lines.append("")
    with open(os.path.join(out_dir, "interop.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return ok


def run_checks(ws, ref, work, models, seed, fixture_tables=None):
    rows = []
    rows += check_presets(ws, ref, work, models)
    rows += check_tables(ws, ref, work, fixture_tables)
    rows += check_written(ws, ref, work, seed)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# --self-test: the helpers catch what they must catch

def self_test_helpers():
    """Planted disagreements the comparison helpers must report, and agreements they must accept."""
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    expect(same_value("nan", math.nan), "nan == nan")
    expect(not same_value("nan", 0.0), "nan != 0")
    expect(not same_value(0.0, -0.0), "0.0 != -0.0")
    expect(same_value(-0.0, -0.0), "-0.0 == -0.0")
    expect(same_value("inf", math.inf) and not same_value("-inf", math.inf), "infinities")
    expect(not same_value(1, 1.0), "int kind vs float")
    expect(same_value(2**63 - 1, 2**63 - 1) and not same_value(2**53 + 1, 2**53), "large integers exact")
    x = f32_from_bits(0x3DCCCCCD)  # 0.1f
    expect(same_value(json.loads(json.dumps(x)), x), "float32 value survives JSON as binary64")
    expect(not same_value(0.1, x), "0.1 (binary64) != 0.1f")
    c = Check("x", "planted")
    c.compare_values("t", [1.0, "nan", 2.0], [1.0, math.nan, 2.5])
    expect(c.mismatches == 1 and c.examples[0]["index"] == 2, "one planted value mismatch found")
    c.compare_values("u", [1.0], [1.0, 2.0])
    expect(c.mismatches == 2 and c.examples[1]["field"] == "values_count", "count mismatch found")
    for i in range(20):
        c.mismatch(i=i)
    expect(len(c.examples) == MAX_EXAMPLES and c.mismatches == 22, "examples capped at 10, all counted")
    return failures


def self_test_planted(ws, ref, work):
    """Edits a real `wsbench inspect` JSON (one value, one sha256, one dtype) and expects compare_checkpoint to
    report exactly those three."""
    ckpt = os.path.join(work, "written-single")
    inspection = load_inspection(os.path.join(work, "inspect-written-single.json"))
    for t in inspection["tensors"]:
        if t["name"] == "fp8.odd":
            t["values"][4] = 1e9
        if t["name"] == "misc.i32_block":
            t["sha256"] = "0" * 64
        if t["name"] == "attn.f16_cube":
            t["dtype"] = "BF16"
    rows = compare_checkpoint("planted", "d", ref, ckpt, inspection)
    found = sorted((e.get("field", "value"), e.get("tensor")) for r in rows for e in r.examples)
    want = [("dtype", "attn.f16_cube"), ("sha256", "misc.i32_block"), ("value", "fp8.odd")]
    return [] if found == want else [f"planted mismatches: found {found}, expected {want}"]


# ---------------------------------------------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wsbench", required=True, help="path of the wsbench binary")
    p.add_argument("--profiles", help="model profiles folder passed to wsbench (default: wsbench's own)")
    p.add_argument("--out", help="output folder for interop.json and interop.md (required unless --self-test)")
    p.add_argument("--models", default=",".join(PRESETS), help="comma-separated presets to publish")
    p.add_argument("--seed", type=int, default=20240607, help="seed of the written checkpoints (part d)")
    p.add_argument("--keep", action="store_true", help="keep the work folder (stores, written checkpoints)")
    p.add_argument("--self-test", action="store_true",
                   help="run every check against a pure-stdlib reference and test the comparison helpers (no torch)")
    args = p.parse_args(argv)
    if not args.self_test and not args.out:
        p.error("--out is required")
    wsbench = os.path.abspath(args.wsbench)
    if not os.access(wsbench, os.X_OK):
        print(f"interop_check: {wsbench} is not an executable", file=sys.stderr)
        return EXIT_MISMATCH

    notes = []
    if args.self_test:
        ref = StdlibReference()
    else:
        try:
            ref = TorchReference()
        except ImportError as e:
            print(f"interop_check: torch and safetensors are required ({type(e).__name__}: {e}); "
                  f"run with --self-test to exercise the script without them", file=sys.stderr)
            return EXIT_UNAVAILABLE
        notes += ref.notes
    versions = ref.versions()
    ws = Wsbench(wsbench, args.profiles)
    work = tempfile.mkdtemp(prefix="wsbench-interop-")
    started = time.time()
    try:
        fixture = None
        fixture_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "dtypes",
                                    "dtype_tables.json")
        if os.path.exists(fixture_path):
            with open(fixture_path, encoding="utf-8") as f:
                fixture = json.load(f)
        models = [m for m in args.models.split(",") if m]
        rows = run_checks(ws, ref, work, models, args.seed, fixture)
        if args.self_test:
            helper = Check("self", "comparison helpers catch planted mismatches", "self_test_helpers + planted edits")
            failures = self_test_helpers() + self_test_planted(ws, ref, work)
            for f in failures:
                helper.mismatch(error=f)
            helper.tensors, helper.values = 1, 12
            rows.append(helper)
        ok = all(r.passed for r in rows)
        if args.out:
            write_report(args.out, rows, versions, notes, wsbench, time.time() - started)
        for r in rows:
            status = "ok  " if r.passed else "FAIL"
            print(f"{status} ({r.part}) {r.name}: {r.tensors} tensors, {r.values} values, {r.mismatches} mismatches"
                  + (f", {r.skipped} skipped" if r.skipped else ""))
            for e in r.examples[:3]:
                print(f"       {json.dumps(e)}")
        print(f"interop_check: {'PASS' if ok else 'FAIL'} ({versions.get('reference')})"
              + (f"; report in {args.out}" if args.out else ""))
        return EXIT_PASS if ok else EXIT_MISMATCH
    finally:
        if args.keep:
            print(f"interop_check: work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
