#include "engine_api/protocols/torch_pickle.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/errors.hpp"

// Format facts not cited in the header: CPython 3.12 (python/cpython@v3.12.3). Opcodes: Lib/pickle.py's table
// (PROTO :152, BINGET :132, BINBYTES :169-170, SHORT_BINUNICODE :174, STACK_GLOBAL :181, MEMOIZE :182, FRAME :183).
// Framing: _FRAME_SIZE_MIN 4 and _FRAME_SIZE_TARGET 64 KiB (:196-197), a frame committed at the start of every
// save() once it reached the target (:211, :529-530), payloads of the target size or more written outside frames
// (:241 write_large_bytes); integers by save_long (:745) and encode_long (:348); list items in batches of 1000
// (:930-932); globals at protocol 4 as two memoized strings and STACK_GLOBAL (:1048 save_global); MEMOIZE stores
// at len(memo) (:1648). pickle.dumps runs the C pickler, Modules/_pickle.c, which follows the same rules (save,
// _Pickler_OpcodeBoundary, _Pickler_CommitFrame, _Pickler_write_bytes, batch_list_exact); the golden payloads of
// tests/fixtures/protocols/sglang/tensor_payloads/, written by it, pin them byte for byte.

namespace wsb::torch_pickle {
namespace {

// clang-format off
enum Op : uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I', BININT = 'J',
  BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P', BINPERSID = 'Q', REDUCE = 'R',
  STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U', UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a',
  BUILD = 'b', GLOBAL = 'c', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i',
  LONG_BINGET = 'j', LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85, TUPLE2 = 0x86,
  TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  BINBYTES = 'B', SHORT_BINBYTES = 'C',
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90,
  FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

const char* op_name(uint8_t op) {
  switch (op) {
    case MARK: return "MARK"; case STOP: return "STOP"; case POP: return "POP"; case POP_MARK: return "POP_MARK";
    case DUP: return "DUP"; case FLOAT: return "FLOAT"; case INT: return "INT"; case BININT: return "BININT";
    case BININT1: return "BININT1"; case LONG: return "LONG"; case BININT2: return "BININT2";
    case NONE: return "NONE"; case PERSID: return "PERSID"; case BINPERSID: return "BINPERSID";
    case REDUCE: return "REDUCE"; case STRING: return "STRING"; case BINSTRING: return "BINSTRING";
    case SHORT_BINSTRING: return "SHORT_BINSTRING"; case UNICODE: return "UNICODE";
    case BINUNICODE: return "BINUNICODE"; case APPEND: return "APPEND"; case BUILD: return "BUILD";
    case GLOBAL: return "GLOBAL"; case DICT: return "DICT"; case EMPTY_DICT: return "EMPTY_DICT";
    case APPENDS: return "APPENDS"; case GET: return "GET"; case BINGET: return "BINGET"; case INST: return "INST";
    case LONG_BINGET: return "LONG_BINGET"; case LIST: return "LIST"; case EMPTY_LIST: return "EMPTY_LIST";
    case OBJ: return "OBJ"; case PUT: return "PUT"; case BINPUT: return "BINPUT";
    case LONG_BINPUT: return "LONG_BINPUT";
    case SETITEM: return "SETITEM"; case TUPLE: return "TUPLE"; case EMPTY_TUPLE: return "EMPTY_TUPLE";
    case SETITEMS: return "SETITEMS"; case BINFLOAT: return "BINFLOAT"; case PROTO: return "PROTO";
    case NEWOBJ: return "NEWOBJ"; case EXT1: return "EXT1"; case EXT2: return "EXT2"; case EXT4: return "EXT4";
    case TUPLE1: return "TUPLE1"; case TUPLE2: return "TUPLE2"; case TUPLE3: return "TUPLE3";
    case NEWTRUE: return "NEWTRUE"; case NEWFALSE: return "NEWFALSE"; case LONG1: return "LONG1";
    case LONG4: return "LONG4"; case BINBYTES: return "BINBYTES"; case SHORT_BINBYTES: return "SHORT_BINBYTES";
    case SHORT_BINUNICODE: return "SHORT_BINUNICODE"; case BINUNICODE8: return "BINUNICODE8";
    case BINBYTES8: return "BINBYTES8"; case EMPTY_SET: return "EMPTY_SET"; case ADDITEMS: return "ADDITEMS";
    case FROZENSET: return "FROZENSET"; case NEWOBJ_EX: return "NEWOBJ_EX"; case STACK_GLOBAL: return "STACK_GLOBAL";
    case MEMOIZE: return "MEMOIZE"; case FRAME: return "FRAME"; case BYTEARRAY8: return "BYTEARRAY8";
    case NEXT_BUFFER: return "NEXT_BUFFER"; case READONLY_BUFFER: return "READONLY_BUFFER";
    default: return nullptr;
  }
}
// clang-format on

// torch dtypes by their attribute name on the torch module (what torch.dtype.__reduce__ returns), with the legacy
// storage class of torch/storage.py `_dtype_to_storage_type_map`; an empty class marks torch.storage._new_dtypes(),
// which torch pickles through `_rebuild_tensor_v3`.
struct TorchDType {
  DType dtype;
  std::string_view torch_name;
  std::string_view legacy_storage;
};
constexpr std::array<TorchDType, 16> kTorchDTypes{{
    {DType::BOOL, "bool", "BoolStorage"},
    {DType::U8, "uint8", "ByteStorage"},
    {DType::I8, "int8", "CharStorage"},
    {DType::I16, "int16", "ShortStorage"},
    {DType::I32, "int32", "IntStorage"},
    {DType::I64, "int64", "LongStorage"},
    {DType::F16, "float16", "HalfStorage"},
    {DType::BF16, "bfloat16", "BFloat16Storage"},
    {DType::F32, "float32", "FloatStorage"},
    {DType::F64, "float64", "DoubleStorage"},
    {DType::U16, "uint16", ""},
    {DType::U32, "uint32", ""},
    {DType::U64, "uint64", ""},
    {DType::F8_E4M3, "float8_e4m3fn", ""},
    {DType::F8_E5M2, "float8_e5m2", ""},
    {DType::F8_E8M0, "float8_e8m0fnu", ""},
}};

const TorchDType& torch_dtype(DType dtype) {
  for (const auto& t : kTorchDTypes) {
    if (t.dtype == dtype) return t;
  }
  throw Error(ErrorKind::Mismatch, fmt::format("torch pickle: dtype {} has no torch equivalent", dtype_name(dtype)));
}

// torch/serialization.py: MAGIC_NUMBER = 0x1950A86A20F9469CFC6C, pickled at protocol 2 as LONG1 of 10 bytes.
constexpr std::array<uint8_t, 10> kMagicLE{0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kLegacyProtocolVersion = 1001;
constexpr size_t kMaxRank = 64;

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else
      return false;
    if (n >= s.size() - i) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms and UTF-16 surrogates are rejected as Python's strict UTF-8 codec does.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;
    if (cp >= 0xd800 && cp <= 0xdfff) return false;
    i += n + 1;
  }
  return true;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  // c10's contiguous strides multiply by max(size, 1), as torch reports for empty tensors too.
  std::vector<int64_t> strides(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::optional<uint64_t> checked_numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// ---------------------------------------------------------------------------------------------------------------
// Writer

constexpr size_t kFrameSizeTarget = 64 * 1024;  // Modules/_pickle.c FRAME_SIZE_TARGET
constexpr size_t kFrameSizeMin = 4;             // Modules/_pickle.c FRAME_SIZE_MIN: shorter frames get no header
constexpr size_t kFrameHeaderSize = 9;          // FRAME + 8-byte length

void put_le(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Minimal two's complement little-endian bytes of a non-negative value, as Lib/pickle.py encode_long.
std::string encode_long(uint64_t v) {
  std::string b;
  while (v != 0) {
    b.push_back(static_cast<char>(v & 0xff));
    v >>= 8;
  }
  if (!b.empty() && (static_cast<uint8_t>(b.back()) & 0x80)) b.push_back('\0');
  return b;
}

// The integer opcodes of Modules/_pickle.c save_long at protocol >= 2: BININT1 / BININT2 / BININT by the highest
// nonzero byte of the 32-bit value, LONG1 beyond the signed 32-bit range.
void append_int(std::string& out, int64_t v) {
  if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
    const auto u = static_cast<uint32_t>(static_cast<int32_t>(v));
    if ((u >> 16) != 0) {
      out.push_back(static_cast<char>(BININT));
      put_le(out, u, 4);
    } else if ((u >> 8) != 0) {
      out.push_back(static_cast<char>(BININT2));
      put_le(out, u, 2);
    } else {
      out.push_back(static_cast<char>(BININT1));
      out.push_back(static_cast<char>(u));
    }
    return;
  }
  // Only non-negative values reach here: shapes, strides and element counts.
  const std::string b = encode_long(static_cast<uint64_t>(v));
  out.push_back(static_cast<char>(LONG1));
  out.push_back(static_cast<char>(b.size()));
  out += b;
}

// One protocol-4 pickle, framed and memoized as Modules/_pickle.c does: a frame is opened by the first write after
// the previous one closed, closed at the start of a save() once it holds FRAME_SIZE_TARGET bytes, and before a
// bytes or str payload of FRAME_SIZE_TARGET bytes or more, which is written outside any frame.
class Writer {
 public:
  Writer() {
    out_.push_back(static_cast<char>(PROTO));
    out_.push_back(4);
    framing_ = true;
  }

  // The check at the top of every save() call.
  void boundary() {
    if (framing_ && frame_start_ && out_.size() - *frame_start_ - kFrameHeaderSize >= kFrameSizeTarget) commit_frame();
  }

  void op(uint8_t o) { write(std::string_view(reinterpret_cast<const char*>(&o), 1)); }

  void memoize() {
    op(MEMOIZE);
    ++memo_size_;
  }

  // A memoized object by identity key: BINGET when saved before, else `save` then MEMOIZE.
  template <typename Save>
  void shared(const std::string& key, Save&& save) {
    boundary();
    if (const auto it = memo_.find(key); it != memo_.end()) {
      const uint32_t idx = it->second;
      std::string g;
      if (idx < 256) {
        g.push_back(static_cast<char>(BINGET));
        g.push_back(static_cast<char>(idx));
      } else {
        g.push_back(static_cast<char>(LONG_BINGET));
        put_le(g, idx, 4);
      }
      write(g);
      return;
    }
    save();
    memo_[key] = memo_size_;
    memoize();
  }

  void save_str(std::string_view s) {
    boundary();
    std::string header;
    if (s.size() <= 0xff) {
      header.push_back(static_cast<char>(SHORT_BINUNICODE));
      header.push_back(static_cast<char>(s.size()));
    } else if (s.size() <= 0xffffffffULL) {
      header.push_back(static_cast<char>(BINUNICODE));
      put_le(header, s.size(), 4);
    } else {
      header.push_back(static_cast<char>(BINUNICODE8));
      put_le(header, s.size(), 8);
    }
    write_payload(header, {s});
    memoize();
  }

  void save_shared_str(std::string_view s) {
    shared("str:" + std::string(s), [&] {
      // save_str without its own boundary or MEMOIZE: `shared` adds both.
      std::string header;
      header.push_back(static_cast<char>(SHORT_BINUNICODE));
      header.push_back(static_cast<char>(s.size()));
      write(header);
      write(s);
    });
  }

  // bytes made of parts (the legacy storage blob: its pickles, the count, the tensor's bytes without a copy).
  void save_bytes(std::initializer_list<std::string_view> parts) {
    boundary();
    size_t n = 0;
    for (auto p : parts) n += p.size();
    std::string header;
    if (n <= 0xff) {
      header.push_back(static_cast<char>(SHORT_BINBYTES));
      header.push_back(static_cast<char>(n));
    } else if (n <= 0xffffffffULL) {
      header.push_back(static_cast<char>(BINBYTES));
      put_le(header, n, 4);
    } else {
      header.push_back(static_cast<char>(BINBYTES8));
      put_le(header, n, 8);
    }
    write_payload(header, parts);
    memoize();
  }

  // save_global at protocol 4: module and qualified name as (memoized) strings, STACK_GLOBAL, the object memoized.
  void save_global(std::string_view module, std::string_view name) {
    shared(fmt::format("global:{}.{}", module, name), [&] {
      save_shared_str(module);
      save_str(name);
      op(STACK_GLOBAL);
    });
  }

  void save_int(int64_t v) {
    boundary();
    std::string s;
    append_int(s, v);
    write(s);
  }

  void save_int_tuple(const std::vector<int64_t>& v) {
    boundary();
    if (v.empty()) {
      op(EMPTY_TUPLE);  // the empty tuple is never memoized
      return;
    }
    if (v.size() <= 3) {
      for (int64_t x : v) save_int(x);
      op(static_cast<uint8_t>(TUPLE1 + v.size() - 1));
    } else {
      op(MARK);
      for (int64_t x : v) save_int(x);
      op(TUPLE);
    }
    memoize();
  }

  std::string finish() {
    op(STOP);
    commit_frame();
    return std::move(out_);
  }

 private:
  void write(std::string_view s) {
    if (framing_ && !frame_start_) {
      frame_start_ = out_.size();
      out_.append(kFrameHeaderSize, '\0');
    }
    out_.append(s);
  }

  void write_payload(const std::string& header, std::initializer_list<std::string_view> parts) {
    size_t n = 0;
    for (auto p : parts) n += p.size();
    if (n >= kFrameSizeTarget) {
      commit_frame();
      framing_ = false;
      out_.reserve(out_.size() + header.size() + n + 64);
      write(header);
      for (auto p : parts) write(p);
      framing_ = true;
      return;
    }
    write(header);
    for (auto p : parts) write(p);
  }

  void commit_frame() {
    if (!frame_start_) return;
    const size_t start = *frame_start_;
    const size_t len = out_.size() - start - kFrameHeaderSize;
    if (len >= kFrameSizeMin) {
      out_[start] = static_cast<char>(FRAME);
      for (size_t i = 0; i < 8; ++i) out_[start + 1 + i] = static_cast<char>((len >> (8 * i)) & 0xff);
    } else {
      out_.erase(start, kFrameHeaderSize);
    }
    frame_start_.reset();
  }

  std::string out_;
  bool framing_ = false;
  std::optional<size_t> frame_start_;
  uint32_t memo_size_ = 0;
  std::map<std::string, uint32_t> memo_;
};

// The first three pickles of torch/serialization.py _legacy_save at protocol 2: MAGIC_NUMBER, PROTOCOL_VERSION and
// sys_info = {protocol_version: 1001, little_endian: True, type_sizes: {short: 2, int: 4, long: 4}} (the sizes of
// struct.Struct("=h"/"=i"/"=l"), standard sizes), byte for byte as torch 2.11 writes them.
std::string legacy_prefix() {
  std::string s;
  s += "\x80\x02\x8a\x0a";
  s.append(reinterpret_cast<const char*>(kMagicLE.data()), kMagicLE.size());
  s += ".";
  s += std::string("\x80\x02M\xe9\x03.", 6);
  static constexpr char kSysInfo[] =
      "\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M\xe9\x03X\x0d\x00\x00\x00little_endianq\x02"
      "\x88X\x0a\x00\x00\x00type_sizesq\x03}q\x04(X\x05\x00\x00\x00shortq\x05K\x02X\x03\x00\x00\x00intq"
      "\x06K\x04X\x04\x00\x00\x00longq\x07K\x04uu.";
  s.append(kSysInfo, sizeof(kSysInfo) - 1);
  return s;
}

void append_binunicode(std::string& out, std::string_view s) {
  out.push_back(static_cast<char>(BINUNICODE));
  put_le(out, s.size(), 4);
  out.append(s);
}

// The 4th and 5th pickles of _legacy_save: the storage as persistent id ("storage", torch.<cls>, key, "cpu", numel,
// None) with BINPUT memo as protocol 2 writes it, then the key list ["0"]; then the element count as int64
// (THPStorage_writeFileRaw). torch's key is str(storage._cdata); any string pairs the two within one payload.
std::string legacy_storage_pickles(std::string_view storage_class, int64_t numel) {
  std::string s("\x80\x02(", 3);
  append_binunicode(s, "storage");
  s += std::string("q\x00", 2);
  s += fmt::format("ctorch\n{}\n", storage_class);
  s += "q\x01";
  append_binunicode(s, "0");
  s += "q\x02";
  append_binunicode(s, "cpu");
  s += "q\x03";
  append_int(s, numel);
  s += "Ntq\x04Q.";
  s += std::string("\x80\x02]q\x00", 5);
  append_binunicode(s, "0");
  s += "q\x01"
       "a.";  // split: "\x01a" would read as one hex escape
  put_le(s, static_cast<uint64_t>(numel), 8);
  return s;
}

void save_tensor(Writer& w, const NamedTensor& t, const std::string& prefix) {
  const TorchDType& td = torch_dtype(t.dtype);
  const bool v3 = td.legacy_storage.empty();
  const size_t elem = dtype_size(t.dtype);
  const int64_t numel = static_cast<int64_t>(t.bytes.size() / elem);
  const std::string storage_pickles = v3 ? legacy_storage_pickles("ByteStorage", static_cast<int64_t>(t.bytes.size()))
                                         : legacy_storage_pickles(td.legacy_storage, numel);
  const std::string_view data(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());

  w.boundary();  // the (name, tensor) tuple
  w.save_str(t.name);
  w.boundary();  // the tensor: save_reduce(_rebuild_tensor_v2 or v3, args)
  w.save_global("torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
  w.boundary();  // args: a tuple of 6 or 7 items
  w.op(MARK);
  w.boundary();  // the storage: save_reduce(_load_from_bytes, (bytes,))
  w.save_global("torch.storage", "_load_from_bytes");
  w.boundary();  // (bytes,)
  w.save_bytes({prefix, storage_pickles, data});
  w.op(TUPLE1);
  w.memoize();
  w.op(REDUCE);
  w.memoize();
  w.save_int(0);
  w.save_int_tuple(t.shape);
  w.save_int_tuple(contiguous_strides(t.shape));
  w.boundary();
  w.op(NEWFALSE);
  w.boundary();  // OrderedDict(): save_reduce(OrderedDict, ())
  w.save_global("collections", "OrderedDict");
  w.boundary();
  w.op(EMPTY_TUPLE);
  w.op(REDUCE);
  w.memoize();
  if (v3) w.save_global("torch", td.torch_name);  // torch.dtype reduces to its name on the torch module
  w.op(TUPLE);
  w.memoize();
  w.op(REDUCE);
  w.memoize();
  w.op(TUPLE2);
  w.memoize();
}

}  // namespace

std::string encode(const std::vector<NamedTensor>& tensors) {
  for (const auto& t : tensors) {
    const auto numel = checked_numel(t.shape);
    if (!numel) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("torch pickle: tensor '{}' has an invalid shape {}", t.name, shape_text(t.shape)));
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(*numel, dtype_size(t.dtype), &nbytes) || nbytes != t.bytes.size()) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("torch pickle: tensor '{}' has {} bytes; {} {} needs {}", t.name, t.bytes.size(),
                              dtype_name(t.dtype), shape_text(t.shape), *numel * dtype_size(t.dtype)));
    }
    if (!valid_utf8(t.name)) {
      throw Error(ErrorKind::Format, fmt::format("torch pickle: tensor name '{}' is not valid UTF-8", t.name));
    }
    torch_dtype(t.dtype);
  }
  const std::string prefix = legacy_prefix();
  Writer w;
  w.boundary();  // the list: EMPTY_LIST, then batch_list_exact (APPEND for one item, else MARK ... APPENDS by 1000)
  w.op(EMPTY_LIST);
  w.memoize();
  if (tensors.size() == 1) {
    save_tensor(w, tensors[0], prefix);
    w.op(APPEND);
  } else {
    for (size_t i = 0; i < tensors.size(); i += 1000) {
      w.op(MARK);
      for (size_t j = i; j < std::min(tensors.size(), i + 1000); ++j) save_tensor(w, tensors[j], prefix);
      w.op(APPENDS);
    }
  }
  return w.finish();
}

// ---------------------------------------------------------------------------------------------------------------
// Reader

namespace {

enum class Fn {
  RebuildTensorV2,
  RebuildTensorV3,
  RebuildParameter,
  LoadFromBytes,
  OrderedDict,
  Size,
  TensorClass,
  ParameterClass,
  UntypedStorageClass,
  MpRebuildTensor,
  MpRebuildTypedStorage,
  MpRebuildStorageEmpty,
  DTypeObj,
  LegacyStorageClass,
};

struct Storage {
  DType dtype = DType::U8;  // the element type of a typed storage; U8 for bytes
  bool typed = false;
  std::string_view data;
  // Set while a legacy payload is read: the persistent id's key and element count, data not yet attached.
  std::string key;
  int64_t numel = 0;
};

struct Value;
using Ref = std::shared_ptr<Value>;

enum class Kind { None, Bool, Int, BigInt, Str, Bytes, Tuple, List, Dict, Global, Storage, Tensor };

struct Value {
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  std::string s;           // Str; BigInt: its little-endian bytes; Global: "module.name"
  std::string_view bytes;  // Bytes: a view into the decoded input
  std::vector<Ref> items;  // Tuple, List; Dict: key, value, key, value...
  Fn fn{};                 // Global
  DType dtype{};           // Global DTypeObj / LegacyStorageClass
  Storage storage;
  NamedTensor tensor;  // its name unused
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::BigInt:
      return "int";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "global";
    case Kind::Storage:
      return "storage";
    case Kind::Tensor:
      return "tensor";
  }
  return "?";
}

constexpr std::string_view kSelfContained =
    "wsbench serve accepts only self-contained tensor payloads (plain pickle.dumps of CPU tensors, as "
    "wsb::torch_pickle::encode writes)";

// Where the reader is: the outer payload, or one `_load_from_bytes` payload inside it.
struct Context {
  bool legacy = false;
  size_t outer_offset = 0;  // where the legacy payload starts in the outer pickle
};

class Reader {
 public:
  Reader(std::string_view data, Context ctx) : data_(data), ctx_(ctx) {}
  // The memo lets a pickle put a list into itself; such cycles of shared_ptr would outlive the reader, so every value
  // it made drops its items here.
  ~Reader() {
    for (const auto& v : made_) v->items.clear();
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // One pickle from `pos` to its STOP; returns the value and leaves pos after STOP.
  Ref load();
  size_t pos() const { return pos_; }

  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    if (ctx_.legacy) {
      throw Error(ErrorKind::Format,
                  fmt::format("torch pickle: _load_from_bytes payload at offset {}, inner offset {}: {}",
                              ctx_.outer_offset, at, msg));
    }
    throw Error(ErrorKind::Format, fmt::format("torch pickle: offset {}: {}", at, msg));
  }

 private:
  std::string_view take(size_t n, size_t op_at, uint8_t op) {
    if (data_.size() - pos_ < n) {
      fail(op_at, fmt::format("truncated: {} needs {} bytes, {} left", op_name(op), n, data_.size() - pos_));
    }
    std::string_view v = data_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  uint64_t take_le(size_t n, size_t op_at, uint8_t op) {
    std::string_view b = take(n, op_at, op);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    return v;
  }
  size_t take_len(size_t n, size_t op_at, uint8_t op) {
    const uint64_t len = take_le(n, op_at, op);
    if (len > data_.size() - pos_) {
      fail(op_at, fmt::format("truncated: {} declares {} bytes, {} left", op_name(op), len, data_.size() - pos_));
    }
    return static_cast<size_t>(len);
  }

  Ref pop(size_t at, uint8_t op) {
    if (stack_.size() <= stack_floor()) fail(at, fmt::format("{} on an empty stack", op_name(op)));
    Ref v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Ref& top(size_t at, uint8_t op) {
    if (stack_.size() <= stack_floor()) fail(at, fmt::format("{} on an empty stack", op_name(op)));
    return stack_.back();
  }
  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<Ref> pop_mark(size_t at, uint8_t op) {
    if (marks_.empty()) fail(at, fmt::format("{} without a MARK", op_name(op)));
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                           std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  Ref str(std::string_view s, size_t at, uint8_t op) {
    if (!valid_utf8(s)) fail(at, fmt::format("{} is not valid UTF-8", op_name(op)));
    auto v = make(Kind::Str);
    v->s = std::string(s);
    return v;
  }

  Ref resolve_global(std::string_view module, std::string_view name, size_t at);
  Ref call(const Ref& fn, const Ref& args, size_t at);
  Ref persistent_load(const Ref& pid, size_t at);
  Ref rebuild(const Storage& st, DType dtype, const Value& offset, const Value& size, const Value& stride, size_t at,
              std::string_view what);

  Ref make(Kind k) {
    auto v = std::make_shared<Value>();
    v->kind = k;
    made_.push_back(v);
    return v;
  }

  std::string_view data_;
  Context ctx_;
  std::vector<Ref> made_;
  size_t pos_ = 0;
  size_t frame_end_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
};

Storage parse_legacy(std::string_view blob, size_t outer_offset);

Ref Reader::resolve_global(std::string_view module, std::string_view name, size_t at) {
  auto g = make(Kind::Global);
  g->s = fmt::format("{}.{}", module, name);
  auto admit = [&](Fn fn) {
    g->fn = fn;
    return g;
  };
  if (ctx_.legacy) {
    if (module == "torch") {
      for (const auto& t : kTorchDTypes) {
        if (!t.legacy_storage.empty() && name == t.legacy_storage) {
          g->dtype = t.dtype;
          return admit(Fn::LegacyStorageClass);
        }
      }
    }
    if (module == "torch.storage" && name == "UntypedStorage") {
      fail(at,
           "global torch.storage.UntypedStorage: torch 2.11's _legacy_load reads the storage type's dtype, "
           "which UntypedStorage lacks, so torch (and SGLang) cannot load this payload (plain pickle.dumps of a "
           "float8 / uint16 / uint32 / uint64 tensor); send the storage as torch.ByteStorage, as "
           "wsb::torch_pickle::encode does");
    }
    fail(at, fmt::format("global {} is not allowed in a _load_from_bytes payload (only torch.<Type>Storage)", g->s));
  }
  if (module == "torch._utils") {
    if (name == "_rebuild_tensor_v2") return admit(Fn::RebuildTensorV2);
    if (name == "_rebuild_tensor_v3") return admit(Fn::RebuildTensorV3);
    if (name == "_rebuild_parameter") return admit(Fn::RebuildParameter);
  }
  if (module == "torch.storage" && name == "_load_from_bytes") return admit(Fn::LoadFromBytes);
  if (module == "torch.storage" && name == "UntypedStorage") return admit(Fn::UntypedStorageClass);
  if (module == "collections" && name == "OrderedDict") return admit(Fn::OrderedDict);
  if (module == "torch" && name == "Size") return admit(Fn::Size);
  if (module == "torch" && name == "Tensor") return admit(Fn::TensorClass);
  if (module == "torch.nn.parameter" && name == "Parameter") return admit(Fn::ParameterClass);
  if (module == "torch") {
    for (const auto& t : kTorchDTypes) {
      if (name == t.torch_name) {
        g->dtype = t.dtype;
        return admit(Fn::DTypeObj);
      }
    }
  }
  if (module == "torch.multiprocessing.reductions") {
    if (name == "rebuild_tensor") return admit(Fn::MpRebuildTensor);
    if (name == "rebuild_typed_storage") return admit(Fn::MpRebuildTypedStorage);
    if (name == "rebuild_storage_empty") return admit(Fn::MpRebuildStorageEmpty);
  }
  // torch.multiprocessing.reductions' other rebuilders and multiprocessing's fd passing hand over the sender's
  // memory (reduce_storage: _share_fd_cpu_ / _share_filename_cpu_; reduce_tensor: CUDA IPC handles).
  if (module == "torch.multiprocessing.reductions" || module == "multiprocessing.resource_sharer" ||
      module == "multiprocessing.reduction") {
    const std::string_view what = name == "rebuild_storage_fd"                  ? "a file descriptor"
                                  : name == "rebuild_storage_filename"          ? "a shared-memory file"
                                  : name.find("cuda") != std::string_view::npos ? "a CUDA IPC handle"
                                                                                : "shared memory or a file descriptor";
    fail(at, fmt::format("global {} refers to {} of the sending process; {}", g->s, what, kSelfContained));
  }
  fail(at, fmt::format("global {} is not allowed; {}", g->s, kSelfContained));
}

bool is_empty_dict(const Value& v) { return v.kind == Kind::Dict && v.items.empty(); }

std::vector<int64_t> int_tuple(const Value& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.items) out.push_back(x->i);
  return out;
}

bool all_ints(const Value& v) {
  if (v.kind != Kind::Tuple) return false;
  return std::all_of(v.items.begin(), v.items.end(), [](const Ref& x) { return x->kind == Kind::Int; });
}

Ref Reader::rebuild(const Storage& st, DType dtype, const Value& offset, const Value& size, const Value& stride,
                    size_t at, std::string_view what) {
  if (offset.kind != Kind::Int || !all_ints(size) || !all_ints(stride)) {
    fail(at, fmt::format("{} needs an int offset and int tuples for size and stride", what));
  }
  const std::vector<int64_t> shape = int_tuple(size);
  const std::vector<int64_t> strides = int_tuple(stride);
  if (shape.size() != strides.size() || shape.size() > kMaxRank) {
    fail(at, fmt::format("{}: size {} and stride {} disagree", what, shape_text(shape), shape_text(strides)));
  }
  const auto numel = checked_numel(shape);
  if (!numel || offset.i < 0 || std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s < 0; })) {
    fail(at, fmt::format("{}: invalid view: offset {}, size {}, stride {}", what, offset.i, shape_text(shape),
                         shape_text(strides)));
  }
  const size_t elem = dtype_size(dtype);
  auto out = make(Kind::Tensor);
  out->tensor.dtype = dtype;
  out->tensor.shape = shape;
  if (*numel == 0) return out;
  // The last element the view reaches must lie inside the storage, as torch's set_ requires.
  uint64_t last = static_cast<uint64_t>(offset.i);
  bool overflow = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    uint64_t step = 0;
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(shape[d] - 1), static_cast<uint64_t>(strides[d]), &step);
    overflow |= __builtin_add_overflow(last, step, &last);
  }
  uint64_t end_byte = 0;
  overflow |= __builtin_add_overflow(last, 1, &end_byte) || __builtin_mul_overflow(end_byte, elem, &end_byte);
  uint64_t total = 0;
  overflow |= __builtin_mul_overflow(*numel, elem, &total);
  if (overflow || end_byte > st.data.size()) {
    fail(at, fmt::format("{}: view (offset {}, size {}, stride {}) of {} reaches past its {}-byte storage", what,
                         offset.i, shape_text(shape), shape_text(strides), dtype_name(dtype), st.data.size()));
  }
  // More elements than the storage holds means a broadcast (stride 0) view; materializing it would let a small
  // payload demand any amount of memory, and no checkpoint tensor is one.
  if (total > st.data.size()) {
    fail(at,
         fmt::format("{}: view (offset {}, size {}, stride {}) of {} needs {} bytes, more than its {}-byte "
                     "storage holds (a broadcast view); send tensors contiguous",
                     what, offset.i, shape_text(shape), shape_text(strides), dtype_name(dtype), total, st.data.size()));
  }
  out->tensor.bytes.resize(total);
  uint8_t* dst = out->tensor.bytes.data();
  const auto* src = reinterpret_cast<const uint8_t*>(st.data.data());
  const std::vector<int64_t> want = contiguous_strides(shape);
  bool contiguous = true;
  for (size_t d = 0; d < shape.size(); ++d) contiguous &= shape[d] == 1 || strides[d] == want[d];
  if (contiguous) {
    std::memcpy(dst, src + static_cast<uint64_t>(offset.i) * elem, total);
    return out;
  }
  // A strided view (a transpose, a slice): gather it element by element in row-major order.
  std::vector<int64_t> index(shape.size(), 0);
  for (uint64_t n = 0; n < *numel; ++n) {
    uint64_t e = static_cast<uint64_t>(offset.i);
    for (size_t d = 0; d < shape.size(); ++d) e += static_cast<uint64_t>(index[d]) * static_cast<uint64_t>(strides[d]);
    std::memcpy(dst + n * elem, src + e * elem, elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

Ref Reader::call(const Ref& fn, const Ref& args_ref, size_t at) {
  if (fn->kind != Kind::Global) fail(at, fmt::format("REDUCE calls a {}, not a global", kind_name(fn->kind)));
  if (args_ref->kind != Kind::Tuple) fail(at, fmt::format("REDUCE arguments are a {}", kind_name(args_ref->kind)));
  const auto& a = args_ref->items;
  auto bad = [&](std::string_view expected) {
    std::string got;
    for (size_t i = 0; i < a.size(); ++i) got += fmt::format("{}{}", i ? ", " : "", kind_name(a[i]->kind));
    fail(at, fmt::format("{}({}): expected ({})", fn->s, got, expected));
  };
  switch (fn->fn) {
    case Fn::OrderedDict: {
      if (!a.empty()) bad("");
      return make(Kind::Dict);
    }
    case Fn::Size: {
      if (a.size() != 1 || !all_ints(*a[0])) bad("tuple of int");
      return a[0];
    }
    case Fn::LoadFromBytes: {
      if (a.size() != 1 || a[0]->kind != Kind::Bytes) bad("bytes");
      const size_t outer = static_cast<size_t>(a[0]->bytes.data() - data_.data());
      auto v = make(Kind::Storage);
      v->storage = parse_legacy(a[0]->bytes, outer);
      return v;
    }
    case Fn::RebuildTensorV2:
    case Fn::RebuildTensorV3: {
      // torch/_utils.py: _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
      // metadata=None); _rebuild_tensor_v3(..., backward_hooks, dtype, metadata=None).
      const bool v3 = fn->fn == Fn::RebuildTensorV3;
      const size_t n = v3 ? 7 : 6;
      const std::string_view expected = v3 ? "storage, int, tuple, tuple, bool, OrderedDict, dtype[, dict]"
                                           : "storage, int, tuple, tuple, bool, OrderedDict[, dict]";
      if ((a.size() != n && a.size() != n + 1) || a[0]->kind != Kind::Storage || a[4]->kind != Kind::Bool ||
          !is_empty_dict(*a[5]) || (v3 && !(a[6]->kind == Kind::Global && a[6]->fn == Fn::DTypeObj))) {
        bad(expected);
      }
      if (a.size() == n + 1 && !is_empty_dict(*a[n]))
        fail(at, fmt::format("{}: tensor metadata is not supported", fn->s));
      const Storage& st = a[0]->storage;
      if (!v3 && !st.typed) fail(at, fmt::format("{} needs a typed storage", fn->s));
      return rebuild(st, v3 ? a[6]->dtype : st.dtype, *a[1], *a[2], *a[3], at, fn->s);
    }
    case Fn::RebuildParameter: {
      // torch/_utils.py _rebuild_parameter(data, requires_grad, backward_hooks): nn.Parameter of a tensor.
      if (a.size() != 3 || a[0]->kind != Kind::Tensor || a[1]->kind != Kind::Bool || !is_empty_dict(*a[2])) {
        bad("tensor, bool, OrderedDict");
      }
      return a[0];
    }
    case Fn::MpRebuildTensor: {
      // torch/multiprocessing/reductions.py rebuild_tensor(cls, storage, metadata), metadata = (storage_offset,
      // size, stride, requires_grad).
      if (a.size() != 3 ||
          !(a[0]->kind == Kind::Global && (a[0]->fn == Fn::TensorClass || a[0]->fn == Fn::ParameterClass)) ||
          a[1]->kind != Kind::Storage || a[2]->kind != Kind::Tuple || a[2]->items.size() != 4 ||
          a[2]->items[3]->kind != Kind::Bool) {
        bad("torch.Tensor, storage, (int, Size, tuple, bool)");
      }
      const Storage& st = a[1]->storage;
      if (!st.typed) fail(at, fmt::format("{} needs a typed storage", fn->s));
      const auto& m = a[2]->items;
      return rebuild(st, st.dtype, *m[0], *m[1], *m[2], at, fn->s);
    }
    case Fn::MpRebuildTypedStorage: {
      if (a.size() != 2 || a[0]->kind != Kind::Storage || a[0]->storage.typed ||
          !(a[1]->kind == Kind::Global && a[1]->fn == Fn::DTypeObj)) {
        bad("UntypedStorage, dtype");
      }
      auto v = make(Kind::Storage);
      v->storage = a[0]->storage;
      v->storage.typed = true;
      v->storage.dtype = a[1]->dtype;
      if (v->storage.data.size() % dtype_size(v->storage.dtype) != 0) {
        fail(at, fmt::format("{}: {} bytes are not whole {} elements", fn->s, v->storage.data.size(),
                             dtype_name(v->storage.dtype)));
      }
      return v;
    }
    case Fn::MpRebuildStorageEmpty: {
      // reduce_storage special-cases empty storages: rebuild_storage_empty(cls) returns cls(), no shared memory.
      if (a.size() != 1 || !(a[0]->kind == Kind::Global && a[0]->fn == Fn::UntypedStorageClass)) {
        bad("torch.storage.UntypedStorage");
      }
      return make(Kind::Storage);
    }
    case Fn::TensorClass:
    case Fn::ParameterClass:
    case Fn::UntypedStorageClass:
    case Fn::DTypeObj:
    case Fn::LegacyStorageClass:
      break;
  }
  fail(at, fmt::format("{} is not callable here", fn->s));
}

// _legacy_load's persistent_load: ("storage", storage_type, key, location, numel, view_metadata).
Ref Reader::persistent_load(const Ref& pid, size_t at) {
  if (!ctx_.legacy) fail(at, "BINPERSID outside a _load_from_bytes payload");
  const auto& p = pid->items;
  if (pid->kind != Kind::Tuple || p.size() != 6 || p[0]->kind != Kind::Str || p[0]->s != "storage" ||
      !(p[1]->kind == Kind::Global && p[1]->fn == Fn::LegacyStorageClass) || p[2]->kind != Kind::Str ||
      p[3]->kind != Kind::Str || p[4]->kind != Kind::Int || p[4]->i < 0 || p[5]->kind != Kind::None) {
    fail(at, "persistent id is not (\"storage\", torch.<Type>Storage, key, location, numel, None)");
  }
  const std::string& location = p[3]->s;
  if (location != "cpu" && location != "cuda" && location.rfind("cuda:", 0) != 0) {
    fail(at, fmt::format("storage location '{}' is not cpu or cuda", location));
  }
  auto v = make(Kind::Storage);
  v->storage.typed = true;
  v->storage.dtype = p[1]->dtype;
  v->storage.key = p[2]->s;
  v->storage.numel = p[4]->i;
  return v;
}

Ref Reader::load() {
  const size_t start = pos_;
  stack_.clear();
  marks_.clear();
  memo_.clear();
  frame_end_ = pos_;
  while (true) {
    const size_t at = pos_;
    if (pos_ >= data_.size()) fail(at, "truncated: no STOP opcode");
    const auto o = static_cast<uint8_t>(data_[pos_++]);
    // Every pickle torch writes starts with PROTO (protocol 2 and up); so does what SGLang's
    // _looks_like_pickle_payload (common.py:2698-2699) takes for a raw pickle.
    if (at == start && o != PROTO) fail(at, fmt::format("the pickle starts with 0x{:02x}, not PROTO (0x80)", o));
    switch (o) {
      case PROTO: {
        const auto v = static_cast<uint8_t>(take(1, at, o)[0]);
        if (at != start) fail(at, "PROTO after the start of the pickle");
        if (v < 2 || v > 5) fail(at, fmt::format("pickle protocol {} is not 2 to 5", v));
        break;
      }
      case FRAME: {
        const uint64_t len = take_le(8, at, o);
        if (pos_ < frame_end_) fail(at, fmt::format("FRAME before the previous frame ends at offset {}", frame_end_));
        if (len > data_.size() - pos_) {
          fail(at, fmt::format("truncated: FRAME declares {} bytes, {} left", len, data_.size() - pos_));
        }
        frame_end_ = pos_ + static_cast<size_t>(len);
        break;
      }
      case STOP: {
        if (!marks_.empty() || stack_.size() != 1) {
          fail(at, fmt::format("STOP with {} values and {} marks on the stack", stack_.size(), marks_.size()));
        }
        Ref v = std::move(stack_.back());
        stack_.clear();
        return v;
      }
      case MARK:
        marks_.push_back(stack_.size());
        break;
      case NONE:
        stack_.push_back(make(Kind::None));
        break;
      case NEWTRUE:
      case NEWFALSE: {
        auto v = make(Kind::Bool);
        v->b = o == NEWTRUE;
        stack_.push_back(v);
        break;
      }
      case BININT1:
      case BININT2:
      case BININT: {
        const size_t n = o == BININT1 ? 1 : o == BININT2 ? 2 : 4;
        const uint64_t u = take_le(n, at, o);
        auto v = make(Kind::Int);
        v->i = o == BININT ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(u)))
                           : static_cast<int64_t>(u);
        stack_.push_back(v);
        break;
      }
      case LONG1:
      case LONG4: {
        const size_t n = o == LONG1 ? take_le(1, at, o) : take_len(4, at, o);
        if (n > 64) fail(at, fmt::format("{} of {} bytes is too large", op_name(o), n));
        const std::string_view b = take(n, at, o);
        if (n <= 8) {
          uint64_t u = 0;
          for (size_t i = 0; i < n; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
          if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
          auto v = make(Kind::Int);
          v->i = static_cast<int64_t>(u);
          stack_.push_back(v);
        } else {
          auto v = make(Kind::BigInt);
          v->s = std::string(b);
          stack_.push_back(v);
        }
        break;
      }
      case SHORT_BINUNICODE:
      case BINUNICODE:
      case BINUNICODE8: {
        const size_t n = take_len(o == SHORT_BINUNICODE ? 1 : o == BINUNICODE ? 4 : 8, at, o);
        stack_.push_back(str(take(n, at, o), at, o));
        break;
      }
      case SHORT_BINBYTES:
      case BINBYTES:
      case BINBYTES8:
      case BYTEARRAY8: {
        const size_t n = take_len(o == SHORT_BINBYTES ? 1 : o == BINBYTES ? 4 : 8, at, o);
        auto v = make(Kind::Bytes);
        v->bytes = take(n, at, o);
        stack_.push_back(v);
        break;
      }
      case EMPTY_TUPLE:
        stack_.push_back(make(Kind::Tuple));
        break;
      case EMPTY_LIST:
        stack_.push_back(make(Kind::List));
        break;
      case EMPTY_DICT:
        stack_.push_back(make(Kind::Dict));
        break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const size_t n = static_cast<size_t>(o - TUPLE1) + 1;
        if (stack_.size() < stack_floor() + n) fail(at, fmt::format("{} needs {} values on the stack", op_name(o), n));
        auto v = make(Kind::Tuple);
        v->items.assign(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
                        std::make_move_iterator(stack_.end()));
        stack_.resize(stack_.size() - n);
        stack_.push_back(v);
        break;
      }
      case TUPLE:
      case LIST: {
        auto v = make(o == TUPLE ? Kind::Tuple : Kind::List);
        v->items = pop_mark(at, o);
        stack_.push_back(v);
        break;
      }
      case DICT: {
        auto v = make(Kind::Dict);
        v->items = pop_mark(at, o);
        if (v->items.size() % 2 != 0) fail(at, "DICT with an odd number of items");
        stack_.push_back(v);
        break;
      }
      case APPEND: {
        Ref x = pop(at, o);
        Ref& list = top(at, o);
        if (list->kind != Kind::List) fail(at, fmt::format("APPEND to a {}", kind_name(list->kind)));
        list->items.push_back(std::move(x));
        break;
      }
      case APPENDS: {
        std::vector<Ref> xs = pop_mark(at, o);
        Ref& list = top(at, o);
        if (list->kind != Kind::List) fail(at, fmt::format("APPENDS to a {}", kind_name(list->kind)));
        for (auto& x : xs) list->items.push_back(std::move(x));
        break;
      }
      case SETITEM: {
        Ref value = pop(at, o);
        Ref key = pop(at, o);
        Ref& dict = top(at, o);
        if (dict->kind != Kind::Dict) fail(at, fmt::format("SETITEM on a {}", kind_name(dict->kind)));
        dict->items.push_back(std::move(key));
        dict->items.push_back(std::move(value));
        break;
      }
      case SETITEMS: {
        std::vector<Ref> xs = pop_mark(at, o);
        if (xs.size() % 2 != 0) fail(at, "SETITEMS with an odd number of items");
        Ref& dict = top(at, o);
        if (dict->kind != Kind::Dict) fail(at, fmt::format("SETITEMS on a {}", kind_name(dict->kind)));
        for (auto& x : xs) dict->items.push_back(std::move(x));
        break;
      }
      case GLOBAL: {
        // "module\nname\n" (Lib/pickle.py load_global).
        const size_t nl1 = data_.find('\n', pos_);
        const size_t nl2 = nl1 == std::string_view::npos ? nl1 : data_.find('\n', nl1 + 1);
        if (nl2 == std::string_view::npos) fail(at, "truncated: GLOBAL needs two newline-terminated lines");
        const std::string_view module = data_.substr(pos_, nl1 - pos_);
        const std::string_view name = data_.substr(nl1 + 1, nl2 - nl1 - 1);
        pos_ = nl2 + 1;
        if (!valid_utf8(module) || !valid_utf8(name)) fail(at, "GLOBAL is not valid UTF-8");
        stack_.push_back(resolve_global(module, name, at));
        break;
      }
      case STACK_GLOBAL: {
        Ref name = pop(at, o);
        Ref module = pop(at, o);
        if (name->kind != Kind::Str || module->kind != Kind::Str) fail(at, "STACK_GLOBAL needs two str");
        stack_.push_back(resolve_global(module->s, name->s, at));
        break;
      }
      case REDUCE: {
        Ref args = pop(at, o);
        Ref fn = pop(at, o);
        stack_.push_back(call(fn, args, at));
        break;
      }
      case BINPERSID: {
        Ref pid = pop(at, o);
        stack_.push_back(persistent_load(pid, at));
        break;
      }
      case BINPUT:
      case LONG_BINPUT: {
        const uint64_t idx = take_le(o == BINPUT ? 1 : 4, at, o);
        memo_[idx] = top(at, o);
        break;
      }
      case MEMOIZE:
        memo_[memo_.size()] = top(at, o);
        break;  // Lib/pickle.py load_memoize: memo[len(memo)]
      case BINGET:
      case LONG_BINGET: {
        const uint64_t idx = take_le(o == BINGET ? 1 : 4, at, o);
        const auto it = memo_.find(idx);
        if (it == memo_.end()) fail(at, fmt::format("{} of memo {}, which was never stored", op_name(o), idx));
        stack_.push_back(it->second);
        break;
      }
      default: {
        if (const char* name = op_name(o)) fail(at, fmt::format("unsupported opcode {} (0x{:02x})", name, o));
        fail(at, fmt::format("unknown opcode 0x{:02x}", o));
      }
    }
  }
}

// One `_load_from_bytes` payload: torch/serialization.py _legacy_load for a single storage.
Storage parse_legacy(std::string_view blob, size_t outer_offset) {
  Reader r(blob, Context{true, outer_offset});
  const size_t magic_at = r.pos();
  Ref magic = r.load();
  if (magic->kind != Kind::BigInt ||
      magic->s != std::string_view(reinterpret_cast<const char*>(kMagicLE.data()), kMagicLE.size())) {
    r.fail(magic_at, "not a torch legacy save: the magic number differs");
  }
  const size_t version_at = r.pos();
  Ref version = r.load();
  if (version->kind != Kind::Int || version->i != kLegacyProtocolVersion) {
    r.fail(version_at, "legacy protocol version is not 1001");
  }
  const size_t sys_at = r.pos();
  Ref sys_info = r.load();
  if (sys_info->kind != Kind::Dict) r.fail(sys_at, "sys_info is not a dict");
  bool little = false;
  for (size_t i = 0; i + 1 < sys_info->items.size(); i += 2) {
    const Value& k = *sys_info->items[i];
    const Value& v = *sys_info->items[i + 1];
    if (k.kind == Kind::Str && k.s == "little_endian") little = v.kind == Kind::Bool && v.b;
  }
  if (!little) r.fail(sys_at, "sys_info does not say little_endian=True: big-endian storages are not supported");
  const size_t main_at = r.pos();
  Ref storage = r.load();
  if (storage->kind != Kind::Storage)
    r.fail(main_at, fmt::format("the saved object is a {}, not a storage", kind_name(storage->kind)));
  const size_t keys_at = r.pos();
  Ref keys = r.load();
  if (keys->kind != Kind::List || keys->items.size() != 1 || keys->items[0]->kind != Kind::Str ||
      keys->items[0]->s != storage->storage.key) {
    r.fail(keys_at, "the storage key list is not [key of the saved storage]");
  }
  Storage st = storage->storage;
  const size_t count_at = r.pos();
  const size_t elem = dtype_size(st.dtype);
  if (blob.size() - count_at < 8) r.fail(count_at, "truncated: the element count needs 8 bytes");
  uint64_t count = 0;
  for (size_t i = 0; i < 8; ++i) count |= static_cast<uint64_t>(static_cast<uint8_t>(blob[count_at + i])) << (8 * i);
  if (count != static_cast<uint64_t>(st.numel)) {
    r.fail(count_at, fmt::format("the element count {} differs from the persistent id's {}", count, st.numel));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(count, elem, &nbytes) || nbytes > blob.size() - count_at - 8) {
    r.fail(count_at, fmt::format("truncated: {} elements of {} need {} bytes, {} left", count, dtype_name(st.dtype),
                                 count * elem, blob.size() - count_at - 8));
  }
  if (nbytes != blob.size() - count_at - 8) {
    r.fail(count_at + 8 + nbytes, fmt::format("{} bytes after the storage data", blob.size() - count_at - 8 - nbytes));
  }
  st.data = blob.substr(count_at + 8, nbytes);
  return st;
}

}  // namespace

std::vector<NamedTensor> decode(std::string_view pickle_bytes) {
  Reader r(pickle_bytes, Context{});
  Ref root = r.load();
  if (r.pos() != pickle_bytes.size()) {
    throw Error(ErrorKind::Format, fmt::format("torch pickle: offset {}: {} byte(s) after STOP", r.pos() - 1,
                                               pickle_bytes.size() - r.pos()));
  }
  if (root->kind != Kind::List) {
    throw Error(ErrorKind::Format,
                fmt::format("torch pickle: the payload is of type {}, not a list of (name, tensor) tuples",
                            kind_name(root->kind)));
  }
  std::unordered_map<const Value*, size_t> uses;
  for (const auto& e : root->items) {
    if (e->kind == Kind::Tuple && e->items.size() == 2) ++uses[e->items[1].get()];
  }
  std::vector<NamedTensor> out;
  out.reserve(root->items.size());
  for (size_t i = 0; i < root->items.size(); ++i) {
    const Value& e = *root->items[i];
    if (e.kind != Kind::Tuple || e.items.size() != 2 || e.items[0]->kind != Kind::Str ||
        e.items[1]->kind != Kind::Tensor) {
      std::string got = kind_name(e.kind);
      if (e.kind == Kind::Tuple) {
        got += "(";
        for (size_t k = 0; k < e.items.size(); ++k)
          got += fmt::format("{}{}", k ? ", " : "", kind_name(e.items[k]->kind));
        got += ")";
      }
      throw Error(ErrorKind::Format,
                  fmt::format("torch pickle: entry {} is of type {}, not a (str, tensor) tuple", i, got));
    }
    // The memo can hand one tensor object to two entries: move it out only at its last use.
    Value& tv = *e.items[1];
    NamedTensor t = --uses[&tv] == 0 ? std::move(tv.tensor) : tv.tensor;
    t.name = e.items[0]->s;
    out.push_back(std::move(t));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// base64

namespace {
// EVP_EncodeBlock / EVP_DecodeBlock take an int length; whole groups of 3 bytes / 4 characters per call.
constexpr size_t kEncodeChunk = size_t{3} << 24;
constexpr size_t kDecodeChunk = size_t{4} << 24;

bool b64_alphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}
}  // namespace

std::string base64_encode(std::span<const uint8_t> bytes) {
  const size_t out_len = (bytes.size() + 2) / 3 * 4;
  std::string out(out_len + 1, '\0');  // EVP_EncodeBlock writes a terminating NUL
  size_t written = 0;
  for (size_t i = 0; i < bytes.size(); i += kEncodeChunk) {
    const size_t n = std::min(kEncodeChunk, bytes.size() - i);
    const int w =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + written), bytes.data() + i, static_cast<int>(n));
    written += static_cast<size_t>(w);
  }
  out.resize(written);
  return out;
}

std::vector<uint8_t> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    throw Error(ErrorKind::Format, fmt::format("base64: length {} is not a multiple of 4", text.size()));
  }
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    if (b64_alphabet(text[i])) continue;
    if (text[i] == '=') throw Error(ErrorKind::Format, fmt::format("base64: '=' at offset {} before the end", i));
    throw Error(ErrorKind::Format, fmt::format("base64: byte 0x{:02x} at offset {} is not in the base64 alphabet",
                                               static_cast<uint8_t>(text[i]), i));
  }
  std::vector<uint8_t> out(text.size() / 4 * 3);
  size_t written = 0;
  for (size_t i = 0; i < text.size(); i += kDecodeChunk) {
    const size_t n = std::min(kDecodeChunk, text.size() - i);
    const int w = EVP_DecodeBlock(out.data() + written, reinterpret_cast<const unsigned char*>(text.data() + i),
                                  static_cast<int>(n));
    if (w < 0) throw Error(ErrorKind::Format, fmt::format("base64: OpenSSL refused the block at offset {}", i));
    written += static_cast<size_t>(w);
  }
  out.resize(written - pad);  // EVP_DecodeBlock turns each '=' into a zero byte
  return out;
}

}  // namespace wsb::torch_pickle
