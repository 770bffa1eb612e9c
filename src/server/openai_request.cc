#include "server/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/format.h"

namespace exactly::server {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& where, const char* field, const std::string& why) {
  std::string message = strformat("field '%s' %s", field, why.c_str());
  throw RequestError(where.empty() ? message : where + ": " + message, field);
}

// Numbers are range-checked in the widest type before they are narrowed, so
// 2^32 + 1 is refused rather than read as 1.
template <class T>
void read_number(const json& body, const char* field, T& out, const std::string& where) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return;
  if (!it->is_number()) bad(where, field, "must be a number, got " + std::string(it->type_name()));
  using limits = std::numeric_limits<T>;
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) bad(where, field, "must be an integer");
    const bool fits = it->is_number_unsigned()
                          ? it->get<uint64_t>() <= static_cast<uint64_t>(limits::max())
                          : it->get<int64_t>() >= static_cast<int64_t>(limits::min()) &&
                                it->get<int64_t>() <= static_cast<int64_t>(limits::max());
    if (!fits)
      bad(where, field, strformat("must be between %lld and %lld", static_cast<long long>(limits::min()),
                                  static_cast<long long>(limits::max())));
    out = static_cast<T>(it->is_number_unsigned() ? static_cast<int64_t>(it->get<uint64_t>()) : it->get<int64_t>());
  } else {
    const double v = it->get<double>();
    if (!std::isfinite(v) || std::fabs(v) > static_cast<double>(limits::max())) bad(where, field, "must be finite");
    out = static_cast<T>(v);
  }
}

void check_range(const std::string& where, const char* field, double v, double lo, double hi) {
  if (v < lo || v > hi) bad(where, field, strformat("must be between %g and %g, got %g", lo, hi, v));
}

std::vector<int32_t> token_ids(const json& ids, int32_t vocab_size, const std::string& where) {
  std::vector<int32_t> out;
  for (const auto& v : ids) {
    if (!v.is_number_integer()) bad(where, "prompt", "must be a string or an array of token ids");
    int64_t id = v.get<int64_t>();
    if (id < 0 || id >= vocab_size)
      bad(where, "prompt", strformat("has token id %lld outside the vocabulary (%d)", static_cast<long long>(id), vocab_size));
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

std::vector<int32_t> text_prompt(const std::string& text, const Tokenizer& tok) {
  std::vector<int32_t> out;
  if (tok.add_bos() && tok.bos_id()) out.push_back(*tok.bos_id());
  auto ids = tok.encode(text, true);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

}  // namespace

RequestParams parse_generation_fields(const json& body, const std::string& where) {
  if (!body.is_object()) throw RequestError((where.empty() ? "" : where + ": ") + "a request must be a JSON object", "");
  RequestParams p;
  p.sampling.temperature = 1.0f;
  p.sampling.top_p = 1.0f;
  p.sampling.top_k = 0;
  p.sampling.min_p = 0.0f;
  p.sampling.repetition_penalty = 1.0f;
  p.sampling.repetition_window = -1;

  read_number(body, "temperature", p.sampling.temperature, where);
  check_range(where, "temperature", p.sampling.temperature, 0, 100);
  read_number(body, "top_p", p.sampling.top_p, where);
  check_range(where, "top_p", p.sampling.top_p, 1e-9, 1);
  read_number(body, "top_k", p.sampling.top_k, where);
  if (p.sampling.top_k < -1) bad(where, "top_k", "must be -1 or 0 (off) or a positive number of tokens");
  if (p.sampling.top_k < 0) p.sampling.top_k = 0;  // -1 means off, as in vLLM
  read_number(body, "min_p", p.sampling.min_p, where);
  check_range(where, "min_p", p.sampling.min_p, 0, 1);
  read_number(body, "presence_penalty", p.sampling.presence_penalty, where);
  check_range(where, "presence_penalty", p.sampling.presence_penalty, -2, 2);
  read_number(body, "frequency_penalty", p.sampling.frequency_penalty, where);
  check_range(where, "frequency_penalty", p.sampling.frequency_penalty, -2, 2);
  read_number(body, "repetition_penalty", p.sampling.repetition_penalty, where);
  if (!(p.sampling.repetition_penalty > 0)) bad(where, "repetition_penalty", "must be positive");
  read_number(body, "n", p.n, where);
  if (p.n < 1 || p.n > 128) bad(where, "n", "must be between 1 and 128");
  read_number(body, "priority", p.priority, where);
  if (auto s = body.find("seed"); s != body.end() && !s->is_null()) {
    if (!s->is_number_integer()) bad(where, "seed", "must be an integer");
    // Negative seeds are taken modulo 2^64, as every other 64-bit seed.
    p.sampling.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
  }
  if (auto l = body.find("prompt_logprobs"); l != body.end() && !l->is_null()) {
    // vLLM's extension: the logprob of each prompt token with top-N alternatives.
    const bool ok = l->is_number_integer() && !l->is_number_unsigned() ? l->get<int64_t>() >= 0 && l->get<int64_t>() <= kMaxLogprobs
                                                                        : l->is_number_unsigned() && l->get<uint64_t>() <= kMaxLogprobs;
    if (!ok) bad(where, "prompt_logprobs", strformat("must be an integer between 0 and %d", kMaxLogprobs));
    p.prompt_logprobs = l->get<int32_t>();
  }
  if (auto e = body.find("ignore_eos"); e != body.end() && !e->is_null()) {
    if (!e->is_boolean()) bad(where, "ignore_eos", "must be a boolean");
    p.ignore_eos = e->get<bool>();
  }
  if (auto k = body.find("skip_special_tokens"); k != body.end() && !k->is_null()) {
    if (!k->is_boolean()) bad(where, "skip_special_tokens", "must be a boolean");
    p.skip_special_tokens = k->get<bool>();
  }
  if (auto u = body.find("user"); u != body.end() && !u->is_null() && !u->is_string())
    bad(where, "user", "must be a string");
  if (auto st = body.find("stop"); st != body.end() && !st->is_null()) {
    if (st->is_string()) {
      p.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      for (const auto& s : *st) {
        if (!s.is_string()) bad(where, "stop", "must be a string or an array of strings");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      bad(where, "stop", "must be a string or an array of strings");
    }
  }
  if (auto st = body.find("stop_token_ids"); st != body.end() && !st->is_null()) {
    if (!st->is_array()) bad(where, "stop_token_ids", "must be an array of token ids");
    for (const auto& s : *st) {
      const bool id = s.is_number_integer() && (s.is_number_unsigned() ? s.get<uint64_t>() <= INT32_MAX
                                                                        : s.get<int64_t>() >= 0 && s.get<int64_t>() <= INT32_MAX);
      if (!id) bad(where, "stop_token_ids", "must be an array of token ids");
      p.stop_token_ids.push_back(static_cast<int32_t>(s.get<int64_t>()));
    }
  }
  return p;
}

LogitBias parse_logit_bias(const json& body, int32_t vocab_size, const std::string& where) {
  LogitBias out;
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_object()) bad(where, "logit_bias", "must be an object from token ids to biases");
  for (const auto& [key, value] : it->items()) {
    // A token id in decimal, as OpenAI's tokenizer ids are written: digits only, no sign or padding.
    const bool digits = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos &&
                        (key == "0" || key[0] != '0');
    const long id = digits ? std::stol(key) : -1;
    if (!digits || id >= vocab_size)
      bad(where, "logit_bias",
          strformat("has the key '%s', which is not a token id of this model (0 to %d)",
                    key.substr(0, 32).c_str(), vocab_size - 1));
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
        value.get<double>() > 100)
      bad(where, "logit_bias", strformat("maps token %ld to %s; a bias is a number between -100 and 100", id,
                                         value.dump().substr(0, 32).c_str()));
    out.emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  return out;
}

std::optional<int64_t> parse_max_tokens(const json& body, const std::string& where) {
  for (const char* field : {"max_completion_tokens", "max_tokens"}) {
    auto it = body.find(field);
    if (it == body.end() || it->is_null()) continue;
    int64_t v = 0;
    read_number(body, field, v, where);
    if (v < 1) bad(where, field, strformat("must be at least 1, got %lld", static_cast<long long>(v)));
    return v;
  }
  return std::nullopt;
}

std::vector<std::vector<int32_t>> parse_prompts(const json& body, const Tokenizer& tok, int32_t vocab_size,
                                                bool allow_batch, const std::string& where) {
  auto prompt = body.find("prompt");
  if (prompt == body.end()) bad(where, "prompt", "is required");
  std::vector<std::vector<int32_t>> prompts;
  const char* expected = allow_batch ? "must be a string, an array of token ids, or an array of those"
                                     : "must be a string or an array of token ids";
  if (prompt->is_string()) {
    prompts.push_back(text_prompt(prompt->get<std::string>(), tok));
  } else if (prompt->is_array() && !prompt->empty() && (prompt->front().is_string() || prompt->front().is_array())) {
    if (!allow_batch) bad(where, "prompt", expected);
    for (const auto& item : *prompt) {
      if (item.is_string()) prompts.push_back(text_prompt(item.get<std::string>(), tok));
      else if (item.is_array()) prompts.push_back(token_ids(item, vocab_size, where));
      else bad(where, "prompt", expected);
    }
  } else if (prompt->is_array()) {
    prompts.push_back(token_ids(*prompt, vocab_size, where));
  } else {
    bad(where, "prompt", expected);
  }
  for (const auto& p : prompts)
    if (p.empty()) bad(where, "prompt", "is empty");
  return prompts;
}

int32_t parse_completion_logprobs(const json& body, const std::string& where) {
  auto l = body.find("logprobs");
  if (l == body.end() || l->is_null()) return -1;
  if (!l->is_number_integer() || l->get<int64_t>() < 0 || l->get<int64_t>() > 20)
    bad(where, "logprobs", "must be an integer between 0 and 20");
  return l->get<int32_t>();
}

RequestParams parse_completion_request(const json& body, const Tokenizer& tok, int32_t vocab_size,
                                       const std::string& where) {
  RequestParams p = parse_generation_fields(body, where);
  // Tool calls are parsed out of answers by the server alone; here they would be ignored.
  for (const char* f : {"tools", "tool_choice"})
    if (auto it = body.find(f); it != body.end() && !it->is_null())
      bad(where, f, "is not supported here: tool calls are served by `exactly serve`");
  p.prompt = parse_prompts(body, tok, vocab_size, false, where).front();
  p.max_tokens = parse_max_tokens(body, where).value_or(16);  // OpenAI's default for completions
  p.logprobs = parse_completion_logprobs(body, where);
  p.logit_bias = parse_logit_bias(body, vocab_size, where);
  return p;
}

json completion_logprobs_json(const std::vector<TokenLogprobs>& logprobs, const Tokenizer& tok, size_t text_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const TokenLogprobs& t : logprobs) {
    std::string text = tok.token_bytes(t.id, true);  // raw bytes; the writer replaces invalid UTF-8
    offsets.push_back(text_offset);
    text_offset += text.size();
    tokens.push_back(std::move(text));
    token_logprobs.push_back(t.logprob);
    json alts = json::object();
    for (const auto& [id, l] : t.top) alts[tok.token_bytes(id, true)] = l;
    top.push_back(alts);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json prompt_logprobs_json(const std::vector<std::optional<TokenLogprobs>>& prompt, const Tokenizer& tok) {
  json out = json::array();
  for (const std::optional<TokenLogprobs>& t : prompt) {
    if (!t) {
      out.push_back(nullptr);
      continue;
    }
    json entry = json::object();
    auto add = [&](int32_t id, double logprob, int32_t rank) {
      entry[std::to_string(id)] = {{"logprob", logprob}, {"rank", rank}, {"decoded_token", tok.token_bytes(id, true)}};
    };
    for (size_t i = 0; i < t->top.size(); ++i) add(t->top[i].first, t->top[i].second, static_cast<int32_t>(i) + 1);
    add(t->id, t->logprob, t->rank);
    out.push_back(std::move(entry));
  }
  return out;
}

json completion_result_json(size_t index, const std::vector<FinishedCompletion>& choices, const RequestOutput& last,
                            bool with_logprobs, const std::vector<std::optional<TokenLogprobs>>& prompt_logprobs,
                            const Tokenizer& tok) {
  json out;
  out["index"] = index;
  json arr = json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const FinishedCompletion& c = choices[i];
    completion_tokens += static_cast<int64_t>(c.token_ids.size());
    json ch;
    ch["index"] = i;
    ch["text"] = c.text;
    ch["token_ids"] = c.token_ids;
    ch["finish_reason"] = c.finish_reason;
    ch["logprobs"] = with_logprobs ? completion_logprobs_json(c.logprobs, tok, 0) : json(nullptr);
    arr.push_back(ch);
  }
  out["choices"] = arr;
  if (!prompt_logprobs.empty()) out["prompt_logprobs"] = prompt_logprobs_json(prompt_logprobs, tok);
  out["usage"] = {{"prompt_tokens", last.prompt_tokens},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", last.prompt_tokens + completion_tokens},
                  {"prompt_tokens_details", {{"cached_tokens", last.cached_prompt_tokens}}}};
  return out;
}

}  // namespace exactly::server
