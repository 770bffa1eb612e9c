// Valid GGUF images parse to exactly the values and tensors that were written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/ggml_types.h"
#include "gguf_test_images.h"
#include "loader/gguf.h"

namespace exactly {
namespace {

using namespace exactly::testing;

std::unique_ptr<GGUFFile> parse(const std::vector<uint8_t>& img) {
  return GGUFFile::parse(img.data(), img.size(), "test.gguf");
}

const GGUFArray& array_of(const GGUFValue& v) { return *std::get<std::shared_ptr<GGUFArray>>(v.v); }

TEST(GGUFParse, EveryScalarTypeKeepsTypeAndValue) {
  GGUFTestWriter w;
  w.add_scalar<uint8_t>("u8", kU8, 250);
  w.add_scalar<int8_t>("i8", kI8, -128);
  w.add_scalar<uint16_t>("u16", kU16, 65535);
  w.add_scalar<int16_t>("i16", kI16, -32768);
  w.add_scalar<uint32_t>("u32", kU32, 4000000000u);
  w.add_scalar<int32_t>("i32", kI32, -2000000000);
  w.add_scalar<uint64_t>("u64", kU64, 0xFFFFFFFFFFFFFFFFull);
  w.add_scalar<int64_t>("i64", kI64, -9000000000000000000ll);
  w.add_scalar<float>("f32", kF32, 1e-5f);
  w.add_scalar<double>("f64", kF64, 0.1);
  w.add_scalar<uint8_t>("yes", kBool, 1);
  w.add_scalar<uint8_t>("no", kBool, 0);
  w.add_string("s", std::string("caf\xc3\xa9\x00\xfe", 7));
  auto img = w.build();
  auto f = parse(img);

  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 13u);
  EXPECT_EQ(f->find("u8")->type, GGUFValueType::UINT8);
  EXPECT_EQ(f->get_int("u8"), 250);
  EXPECT_EQ(f->get_int("i8"), -128);
  EXPECT_EQ(f->get_int("u16"), 65535);
  EXPECT_EQ(f->get_int("i16"), -32768);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(std::get<uint64_t>(f->find("u64")->v), 0xFFFFFFFFFFFFFFFFull);
  EXPECT_THROW(f->get_int("u64"), FileFormatError);  // does not fit in int64
  EXPECT_EQ(f->get_int("i64"), -9000000000000000000ll);
  EXPECT_EQ(f->get_float("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(f->find("f32")->type, GGUFValueType::FLOAT32);
  EXPECT_EQ(f->get_float("f64"), 0.1);
  EXPECT_EQ(f->get_float("u16"), 65535.0);  // integers are numbers too
  EXPECT_EQ(f->get_bool("yes"), true);
  EXPECT_EQ(f->get_bool("no"), false);
  EXPECT_EQ(f->get_string("s"), std::string("caf\xc3\xa9\x00\xfe", 7));  // raw bytes, NUL kept
  EXPECT_EQ(f->metadata()[0].first, "u8");  // file order is kept
  EXPECT_EQ(f->metadata()[12].first, "s");
  EXPECT_EQ(gguf_value_to_string(*f->find("f32")), "1e-05");
  EXPECT_EQ(gguf_value_to_string(*f->find("i8")), "-128");
}

TEST(GGUFParse, AccessorsRejectWrongTypesAndNameMissingKeys) {
  GGUFTestWriter w;
  w.add_string("name", "x");
  w.add_scalar<uint32_t>("count", kU32, 3);
  auto img = w.build();
  auto f = parse(img);
  EXPECT_FALSE(f->get_int("absent").has_value());
  EXPECT_FALSE(f->get_string_array("absent").has_value());
  try {
    f->require_int("absent.key");
    FAIL() << "expected FileFormatError";
  } catch (const FileFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.key"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
  }
  try {
    f->get_int("name");
    FAIL() << "expected FileFormatError";
  } catch (const FileFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'name' has type string"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->get_string("count"), FileFormatError);
  EXPECT_THROW(f->get_bool("count"), FileFormatError);
  EXPECT_THROW(f->get_float_array("count"), FileFormatError);
  EXPECT_THROW(f->require_tensor("missing.weight"), FileFormatError);
  EXPECT_EQ(f->find_tensor("missing.weight"), nullptr);
}

TEST(GGUFParse, ArraysOfEveryTypeAndNestedArrays) {
  GGUFTestWriter w;
  w.add_array("u8s", array_payload<uint8_t>(kU8, {0, 255}));
  w.add_array("i8s", array_payload<int8_t>(kI8, {-1, 1}));
  w.add_array("u16s", array_payload<uint16_t>(kU16, {7}));
  w.add_array("i16s", array_payload<int16_t>(kI16, {-7}));
  w.add_array("u32s", array_payload<uint32_t>(kU32, {1, 2, 3}));
  w.add_array("i32s", array_payload<int32_t>(kI32, {-1, -2, -3}));
  w.add_array("u64s", array_payload<uint64_t>(kU64, {1ull << 40}));
  w.add_array("i64s", array_payload<int64_t>(kI64, {-(1ll << 40)}));
  w.add_array("f32s", array_payload<float>(kF32, {0.5f, -2.0f}));
  w.add_array("f64s", array_payload<double>(kF64, {1e300}));
  w.add_array("bools", array_payload<uint8_t>(kBool, {1, 0, 1}));
  w.add_array("strs", string_array_payload({"a", "", "\xff\xfe"}));
  w.add_array("empty", array_payload<uint32_t>(kU32, {}));
  // [[["deep"]], [[1, 2], []]] : arrays of arrays of arrays.
  w.add_array("nested", nested_array_payload(
                            {nested_array_payload({string_array_payload({"deep"})}),
                             nested_array_payload({array_payload<int32_t>(kI32, {1, 2}),
                                                   array_payload<int32_t>(kI32, {})})}));
  auto img = w.build();
  auto f = parse(img);

  EXPECT_EQ(f->get_int_array("u8s"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f->get_int_array("i8s"), (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(f->get_int_array("u16s"), (std::vector<int64_t>{7}));
  EXPECT_EQ(f->get_int_array("i16s"), (std::vector<int64_t>{-7}));
  EXPECT_EQ(f->get_int_array("u32s"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f->get_int_array("i32s"), (std::vector<int64_t>{-1, -2, -3}));
  EXPECT_EQ(f->get_int_array("u64s"), (std::vector<int64_t>{1ll << 40}));
  EXPECT_EQ(f->get_int_array("i64s"), (std::vector<int64_t>{-(1ll << 40)}));
  EXPECT_EQ(f->get_float_array("f32s"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(f->get_float_array("i32s"), (std::vector<float>{-1, -2, -3}));
  EXPECT_EQ(std::get<double>(array_of(*f->find("f64s")).items[0].v), 1e300);
  const auto& bools = array_of(*f->find("bools"));
  ASSERT_EQ(bools.items.size(), 3u);
  EXPECT_EQ(std::get<bool>(bools.items[0].v), true);
  EXPECT_EQ(std::get<bool>(bools.items[1].v), false);
  EXPECT_EQ(f->get_string_array("strs"), (std::vector<std::string>{"a", "", "\xff\xfe"}));
  EXPECT_EQ(f->get_int_array("empty"), std::vector<int64_t>{});
  EXPECT_THROW(f->get_int_array("strs"), FileFormatError);
  EXPECT_THROW(f->get_string_array("u8s"), FileFormatError);

  const auto& nested = array_of(*f->find("nested"));
  EXPECT_EQ(nested.elem_type, GGUFValueType::ARRAY);
  ASSERT_EQ(nested.items.size(), 2u);
  const auto& first = array_of(nested.items[0]);
  ASSERT_EQ(first.items.size(), 1u);
  EXPECT_EQ(std::get<std::string>(array_of(first.items[0]).items[0].v), "deep");
  const auto& second = array_of(nested.items[1]);
  ASSERT_EQ(second.items.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(array_of(second.items[0]).items[1].v), 2);
  EXPECT_TRUE(array_of(second.items[1]).items.empty());
  EXPECT_EQ(gguf_value_to_string(*f->find("nested")), "[[[\"deep\"]], [[1, 2], []]]");
  EXPECT_EQ(gguf_value_to_string(*f->find("u32s"), 2), "[1, 2, ... (3 uint32 items)]");
}

// One tensor of every supported type: geometry, byte size and data pointer.
TEST(GGUFParse, TensorsOfEverySupportedType) {
  GGUFTestWriter w;
  struct Case {
    uint32_t id;
    std::vector<uint64_t> dims;
  };
  const std::vector<Case> cases = {{0, {3, 5}},   {1, {7}},      {30, {2, 2, 2, 2}}, {2, {64, 3}},
                                   {3, {32, 1, 2}}, {8, {96}},   {12, {512, 2}},     {13, {256}},
                                   {14, {256, 3}}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto traits = ggml_type_traits(cases[i].id);
    ASSERT_TRUE(traits && traits->supported);
    int64_t n = 1;
    for (auto d : cases[i].dims) n *= static_cast<int64_t>(d);
    w.add_tensor({"t." + std::string(traits->name), cases[i].dims, cases[i].id,
                  random_bytes(stored_bytes(n, traits->block_elems, traits->block_bytes),
                               static_cast<uint32_t>(i)),
                  {}});
  }
  GGUFTestWriter::Layout layout;
  auto img = w.build(&layout);
  auto f = parse(img);
  ASSERT_EQ(f->tensors().size(), cases.size());
  EXPECT_EQ(f->data_offset(), layout.data_offset);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto traits = *ggml_type_traits(cases[i].id);
    const GGUFTensorInfo& t = f->require_tensor("t." + std::string(traits.name));
    EXPECT_EQ(&t, &f->tensors()[i]);
    EXPECT_EQ(static_cast<uint32_t>(t.type), cases[i].id);
    ASSERT_EQ(t.shape.size(), cases[i].dims.size());
    int64_t n = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      EXPECT_EQ(t.shape[d], static_cast<int64_t>(cases[i].dims[d]));
      n *= t.shape[d];
    }
    EXPECT_EQ(t.num_elements(), n);
    EXPECT_EQ(t.nbytes, stored_bytes(n, traits.block_elems, traits.block_bytes));
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.data, img.data() + f->data_offset() + t.offset);
    const auto expected = random_bytes(t.nbytes, static_cast<uint32_t>(i));
    EXPECT_EQ(0, std::memcmp(t.data, expected.data(), t.nbytes)) << t.name;
  }
}

TEST(GGUFParse, CustomAlignmentAndVersion2) {
  GGUFTestWriter w;
  w.version = 2;
  w.alignment = 256;
  w.add_scalar<uint32_t>("general.alignment", kU32, 256);
  w.add_tensor({"a", {3}, 0, random_bytes(12, 1), {}});
  w.add_tensor({"b", {5}, 0, random_bytes(20, 2), {}});
  auto img = w.build();
  auto f = parse(img);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->require_tensor("b").offset, 256u);
}

TEST(GGUFParse, FileWithoutTensors) {
  GGUFTestWriter w;
  w.add_string("general.name", "empty");
  auto img = w.build();
  auto f = parse(img);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->get_string("general.name"), "empty");
}

TEST(GGUFOpen, MapsAFileAndReportsUnreadablePaths) {
  const auto img = small_valid_writer().build();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("exactly_loader_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "small.gguf").string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(img.data()),
                                              static_cast<std::streamsize>(img.size()));
  {
    auto f = GGUFFile::open(path);
    auto g = parse(img);
    EXPECT_EQ(f->path(), path);
    EXPECT_EQ(f->file_size(), img.size());
    ASSERT_EQ(f->tensors().size(), g->tensors().size());
    for (size_t i = 0; i < f->tensors().size(); ++i)
      EXPECT_EQ(0, std::memcmp(f->tensors()[i].data, g->tensors()[i].data, g->tensors()[i].nbytes));
    EXPECT_EQ(f->get_string_array("tokens"), g->get_string_array("tokens"));
  }
  const auto empty = (dir / "empty.gguf").string();
  std::ofstream(empty, std::ios::binary).flush();
  for (const std::string& bad : {(dir / "absent.gguf").string(), empty, dir.string()}) {
    try {
      GGUFFile::open(bad);
      ADD_FAILURE() << "expected FileFormatError for " << bad;
    } catch (const FileFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace exactly
