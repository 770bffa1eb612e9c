// The GGUF writer and the layer export built on it: a file read and written
// back is byte-identical (every value type, nested arrays, tensors, a custom
// alignment), and exporting the first layers keeps everything else as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "gguf_test_images.h"
#include "loader/gguf.h"
#include "loader/gguf_writer.h"
#include "loader/layer_export.h"

namespace exactly {
namespace {

using namespace exactly::testing;

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("exactly-writer-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<GGUFTensorToWrite> tensors_of(const GGUFFile& f) {
  std::vector<GGUFTensorToWrite> out;
  for (const GGUFTensorInfo& t : f.tensors()) out.push_back({t.name, t.shape, t.type, {t.data, t.nbytes}});
  return out;
}

void expect_rewrite_is_identical(const GGUFTestWriter& w, const std::string& path) {
  const std::vector<uint8_t> image = w.build();
  auto f = GGUFFile::parse(image.data(), image.size(), "image.gguf");
  write_gguf(path, f->metadata(), tensors_of(*f));
  EXPECT_EQ(read_bytes(path), image);
}

TEST(GGUFWriter, WritesBackWhatWasReadByteForByte) {
  TempDir dir;
  GGUFTestWriter w = small_valid_writer();
  w.add_scalar<uint16_t>("u16", kU16, 65535);
  w.add_scalar<int16_t>("i16", kI16, -32768);
  w.add_scalar<int32_t>("i32", kI32, -2000000000);
  w.add_scalar<int64_t>("i64", kI64, -9000000000000000000ll);
  w.add_scalar<double>("f64", kF64, 0.1);
  w.add_scalar<float>("f32", kF32, 1e-5f);
  w.add_array("f64s", array_payload<double>(kF64, {1e300, -0.0}));
  w.add_array("bools", array_payload<uint8_t>(kBool, {1, 0}));
  expect_rewrite_is_identical(w, dir.file("default-alignment.gguf"));

  GGUFTestWriter aligned = small_valid_writer();
  aligned.alignment = 256;
  aligned.add_scalar<uint32_t>("general.alignment", kU32, 256);
  expect_rewrite_is_identical(aligned, dir.file("alignment-256.gguf"));
}

TEST(GGUFWriter, ReportsAFileItCannotWrite) {
  GGUFTestWriter w = small_valid_writer();
  const std::vector<uint8_t> image = w.build();
  auto f = GGUFFile::parse(image.data(), image.size(), "image.gguf");
  EXPECT_THROW(write_gguf("/nonexistent-dir/x.gguf", f->metadata(), tensors_of(*f)), Error);
}

TEST(LayerExport, KeepsTheFirstLayersAndEverythingElse) {
  TempDir dir;
  GGUFTestWriter w = small_valid_writer();  // llama, 2 layers, one tensor in blk.0
  w.add_tensor({"blk.1.ffn", {256}, 12 /*Q4_K*/, random_bytes(stored_bytes(256, 256, 144), 4), {}});
  w.add_tensor({"blk.10.x", {8}, 0, random_bytes(32, 5), {}});  // "blk.1" is not a prefix of its layer
  const std::vector<uint8_t> image = w.build();
  auto in = GGUFFile::parse(image.data(), image.size(), "image.gguf");
  const std::string path = dir.file("first1.gguf");
  export_first_layers(*in, 1, path);
  auto out = GGUFFile::open(path);

  EXPECT_EQ(out->require_int("llama.block_count"), 1);
  EXPECT_EQ(out->find("llama.block_count")->type, GGUFValueType::UINT32);
  ASSERT_EQ(out->metadata().size(), in->metadata().size());
  for (size_t i = 0; i < in->metadata().size(); ++i) {
    const auto& [key, value] = in->metadata()[i];
    EXPECT_EQ(out->metadata()[i].first, key);
    if (key == "llama.block_count") continue;
    EXPECT_EQ(gguf_value_to_string(out->metadata()[i].second, SIZE_MAX), gguf_value_to_string(value, SIZE_MAX)) << key;
  }
  std::vector<std::string> names;
  for (const GGUFTensorInfo& t : out->tensors()) {
    names.push_back(t.name);
    const GGUFTensorInfo& src = in->require_tensor(t.name);
    EXPECT_EQ(t.shape, src.shape);
    EXPECT_EQ(t.type, src.type);
    EXPECT_EQ(t.offset % out->alignment(), 0u);
    EXPECT_EQ(0, std::memcmp(t.data, src.data, t.nbytes)) << t.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"norm", "embd", "blk.0.ffn"}));
}

TEST(LayerExport, RefusesLayerCountsOutsideTheModel) {
  TempDir dir;
  const std::vector<uint8_t> image = small_valid_writer().build();
  auto in = GGUFFile::parse(image.data(), image.size(), "image.gguf");
  for (int64_t layers : {0, 3, -1}) {
    try {
      export_first_layers(*in, layers, dir.file("x.gguf"));
      ADD_FAILURE() << layers << " layers were accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      EXPECT_NE(std::string(e.what()).find("has 2 layers"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

}  // namespace
}  // namespace exactly
