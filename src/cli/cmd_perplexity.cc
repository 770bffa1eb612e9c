// `exactly perplexity`: perplexity of a text file over non-overlapping windows
// of --ctx tokens, computed the way llama.cpp's perplexity tool does: each
// window starts with BOS (when the model adds one) and only the predictions in
// its second half are scored, so every scored token has at least ctx/2 tokens
// of context.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace exactly::cli {

namespace {

struct PerplexityOptions {
  ModelOptions model;
  std::string file;
  int ctx = 512;
  int chunks = -1;
};

// -log softmax(logits)[target] in double precision.
double negative_log_likelihood(const float* logits, int32_t vocab, int32_t target) {
  float max = logits[0];
  for (int32_t i = 1; i < vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return std::log(sum) - (static_cast<double>(logits[target]) - max);
}

void run(const PerplexityOptions& o) {
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  const Tokenizer& tok = *m.tokenizer;
  const int32_t vocab = m.config().vocab_size;
  if (o.ctx < 2 || o.ctx > m.config().context_length)
    throw Error(strformat("--ctx %d must be between 2 and the model's context %d", o.ctx, m.config().context_length),
                ExitCode::kUsage);
  const std::string text = read_file(o.file);
  const bool bos = tok.add_bos() && tok.bos_id();
  std::vector<int32_t> tokens;
  if (bos) tokens.push_back(*tok.bos_id());
  auto ids = tok.encode(text, false);
  tokens.insert(tokens.end(), ids.begin(), ids.end());

  const int32_t n_ctx = o.ctx;
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (o.chunks > 0) n_chunks = std::min<int64_t>(n_chunks, o.chunks);
  if (n_chunks == 0)
    throw Error(strformat("%s has %zu tokens; at least %d (one window of --ctx) are needed", o.file.c_str(),
                          tokens.size(), n_ctx), ExitCode::kBadInput);

  ThreadPool pool(o.model.resolved_threads());
  Generator gen(*m.model, pool, n_ctx);
  std::vector<float> logits(static_cast<size_t>(n_ctx) * vocab);
  const int32_t first = n_ctx / 2;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::fprintf(stderr, "perplexity: %zu tokens, %lld windows of %d\n", tokens.size(),
               static_cast<long long>(n_chunks), n_ctx);
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> window(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (bos) window[0] = *tok.bos_id();
    gen.reset();
    gen.feed_all(window, logits.data());
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      double v = negative_log_likelihood(logits.data() + static_cast<size_t>(j) * vocab, vocab,
                                         tokens[static_cast<size_t>(c * n_ctx + j + 1)]);
      nll += v;
      nll2 += v * v;
      ++count;
    }
    std::printf("[%lld]%.4f%s", static_cast<long long>(c + 1), std::exp(nll / static_cast<double>(count)),
                c + 1 == n_chunks ? "\n" : ",");
    std::fflush(stdout);
  }
  const double mean = nll / static_cast<double>(count);
  const double var = nll2 / static_cast<double>(count) - mean * mean;
  const double ppl = std::exp(mean);
  const double err = count > 1 ? ppl * std::sqrt(std::max(var, 0.0) / static_cast<double>(count - 1)) : 0.0;
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a text file over non-overlapping windows");
  add_model_options(*cmd, o->model);
  cmd->add_option("-f,--file", o->file, "text file")->required();
  cmd->add_option("-c,--ctx", o->ctx, "window size in tokens")->capture_default_str();
  cmd->add_option("--chunks", o->chunks, "score at most this many windows (-1: all)")->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
