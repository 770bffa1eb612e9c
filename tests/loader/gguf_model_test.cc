// The real default model opens and shows facts known from its conversion
// (cross-checked with the reference Python reader of the format).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "loader/gguf.h"

namespace exactly {
namespace {

std::string model_path() {
  if (const char* p = std::getenv("EXACTLY_MODEL")) return p;
  const char* src = std::getenv("EXACTLY_SOURCE_DIR");
  return std::string(src ? src : ".") + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GGUFModel, SmolLM2Facts) {
  const std::string path = model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model not found at " << path;
  auto f = GGUFFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 33u);
  EXPECT_EQ(f->tensors().size(), 272u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->require_int("llama.block_count"), 30);
  EXPECT_EQ(f->require_int("llama.embedding_length"), 576);
  EXPECT_EQ(f->require_int("llama.attention.head_count"), 9);
  EXPECT_EQ(f->require_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(f->require_float("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(f->get_bool("tokenizer.ggml.add_bos_token"), false);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type")->size(), 49152u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ(f->data_offset(), 1785664u);  // where the reference reader places the first tensor

  const GGUFTensorInfo& embd = f->require_tensor("token_embd.weight");
  EXPECT_EQ(embd.type, GGMLType::Q8_0);
  EXPECT_EQ(embd.shape, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(embd.nbytes, 576u / 32 * 34 * 49152);
  EXPECT_EQ(embd.offset, 0u);
  const GGUFTensorInfo& q = f->require_tensor("blk.3.attn_q.weight");
  EXPECT_EQ(q.type, GGMLType::Q4_1);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{576, 576}));
  EXPECT_EQ(f->require_tensor("output_norm.weight").type, GGMLType::F32);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // the output head is tied to token_embd
  int counts[3] = {0, 0, 0};                              // Q4_1, F32, Q8_0
  for (const auto& t : f->tensors()) {
    counts[0] += t.type == GGMLType::Q4_1;
    counts[1] += t.type == GGMLType::F32;
    counts[2] += t.type == GGMLType::Q8_0;
  }
  EXPECT_EQ(counts[0], 210);
  EXPECT_EQ(counts[1], 61);
  EXPECT_EQ(counts[2], 1);
}

}  // namespace
}  // namespace exactly
