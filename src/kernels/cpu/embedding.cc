// Token embedding lookup: the dequantised table row, bit-identical to
// dequantize_row.
#include "core/check.h"
#include "kernels/ops.h"

namespace exactly::kernels {

void embedding_lookup(const WeightMatrix& table, const int32_t* tokens, int64_t n_tokens, float* out) {
  const int64_t row_bytes = ggml_row_bytes(table.type, table.cols);
  for (int64_t t = 0; t < n_tokens; ++t) {
    EXACTLY_CHECK(tokens[t] >= 0 && tokens[t] < table.rows, "token id %d outside the vocabulary of %lld",
                  tokens[t], static_cast<long long>(table.rows));
    dequantize_row(table.type, static_cast<const uint8_t*>(table.data) + tokens[t] * row_bytes,
                   out + t * table.cols, table.cols);
  }
}

}  // namespace exactly::kernels
