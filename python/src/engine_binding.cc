// The engine in-process, as `exactly batch` drives it: requests are read from
// completions request bodies by the same parser (so a request means the same
// from Python, `exactly batch` and the server), step() runs one engine
// iteration. Every call that touches the engine releases the GIL and holds
// the engine's lock instead, so Python threads run while a batch steps and
// two threads never step it at once.
#include <malloc.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/generation_request.h"
#include "server/request_body.h"
#include "server/structured_output.h"

namespace nb = nanobind;

namespace exactly::python {
namespace {

class PyEngine {
 public:
  PyEngine(const std::string& model, const std::string& device, const EngineConfig& config, bool deterministic,
           bool enforce_eager, int tensor_parallel_size) {
    LoadOptions options;
    options.device = parse_device(device);
    options.deterministic = deterministic;
    options.cuda_graphs = !enforce_eager;
    options.tensor_parallel_size = tensor_parallel_size;
    options.threads = config.threads > 0 ? config.threads : ThreadPool::default_threads();
    model_ = load_model(model, false, options);
    engine_ = std::make_unique<Engine>(model_, config);
  }

  // The engine's memory goes back to the system with the engine: what glibc
  // keeps of freed heap (tens of MiB of request state, spread over the
  // arenas of the engine's threads) is trimmed, so `del llm` shows in the
  // process's resident memory, as a user checking it expects.
  ~PyEngine() {
    engine_.reset();
    grammars_.reset();
    model_ = LoadedModel{};
    malloc_trim(0);
  }
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  // A completions request body with its prompt (text or token ids); returns
  // the request's id. Throws RequestError naming a bad field, Error(kUsage)
  // for a request the engine can never run.
  ClientRequestId add_request(const std::string& body_text) {
    const nlohmann::json body = server::parse_request_body(body_text);
    RequestParams params = server::parse_completion_request(body, tok(), model_.config().vocab_size, "");
    params.constraint = constraint(body_text, body, params.ignore_eos);
    std::lock_guard lock(mutex_);
    return engine_->add_request(params);
  }

  // The grammar a body's structured-output field asks for (vLLM's
  // `structured_outputs`, `guided_*`, or chat's `response_format`), compiled
  // on the caller's thread and cached by its text.
  std::shared_ptr<const Constraint> constraint(const std::string& text, const nlohmann::json& body, bool ignore_eos) {
    if (!server::asks_for_structure(body)) return nullptr;
    std::lock_guard lock(grammars_mutex_);
    if (!grammars_ && GrammarCache::available())
      grammars_ = std::make_unique<GrammarCache>(tok(), model_.config().vocab_size, server::kGrammarCacheBytes);
    return server::parse_request_constraint(text, body, ignore_eos, grammars_.get(), "");
  }

  std::vector<RequestOutput> step() {
    std::lock_guard lock(mutex_);
    return engine_->step();
  }

  // One step for a caller that wants only the whole of its requests
  // (generate(), chat()): the outputs of `mine` are folded here, in order,
  // instead of crossing into Python one step at a time. Returns the ids of
  // `mine` that finished in this step, and the other requests' outputs.
  std::pair<std::vector<ClientRequestId>, std::vector<RequestOutput>> step_folding(
      const std::vector<ClientRequestId>& mine) {
    const std::unordered_set<ClientRequestId> owned(mine.begin(), mine.end());
    std::lock_guard lock(mutex_);
    std::vector<ClientRequestId> finished;
    std::vector<RequestOutput> others;
    for (RequestOutput& out : engine_->step()) {
      if (!owned.contains(out.id)) {
        others.push_back(std::move(out));
        continue;
      }
      if (out.finished) finished.push_back(out.id);
      fold_locked(std::move(out));
    }
    return {std::move(finished), std::move(others)};
  }

  // An output that another caller's step delivered, folded in its turn.
  void fold_output(const RequestOutput& out) {
    std::lock_guard lock(mutex_);
    fold_locked(RequestOutput(out));
  }

  // Everything folded for `id` as one output (then forgotten); an empty one
  // when nothing was.
  RequestOutput take_folded(ClientRequestId id) {
    std::lock_guard lock(mutex_);
    auto it = folded_.find(id);
    if (it == folded_.end()) {
      RequestOutput empty;
      empty.id = id;
      return empty;
    }
    RequestOutput out = std::move(it->second);
    folded_.erase(it);
    return out;
  }

  void drop_folded(ClientRequestId id) {
    std::lock_guard lock(mutex_);
    folded_.erase(id);
  }

  void abort(ClientRequestId id) {
    std::lock_guard lock(mutex_);
    engine_->abort(id);
  }

  bool has_unfinished() {
    std::lock_guard lock(mutex_);
    return engine_->has_unfinished();
  }

  nb::dict kv_stats() {
    KVCacheStats kv;
    {
      std::lock_guard lock(mutex_);
      kv = engine_->kv_stats();
    }
    nb::dict d;
    d["total_blocks"] = kv.total_blocks;
    d["used_blocks"] = kv.used_blocks;
    d["cached_blocks"] = kv.cached_blocks;
    return d;
  }

  // The tokenizer's calls read immutable state: no lock.
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const {
    std::vector<int32_t> ids;
    if (add_special_tokens && tok().add_bos() && tok().bos_id()) ids.push_back(*tok().bos_id());
    const std::vector<int32_t> body = tok().encode(text, true);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  }

  nb::bytes decode(const std::vector<int32_t>& ids, bool render_special) const {
    for (int32_t id : ids) check_token(id);
    const std::string text = tok().decode(ids, render_special);
    return nb::bytes(text.data(), text.size());
  }

  nb::bytes token_text(int32_t id) const {
    check_token(id);
    const std::string bytes = tok().token_bytes(id, true);
    return nb::bytes(bytes.data(), bytes.size());
  }

  // `template_kwargs`: further template variables as a JSON object, "" for
  // none, checked as the server checks chat_template_kwargs.
  std::string chat_text(const std::string& messages, bool add_generation_prompt, const std::string& template_kwargs,
                        const std::string& tools) const {
    const auto kwargs = parse_template_kwargs(template_kwargs);
    const nlohmann::ordered_json parsed = tools.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(tools);
    return server::chat_prompt_text(parse_messages(messages), tok(), add_generation_prompt,
                                    tools.empty() ? nullptr : &parsed, kwargs ? &*kwargs : nullptr);
  }

  // `tools`: a chat request's "tools" array as JSON, "" for none; they go to
  // the template as the server passes them.
  std::vector<int32_t> chat_tokens(const std::string& messages, const std::string& tools,
                                   const std::string& template_kwargs) const {
    const auto kwargs = parse_template_kwargs(template_kwargs);
    const nlohmann::ordered_json parsed = tools.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(tools);
    return server::chat_prompt_tokens(parse_messages(messages), tok(), tools.empty() ? nullptr : &parsed,
                                      kwargs ? &*kwargs : nullptr);
  }

  const Tokenizer& tok() const { return *model_.tokenizer; }
  const LoadedModel& model() const { return model_; }
  const Engine& engine() const { return *engine_; }

 private:
  // Appends a step's output to what was folded for its request: each
  // completion's tokens, text and logprobs in order, its finish reason, the
  // prompt's logprobs when they come, the latest counts.
  void fold_locked(RequestOutput&& out) {
    auto [it, first] = folded_.try_emplace(out.id);
    RequestOutput& whole = it->second;
    if (first) {
      whole = std::move(out);
      return;
    }
    for (CompletionDelta& d : out.completions) {
      auto c = std::find_if(whole.completions.begin(), whole.completions.end(),
                            [&](const CompletionDelta& w) { return w.index == d.index; });
      if (c == whole.completions.end()) {
        whole.completions.push_back(std::move(d));
        continue;
      }
      c->token_ids.insert(c->token_ids.end(), d.token_ids.begin(), d.token_ids.end());
      c->text += d.text;
      c->logprobs.insert(c->logprobs.end(), std::make_move_iterator(d.logprobs.begin()),
                         std::make_move_iterator(d.logprobs.end()));
      if (d.finish_reason) c->finish_reason = d.finish_reason;
    }
    if (!out.prompt_logprobs.empty()) whole.prompt_logprobs = std::move(out.prompt_logprobs);
    whole.finished = out.finished;
    whole.prompt_tokens = out.prompt_tokens;
    whole.cached_prompt_tokens = out.cached_prompt_tokens;
    whole.completion_tokens = out.completion_tokens;
  }

  static std::optional<nlohmann::ordered_json> parse_template_kwargs(const std::string& text) {
    if (text.empty()) return std::nullopt;
    nlohmann::json body = nlohmann::json::object();
    body["chat_template_kwargs"] = nlohmann::json::parse(text);
    return server::chat_template_kwargs(body);
  }

  void check_token(int32_t id) const {
    if (id < 0 || id >= tok().vocab_size())
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                      std::to_string(tok().vocab_size()) + " tokens",
                  ExitCode::kUsage);
  }

  static nlohmann::json parse_messages(const std::string& messages) {
    return server::parse_request_body(messages);
  }

  LoadedModel model_;
  std::mutex grammars_mutex_;
  std::unique_ptr<GrammarCache> grammars_;  // made when a request asks for a grammar
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::unordered_map<ClientRequestId, RequestOutput> folded_;  // step_folding's requests, under mutex_
};

void bind_config(nb::module_& m) {
  nb::class_<EngineConfig>(m, "EngineConfig")
      .def(nb::init<>())
      .def_rw("threads", &EngineConfig::threads)
      .def_rw("kv_cache_memory", &EngineConfig::kv_cache_memory)
      .def_rw("gpu_memory_utilization", &EngineConfig::gpu_memory_utilization)
      .def_rw("block_size", &EngineConfig::block_size)
      .def_rw("max_num_batched_tokens", &EngineConfig::max_num_batched_tokens)
      .def_rw("max_num_seqs", &EngineConfig::max_num_seqs)
      .def_rw("enable_prefix_caching", &EngineConfig::enable_prefix_caching)
      .def_rw("long_prefill_token_threshold", &EngineConfig::long_prefill_token_threshold)
      .def_rw("max_model_len", &EngineConfig::max_model_len)
      .def_rw("spec_method", &EngineConfig::spec_method)
      .def_rw("num_speculative_tokens", &EngineConfig::num_speculative_tokens)
      .def_rw("adaptive_speculation", &EngineConfig::adaptive_speculation)
      .def_rw("confident_draft_runs", &EngineConfig::confident_draft_runs)
      .def_rw("draft_kv_cache_memory", &EngineConfig::draft_kv_cache_memory);
}

}  // namespace

void bind_engine(nb::module_& m) {
  bind_config(m);
  using Unlocked = nb::call_guard<nb::gil_scoped_release>;
  nb::class_<PyEngine>(m, "Engine")
      .def(nb::init<const std::string&, const std::string&, const EngineConfig&, bool, bool, int>(), nb::arg("model"),
           nb::arg("device"), nb::arg("config"), nb::arg("deterministic"), nb::arg("enforce_eager"),
           nb::arg("tensor_parallel_size") = 1, Unlocked())
      .def("add_request", &PyEngine::add_request, nb::arg("body"), Unlocked())
      .def("step", &PyEngine::step, Unlocked())
      .def("step_folding", &PyEngine::step_folding, nb::arg("mine"), Unlocked())
      .def("fold_output", &PyEngine::fold_output, nb::arg("output"), Unlocked())
      .def("take_folded", &PyEngine::take_folded, nb::arg("id"), Unlocked())
      .def("drop_folded", &PyEngine::drop_folded, nb::arg("id"), Unlocked())
      .def("abort", &PyEngine::abort, nb::arg("id"), Unlocked())
      .def("has_unfinished", &PyEngine::has_unfinished, Unlocked())
      .def("kv_stats", &PyEngine::kv_stats)
      .def("encode", &PyEngine::encode, nb::arg("text"), nb::arg("add_special_tokens"), Unlocked())
      .def("decode", &PyEngine::decode, nb::arg("ids"), nb::arg("render_special"))
      .def("chat_text", &PyEngine::chat_text, nb::arg("messages"), nb::arg("add_generation_prompt"),
           nb::arg("template_kwargs") = "", nb::arg("tools") = "", Unlocked())
      .def("chat_tokens", &PyEngine::chat_tokens, nb::arg("messages"), nb::arg("tools") = "",
           nb::arg("template_kwargs") = "", Unlocked())
      .def("token_text", &PyEngine::token_text, nb::arg("id"))
      .def_prop_ro("vocab_size", [](const PyEngine& e) { return e.model().config().vocab_size; })
      .def_prop_ro("max_model_len", [](const PyEngine& e) { return e.engine().max_model_len(); })
      .def_prop_ro("bos_token_id", [](const PyEngine& e) { return e.tok().bos_id().value_or(-1); })
      .def_prop_ro("eos_token_id", [](const PyEngine& e) { return e.tok().eos_id().value_or(-1); })
      .def_prop_ro("has_chat_template", [](const PyEngine& e) { return !e.tok().chat_template().empty(); })
      .def_prop_ro("model_name", [](const PyEngine& e) { return e.model().config().name; });
}

}  // namespace exactly::python
