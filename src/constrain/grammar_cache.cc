#include "constrain/grammar_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <list>
#include <mutex>
#include <unordered_map>

#include <xgrammar/xgrammar.h>

#include "constrain/xgrammar_log.h"

namespace exactly {

namespace {

constexpr int kMaxWhitespace = 20;  // the longest run of whitespace between JSON tokens

// One sequence's matcher over a compiled grammar.
class XgrammarState final : public ConstraintState {
 public:
  XgrammarState(const xgrammar::CompiledGrammar& g, const std::vector<int>& stop_ids)
      : matcher_(g, stop_ids, /*terminate_without_stop_token=*/false), stop_ids_(stop_ids) {}

  void fill_mask(std::span<uint32_t> mask) override {
    int64_t shape = static_cast<int64_t>(mask.size());
    DLTensor t{};
    t.data = mask.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLInt, 32, 1};
    t.shape = &shape;
    matcher_.FillNextTokenBitmask(&t);
    if (std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; })) {
      dead_end_ = true;
      for (int id : stop_ids_) mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
    }
  }

  bool accept(int32_t token) override { return matcher_.AcceptToken(token); }
  bool dead_end() const override { return dead_end_; }

 private:
  xgrammar::GrammarMatcher matcher_;
  const std::vector<int>& stop_ids_;
  bool dead_end_ = false;
};

class XgrammarConstraint final : public Constraint {
 public:
  XgrammarConstraint(xgrammar::CompiledGrammar g, const std::vector<int>& stop_ids)
      : grammar_(std::move(g)), stop_ids_(stop_ids) {}
  std::unique_ptr<ConstraintState> start() const override {
    return std::make_unique<XgrammarState>(grammar_, stop_ids_);
  }

 private:
  xgrammar::CompiledGrammar grammar_;
  const std::vector<int>& stop_ids_;  // the cache's, which outlives every request
};

// A string literal of xgrammar's EBNF: quotes, backslashes and control
// characters escaped, other bytes (UTF-8 included) as they are.
std::string ebnf_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// xgrammar's message without the time and source location it puts first.
std::string client_message(std::string m) {
  if (const size_t at = m.find(".cc:"); !m.empty() && m[0] == '[' && at != std::string::npos)
    if (const size_t colon = m.find(": ", at + 4); colon != std::string::npos) m = m.substr(colon + 2);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

std::string choice_grammar(const std::vector<std::string>& choices) {
  std::string g = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) g += (i ? " | " : "") + ebnf_literal(choices[i]);
  return g;
}

std::string cache_key(const GrammarSpec& spec) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(spec.kind)));
  if (spec.kind == GrammarSpec::Kind::kChoice) return key + choice_grammar(spec.choices);
  return key + spec.text;
}

xgrammar::TokenizerInfo tokenizer_info(const Tokenizer& tok, int32_t vocab_size, std::vector<int>& stop_ids) {
  // Each token as the bytes it stands for (RAW: nothing left to decode);
  // control tokens stand for no bytes, which xgrammar takes as special and
  // never allows, except the stop tokens once the grammar is complete.
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    vocab[static_cast<size_t>(id)] = tok.token_bytes(id, false);
    if (tok.is_end_of_generation(id)) stop_ids.push_back(id);
  }
  return xgrammar::TokenizerInfo(vocab, xgrammar::VocabType::RAW, vocab_size, stop_ids);
}

}  // namespace

struct GrammarCache::Impl {
  Impl(const Tokenizer& tok, int32_t vocab_size, int64_t max_bytes_)
      : info(tokenizer_info(tok, vocab_size, stop_ids)),
        compiler(info, /*max_threads=*/2, /*cache_enabled=*/false),
        max_bytes(max_bytes_) {}

  xgrammar::CompiledGrammar compile(const GrammarSpec& spec) {
    switch (spec.kind) {
      // Strict: properties and items a schema does not name are left out,
      // so the output is one of the documents the schema accepts. Any
      // layout, with runs of whitespace bounded: an unbounded run lets a
      // small model pad until max_tokens cuts the document.
      case GrammarSpec::Kind::kJsonSchema:
        return compiler.CompileJSONSchema(spec.text, /*any_whitespace=*/true, std::nullopt, std::nullopt,
                                          /*strict_mode=*/true, kMaxWhitespace);
      // An object with any members, as OpenAI's json_object mode promises.
      case GrammarSpec::Kind::kJsonObject:
        return compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/true, std::nullopt,
                                          std::nullopt, /*strict_mode=*/false, kMaxWhitespace);
      case GrammarSpec::Kind::kRegex: return compiler.CompileRegex(spec.text);
      case GrammarSpec::Kind::kEbnf: return compiler.CompileGrammar(spec.text, "root");
      case GrammarSpec::Kind::kChoice: return compiler.CompileGrammar(choice_grammar(spec.choices), "root");
    }
    throw GrammarError("unknown grammar kind");
  }

  // Least recently used first; evicted from the front down to max_bytes.
  struct Entry {
    std::string key;
    std::shared_ptr<const Constraint> constraint;
    int64_t bytes;
  };
  std::vector<int> stop_ids;
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
  int64_t max_bytes;
  mutable std::mutex mu;
  std::list<Entry> lru;
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  int64_t bytes = 0;
  GrammarCacheStats stats;
};

GrammarCache::GrammarCache(const Tokenizer& tok, int32_t vocab_size, int64_t max_bytes)
    : impl_(std::make_unique<Impl>(tok, vocab_size, max_bytes)) {}

GrammarCache::~GrammarCache() = default;

bool GrammarCache::available() { return true; }

GrammarCacheStats GrammarCache::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

std::shared_ptr<const Constraint> GrammarCache::get(const GrammarSpec& spec) {
  Impl& m = *impl_;
  const std::string key = cache_key(spec);
  {
    std::lock_guard lock(m.mu);
    if (auto it = m.index.find(key); it != m.index.end()) {
      m.lru.splice(m.lru.end(), m.lru, it->second);
      ++m.stats.hits;
      return it->second->constraint;
    }
  }
  // Compiled outside the lock, so that one slow grammar holds up no other request.
  const auto t0 = std::chrono::steady_clock::now();
  take_xgrammar_warnings();
  xgrammar::CompiledGrammar g = [&] {
    try {
      return m.compile(spec);
    } catch (const std::exception& e) {
      throw GrammarError(client_message(e.what()));
    }
  }();
  // A warning means part of the grammar was left out: the output could break it.
  if (std::vector<std::string> w = take_xgrammar_warnings(); !w.empty())
    throw GrammarError("a part of it is not supported: " + w.front());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto bytes = static_cast<int64_t>(g.MemorySizeBytes() + key.size());
  auto constraint = std::make_shared<XgrammarConstraint>(std::move(g), m.stop_ids);
  std::lock_guard lock(m.mu);
  ++m.stats.compiles;
  m.stats.compile_seconds += seconds;
  if (m.index.count(key) || bytes > m.max_bytes) return constraint;
  m.lru.push_back({key, constraint, bytes});
  m.index[key] = std::prev(m.lru.end());
  m.bytes += bytes;
  while (m.bytes > m.max_bytes) {
    m.bytes -= m.lru.front().bytes;
    m.index.erase(m.lru.front().key);
    m.lru.pop_front();
  }
  return constraint;
}

}  // namespace exactly
