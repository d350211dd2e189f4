// Device dequantizing matvec (engine/quant/device_linear.hpp). Everywhere: the host emulation of the kernels
// (matvec_math.hpp) agrees with an exact double product over the logical weights for every format (so the runtime
// indexing matches models/transform), both block-read paths give identical bits, and bad launches are refused
// with the field named. On a GPU: the device result equals the emulation bit for bit for every format, with
// multi-expert slots routed by device expert ids (out-of-range ids give NaN rows), shared inputs, and replays of a
// captured CUDA graph that re-read the ids.
#include <gtest/gtest.h>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/quant/device_linear.hpp"
#include "engine/quant/device_util.hpp"
#include "tests/engine/quant/linear_cases.hpp"
#include "tests/support/gpu_support.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using test::LinearCase;

enum class Kind { DenseBf16, DenseF16, DenseF32, Fp8, Nvfp4Word, Nvfp4Phase, Mxfp4, DenseKMajorBf16, DenseKMajorF32 };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::DenseBf16: return "DenseBf16";
    case Kind::DenseF16: return "DenseF16";
    case Kind::DenseF32: return "DenseF32";
    case Kind::Fp8: return "Fp8";
    case Kind::Nvfp4Word: return "Nvfp4Word";
    case Kind::Nvfp4Phase: return "Nvfp4Phase";
    case Kind::Mxfp4: return "Mxfp4";
    case Kind::DenseKMajorBf16: return "DenseKMajorBf16";
    case Kind::DenseKMajorF32: return "DenseKMajorF32";
  }
  return "?";
}

/// Shapes with rows not a multiple of a block's rows (8 / 32) and cols not a multiple of the warp or block width.
void build(LinearCase& c, Kind kind, int64_t experts) {
  switch (kind) {
    case Kind::DenseBf16: return test::make_dense(c, DeviceDenseDtype::BF16, experts, 45, 200, 1);
    case Kind::DenseF16: return test::make_dense(c, DeviceDenseDtype::F16, experts, 37, 97, 2);
    case Kind::DenseF32: return test::make_dense(c, DeviceDenseDtype::F32, experts, 9, 33, 3);
    case Kind::Fp8: return test::make_fp8(c, experts, 37, 70, 4);
    case Kind::Nvfp4Word: return test::make_nvfp4(c, experts, 45, 1088, 0, 5);  // 68 blocks: lanes take 2 or 3
    case Kind::Nvfp4Phase: return test::make_nvfp4(c, experts, 130, 90, 6, 6);  // straddled first/last blocks
    case Kind::Mxfp4: return test::make_mxfp4(c, experts, 33, 1100, 7);         // 35 blocks, the last partial
    case Kind::DenseKMajorBf16: return test::make_dense_kmajor(c, DeviceDenseDtype::BF16, experts, 45, 200, 8);
    case Kind::DenseKMajorF32: return test::make_dense_kmajor(c, DeviceDenseDtype::F32, experts, 9, 33, 9);
  }
}

std::vector<float> random_x(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = test::uniform(rng, -1.0f, 1.0f);
  return x;
}

class LinearEmulation : public ::testing::TestWithParam<Kind> {};

TEST_P(LinearEmulation, MatchesTheExactProductPerExpert) {
  LinearCase c;
  build(c, GetParam(), 3);
  const auto& l = c.linear;
  const auto x = random_x(static_cast<size_t>(3 * l.cols), 17);
  const std::vector<int32_t> ids = {2, 0, 1};
  // Both word-path choices must agree with the exact product; the device picks one by pointer alignment.
  const auto y = test::emulate_matvec(l, ids.data(), 3, x.data(), l.cols, test::word_paths_of(l));
  for (int slot = 0; slot < 3; ++slot) {
    std::vector<double> want, magnitude;
    test::reference_matvec(c, ids[static_cast<size_t>(slot)], x.data() + slot * l.cols, &want, &magnitude);
    for (int64_t n = 0; n < l.rows; ++n) {
      const size_t i = static_cast<size_t>(n);
      ASSERT_NEAR(y[static_cast<size_t>(slot * l.rows + n)], want[i], 1e-5 * magnitude[i] + 1e-30)
          << c.what << " slot " << slot << " row " << n;
    }
  }
}

TEST_P(LinearEmulation, BothBlockReadPathsGiveIdenticalBits) {
  LinearCase c;
  build(c, GetParam(), 2);
  const auto& l = c.linear;
  const auto x = random_x(static_cast<size_t>(l.cols), 23);
  const std::vector<int32_t> ids = {0, 1};
  const bool nvfp4_word_possible = l.k_phase == 0 && l.cols % 16 == 0;
  const auto a = test::emulate_matvec(l, ids.data(), 2, x.data(), 0, {nvfp4_word_possible, true});
  const auto b = test::emulate_matvec(l, ids.data(), 2, x.data(), 0, {false, false});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(test::float_bits(a[i]), test::float_bits(b[i])) << c.what << " " << i;
}

INSTANTIATE_TEST_SUITE_P(Formats, LinearEmulation,
                         ::testing::Values(Kind::DenseBf16, Kind::DenseF16, Kind::DenseF32, Kind::Fp8,
                                           Kind::Nvfp4Word, Kind::Nvfp4Phase, Kind::Mxfp4, Kind::DenseKMajorBf16,
                                           Kind::DenseKMajorF32),
                         [](const auto& info) { return kind_name(info.param); });

// ---- launch checks: pure host code before any CUDA call, so they run without a device ----

/// Expects launch_linear_matvec(l, ...) to be refused with Mismatch naming `field` (Resource without CUDA).
void expect_refused(const DeviceLinear& l, int k, int64_t x_stride, const std::string& message) {
  float x[4] = {}, y[4] = {};
  if (!cuda_ops::built()) {
    test::expect_error([&] { launch_linear_matvec(l, nullptr, k, x, x_stride, y, nullptr); }, ErrorKind::Resource,
                       {"launch_linear_matvec: built without CUDA"});
    return;
  }
  test::expect_error([&] { launch_linear_matvec(l, nullptr, k, x, x_stride, y, nullptr); }, ErrorKind::Mismatch,
                     {message});
}

TEST(LaunchLinearMatvec, InconsistentDescriptionsRefused) {
  LinearCase nv;
  test::make_nvfp4(nv, 1, 45, 96, 0, 1);
  DeviceLinear l = nv.linear;
  expect_refused(l, -1, 0, "launch_linear_matvec (nvfp4 45 x 96): k = -1 slots outside [0, 65535]");
  expect_refused(l, 65536, 0, "k = 65536 slots outside [0, 65535]");
  expect_refused(l, 1, 95, "x_stride 95 is neither 0 (shared input) nor >= cols");
  l.cols = 95;
  expect_refused(l, 1, 0, "launch_linear_matvec (nvfp4 45 x 95): cols must be even (two E2M1 codes per byte)");
  l = nv.linear;
  l.k_phase = 16;
  expect_refused(l, 1, 0, "k_phase 16 outside [0, 16)");
  l = nv.linear;
  l.scale_cols_padded = 4;  // 6 blocks need Kp >= 6
  expect_refused(l, 1, 0, "scale padded dims [Mp 128, Kp 4] are not 128 x 4 tiles covering the blocks");
  l = nv.linear;
  l.alpha = nullptr;
  expect_refused(l, 1, 0, "alpha or input_scale pointer is null or not 4-byte aligned");
  l = nv.linear;
  l.experts = 0;
  expect_refused(l, 1, 0, "experts = 0 (must be >= 1)");
  l = nv.linear;
  l.weight = nullptr;
  expect_refused(l, 1, 0, "weight pointer is null");

  LinearCase fp8;
  test::make_fp8(fp8, 1, 37, 70, 2);
  l = fp8.linear;
  l.scale_rows_padded = 32;
  expect_refused(l, 1, 0, "launch_linear_matvec (fp8_channel 37 x 70): scale_rows_padded 32 differs from the weight's Np 48");
  l = fp8.linear;
  l.weight_cols_padded = 64;
  expect_refused(l, 1, 0, "weight padded dims [Kp 64, Np 48] smaller than the logical ones");

  LinearCase mx;
  test::make_mxfp4(mx, 1, 33, 100, 3);
  l = mx.linear;
  l.scale_rows_padded = 128;
  expect_refused(l, 1, 0, "scale padded dims [Mp 128, Kp 4] do not fit the Hopper scale layout");

  LinearCase dense;
  test::make_dense(dense, DeviceDenseDtype::BF16, 1, 4, 8, 4);
  l = dense.linear;
  l.weight = dense.weight.data() + 1;
  expect_refused(l, 1, 0, "launch_linear_matvec (dense 4 x 8): weight pointer is not element-aligned");
  l = dense.linear;
  l.dense_dtype = static_cast<DeviceDenseDtype>(7);
  expect_refused(l, 1, 0, "dense_dtype 7 is not BF16, F16 or F32");

  LinearCase kmajor;
  test::make_dense_kmajor(kmajor, DeviceDenseDtype::BF16, 1, 4, 8, 5);
  l = kmajor.linear;
  l.weight = kmajor.weight.data() + 1;
  expect_refused(l, 1, 0, "launch_linear_matvec (dense_kmajor 4 x 8): weight pointer is not element-aligned");
}

TEST(LaunchLinearMatvec, ZeroSlotsEnqueueNothing) {
  if (!cuda_ops::built()) GTEST_SKIP() << "built without CUDA: every launch refuses";
  DeviceLinear garbage;  // would fail every check: k == 0 returns before them
  launch_linear_matvec(garbage, nullptr, 0, nullptr, 0, nullptr, nullptr);
  SUCCEED();
}

// ---- GPU ----

/// A LinearCase's storages on the device.
struct OnDevice {
  DeviceBuffer weight, scale, alpha, input_scale;
  DeviceLinear linear;

  explicit OnDevice(const LinearCase& c) : linear(c.linear) {
    weight = upload(c.weight);
    linear.weight = weight.data();
    if (!c.scale.empty()) {
      scale = upload(c.scale);
      linear.scale = scale.data();
    }
    if (!c.alpha.empty()) {
      alpha = upload(c.alpha);
      input_scale = upload(c.input_scale);
      linear.alpha = alpha.as<float>();
      linear.input_scale = input_scale.as<float>();
    }
  }
  template <class T>
  static DeviceBuffer upload(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.size());
    return b;
  }
};

/// Runs the device matvec and returns y (k * rows floats).
std::vector<float> run_device(const OnDevice& d, const std::vector<int32_t>* ids, int k, const std::vector<float>& x,
                              int64_t x_stride) {
  DeviceBuffer dx = OnDevice::upload(x);
  DeviceBuffer dy(static_cast<uint64_t>(k * d.linear.rows) * 4);
  dy.fill(0xFF);  // a row the kernel skipped would read as NaN 0xFFFFFFFF, never as a computed value
  DeviceBuffer dids;
  if (ids != nullptr) dids = OnDevice::upload(*ids);
  launch_linear_matvec(d.linear, ids != nullptr ? dids.as<int32_t>() : nullptr, k, dx.as<float>(), x_stride,
                       dy.as<float>(), nullptr);
  std::vector<float> y(static_cast<size_t>(k * d.linear.rows));
  dy.download(y.data(), dy.size());
  return y;
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (test::float_bits(got[i]) != test::float_bits(want[i]) && bad++ < 5)
      ADD_FAILURE() << what << " output " << i << ": device " << got[i] << " (0x" << std::hex
                    << test::float_bits(got[i]) << "), emulation " << want[i] << " (0x" << test::float_bits(want[i])
                    << std::dec << ")";
  }
  EXPECT_EQ(bad, 0u) << what;
}

class LinearDevice : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { WSBENCH_REQUIRE_GPU(); }
};

TEST_P(LinearDevice, SingleExpertBitwiseEqualsEmulation) {
  LinearCase c;
  build(c, GetParam(), 1);
  OnDevice d(c);
  const auto x = random_x(static_cast<size_t>(c.linear.cols), 31);
  const auto got = run_device(d, nullptr, 1, x, 0);
  expect_bitwise(got, test::emulate_matvec(c.linear, nullptr, 1, x.data(), 0, test::word_paths_of(d.linear)), c.what);
}

TEST_P(LinearDevice, MultiExpertSlotsWithDeviceIdsAndBadIds) {
  LinearCase c;
  build(c, GetParam(), 3);
  OnDevice d(c);
  const auto& l = c.linear;
  const int64_t stride = l.cols + 5;  // every slot its own input, not packed
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, -1, 0};
  const int k = static_cast<int>(ids.size());
  const auto x = random_x(static_cast<size_t>(k * stride), 37);
  const auto got = run_device(d, &ids, k, x, stride);
  const auto want = test::emulate_matvec(l, ids.data(), k, x.data(), stride, test::word_paths_of(d.linear));
  expect_bitwise(got, want, c.what);
  for (int slot : {4, 5})  // ids 3 and -1 are outside [0, 3)
    for (int64_t n = 0; n < l.rows; ++n)
      ASSERT_EQ(test::float_bits(got[static_cast<size_t>(slot * l.rows + n)]), 0x7FC00000u)
          << c.what << " slot " << slot << " row " << n;
  // Slots 0 and 3 share expert 2 but not the input: their rows differ.
  EXPECT_NE(std::vector<float>(got.begin(), got.begin() + l.rows),
            std::vector<float>(got.begin() + 3 * l.rows, got.begin() + 4 * l.rows));
}

TEST_P(LinearDevice, SharedInputWithoutIdsIsExpertZeroInEverySlot) {
  LinearCase c;
  build(c, GetParam(), 2);
  OnDevice d(c);
  const auto x = random_x(static_cast<size_t>(c.linear.cols), 41);
  const auto got = run_device(d, nullptr, 3, x, 0);
  const auto one = test::emulate_matvec(c.linear, nullptr, 1, x.data(), 0, test::word_paths_of(d.linear));
  std::vector<float> want;
  for (int i = 0; i < 3; ++i) want.insert(want.end(), one.begin(), one.end());
  expect_bitwise(got, want, c.what);
}

INSTANTIATE_TEST_SUITE_P(Formats, LinearDevice,
                         ::testing::Values(Kind::DenseBf16, Kind::DenseF16, Kind::DenseF32, Kind::Fp8,
                                           Kind::Nvfp4Word, Kind::Nvfp4Phase, Kind::Mxfp4, Kind::DenseKMajorBf16,
                                           Kind::DenseKMajorF32),
                         [](const auto& info) { return kind_name(info.param); });

TEST(LinearDeviceGraph, ReplaysReadTheExpertIdsAfresh) {
  WSBENCH_REQUIRE_GPU();
  LinearCase c;
  test::make_nvfp4(c, 4, 45, 1088, 0, 9);
  OnDevice d(c);
  const auto& l = c.linear;
  const auto x = random_x(static_cast<size_t>(2 * l.cols), 43);
  DeviceBuffer dx = OnDevice::upload(x);
  DeviceBuffer dy(static_cast<uint64_t>(2 * l.rows) * 4);
  std::vector<int32_t> ids = {3, 1};
  DeviceBuffer dids = OnDevice::upload(ids);
  DeviceGraph graph([&](cudaStream_t s) {
    launch_linear_matvec(d.linear, dids.as<int32_t>(), 2, dx.as<float>(), l.cols, dy.as<float>(), s);
  });
  const auto paths = test::word_paths_of(d.linear);
  std::vector<float> y(static_cast<size_t>(2 * l.rows));
  const std::vector<std::vector<int32_t>> routes = {{3, 1}, {0, 2}, {1, 9}};  // 9 is out of range: NaN slot
  for (const auto& route : routes) {
    dids.upload(route.data(), 8);
    graph.replay();
    dy.download(y.data(), dy.size());
    expect_bitwise(y, test::emulate_matvec(l, route.data(), 2, x.data(), l.cols, paths),
                   "graph replay with ids " + std::to_string(route[0]) + "," + std::to_string(route[1]));
  }
}

}  // namespace
}  // namespace wsb
