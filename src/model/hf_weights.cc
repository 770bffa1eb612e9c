#include "model/hf_weights.h"

#include <cstring>

#include "core/error.h"
#include "core/format.h"
#include "core/half.h"

namespace exactly {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t num_elements(const SafetensorsTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

// Where the text model's tensors live: "model." in a causal-LM checkpoint;
// inside Gemma 3's image-text checkpoints, "language_model.model." (as
// transformers 4.50 saved them) or "model.language_model." (4.52 on).
std::string text_model_root(const SafetensorsCheckpoint& c) {
  for (const char* root : {"model.", "language_model.model.", "model.language_model."})
    if (c.find(std::string(root) + "embed_tokens.weight") != nullptr) return root;
  return "model.";  // the missing embedding is then reported under its usual name
}

// Reads tensors by their causal-LM names ("model.layers.0...."), found under
// the checkpoint's text-model root.
class Reader {
 public:
  Reader(const SafetensorsCheckpoint& c, const ModelConfig& config, std::string root)
      : c_(c), config_(config), root_(std::move(root)) {}

  [[noreturn]] void fail(const SafetensorsTensor& t, const std::string& problem) const {
    throw FileFormatError(strformat("%s: tensor '%s' %s", c_.file_of(t).c_str(), t.name.c_str(), problem.c_str()));
  }

  // The tensor `name`, checked for a float dtype and `shape`; null when absent and optional.
  const SafetensorsTensor* get(const std::string& causal_name, const std::vector<int64_t>& shape,
                               bool optional = false) const {
    const std::string name = stored_name(causal_name);
    const SafetensorsTensor* t = c_.find(name);
    if (t == nullptr) {
      if (optional) return nullptr;
      throw FileFormatError(strformat("%s: tensor '%s' is missing (%s with %d layers)", c_.path().c_str(), name.c_str(),
                                      config_.architecture.c_str(), config_.n_layers));
    }
    if (t->dtype != SafetensorsDType::BF16 && t->dtype != SafetensorsDType::F16 && t->dtype != SafetensorsDType::F32)
      fail(*t, strformat("has dtype %s (supported: BF16, F16, F32)", safetensors_dtype_name(t->dtype)));
    if (t->shape != shape)
      fail(*t, strformat("has shape %s; the config implies %s", shape_string(t->shape).c_str(),
                         shape_string(shape).c_str()));
    return t;
  }

  const SafetensorsTensor* find(const std::string& causal_name) const { return c_.find(stored_name(causal_name)); }

  // A U8 tensor (MXFP4 blocks or scales) of `shape`.
  const SafetensorsTensor* get_bytes(const std::string& causal_name, const std::vector<int64_t>& shape) const {
    const SafetensorsTensor* t = find(causal_name);
    if (t == nullptr)
      throw FileFormatError(strformat("%s: tensor '%s' is missing (%s with %d layers)", c_.path().c_str(),
                                      stored_name(causal_name).c_str(), config_.architecture.c_str(),
                                      config_.n_layers));
    if (t->dtype != SafetensorsDType::U8)
      fail(*t, strformat("has dtype %s (MXFP4 blocks and scales are U8)", safetensors_dtype_name(t->dtype)));
    if (t->shape != shape)
      fail(*t, strformat("has shape %s; the config implies %s", shape_string(t->shape).c_str(),
                         shape_string(shape).c_str()));
    return t;
  }

 private:
  std::string stored_name(const std::string& causal_name) const {
    return causal_name.starts_with("model.") ? root_ + causal_name.substr(6) : causal_name;
  }

  const SafetensorsCheckpoint& c_;
  const ModelConfig& config_;
  std::string root_;
};

// Mixtral's block_sparse_moe (w1 gate, w3 up, w2 down) or Qwen3-MoE's mlp
// (gate_proj, up_proj, down_proj) experts and router.
void read_experts(const Reader& r, const std::string& p, const ModelConfig& c, HfLayerWeights& L) {
  const int64_t dim = c.dim, ffn = c.expert_ffn_dim;
  const bool mixtral = c.architecture == "llama";
  const std::string base = p + (mixtral ? "block_sparse_moe." : "mlp.");
  L.router = r.get(base + "gate.weight", {c.n_experts, dim});
  for (int e = 0; e < c.n_experts; ++e) {
    const std::string x = base + strformat("experts.%d.", e);
    L.experts.push_back({r.get(x + (mixtral ? "w1.weight" : "gate_proj.weight"), {ffn, dim}),
                         r.get(x + (mixtral ? "w3.weight" : "up_proj.weight"), {ffn, dim}),
                         r.get(x + (mixtral ? "w2.weight" : "down_proj.weight"), {dim, ffn})});
  }
}

// gpt-oss's router (with its bias) and fused experts, float or MXFP4.
void read_fused_experts(const Reader& r, const std::string& p, const ModelConfig& c, HfLayerWeights& L) {
  const int64_t n = c.n_experts, dim = c.dim, ffn = c.expert_ffn_dim;
  L.router = r.get(p + "mlp.router.weight", {n, dim});
  L.router_bias = r.get(p + "mlp.router.bias", {n});
  const std::string x = p + "mlp.experts.";
  HfFusedExperts& f = L.fused;
  if (r.find(x + "gate_up_proj_blocks") != nullptr) {
    if (dim % 32 != 0 || ffn % 32 != 0)
      throw FileFormatError(strformat("hidden_size %lld and intermediate_size %lld must be multiples of 32 for "
                                      "MXFP4 experts", static_cast<long long>(dim), static_cast<long long>(ffn)));
    f.gate_up_blocks = r.get_bytes(x + "gate_up_proj_blocks", {n, 2 * ffn, dim / 32, 16});
    f.gate_up_scales = r.get_bytes(x + "gate_up_proj_scales", {n, 2 * ffn, dim / 32});
    f.down_blocks = r.get_bytes(x + "down_proj_blocks", {n, dim, ffn / 32, 16});
    f.down_scales = r.get_bytes(x + "down_proj_scales", {n, dim, ffn / 32});
  } else {
    f.gate_up = r.get(x + "gate_up_proj", {n, dim, 2 * ffn});
    f.down = r.get(x + "down_proj", {n, ffn, dim});
  }
  f.gate_up_bias = r.get(x + "gate_up_proj_bias", {n, 2 * ffn});
  f.down_bias = r.get(x + "down_proj_bias", {n, dim});
}

// Rows [begin, begin + rows) of the 2-D tensor t, as a tensor of its own
// that w keeps (a view into the same bytes).
const SafetensorsTensor* row_view(HfWeights& w, const SafetensorsTensor& t, int64_t begin, int64_t rows) {
  const int64_t row_bytes = t.size_bytes / t.shape[0];
  auto v = std::make_unique<SafetensorsTensor>(t);
  v->name = strformat("%s[%lld:%lld]", t.name.c_str(), static_cast<long long>(begin),
                      static_cast<long long>(begin + rows));
  v->shape = {rows, t.shape[1]};
  v->data = t.data + begin * row_bytes;
  v->size_bytes = rows * row_bytes;
  v->file_offset = t.file_offset + begin * row_bytes;
  w.views.push_back(std::move(v));
  return w.views.back().get();
}

}  // namespace

HfWeights HfWeights::open(const std::string& path, const ModelConfig& c) {
  HfWeights w;
  w.checkpoint = SafetensorsCheckpoint::open(path);
  const Reader r(*w.checkpoint, c, text_model_root(*w.checkpoint));
  const int64_t dim = c.dim, ffn = c.ffn_dim, vocab = c.vocab_size;
  const int64_t q_rows = int64_t{c.n_heads} * c.head_dim, kv_rows = int64_t{c.n_kv_heads} * c.head_dim;
  w.token_embd = r.get("model.embed_tokens.weight", {vocab, dim});
  // The head: "lm_head.weight", or inside an image-text checkpoint saved by
  // transformers 4.50-4.51, "language_model.lm_head.weight".
  const std::string head = r.find("lm_head.weight") == nullptr && r.find("language_model.lm_head.weight") != nullptr
                               ? "language_model.lm_head.weight"
                               : "lm_head.weight";
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else if (r.find(head) == nullptr) {
    throw FileFormatError(strformat("%s: tensor 'lm_head.weight' is missing (tie_word_embeddings is false)",
                                    w.checkpoint->path().c_str()));
  } else {
    w.output = r.get(head, {vocab, dim});
  }
  w.output_norm = r.get("model.norm.weight", {dim});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = strformat("model.layers.%d.", l);
    HfLayerWeights L{};
    L.attn_norm = r.get(p + "input_layernorm.weight", {dim});
    if (r.find(p + "self_attn.qkv_proj.weight") != nullptr) {  // Phi-3: q | k | v in one tensor
      const SafetensorsTensor* qkv = r.get(p + "self_attn.qkv_proj.weight", {q_rows + 2 * kv_rows, dim});
      L.wq = row_view(w, *qkv, 0, q_rows);
      L.wk = row_view(w, *qkv, q_rows, kv_rows);
      L.wv = row_view(w, *qkv, q_rows + kv_rows, kv_rows);
    } else {
      L.wq = r.get(p + "self_attn.q_proj.weight", {q_rows, dim});
      L.wk = r.get(p + "self_attn.k_proj.weight", {kv_rows, dim});
      L.wv = r.get(p + "self_attn.v_proj.weight", {kv_rows, dim});
    }
    // Biases must be there exactly when the config says: ignoring one, or
    // inventing zeros for a missing one, would compute another model.
    L.q_bias = r.get(p + "self_attn.q_proj.bias", {q_rows}, !c.attention_bias);
    L.k_bias = r.get(p + "self_attn.k_proj.bias", {kv_rows}, !c.attention_bias);
    L.v_bias = r.get(p + "self_attn.v_proj.bias", {kv_rows}, !c.attention_bias);
    for (const SafetensorsTensor* b : {L.q_bias, L.k_bias, L.v_bias})
      if (b != nullptr && !c.attention_bias) r.fail(*b, "is present, but config.json asks for no attention bias");
    const bool gpt_oss = c.architecture == "gpt-oss";
    if (gpt_oss) {
      L.o_bias = r.get(p + "self_attn.o_proj.bias", {dim});
      L.sinks = r.get(p + "self_attn.sinks", {c.n_heads});
    } else if (const SafetensorsTensor* b = r.find(p + "self_attn.o_proj.bias")) {
      r.fail(*b, "is an o_proj bias (Llama's attention_bias: true), which is not supported");
    }
    if (c.qk_norm) {
      L.q_norm = r.get(p + "self_attn.q_norm.weight", {c.head_dim});
      L.k_norm = r.get(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    L.wo = r.get(p + "self_attn.o_proj.weight", {dim, q_rows});
    if (c.sandwich_norms) {  // Gemma 3's names: post_attention_layernorm is on the attention output
      L.post_attn_norm = r.get(p + "post_attention_layernorm.weight", {dim});
      L.ffn_norm = r.get(p + "pre_feedforward_layernorm.weight", {dim});
      L.post_ffn_norm = r.get(p + "post_feedforward_layernorm.weight", {dim});
    } else {
      L.ffn_norm = r.get(p + "post_attention_layernorm.weight", {dim});
    }
    if (gpt_oss) {
      read_fused_experts(r, p, c, L);
    } else if (c.n_experts > 0) {
      read_experts(r, p, c, L);
    } else if (r.find(p + "mlp.gate_up_proj.weight") != nullptr) {  // Phi-3: gate | up in one tensor
      const SafetensorsTensor* gate_up = r.get(p + "mlp.gate_up_proj.weight", {2 * ffn, dim});
      L.w_gate = row_view(w, *gate_up, 0, ffn);
      L.w_up = row_view(w, *gate_up, ffn, ffn);
      L.w_down = r.get(p + "mlp.down_proj.weight", {dim, ffn});
    } else {
      L.w_gate = r.get(p + "mlp.gate_proj.weight", {ffn, dim});
      L.w_up = r.get(p + "mlp.up_proj.weight", {ffn, dim});
      L.w_down = r.get(p + "mlp.down_proj.weight", {dim, ffn});
    }
    w.layers.push_back(L);
  }
  if (const SafetensorsTensor* extra = r.find(strformat("model.layers.%d.input_layernorm.weight", c.n_layers)))
    r.fail(*extra, strformat("belongs to a layer beyond num_hidden_layers (%d)", c.n_layers));
  return w;
}

void append_as_bf16(const SafetensorsTensor& t, std::vector<uint16_t>& out) {
  const auto n = static_cast<size_t>(num_elements(t));
  const size_t at = out.size();
  out.resize(at + n);
  uint16_t* dst = out.data() + at;
  switch (t.dtype) {
    case SafetensorsDType::BF16:
      std::memcpy(dst, t.data, n * 2);  // little-endian on disk and here
      return;
    case SafetensorsDType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + i * 2, 2);
        dst[i] = float_to_bf16(half_to_float(h));
      }
      return;
    case SafetensorsDType::F32:
      for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, t.data + i * 4, 4);
        dst[i] = float_to_bf16(f);
      }
      return;
    default:
      throw FileFormatError(strformat("tensor '%s': dtype %s is not a float type", t.name.c_str(),
                                      safetensors_dtype_name(t.dtype)));
  }
}

void append_as_f32(const SafetensorsTensor& t, std::vector<float>& out) {
  const auto n = static_cast<size_t>(num_elements(t));
  const size_t at = out.size();
  out.resize(at + n);
  float* dst = out.data() + at;
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    switch (t.dtype) {
      case SafetensorsDType::BF16:
        std::memcpy(&h, t.data + i * 2, 2);
        dst[i] = bf16_to_float(h);
        break;
      case SafetensorsDType::F16:
        std::memcpy(&h, t.data + i * 2, 2);
        dst[i] = half_to_float(h);
        break;
      case SafetensorsDType::F32:
        std::memcpy(dst + i, t.data + i * 4, 4);
        break;
      default:
        throw FileFormatError(strformat("tensor '%s': dtype %s is not a float type", t.name.c_str(),
                                        safetensors_dtype_name(t.dtype)));
    }
  }
}

}  // namespace exactly
