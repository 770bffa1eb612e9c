// Safetensors: files written here byte by byte from the format's definition
// (8-byte little-endian header length, JSON header, data section), read back
// exactly; sharded checkpoints through an index; every corruption a
// FileFormatError naming what is wrong, never a crash.
#include "loader/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace exactly {
namespace {

using Json = nlohmann::json;

struct Blob {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> image(const std::vector<Blob>& blobs, const Json& metadata = Json(),
                           const std::function<void(Json&)>& edit = nullptr) {
  Json header = Json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const Blob& b : blobs) {
    header[b.name] = {{"dtype", b.dtype}, {"shape", b.shape}, {"data_offsets", {at, at + b.bytes.size()}}};
    at += b.bytes.size();
  }
  if (edit) edit(header);
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';  // the format allows trailing spaces
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(uint64_t{text.size()} >> (8 * i)));
  out += text;
  for (const Blob& b : blobs) out.append(reinterpret_cast<const char*>(b.bytes.data()), b.bytes.size());
  return std::vector<uint8_t>(out.begin(), out.end());
}

std::vector<uint8_t> counting(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(start + i);
  return v;
}

const std::vector<Blob> kBlobs = {{"model.embed_tokens.weight", "BF16", {4, 3}, counting(24, 1)},
                                  {"model.norm.weight", "F32", {3}, counting(12, 100)},
                                  {"lm_head.weight", "F16", {2, 2}, counting(8, 200)}};

std::unique_ptr<SafetensorsFile> parse(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::parse(bytes.data(), bytes.size(), "test.safetensors");
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    parse(bytes);
  } catch (const FileFormatError& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsBackEveryTensorAndTheMetadata) {
  const auto bytes = image(kBlobs, Json{{"format", "pt"}});
  const auto f = parse(bytes);
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  for (const Blob& b : kBlobs) {
    const SafetensorsTensor* t = f->find(b.name);
    ASSERT_NE(t, nullptr) << b.name;
    EXPECT_EQ(safetensors_dtype_name(t->dtype), b.dtype);
    EXPECT_EQ(t->shape, b.shape);
    ASSERT_EQ(t->size_bytes, static_cast<int64_t>(b.bytes.size()));
    EXPECT_EQ(std::memcmp(t->data, b.bytes.data(), b.bytes.size()), 0) << b.name;
    EXPECT_EQ(bytes.data() + t->file_offset, t->data);
  }
  EXPECT_EQ(f->find("missing"), nullptr);
}

TEST(Safetensors, NamesWhatIsWrong) {
  EXPECT_NE(error_of(image(kBlobs, Json(), [](Json& h) { h["lm_head.weight"]["dtype"] = "F17"; })).find(
                "'lm_head.weight' has unknown dtype \"F17\""),
            std::string::npos);
  EXPECT_NE(error_of(image(kBlobs, Json(), [](Json& h) { h["model.norm.weight"]["shape"] = {4}; })).find(
                "'model.norm.weight' holds 12 bytes but its shape [4] of F32 needs 16"),
            std::string::npos);
  EXPECT_NE(error_of(image(kBlobs, Json(), [](Json& h) { h["lm_head.weight"]["data_offsets"] = {36, 4000}; }))
                .find("'lm_head.weight' bytes [36, 4000)"),
            std::string::npos);
  EXPECT_NE(error_of(image(kBlobs, Json(), [](Json& h) { h["lm_head.weight"]["data_offsets"] = {28, 36}; }))
                .find("overlap or hole"),
            std::string::npos);
  EXPECT_NE(error_of(image(kBlobs, Json(), [](Json& h) { h.erase("lm_head.weight"); })).find("data section has 44"),
            std::string::npos);
  EXPECT_NE(error_of(image(kBlobs, Json(), [](Json& h) { h["x"] = 3; })).find("'x' lacks dtype"), std::string::npos);
  std::vector<uint8_t> huge = image(kBlobs);
  huge[6] = 0x7f;
  EXPECT_NE(error_of(huge).find("header length"), std::string::npos);
  std::vector<uint8_t> not_json = image(kBlobs);
  not_json[8] = '[';
  EXPECT_NE(error_of(not_json).find("not a JSON object"), std::string::npos);
}

TEST(Safetensors, EveryTruncationIsAnErrorNotACrash) {
  const auto bytes = image(kBlobs);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(parse(cut), FileFormatError) << "cut at " << n;
  }
}

TEST(Safetensors, ShardedCheckpointResolvesTensorsThroughTheIndex) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("exactly_st_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                       static_cast<std::streamsize>(bytes.size()));
  };
  write("model-00001-of-00002.safetensors", image({kBlobs[0], kBlobs[1]}));
  write("model-00002-of-00002.safetensors", image({kBlobs[2]}));
  Json index = {{"metadata", {{"total_size", 44}}},
                {"weight_map",
                 {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                  {"model.norm.weight", "model-00001-of-00002.safetensors"},
                  {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  const auto c = SafetensorsCheckpoint::open(dir.string());
  EXPECT_EQ(c->num_shards(), 2u);
  ASSERT_EQ(c->tensors().size(), 3u);
  const SafetensorsTensor* head = c->find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(std::memcmp(head->data, kBlobs[2].bytes.data(), 8), 0);

  index["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  try {
    SafetensorsCheckpoint::open(dir.string());
    ADD_FAILURE() << "an index naming the wrong shard was accepted";
  } catch (const FileFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'lm_head.weight' is not in its shard model-00001-of-00002.safetensors"),
              std::string::npos)
        << e.what();
  }
  index["weight_map"]["lm_head.weight"] = "../elsewhere.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  EXPECT_THROW(SafetensorsCheckpoint::open(dir.string()), FileFormatError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace exactly
