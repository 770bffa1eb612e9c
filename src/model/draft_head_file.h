// A draft head's file (`--spec head:PATH`, model/draft_head.h), read and
// checked against its target: one reader for the CPU head and the GPU head,
// so both accept and refuse the same files.
//
// The file is a GGUF of architecture `exactly-draft-head`:
//   exactly-draft-head.embedding_length        the target's hidden size
//   exactly-draft-head.vocab_size              the target's vocabulary
//   exactly-draft-head.target_layer            the target layers it reads after
//                                              (all of them: the last's output)
//   exactly-draft-head.feed_forward_length, .attention.head_count,
//   .attention.head_count_kv, .rope.freq_base, .attention.layer_norm_rms_epsilon,
//   .rope.dimension_count (optional)           its decoder layer
//   exactly.output_token_ids (optional)        a partial head over these tokens
// and the tensors fc.weight [2 * dim -> dim], blk.0.* (a llama layer) and
// output_norm.weight, in F32 or F16, nothing else.
#pragma once

#include "kernels/ops.h"
#include "loader/gguf.h"
#include "model/config.h"
#include "model/llama_layer.h"

namespace exactly {

struct DraftHeadFile {
  ModelConfig config;         // one layer; dim and vocabulary the target's
  kernels::WeightMatrix fc;   // [dim, 2 * dim]
  LlamaLayerWeights layer{};  // blk.0.*, no biases or extra norms
  const float* norm = nullptr;  // [dim] output_norm.weight

  // The head in `file` (whose mapping the weights point into) for a target
  // of `target`'s shape. Throws FileFormatError (exit code 2) naming the file
  // and what is wrong: a missing or unexpected tensor or key, a wrong shape
  // or type, a hidden size, vocabulary or layer count other than the
  // target's, a partial head on a target whose head is partial already.
  static DraftHeadFile read(const GGUFFile& file, const ModelConfig& target);
};

}  // namespace exactly
