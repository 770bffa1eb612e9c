// The CPU model's hidden states (Model::hidden()), which a draft head reads:
// asking for them leaves every logit's bits as they are, and each is the
// vector the output head multiplies — the head times it gives the logits
// row of the same position, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/ops.h"
#include "model/llama.h"
#include "real_model_test.h"

namespace exactly {
namespace {

class HiddenStates : public RealModelTest {
 protected:
  // One pass over `tokens` from position 0, logits of every row, into a fresh cache.
  static std::vector<float> logits(const std::vector<int32_t>& tokens, bool want_hidden, std::vector<float>* hidden) {
    Model& m = *model_->model;
    ThreadPool pool(2);
    const int32_t bs = 16;
    std::unique_ptr<KVPool> kv = m.make_kv_pool(4, bs);
    const std::vector<int32_t> table = {0, 1, 2, 3};
    ForwardBatch b;
    b.reset(1, table.size());
    b.input.begin_sequence(0, table);
    for (size_t i = 0; i < tokens.size(); ++i) b.input.push_token(tokens[i], static_cast<int64_t>(i), table, bs);
    b.input.end_sequence(static_cast<int64_t>(tokens.size()));
    for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
      b.input.logits_rows.push_back(i);
      if (want_hidden) b.input.hidden_rows.push_back(static_cast<int32_t>(tokens.size()) - 1 - i);  // reversed order
    }
    const auto vocab = static_cast<size_t>(m.config().vocab_size);
    std::vector<float> out(tokens.size() * vocab);
    m.forward(b, *kv, out.data(), pool);
    if (hidden) hidden->assign(m.hidden().begin(), m.hidden().end());
    return out;
  }
};

TEST_F(HiddenStates, AskingForThemKeepsTheLogitsAndTheHeadTimesThemGivesTheLogits) {
  ASSERT_TRUE(model_->model->returns_hidden());
  const std::vector<int32_t> tokens = model_->tokenizer->encode("The capital of France is Paris, and of Italy", true);
  std::vector<float> hidden;
  const std::vector<float> plain = logits(tokens, false, nullptr);
  const std::vector<float> with = logits(tokens, true, &hidden);
  ASSERT_EQ(plain.size(), with.size());
  EXPECT_EQ(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(float)), 0) << "logits changed";

  const auto* llama = dynamic_cast<const LlamaModel*>(model_->model.get());
  ASSERT_NE(llama, nullptr);
  const auto dim = static_cast<size_t>(llama->config().dim);
  const auto vocab = static_cast<size_t>(llama->config().vocab_size);
  ASSERT_EQ(hidden.size(), tokens.size() * dim);
  ThreadPool pool(2);
  std::vector<float> again(vocab);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const size_t row = tokens.size() - 1 - i;  // hidden rows were asked for in reverse
    kernels::matmul(llama->weights().output, hidden.data() + i * dim, 1, again.data(), pool);
    EXPECT_EQ(std::memcmp(again.data(), plain.data() + row * vocab, vocab * sizeof(float)), 0) << "position " << row;
  }
}

}  // namespace
}  // namespace exactly
