// The tokenizer of the default model file, read through the GGUF loader.
// Exact agreement with an independent tokenizer is in tests/e2e/test_tokenizer.py;
// here: metadata wiring and encoding speed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "loader/gguf.h"
#include "tokenizer/tokenizer.h"

namespace exactly {
namespace {

std::string model_file() {
  if (const char* m = std::getenv("EXACTLY_MODEL"); m && *m) return m;
  const char* src = std::getenv("EXACTLY_SOURCE_DIR");
  return std::string(src ? src : ".") + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class RealModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(model_file())) GTEST_SKIP() << "model not found: " << model_file();
    file_ = GGUFFile::open(model_file());
    tok_ = Tokenizer::from_gguf(*file_);
  }
  std::unique_ptr<GGUFFile> file_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(RealModel, MetadataIsWired) {
  EXPECT_EQ(tok_->vocab_size(), 49152);
  EXPECT_EQ(tok_->bos_id(), 1);
  EXPECT_EQ(tok_->eos_id(), 2);
  EXPECT_FALSE(tok_->add_bos());
  EXPECT_TRUE(tok_->is_end_of_generation(2));  // <|im_end|>
  EXPECT_TRUE(tok_->is_end_of_generation(0));  // <|endoftext|>
  EXPECT_FALSE(tok_->is_end_of_generation(1)); // <|im_start|>
  EXPECT_NE(tok_->chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tok_->encode("<|im_start|>", true), std::vector<int32_t>{1});
  EXPECT_EQ(tok_->token_bytes(1), "");
  EXPECT_EQ(tok_->token_bytes(1, true), "<|im_start|>");
}

TEST_F(RealModel, EncodesAThousandTokensQuickly) {
  // Distinct words, so the piece cache cannot help: this is the cold path.
  std::string text;
  for (int i = 0; i < 400; ++i) text += "alpha" + std::to_string(i * 7919) + "beta, ";
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok_->encode(text, true);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GE(ids.size(), 1000u);
  std::printf("encoded %zu tokens in %.2f ms\n", ids.size(), ms);
  EXPECT_EQ(tok_->decode(ids), text);
  // The target is well under 10 ms; the bound leaves room for a loaded CI machine.
  EXPECT_LT(ms, 50.0);
}

}  // namespace
}  // namespace exactly
