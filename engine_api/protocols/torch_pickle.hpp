#pragma once
// The tensor payload of SGLang's `POST /update_weights_from_tensor`: each entry of `serialized_named_tensors` is the
// base64 of a pickle of a Python list of `(name: str, tensor: torch.Tensor)` tuples, which the engine loads with
// `MultiprocessingSerializer.deserialize` = base64 decode + `SafeUnpickler(...).load()`
// (modal-projects/sglang@8905cbd42:python/sglang/srt/utils/common.py:2678-2692, entry r read by TP rank r in
// python/sglang/srt/managers/tp_worker.py:176-183, the field in python/sglang/srt/managers/io_struct.py:1596).
//
// The representation, written by encode and read by decode, is what torch itself pickles for a contiguous CPU tensor
// (`pickle.dumps(tensor, protocol=4)`, torch 2.11 as seen in its output; sources cite pytorch/pytorch@v2.11.0):
//
//   torch._utils._rebuild_tensor_v2(                               torch/_tensor.py, Tensor._reduce_ex_internal
//       torch.storage._load_from_bytes(LEGACY),                    torch/storage.py, TypedStorage.__reduce__
//       0, size, stride, False, collections.OrderedDict())
//
// where LEGACY is `torch.save(storage, _use_new_zipfile_serialization=False)` (torch/serialization.py, _legacy_save):
// five pickles at protocol 2 (MAGIC_NUMBER 0x1950a86a20f9469cfc6c, PROTOCOL_VERSION 1001, the sys_info dict, the
// storage as persistent id ("storage", torch.<Type>Storage, key, "cpu", numel, None), the key list) followed by the
// element count as little-endian int64 and the raw bytes (torch/csrc/serialization.cpp, THPStorage_writeFileRaw).
// For the dtypes in torch.storage._new_dtypes() (float8_*, uint16/32/64) torch uses
// `_rebuild_tensor_v3(storage, 0, size, stride, False, OrderedDict(), torch.<dtype>)` and names the storage
// `torch.storage.UntypedStorage`, which torch 2.11's own `_legacy_load` cannot read back (it asks the storage type
// for `.dtype`; AttributeError, seen with torch 2.11.0+cu130). encode therefore names `torch.ByteStorage` there
// (element size 1, numel = byte count), which `_legacy_load` reads and `_rebuild_tensor_v3` reinterprets as the dtype.
//
// Why SGLang accepts it: SafeUnpickler.find_class admits a global when `module + "."` starts with an allowed prefix
// (common.py:2728-2797); every global of the outer pickle is under "torch." (torch._utils, torch.storage, torch for
// dtypes) or "collections.", and none is in DENY_CLASSES (common.py:2771-2781). `_load_from_bytes` then runs
// `torch.load(io.BytesIO(b), weights_only=False)` on LEGACY with torch's own unpickler. The payload is all bytes: no
// shared memory, file descriptor or live sender is involved, so it crosses hosts and containers.
//
// Real `MultiprocessingSerializer.serialize` output is `ForkingPickler` with torch.multiprocessing's reducers: a CPU
// tensor becomes `rebuild_tensor(torch.Tensor, rebuild_typed_storage(rebuild_storage_fd(...) or
// rebuild_storage_filename(...), dtype), metadata)` (torch/multiprocessing/reductions.py, reduce_tensor /
// reduce_storage), which names a file descriptor or a shared-memory file of the sending process. decode refuses
// those globals by name; it accepts the one self-contained ForkingPickler form, `rebuild_storage_empty` of a tensor
// with no elements.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"

namespace wsb::torch_pickle {

/// One `(name, tensor)` entry of the payload. `bytes` holds the tensor's elements little-endian in row-major
/// contiguous order: exactly `numel(shape) * dtype_size(dtype)` bytes (a 0-d tensor has shape {} and one element).
/// FP4-packed weights travel as U8 (two E2M1 codes per byte), as torch holds them in uint8 tensors.
struct NamedTensor {
  std::string name;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// The pickle (protocol 4, as `pickle.dumps(list_of_tuples, protocol=4)` frames and memoizes it in CPython's C
/// pickler, Modules/_pickle.c) of `[(name, tensor), ...]` in the representation described above. Every DType is
/// supported: BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64 through `_rebuild_tensor_v2` with the legacy storage class of
/// torch/storage.py `_dtype_to_storage_type_map`; U16 U32 U64 F8_E4M3 F8_E5M2 F8_E8M0 through `_rebuild_tensor_v3`
/// with dtype torch.uint16 / uint32 / uint64 / float8_e4m3fn / float8_e5m2 / float8_e8m0fnu. Shapes of any rank
/// (0-d included) and zero-element tensors are allowed; strides are c10's contiguous strides.
/// Throws Error(Mismatch) when a tensor's byte count differs from numel * dtype size or a dimension is negative, and
/// Error(Format) when a name is not valid UTF-8 (Python decodes names as UTF-8).
std::string encode(const std::vector<NamedTensor>& tensors);

/// The server side: reads a pickle of a list of `(str, tensor)` tuples with a strict pickle VM (protocols 2-5,
/// opcodes of CPython's Lib/pickle.py; frames honoured). Accepts what encode writes and what torch writes for CPU
/// tensors with plain `pickle.dumps` (any contiguous or strided view: `_rebuild_tensor_v2`, `_rebuild_tensor_v3`
/// over a ByteStorage, `torch._utils._rebuild_parameter` for nn.Parameter), and ForkingPickler's
/// `torch.multiprocessing.reductions.rebuild_tensor` over `rebuild_storage_empty`. Views come back contiguous.
/// Globals admitted: torch._utils._rebuild_tensor_v2 / _rebuild_tensor_v3 / _rebuild_parameter,
/// torch.storage._load_from_bytes, collections.OrderedDict, torch.<dtype>, torch.Size, torch.Tensor,
/// torch.storage.UntypedStorage (as rebuild_storage_empty's argument) and those three reductions; inside a
/// `_load_from_bytes` payload only torch.<Type>Storage.
/// Throws Error(Format) for every malformed or refused input, the message naming the opcode and its byte offset (an
/// inner offset inside a `_load_from_bytes` payload is given with the outer one): truncation, an unknown or
/// unsupported opcode, a global outside the list above (named as module.name), ForkingPickler references to shared
/// memory, file descriptors or CUDA IPC (rebuild_storage_fd, rebuild_storage_filename, rebuild_cuda_tensor, ...:
/// wsbench serve accepts only self-contained tensor payloads), torch's UntypedStorage inside `_load_from_bytes`
/// (which torch 2.11 cannot load, so SGLang would fail too), a view reaching past its storage, data after STOP.
std::vector<NamedTensor> decode(std::string_view pickle_bytes);

/// Standard base64 (RFC 4648 section 4, with padding), as Python's `base64.b64encode` / pybase64 write it; OpenSSL's
/// EVP_EncodeBlock does the work.
std::string base64_encode(std::span<const uint8_t> bytes);

/// The inverse, as strict as `pybase64.b64decode(data, validate=True)` that SGLang applies (common.py:2690): only the
/// 64 alphabet characters, length a multiple of 4, '=' only as the last one or two characters. Throws Error(Format)
/// naming the offset of the first offending character. OpenSSL's EVP_DecodeBlock does the work.
std::vector<uint8_t> base64_decode(std::string_view text);

}  // namespace wsb::torch_pickle
