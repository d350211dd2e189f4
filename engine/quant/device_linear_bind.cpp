#include "engine/quant/device_linear_bind.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

namespace {

[[noreturn]] void unbound(const char* field) {
  throw Error(ErrorKind::Mismatch, fmt::format("to_device_linear: the QuantLinear's {} storage is unbound", field));
}

const Shape& shape_of(const StorageRef& r, const char* field) {
  if (r.spec == nullptr || r.data == nullptr) unbound(field);
  return r.spec->shape;
}

DeviceDenseDtype dense_dtype(const RuntimeStorageSpec& spec) {
  switch (spec.dtype) {
    case DType::BF16:
      return DeviceDenseDtype::BF16;
    case DType::F16:
      return DeviceDenseDtype::F16;
    case DType::F32:
      return DeviceDenseDtype::F32;
    default:
      throw Error(ErrorKind::Mismatch, fmt::format("to_device_linear: storage '{}' has dtype {}, not BF16, F16 or F32",
                                                   spec.name, dtype_name(spec.dtype)));
  }
}

}  // namespace

DeviceLinear to_device_linear(const QuantLinear& l) {
  DeviceLinear d;
  const Shape& w = shape_of(l.weight, "weight");
  d.weight = l.weight.data;
  d.rows = l.rows;
  d.cols = l.cols;
  d.experts = l.experts;
  d.weight_rows_padded = l.rows;
  d.weight_cols_padded = l.cols;
  switch (l.format) {
    case LinearFormat::Dense:
      d.format = DeviceLinearFormat::Dense;
      d.dense_dtype = dense_dtype(*l.weight.spec);
      break;
    case LinearFormat::DenseKMajor:  // weight [.., cols, rows]
      d.format = DeviceLinearFormat::DenseKMajor;
      d.dense_dtype = dense_dtype(*l.weight.spec);
      break;
    case LinearFormat::Fp8Channel:  // weight [.., Kp, Np], scale [.., Np]
      d.format = DeviceLinearFormat::Fp8Channel;
      d.weight_cols_padded = w[w.size() - 2];
      d.weight_rows_padded = w.back();
      d.scale = l.scale.data;
      d.scale_rows_padded = shape_of(l.scale, "scale").back();
      break;
    case LinearFormat::Nvfp4: {  // scale [E, Mp, Kp]
      d.format = DeviceLinearFormat::Nvfp4;
      const Shape& s = shape_of(l.scale, "scale");
      d.scale = l.scale.data;
      d.scale_rows_padded = s[1];
      d.scale_cols_padded = s[2];
      shape_of(l.alpha, "alpha");
      shape_of(l.input_scale, "input_scale");
      d.alpha = reinterpret_cast<const float*>(l.alpha.data);
      d.input_scale = reinterpret_cast<const float*>(l.input_scale.data);
      d.k_phase = l.k_phase;
      break;
    }
    case LinearFormat::Mxfp4: {  // weight [E, Np, Kb, 16], scale [E, Mp / 32, Kp * 32]
      d.format = DeviceLinearFormat::Mxfp4;
      const Shape& s = shape_of(l.scale, "scale");
      d.weight_rows_padded = w[1];
      d.weight_cols_padded = w[2];
      d.scale = l.scale.data;
      d.scale_rows_padded = s[1] * 32;
      d.scale_cols_padded = s[2] / 32;
      break;
    }
  }
  return d;
}

DeviceLinear to_device_linear(const QuantLinear& linear, const RankLayout& layout, const DeviceRankView& view) {
  auto rebind = [&](StorageRef r) -> StorageRef {
    if (r.spec == nullptr) return r;
    const size_t i = layout.index_of(r.spec->name);
    if (i >= view.storages.size() || i >= view.bytes.size())
      throw Error(ErrorKind::Mismatch,
                  fmt::format("to_device_linear: storage '{}' (index {}) is missing from the device view of {} "
                              "storages",
                              r.spec->name, i, view.storages.size()));
    if (view.bytes[i] != r.spec->bytes() || layout.storages[i].bytes() != r.spec->bytes())
      throw Error(ErrorKind::Mismatch,
                  fmt::format("to_device_linear: storage '{}' is {} bytes on the device, {} in its spec", r.spec->name,
                              view.bytes[i], r.spec->bytes()));
    return StorageRef{r.spec, view.storages[i]};
  };
  QuantLinear on_device = linear;
  on_device.weight = rebind(linear.weight);
  on_device.scale = rebind(linear.scale);
  on_device.alpha = rebind(linear.alpha);
  on_device.input_scale = rebind(linear.input_scale);
  return to_device_linear(on_device);
}

}  // namespace wsb
