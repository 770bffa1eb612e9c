// The build without xgrammar's sources: every grammar is refused, saying how to get them.
#include "constrain/grammar_cache.h"

namespace exactly {

struct GrammarCache::Impl {};

GrammarCache::GrammarCache(const Tokenizer&, int32_t, int64_t) {}
GrammarCache::~GrammarCache() = default;

std::shared_ptr<const Constraint> GrammarCache::get(const GrammarSpec&) {
  throw GrammarError("this build has no grammar engine (run scripts/fetch-xgrammar and rebuild)");
}

GrammarCacheStats GrammarCache::stats() const { return {}; }
bool GrammarCache::available() { return false; }

}  // namespace exactly
