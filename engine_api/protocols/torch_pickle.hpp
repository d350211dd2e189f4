#pragma once
// The tensor payload of SGLang's `POST /update_weights_from_tensor`: each entry of `serialized_named_tensors`
// (modal-projects/sglang@8905cbd42:python/sglang/srt/managers/io_struct.py:1596) is read by TP rank r
// (python/sglang/srt/managers/tp_worker.py:176-183) with `MultiprocessingSerializer.deserialize` = base64 decode
// (`validate=True`) + `SafeUnpickler(io.BytesIO(data)).load()` (python/sglang/srt/utils/common.py:2677-2692), and
// with load_format None or "direct" it is a list of `(name, tensor)` tuples handed to the model's load_weights
// (python/sglang/srt/model_executor/model_runner_components/weight_updater.py:276-305; CPU tensors are moved to the
// GPU there, :363-366).
//
// The representation, written by encode and read by decode, is what torch itself pickles for a contiguous CPU tensor
// with plain `pickle.dumps(..., protocol=4)`. Sources: torch 2.11.0 (pytorch/pytorch@v2.11.0, line numbers of the
// 2.11.0 wheel's sources), CPython 3.12 (python/cpython@v3.12.3:Lib/pickle.py):
//
//   torch._utils._rebuild_tensor_v2(                  torch/_tensor.py:323-546 Tensor._reduce_ex_internal, :514
//       torch.storage._load_from_bytes(LEGACY),       torch/storage.py:1247-1250 TypedStorage.__reduce__
//       0, size, stride, False, collections.OrderedDict())     torch/_tensor.py:330, :530-537; torch/_utils.py:227
//
// LEGACY is `torch.save(storage, f, _use_new_zipfile_serialization=False)` (torch/serialization.py:1022-1181
// _legacy_save): five pickles at protocol 2 (DEFAULT_PROTOCOL, :59) - MAGIC_NUMBER 0x1950a86a20f9469cfc6c and
// PROTOCOL_VERSION 1001 (:65-66), sys_info {protocol_version, little_endian, type_sizes {short: 2, int: 4, long: 4}}
// (:1150-1158; the sizes are struct's standard "=h", "=i", "=l", :61-63), the storage as the persistent id
// ("storage", torch.<Type>Storage, key, "cpu", numel, None) (:1139-1146, key str(storage._cdata) :1099), the sorted
// key list (:1174-1175) - then per storage its element count as little-endian int64 and its raw bytes
// (storage._write_file, :1179; torch/csrc/serialization.cpp THPStorage_writeFileRaw with save_size). `_legacy_load`
// (:1625-1888) reads it back: the persistent id's storage type gives the dtype (:1785-1787), the count and bytes
// follow the key list (:1867-1882).
//
// For the dtypes of torch.storage._new_dtypes() (torch/storage.py:539-558: float8_*, uint16/32/64) torch writes
// `_rebuild_tensor_v3(storage, 0, size, stride, False, OrderedDict(), torch.<dtype>)` (torch/_tensor.py:507-540,
// torch/_utils.py:250-266) over an untyped storage named `torch.storage.UntypedStorage`, which its own
// `_legacy_load` cannot read back: `storage_type.dtype` (serialization.py:1787) raises AttributeError for
// UntypedStorage (seen with torch 2.11.0+cu130). encode names `torch.ByteStorage` there instead (element size 1,
// numel = byte count); `_legacy_load` reads it and `_rebuild_tensor_v3` sets the dtype on its bytes
// (torch/_utils.py:266). tests/interop/torch_pickle_check.py loads every dtype this way with torch 2.11.
//
// Why SGLang accepts it: SafeUnpickler.find_class (common.py:2783-2800) admits a global when `module + "."` starts
// with one of ALLOWED_MODULE_PREFIXES (:2729-2769) and it is not in DENY_CLASSES (:2771-2781); every global of the
// outer pickle is in "torch." (torch._utils, torch.storage, the torch module for dtypes) or "collections.".
// `_load_from_bytes` then runs `torch.load(io.BytesIO(b), weights_only=False)` (torch/storage.py:534-535) with
// torch's own unpickler. The payload is all bytes: no shared memory, file descriptor or live sender, so it crosses
// processes, hosts and containers.
//
// Real `MultiprocessingSerializer.serialize` output (`ForkingPickler(buf).dump(obj)`, common.py:2665-2669) is not
// self-contained: importing torch registers torch.multiprocessing's reducers (torch/__init__.py:2291,
// torch/multiprocessing/__init__.py:105, reductions.py:625), so a CPU tensor becomes `rebuild_tensor(torch.Tensor,
// rebuild_typed_storage(rebuild_storage_fd(...) | rebuild_storage_filename(...), dtype), metadata)`
// (torch/multiprocessing/reductions.py:222-399, :579, :592-622), naming a file descriptor passed through the
// sender's resource sharer or a shared-memory file. decode refuses those globals by name; it accepts ForkingPickler's
// one self-contained form, `rebuild_storage_empty` (:570, :613) for a tensor without elements.
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
/// (which torch 2.11 cannot load, so SGLang would fail too), a view reaching past its storage or holding more
/// elements than it (a broadcast), data after STOP, a root that is not a list of (str, tensor) tuples (so the dict of
/// load_format "flattened_bucket", weight_updater.py:282-286, is refused too).
std::vector<NamedTensor> decode(std::string_view pickle_bytes);

/// Standard base64 (RFC 4648 section 4, with padding), as Python's `base64.b64encode` / pybase64 write it; OpenSSL's
/// EVP_EncodeBlock does the work.
std::string base64_encode(std::span<const uint8_t> bytes);

/// The inverse, as strict as `pybase64.b64decode(data, validate=True)` that SGLang applies (common.py:2690): only the
/// 64 alphabet characters, length a multiple of 4, '=' only as the last one or two characters. Throws Error(Format)
/// naming the offset of the first offending character. OpenSSL's EVP_DecodeBlock does the work.
std::vector<uint8_t> base64_decode(std::string_view text);

}  // namespace wsb::torch_pickle
