#!/usr/bin/env python3
"""Checks wsbench's torch tensor pickle (engine_api/protocols/torch_pickle.hpp) against real torch.

SGLang's POST /update_weights_from_tensor loads each `serialized_named_tensors` entry with
MultiprocessingSerializer.deserialize: base64 decode (validate=True), then SafeUnpickler(...).load()
(modal-projects/sglang@8905cbd42:python/sglang/srt/utils/common.py:2678-2692). This script needs torch (the GPU host
has it) and the test executable test_engine_api_torch_pickle, and checks:

  (a) encode -> torch: the executable writes wsb::torch_pickle::encode payloads (every wsbench dtype; 0-d, 2-d, 3-d
      and empty shapes; a non-ASCII name; one payload past the 64 KiB pickle frame; 1200 entries) and their base64
      (WSBENCH_PICKLE_OUT); each is loaded here the way SGLang does, through a copy of SafeUnpickler's allow-list
      logic (common.py:2728-2797), and must give a list of (str, torch.Tensor) tuples of CPU tensors whose names,
      torch dtypes, shapes and bytes equal what wsbench encoded; the first tensor of each payload is also moved to
      the GPU when one is present, as SGLang's _unwrap_tensor does (weight_updater.py:363-366);
  (b) torch -> decode: real torch payloads are written (plain pickle.dumps of CPU tensors, strided views and an
      nn.Parameter; protocols 2, 4 and 5; ForkingPickler output, which MultiprocessingSerializer.serialize is, with
      the file_descriptor and file_system sharing strategies, of a CUDA tensor, and of empty tensors) and handed to
      the executable (WSBENCH_PICKLE_IN); wsb::torch_pickle::decode must return torch's own bytes for the plain
      pickles and the empty ForkingPickler tensors, and refuse the shared-memory ones naming the global
      (torch.multiprocessing.reductions.rebuild_storage_fd / rebuild_storage_filename / rebuild_cuda_tensor).

Usage:
  python3 tests/interop/torch_pickle_check.py --wsbench-test-bin build/tests/test_engine_api_torch_pickle [--out DIR]
  python3 tests/interop/torch_pickle_check.py --write-real-fixtures tests/fixtures/protocols/sglang/tensor_payloads

The second form only writes the torch2xx_* payloads and their expectations that the C++ test reads (the committed
ones come from torch 2.11.0+cu130). Exit codes: 0 every check passed; 1 a mismatch (or the executable failed);
2 torch or the executable is unavailable.
"""

import argparse
import base64
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile

EXIT_PASS, EXIT_MISMATCH, EXIT_UNAVAILABLE = 0, 1, 2

# A copy of SafeUnpickler's checks, modal-projects/sglang@8905cbd42:python/sglang/srt/utils/common.py:2728-2797.
ALLOWED_MODULE_PREFIXES = {
    "builtins.", "collections.", "copyreg.", "functools.", "itertools.", "operator.", "types.", "weakref.",
    "torch.", "torch._tensor.", "torch.storage.", "torch.nn.parameter.", "torch.autograd.function.",
    "torch.distributed.", "torch.distributed._shard.", "torch.distributed._composable.", "torch._C._distributed_c10d.",
    "torch._C._distributed_fsdp.", "torch.distributed.optim.", "multiprocessing.resource_sharer.",
    "multiprocessing.reduction.", "pickletools.", "peft.", "transformers.", "huggingface_hub.",
    "sglang.srt.weight_sync.tensor_bucket.", "sglang.srt.model_executor.model_runner.",
    "sglang.srt.model_executor.model_runner_components.weight_updater.", "sglang.srt.layers.", "sglang.srt.utils.",
    "sglang.srt.disaggregation.", "sglang.srt.managers.", "torch_npu.",
}
DENY_CLASSES = {
    ("builtins", "eval"), ("builtins", "exec"), ("builtins", "compile"), ("os", "system"), ("subprocess", "Popen"),
    ("subprocess", "run"), ("codecs", "decode"), ("types", "CodeType"), ("types", "FunctionType"),
}


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in DENY_CLASSES:
            raise RuntimeError(f"Blocked unsafe class loading ({module}.{name})")
        if any((module + ".").startswith(prefix) for prefix in ALLOWED_MODULE_PREFIXES):
            return super().find_class(module, name)
        raise RuntimeError(f"Blocked unsafe class loading ({module}.{name})")


def sglang_deserialize(data):
    """MultiprocessingSerializer.deserialize with the standard library's base64 in place of pybase64."""
    if isinstance(data, str):
        data = base64.b64decode(data, validate=True)
    return SafeUnpickler(io.BytesIO(data)).load()


def torch_dtypes(torch):
    table = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32,
             "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32,
             "F64": torch.float64, "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64,
             "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
    if hasattr(torch, "float8_e8m0fnu"):
        table["F8_E8M0"] = torch.float8_e8m0fnu
    return table


def tensor_bytes(t):
    return t.detach().cpu().contiguous().reshape(-1).view(__import__("torch").uint8).numpy().tobytes()


def pattern(nbytes, seed):
    return bytearray(((i * 37 + seed * 11 + 5) & 0xFF) for i in range(nbytes))


def make(torch, dtype, shape, seed):
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    es = torch.empty((), dtype=dtype).element_size()
    return torch.frombuffer(pattern(n * es, seed), dtype=torch.uint8).view(dtype).reshape(shape).clone()


def forking_dumps(obj):
    from multiprocessing.reduction import ForkingPickler
    buf = io.BytesIO()
    ForkingPickler(buf).dump(obj)  # MultiprocessingSerializer.serialize, common.py:2665-2669
    return buf.getvalue()


def real_payloads(torch):
    """{file: (payload bytes, expectation)}: expectation is a list of (name, wsbench dtype, tensor) or a global."""
    import torch.multiprocessing as tmp
    names = {v: k for k, v in torch_dtypes(torch).items()}
    out, keep = {}, []
    classic = [("model.bf16.weight", make(torch, torch.bfloat16, (2, 3), 0)),
               ("model.f16.weight", make(torch, torch.float16, (4,), 1)),
               ("model.f32.weight", make(torch, torch.float32, (2, 2, 2), 2)),
               ("model.u8.weight_packed", make(torch, torch.uint8, (7,), 4)),
               ("model.i8.weight", make(torch, torch.int8, (2, 3), 5)),
               ("model.i32.index", make(torch, torch.int32, (3,), 6)),
               ("model.i64.position", make(torch, torch.int64, (2, 2), 7)),
               ("model.f32.scalar", make(torch, torch.float32, (), 8)),
               ("model.bf16.empty", make(torch, torch.bfloat16, (0, 4), 9)),
               ("model.bool.mask", torch.tensor([True, False, True])),
               ("model.f64.weight", make(torch, torch.float64, (2,), 11)),
               ("model.i16.weight", make(torch, torch.int16, (2,), 12))]
    expect_classic = [(n, names[t.dtype], t) for n, t in classic]
    out["torch2xx_plain_classic.bin"] = (pickle.dumps(classic, protocol=4), expect_classic)
    out["torch2xx_plain_p5.bin"] = (pickle.dumps(classic, protocol=5), expect_classic)
    base = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    shared = torch.arange(6, dtype=torch.float32)
    views = [("transposed", base.t()), ("slice", torch.arange(10, dtype=torch.int64)[3:7]),
             ("shared.a", shared), ("shared.b", shared[2:4]), ("strided", base[:, ::2]),
             ("parameter", torch.nn.Parameter(make(torch, torch.float32, (2, 3), 9)))]
    out["torch2xx_plain_views.bin"] = (pickle.dumps(views, protocol=4), [(n, names[t.dtype], t) for n, t in views])
    out["torch2xx_plain_float8.bin"] = (pickle.dumps([("w", make(torch, torch.float8_e4m3fn, (3, 5), 3))], protocol=4),
                                        "torch.storage.UntypedStorage")
    out["torch2xx_plain_p2.bin"] = (pickle.dumps(classic[:1], protocol=2), "_codecs.encode")
    empty = [("e", torch.empty((0, 4), dtype=torch.bfloat16)), ("e8", torch.empty((0,), dtype=torch.float8_e4m3fn))]
    out["torch2xx_forking_empty.bin"] = (forking_dumps(empty), [(n, names[t.dtype], t) for n, t in empty])
    x = [("w", make(torch, torch.bfloat16, (2, 3), 1))]
    keep.append(x)
    out["torch2xx_forking_fd.bin"] = (forking_dumps(x), "torch.multiprocessing.reductions.rebuild_storage_fd")
    strategy = tmp.get_sharing_strategy()
    tmp.set_sharing_strategy("file_system")
    x = [("w", make(torch, torch.float32, (2,), 2))]
    keep.append(x)
    out["torch2xx_forking_file_system.bin"] = (forking_dumps(x),
                                               "torch.multiprocessing.reductions.rebuild_storage_filename")
    tmp.set_sharing_strategy(strategy)
    if torch.cuda.is_available():
        x = [("c", make(torch, torch.bfloat16, (2, 3), 1).cuda())]
        keep.append(x)
        out["torch2xx_forking_cuda.bin"] = (forking_dumps(x), "torch.multiprocessing.reductions.rebuild_cuda_tensor")
    return out, keep


def expectation_json(expect):
    if isinstance(expect, str):
        return {"refused_global": expect}
    return {"tensors": [{"name": n, "dtype": d, "shape": list(t.shape), "hex": tensor_bytes(t).hex()}
                        for n, d, t in expect]}


def write_real_fixtures(torch, out_dir):
    tag = "torch" + "".join(torch.__version__.split("+")[0].split(".")[:2])
    payloads, _keep = real_payloads(torch)
    os.makedirs(out_dir, exist_ok=True)
    files = {}
    for file, (data, expect) in payloads.items():
        name = file.replace("torch2xx", tag)
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
        files[name] = expectation_json(expect)
    with open(os.path.join(out_dir, f"{tag}_expected.json"), "w") as f:
        json.dump({"torch": torch.__version__, "python": sys.version.split()[0], "files": files}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(files)} payloads of torch {torch.__version__} to {out_dir}")


class Report:
    def __init__(self):
        self.rows, self.failed = [], 0

    def add(self, check, case, ok, detail=""):
        self.rows.append({"check": check, "case": case, "ok": bool(ok), "detail": detail})
        if not ok:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {check:<22} {case:<40} {detail}")


def run_test_bin(test_bin, test_filter, env_name, path):
    env = dict(os.environ, **{env_name: path})
    proc = subprocess.run([test_bin, f"--gtest_filter={test_filter}"], env=env, capture_output=True, text=True)
    return proc.returncode, proc.stdout[-4000:] + proc.stderr[-4000:]


def check_encode(torch, test_bin, work, report):
    out = os.path.join(work, "encoded")
    rc, log = run_test_bin(test_bin, "TorchPickleInterop.WritesPayloadsForTheTorchCheck", "WSBENCH_PICKLE_OUT", out)
    if rc != 0 or not os.path.exists(os.path.join(out, "manifest.json")):
        report.add("encode->torch", "test executable", False, f"rc {rc}: {log}")
        return
    dtypes = torch_dtypes(torch)
    for case in json.load(open(os.path.join(out, "manifest.json"))):
        raw = open(os.path.join(out, case["bin"]), "rb").read()
        text = open(os.path.join(out, case["b64"])).read()
        report.add("base64", case["case"], base64.b64decode(text, validate=True) == raw,
                   "b64decode(validate=True) gives the pickle")
        try:
            loaded = sglang_deserialize(text)
        except Exception as e:  # noqa: BLE001 - report whatever SGLang's path would raise
            report.add("encode->torch", case["case"], False, f"SafeUnpickler: {e!r}")
            continue
        problems = []
        if not isinstance(loaded, list) or len(loaded) != len(case["tensors"]):
            problems.append(f"got {type(loaded).__name__} of {len(loaded) if hasattr(loaded, '__len__') else '?'}")
        else:
            for entry, want in zip(loaded, case["tensors"]):
                if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                        and isinstance(entry[1], torch.Tensor)):
                    problems.append(f"entry {entry!r:.80} is not (str, Tensor)")
                    continue
                name, t = entry
                if want["dtype"] not in dtypes:
                    problems.append(f"{want['name']}: this torch lacks {want['dtype']}")
                    continue
                if name != want["name"] or t.dtype != dtypes[want["dtype"]] or list(t.shape) != want["shape"] \
                        or t.device.type != "cpu" or tensor_bytes(t) != base64.b64decode(want["b64"]):
                    problems.append(f"{want['name']}: got {name!r} {t.dtype} {list(t.shape)} on {t.device}")
            if loaded and torch.cuda.is_available():
                loaded[0][1].to("cuda")
        report.add("encode->torch", case["case"], not problems,
                   "; ".join(problems[:5]) or f"{len(case['tensors'])} tensors equal")


def check_decode(torch, test_bin, work, report):
    real = os.path.join(work, "real")
    os.makedirs(real, exist_ok=True)
    payloads, _keep = real_payloads(torch)
    for file, (data, _) in payloads.items():
        with open(os.path.join(real, file), "wb") as f:
            f.write(data)
    rc, log = run_test_bin(test_bin, "TorchPickleInterop.DecodesPayloadsForTheTorchCheck", "WSBENCH_PICKLE_IN", real)
    if rc != 0:
        report.add("torch->decode", "test executable", False, f"rc {rc}: {log}")
        return
    for file, (_, expect) in payloads.items():
        result_path = os.path.join(real, file[:-4] + ".result.json")
        if not os.path.exists(result_path):
            report.add("torch->decode", file, False, "no result written")
            continue
        result = json.load(open(result_path))
        if isinstance(expect, str):
            msg = result.get("error", "")
            report.add("torch->decode", file, f"global {expect}" in msg, msg[:160] or "decoded, expected a refusal")
            continue
        got = result.get("tensors")
        want = [{"name": n, "dtype": d, "shape": list(t.shape), "b64": base64.b64encode(tensor_bytes(t)).decode()}
                for n, d, t in expect]
        report.add("torch->decode", file, got == want,
                   f"{len(want)} tensors equal" if got == want else f"{result.get('error', got)!s:.200}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wsbench-test-bin", help="path of test_engine_api_torch_pickle")
    parser.add_argument("--out", help="folder for the work files and torch_pickle_check.json (default: a temp dir)")
    parser.add_argument("--write-real-fixtures", metavar="DIR", help="only write real torch payloads into DIR")
    args = parser.parse_args()
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"torch is not importable: {e!r}")
        return EXIT_UNAVAILABLE
    if args.write_real_fixtures:
        write_real_fixtures(torch, args.write_real_fixtures)
        return EXIT_PASS
    if not args.wsbench_test_bin or not os.access(args.wsbench_test_bin, os.X_OK):
        print(f"--wsbench-test-bin {args.wsbench_test_bin!r} is not an executable")
        return EXIT_UNAVAILABLE
    work = args.out or tempfile.mkdtemp(prefix="torch-pickle-check-")
    os.makedirs(work, exist_ok=True)
    report = Report()
    check_encode(torch, os.path.abspath(args.wsbench_test_bin), work, report)
    check_decode(torch, os.path.abspath(args.wsbench_test_bin), work, report)
    with open(os.path.join(work, "torch_pickle_check.json"), "w") as f:
        json.dump({"torch": torch.__version__, "python": sys.version.split()[0], "failed": report.failed,
                   "rows": report.rows}, f, indent=1)
    print(f"{len(report.rows) - report.failed} passed, {report.failed} failed (torch {torch.__version__}; {work})")
    return EXIT_MISMATCH if report.failed else EXIT_PASS


if __name__ == "__main__":
    sys.exit(main())
