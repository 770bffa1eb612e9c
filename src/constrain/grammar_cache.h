// Compiles the grammar a request asks for into a Constraint the engine
// applies, and keeps compiled grammars in a cache bounded in bytes, keyed by
// the grammar's kind and text: a schema compiled once is found again.
// Thread-safe: request parsers compile from several threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/output_constraint.h"
#include "tokenizer/tokenizer.h"

namespace exactly {

struct GrammarSpec {
  enum class Kind { kJsonSchema, kJsonObject, kRegex, kEbnf, kChoice };
  Kind kind = Kind::kJsonObject;
  std::string text;                  // the schema (serialized), the regex or the EBNF grammar
  std::vector<std::string> choices;  // kChoice: the output is exactly one of them
};

// A grammar that does not compile: the message says why, for the client.
struct GrammarError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct GrammarCacheStats {
  int64_t compiles = 0;  // requests that compiled (cache misses)
  int64_t hits = 0;
  double compile_seconds = 0;
};

class GrammarCache {
 public:
  // `vocab_size` is the model's (its logits rows), which may exceed the
  // tokenizer's; the tokens past the tokenizer's are never allowed.
  GrammarCache(const Tokenizer& tok, int32_t vocab_size, int64_t max_bytes);
  ~GrammarCache();
  // Throws GrammarError when the grammar does not compile.
  std::shared_ptr<const Constraint> get(const GrammarSpec& spec);
  GrammarCacheStats stats() const;
  // Whether this build has a grammar engine.
  static bool available();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace exactly
