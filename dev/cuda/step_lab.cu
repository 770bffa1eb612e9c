// Lab for a whole decode step of a Llama-3-8B-shaped (or SmolLM2-shaped) model, built
// from the production kernels (libexactly_kernels_cuda) in the order the CUDA
// model runs them (src/model/cuda/llama_cuda_layers.cc, run_layers), captured in one
// CUDA graph and timed. Then the same step with one kind of kernel left out
// at a time: what a kind costs in place, gaps included, is the difference.
// Outputs are meaningless (random weights, and the ablations break the data
// flow); only the time is measured.
//
//   step_lab [--model llama3-8b|smollm2] [-b BATCH] [CONTEXT ...]   sequences per step (default 1), each of
//                                       CONTEXT keys (default 576 1024 4096)
//   step_lab --orders [--model ...] [-b BATCH] [CONTEXT ...]
//       the whole step with each way of computing the products (the fastest
//       order, the canonical order as Gemm tunes it, gemm_rows alone) beside
//       each attention (split-KV, exact rows as routed, exact rows split),
//       then the kinds' costs in place in the canonical order.
//   step_lab --edges [-b BATCH] [CONTEXT ...]
//       the whole step only, as captured and with the graph's kernel-to-kernel
//       edges made programmatic (into the engine's own kernels only, or all
//       of them): a kernel may then start while its predecessor drains, and must
//       wait (griddepcontrol.wait) before reading its outputs. The logits of
//       each variant are compared bit for bit with the captured graph's.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/exact_rows_split.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_rows.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/layer_ops.h"
#include "kernels/cuda/paged_decode_kernel.cuh"
#include "lab_common.h"

namespace kc = exactly::kernels::cuda;

namespace {

// The model's shape: Llama-3-8B's unless --model smollm2 (SmolLM2-135M's).
struct ModelShape {
  const char* name;
  int dim, heads, kv, hd, ffn, vocab, layers;
  float rope_base;
  int qkv() const { return (heads + 2 * kv) * hd; }
};
constexpr ModelShape kLlama3_8B{"Llama-3-8B", 4096, 32, 8, 128, 14336, 128256, 32, 500000.0f};
constexpr ModelShape kSmolLM2{"SmolLM2-135M", 576, 9, 3, 64, 1536, 49152, 30, 100000.0f};
ModelShape shape = kLlama3_8B;
constexpr int kLabHd = 128;  // the lab's own split-KV versions are built for head dim 128
constexpr int kBlock = 16;

void* alloc_bf16(int64_t n, uint64_t seed, float scale = 0.02f) {
  void* p;
  CK(cudaMalloc(&p, size_t(n) * 2));
  kc::fill_uniform_bf16(p, n, scale, seed, nullptr);
  return p;
}
float* alloc_f32(int64_t n, float value) {
  float* p;
  CK(cudaMalloc(&p, size_t(n) * 4));
  kc::fill_f32(p, n, value, nullptr);
  return p;
}

struct Layer {
  void *wqkv, *wo, *wgu, *wdown, *k, *v;
  float *attn_norm, *ffn_norm;
};

// Paged decode as src/kernels/cuda/paged_decode.cu launches it, with the
// partition size and the ring depth per warp as parameters.
template <int kPart, int kStages>
void decode_attention(const kc::PagedKVDevice& c, const kc::AttentionBatchDevice& b, const void* q, float scale,
                      void* out, void* workspace, cudaStream_t stream) {
  using bf16 = __nv_bfloat16;
  using Shape = kc::DecodeShape<kLabHd, 4, kStages>;
  constexpr auto kernel = kc::paged_decode_kernel<bf16, kLabHd, 4, kStages, kPart, false, 3>;
  kc::allow_shared_memory<kernel>(Shape::kSmemBytes, "lab decode");
  const int parts = (b.max_seq_len + kPart - 1) / kPart;
  float* partial_out = static_cast<float*>(workspace);
  float* partial_lse = partial_out + int64_t{b.n_seqs} * shape.heads * parts * kLabHd;
  kc::DecodeParams p{kc::paged_attention_params<void>(c, b, q, out, shape.heads, scale), 1, parts, partial_out,
                     partial_lse};
  kc::launch_dependent("lab decode", kc::LaunchRole::kOther, kernel, dim3(parts, c.n_kv_heads, b.n_seqs),
                       Shape::kThreads, Shape::kSmemBytes, stream, p);
  if (parts > 1)
    kc::launch_dependent("lab merge", kc::LaunchRole::kOther, kc::merge_partitions_kernel<bf16, kLabHd, kPart>,
                         dim3(shape.heads, b.n_seqs), kLabHd, 0, stream, p);
}

using AttentionFn = void (*)(const kc::PagedKVDevice&, const kc::AttentionBatchDevice&, const void*, float, void*,
                             void*, cudaStream_t);
struct AttentionVersion {
  const char* name;
  AttentionFn fn;  // null: the production launcher
};
const AttentionVersion kAttentionVersions[] = {
    {"production (decode_partition of the length, 2 stages)", nullptr},
    {"1024-key partitions, 2 stages", decode_attention<1024, 2>},
    {"512-key partitions, 2 stages", decode_attention<512, 2>},
    {"512-key partitions, 4 stages", decode_attention<512, 4>},
    {"256-key partitions, 2 stages", decode_attention<256, 2>},
    {"128-key partitions, 2 stages", decode_attention<128, 2>},
    {"64-key partitions, 2 stages", decode_attention<64, 2>},
};

enum Kind { kEmbed, kNorm, kProduct, kRope, kAttention, kSwiglu, kHead, kArgmax, kKinds };
// Bits that leave out one of a layer's products only (beyond the kinds).
enum LayerProduct { kQkvProduct = 16, kOutProduct, kGateUpProduct, kDownProduct, kLayerProductsEnd };
const char* kLayerProductNames[] = {"qkv", "o", "gate/up", "down"};
constexpr unsigned kLayerProductBits = ((1u << kLayerProductsEnd) - 1) & ~((1u << kQkvProduct) - 1);
const char* kKindNames[kKinds] = {"embedding", "rmsnorm", "products", "rope+store",
                                  "attention", "swiglu",  "head",     "argmax"};

// How the step's products are computed: the fastest order (the streaming
// kernel, cuBLASLt with split-K), the canonical one as Gemm tunes it, or
// gemm_rows for every product.
enum class Products { kFastest, kCanonical, kRowsOnly };
const char* kProductNames[] = {"fastest", "canonical", "gemm_rows"};
// The attention: the lab's or production's split-KV (AttentionFn), or exact
// rows, routed or forced onto the split path.
enum class Exact { kNone, kRouted, kSplit };
const char* kExactNames[] = {"split-KV", "exact routed", "exact split"};

struct Step {
  std::vector<Layer> layers;
  void *embd, *head, *h, *qkv, *q, *attn, *gu, *act, *decode_ws;
  float *x, *out_norm, *logits;
  int32_t *tokens, *positions, *query_start, *seq_lens, *tables, *argmax;
  void* angles = nullptr;  // (cos, sin) of each row's angles, made once a step
  int64_t* slots;
  int64_t decode_bytes = 0;
  int max_blocks = 0, ctx = 0, B = 1;
  kc::Gemm gemm{kc::GemmOrder::kCanonical};
  kc::Gemm fast_gemm{kc::GemmOrder::kFastest};
  Products products = Products::kCanonical;
  AttentionFn attention = nullptr;
  Exact exact = Exact::kNone;
  void* exact_ws = nullptr;
  int64_t exact_bytes = 0;

  void product(const void* in, const void* w, void* out, int m, int k, kc::GemmOut type, bool add, cudaStream_t s) {
    if (products == Products::kFastest) return fast_gemm.run(in, w, out, B, m, k, type, add, s);
    // gemm_rows takes at most kGemmRowsMax rows; past them Gemm's canonical plan runs.
    if (products == Products::kRowsOnly && B <= kc::kGemmRowsMax)
      return kc::gemm_rows_bf16(in, w, out, B, m, k, type, add, s);
    gemm.run(in, w, out, B, m, k, type, add, s);
  }

  Step(int max_ctx, int batch) : B(batch) {
    max_blocks = (max_ctx + kBlock - 1) / kBlock;
    const int64_t pool_blocks = int64_t{max_blocks} * B;
    for (int l = 0; l < shape.layers; ++l) {
      Layer L;
      L.wqkv = alloc_bf16(int64_t{shape.qkv()} * shape.dim, 10 * l + 1);
      L.wo = alloc_bf16(int64_t{shape.dim} * shape.dim, 10 * l + 2);
      L.wgu = alloc_bf16(int64_t{2 * shape.ffn} * shape.dim, 10 * l + 3);
      L.wdown = alloc_bf16(int64_t{shape.dim} * shape.ffn, 10 * l + 4);
      L.k = alloc_bf16(pool_blocks * kBlock * shape.kv * shape.hd, 10 * l + 5, 1.0f);
      L.v = alloc_bf16(pool_blocks * kBlock * shape.kv * shape.hd, 10 * l + 6, 1.0f);
      L.attn_norm = alloc_f32(shape.dim, 1.0f);
      L.ffn_norm = alloc_f32(shape.dim, 1.0f);
      layers.push_back(L);
    }
    embd = alloc_bf16(int64_t{shape.vocab} * shape.dim, 7);
    head = alloc_bf16(int64_t{shape.vocab} * shape.dim, 8);
    out_norm = alloc_f32(shape.dim, 1.0f);
    x = alloc_f32(int64_t{B} * shape.dim, 0.5f);
    h = alloc_bf16(int64_t{B} * shape.dim, 11, 1.0f);
    qkv = alloc_bf16(int64_t{B} * shape.qkv(), 12, 1.0f);
    q = alloc_bf16(int64_t{B} * shape.heads * shape.hd, 13, 1.0f);
    attn = alloc_bf16(int64_t{B} * shape.heads * shape.hd, 14, 1.0f);
    gu = alloc_bf16(int64_t{B} * 2 * shape.ffn, 15, 1.0f);
    act = alloc_bf16(int64_t{B} * shape.ffn, 16, 1.0f);
    logits = alloc_f32(int64_t{B} * shape.vocab, 0.0f);
    decode_bytes = kc::decode_workspace_bytes(B, shape.heads, max_ctx, shape.hd) * 8;  // room for 64-key partitions
    CK(cudaMalloc(&decode_ws, size_t(decode_bytes)));
    exact_bytes = kc::exact_rows_split_bytes(B, shape.kv, shape.heads / shape.kv, 1, max_ctx);
    CK(cudaMalloc(&exact_ws, size_t(exact_bytes)));
    const size_t b = static_cast<size_t>(B);
    CK(cudaMalloc(&tokens, 4 * b));
    CK(cudaMalloc(&positions, 4 * b));
    CK(cudaMalloc(&angles, 8 * b * shape.hd / 2));
    CK(cudaMalloc(&query_start, 4 * b + 4));
    CK(cudaMalloc(&seq_lens, 4 * b));
    CK(cudaMalloc(&argmax, 4 * b));
    CK(cudaMalloc(&slots, 8 * b));
    CK(cudaMalloc(&tables, size_t(pool_blocks) * 4));
    std::vector<int32_t> table(static_cast<size_t>(pool_blocks)), token(b, 42), qs(b + 1);
    for (int64_t i = 0; i < pool_blocks; ++i) table[size_t(i)] = static_cast<int32_t>(i);
    for (size_t i = 0; i <= b; ++i) qs[i] = static_cast<int32_t>(i);
    CK(cudaMemcpy(tables, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(tokens, token.data(), b * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(query_start, qs.data(), (b + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
  }

  void set_context(int context) {
    ctx = context;
    const size_t b = static_cast<size_t>(B);
    std::vector<int32_t> pos(b, ctx - 1), lens(b, ctx);
    std::vector<int64_t> slot(b);
    for (size_t i = 0; i < b; ++i) slot[i] = int64_t(i) * max_blocks * kBlock + ctx - 1;
    CK(cudaMemcpy(positions, pos.data(), b * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(seq_lens, lens.data(), b * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(slots, slot.data(), b * 8, cudaMemcpyHostToDevice));
  }

  // One decode step; `skip` leaves kinds out, `only` (if >= 0) keeps one kind.
  void record(cudaStream_t s, unsigned skip, int bound) {
    auto on = [&](int k) { return (skip & (1u << k)) == 0; };
    auto product_on = [&](LayerProduct k) { return on(kProduct) && on(k); };
    kc::AttentionBatchDevice batch{B, query_start, seq_lens, tables, max_blocks, 1, bound};
    if (on(kEmbed)) kc::embedding_lookup(embd, tokens, B, shape.dim, shape.vocab, x, s);
    if (on(kRope))
      kc::rope_angles(positions, B, shape.hd, shape.rope_base, angles, s);  // once a step, as the engine does
    for (int l = 0; l < shape.layers; ++l) {
      const Layer& L = layers[size_t(l)];
      kc::PagedKVDevice cache{L.k, L.v, int64_t{max_blocks} * B, kBlock, shape.kv, shape.hd, kc::DType::bf16};
      if (on(kNorm)) kc::rmsnorm_bf16(x, L.attn_norm, nullptr, B, shape.dim, 1e-5f, h, s);
      if (product_on(kQkvProduct)) product(h, L.wqkv, qkv, shape.qkv(), shape.dim, kc::GemmOut::bf16, false, s);
      kc::RopeStoreArgs rope{
          qkv, nullptr, positions, slots, B, shape.heads, shape.hd, shape.rope_base, kc::RopeLayout::kHalfSplit,
          q,   angles};
      if (on(kRope)) kc::rope_and_store(rope, cache, s);
      if (on(kAttention)) {
        if (exact != Exact::kNone)
          kc::exact_rows_attention(cache, batch, q, shape.heads, 0.088f, attn, s,
                                   exact == Exact::kSplit ? kc::ExactRowsPath::kSplit : kc::ExactRowsPath::kAuto,
                                   exact_ws, exact_bytes);
        else if (attention != nullptr)
          attention(cache, batch, q, 0.088f, attn, decode_ws, s);
        else
          kc::paged_decode_attention(cache, batch, q, shape.heads, 0.088f, attn, decode_ws, decode_bytes, s);
      }
      if (product_on(kOutProduct)) product(attn, L.wo, x, shape.dim, shape.dim, kc::GemmOut::f32, true, s);
      if (on(kNorm)) kc::rmsnorm_bf16(x, L.ffn_norm, nullptr, B, shape.dim, 1e-5f, h, s);
      if (product_on(kGateUpProduct)) product(h, L.wgu, gu, 2 * shape.ffn, shape.dim, kc::GemmOut::bf16, false, s);
      if (on(kSwiglu)) kc::swiglu(gu, B, shape.ffn, act, s);
      if (product_on(kDownProduct)) product(act, L.wdown, x, shape.dim, shape.ffn, kc::GemmOut::f32, true, s);
    }
    if (on(kNorm)) kc::rmsnorm_bf16(x, out_norm, nullptr, B, shape.dim, 1e-5f, h, s);
    if (on(kHead)) product(h, head, logits, shape.vocab, shape.dim, kc::GemmOut::f32, false, s);
    if (on(kArgmax)) kc::row_argmax(logits, B, shape.vocab, argmax, s);
  }
};

// Replaces every edge between two kernel nodes whose downstream kernel
// `pick` accepts by a programmatic one (the upstream kernel's trigger, or
// its end, releases the downstream kernel's launch).
int make_edges_programmatic(cudaGraph_t graph, const std::function<bool(const char*)>& pick) {
  size_t n = 0;
  CK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  CK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n));
  auto kernel_name = [](cudaGraphNode_t node) -> const char* {
    cudaGraphNodeType type;
    CK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) return nullptr;
    // Through the driver: cuBLASLt's kernels come from modules of their own,
    // which the runtime's node parameters cannot name.
    CUDA_KERNEL_NODE_PARAMS params{};
    if (cuGraphKernelNodeGetParams(node, &params) != CUDA_SUCCESS) return "?";
    const char* name = nullptr;
    if (params.func != nullptr && cuFuncGetName(&name, params.func) == CUDA_SUCCESS && name != nullptr) return name;
    if (params.kern != nullptr && cuKernelGetName(&name, params.kern) == CUDA_SUCCESS && name != nullptr) return name;
    return "?";
  };
  int changed = 0;
  for (size_t i = 0; i < n; ++i) {
    const char* up = kernel_name(from[i]);
    const char* down = kernel_name(to[i]);
    if (up == nullptr || down == nullptr || !pick(down)) continue;
    CK(cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1));
    cudaGraphEdgeData edge{};
    edge.from_port = cudaGraphKernelNodePortProgrammatic;
    edge.type = cudaGraphDependencyTypeProgrammatic;
    CK(cudaGraphAddDependencies(graph, &from[i], &to[i], &edge, 1));
    ++changed;
  }
  return changed;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> contexts;
  int batch = 1;
  bool edges = false, orders = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
      const char* name = argv[++i];
      if (std::strcmp(name, "smollm2") == 0) {
        shape = kSmolLM2;
      } else if (std::strcmp(name, "llama3-8b") != 0) {
        std::fprintf(stderr, "step_lab: --model takes llama3-8b or smollm2, not %s\n", name);
        return 2;
      }
      continue;
    }
    if (std::strcmp(argv[i], "--orders") == 0) {
      orders = true;
      continue;
    }
    if (std::strcmp(argv[i], "--edges") == 0) {
      edges = true;
      continue;
    }
    if (std::strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
      batch = std::atoi(argv[++i]);
      continue;
    }
    contexts.push_back(std::atoi(argv[i]));
  }
  if (contexts.empty()) contexts = {576, 1024, 4096};
  const int max_ctx = (*std::max_element(contexts.begin(), contexts.end()) + 511) / 512 * 512;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; dependent launch mode %d; %s shape, batch %d, one step per graph\n", prop.name,
              prop.multiProcessorCount, static_cast<int>(kc::dependent_launch_mode()), shape.name, batch);
  Step step(max_ctx, batch);
  if (orders) {
    for (int ctx : contexts) {
      step.set_context(ctx);
      const int bound = (ctx + 511) / 512 * 512;
      std::printf("\ncontext %d (bound %d): whole step, ms (medians of 3 x 20 replays)\n", ctx, bound);
      for (Products pr : {Products::kFastest, Products::kCanonical, Products::kRowsOnly}) {
        for (Exact ex : {Exact::kNone, Exact::kRouted, Exact::kSplit}) {
          step.products = pr;
          step.exact = ex;
          step.record(nullptr, 0, bound);  // plans the products outside capture (Gemm may time candidates)
          CK(cudaDeviceSynchronize());
          std::vector<float> t;
          for (int rep = 0; rep < 3; ++rep) t.push_back(time_graph([&](cudaStream_t s) { step.record(s, 0, bound); }));
          const float alone = time_graph([&](cudaStream_t s) { step.record(s, ~(1u << kAttention), bound); });
          std::printf("  products %-9s attention %-12s whole step %.3f / %.3f / %.3f   attention alone %.3f\n",
                      kProductNames[int(pr)], kExactNames[int(ex)], t[0], t[1], t[2], alone);
          std::fflush(stdout);
        }
      }
      for (Products pr : {Products::kFastest, Products::kCanonical, Products::kRowsOnly}) {
        step.products = pr;
        step.exact = pr == Products::kFastest ? Exact::kNone : Exact::kRouted;
        const float full = time_graph([&](cudaStream_t s) { step.record(s, 0, bound); });
        std::printf("  %s order, kinds in place (whole %.3f ms):", kProductNames[int(pr)], full);
        for (int k = 0; k < kKinds; ++k) {
          const float without = time_graph([&](cudaStream_t s) { step.record(s, 1u << k, bound); });
          std::printf(" %s %.3f", kKindNames[k], full - without);
        }
        const unsigned small = ~((1u << kProduct) | (1u << kHead) | kLayerProductBits);
        const float chain = time_graph([&](cudaStream_t s) { step.record(s, small, bound); });
        std::printf("; products + head alone %.3f, of which", chain);
        for (int k = kQkvProduct; k < kLayerProductsEnd; ++k) {
          const float without = time_graph([&](cudaStream_t s) { step.record(s, small | (1u << k), bound); });
          std::printf(" %s %.3f", kLayerProductNames[k - kQkvProduct], chain - without);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    return 0;
  }
  if (edges) {
    auto ours = [](const char* name) { return std::strstr(name, "exactly") != nullptr; };
    auto any = [](const char*) { return true; };
    std::vector<float> logits(size_t(batch) * shape.vocab), reference;
    auto run_logits = [&](cudaStream_t s, int bound) { step.record(s, 0, bound); };
    for (int ctx : contexts) {
      step.set_context(ctx);
      const int bound = (ctx + 511) / 512 * 512;
      struct Variant {
        const char* name;
        std::function<bool(const char*)> pick;
      };
      const Variant variants[] = {{"as captured", nullptr},
                                  {"edges into the engine's own kernels programmatic", ours},
                                  {"every kernel-to-kernel edge programmatic", any}};
      std::printf("\ncontext %d (bound %d)\n", ctx, bound);
      for (const Variant& v : variants) {
        int changed = 0;
        std::function<void(cudaGraph_t)> transform;
        if (v.pick) transform = [&](cudaGraph_t g) { changed = make_edges_programmatic(g, v.pick); };
        std::vector<float> times;
        for (int rep = 0; rep < 3; ++rep)
          times.push_back(time_graph([&](cudaStream_t s) { run_logits(s, bound); }, 20, transform));
        CK(cudaMemcpy(logits.data(), step.logits, logits.size() * 4, cudaMemcpyDeviceToHost));
        bool same = true;
        if (reference.empty())
          reference = logits;
        else
          same = std::memcmp(reference.data(), logits.data(), logits.size() * 4) == 0;
        std::printf("  %-44s %d edges changed: whole step %.3f / %.3f / %.3f ms, logits %s\n", v.name, changed,
                    times[0], times[1], times[2], v.pick ? (same ? "bit-identical" : "DIFFER") : "(reference)");
        std::fflush(stdout);
      }
    }
    return 0;
  }
  for (int ctx : contexts) {
    step.set_context(ctx);
    const int bound = (ctx + 511) / 512 * 512;  // the engine captures per context bound
    const float full = time_graph([&](cudaStream_t s) { step.record(s, 0, bound); });
    std::printf("\ncontext %d (bound %d): whole step %.3f ms\n", ctx, bound, full);
    for (int k = 0; k < kKinds; ++k) {
      const float without = time_graph([&](cudaStream_t s) { step.record(s, 1u << k, bound); });
      const float alone = time_graph([&](cudaStream_t s) { step.record(s, ~((1u << k) | kLayerProductBits), bound); });
      std::printf("  %-11s without: %.3f ms (costs %.3f in place)   alone: %.3f ms\n", kKindNames[k], without,
                  full - without, alone);
    }
    const unsigned small = ~((1u << kProduct) | (1u << kHead) | kLayerProductBits);
    std::printf("  products + head alone: %.3f ms\n",
                time_graph([&](cudaStream_t s) { step.record(s, small, bound); }));
    for (const AttentionVersion& v : kAttentionVersions) {
      if (v.fn != nullptr && shape.hd != kLabHd) continue;
      step.attention = v.fn;
      const float whole = time_graph([&](cudaStream_t s) { step.record(s, 0, bound); });
      const float alone = time_graph([&](cudaStream_t s) { step.record(s, ~(1u << kAttention), bound); });
      std::printf("  attention %-42s whole step %.3f ms, attention alone %.3f ms\n", v.name, whole, alone);
    }
    step.attention = nullptr;
    std::fflush(stdout);
  }
  return 0;
}
