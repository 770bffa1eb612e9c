// Verification of sampled drafts (see sampling.h), in three launches:
//
//   claims  one thread per job marks its k + 1 rows, each row going to the
//           earliest job that names it (atomicMin), so that overlapping jobs
//           are found the same way on every run;
//   rows    one block per claimed row processes it as sample_rows does
//           (sampling_device.cuh) and, for a drafted row, computes the
//           acceptance probability of its draft: p(x) in double as the host
//           computes it, q(x) from the row's draft distribution;
//   jobs    one block per job walks its positions to the first rejection and
//           makes the job's one draw: the bonus token from the last row's
//           masses, or the replacement from the rejected row's residual.
//
// Residual. max(0, p - q) is computed in double, p as the host computes it
// (over its survivors' renormalised total), then divided by its own total and
// held in fixed point like the masses, so the same descent and scans draw
// from it. Its weights differ among tokens of one logit, so the token at the
// crossing key is found by a weighted scan in id order rather than by a
// division. q is scattered into a dense row for the lookups: the workspace of
// the job's last row, whose masses a rejected job does not need.
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_device.cuh"

namespace exactly::kernels::cuda {

// The C interface and the Python checks build these arrays byte for byte.
static_assert(sizeof(VerifyJob) == 24 && alignof(VerifyJob) == 4, "VerifyJob layout");
static_assert(sizeof(DraftProb) == 16 && offsetof(DraftProb, p) == 8 && alignof(DraftProb) == 8, "DraftProb layout");

namespace {

using namespace sampling_device;

// What the jobs pass needs of a processed row.
struct RowState {
  double sum;         // the softmax denominator over the top-k survivors
  double kept_total;  // the survivors' probabilities summed: the host's renormalisation (drafted rows)
  double accept;      // min(1, p(x) / q(x)) for the row's draft (drafted rows)
  uint32_t top_key;
  int32_t top_id;
  uint32_t kept_key;  // the Cut of what every filter kept
  int32_t kept_id;
  int32_t gathered;   // the gathered top-k's size, or -1 when the passes walk the whole row
  int32_t flags;      // kDegenerate | kSorted
};
static_assert(sizeof(RowState) == 48, "RowState packs to 48 bytes");
constexpr int32_t kDegenerate = 1, kSorted = 2;

constexpr u64 kUnclaimed = ~u64{0};

__device__ u64 claim_of(int job, int position) {
  return u64{static_cast<uint32_t>(job)} << 32 | static_cast<uint32_t>(position);
}

__device__ bool fits(const VerifyJob& job, int64_t rows) {
  return job.num_drafts >= 1 && job.first_row >= 0 && int64_t{job.first_row} + job.num_drafts < rows &&
         job.draft_begin >= 0 && job.q_begin >= 0 && job.uniform_begin >= 0;
}

__global__ void claim_kernel(const VerifyJob* jobs, int num_jobs, int64_t rows, u64* claims) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= num_jobs) return;
  const VerifyJob job = jobs[j];
  if (!fits(job, rows)) return;
  for (int i = 0; i <= job.num_drafts; ++i) atomicMin(&claims[int64_t{job.first_row} + i], claim_of(j, i));
}

// Whether job j fits and holds all its rows; the same answer in every thread.
__device__ bool holds_rows(const VerifyJob& job, int j, int64_t rows, const u64* claims) {
  const bool fit = fits(job, rows);
  int lost = 0;
  if (fit)
    for (int i = threadIdx.x; i <= job.num_drafts; i += kThreads)
      lost |= claims[int64_t{job.first_row} + i] != claim_of(j, i);
  return __syncthreads_or(lost) == 0 && fit;
}

__device__ ProcessedRow restored(const RowState& st, float* row, int vocab, u64* space) {
  const View view = st.gathered >= 0 ? gathered_view(space, st.gathered) : View{row, nullptr, vocab};
  return {(st.flags & kDegenerate) != 0, st.top_key, st.top_id, (st.flags & kSorted) != 0, view,
          Cut{st.kept_key, st.kept_id}, st.sum};
}

// p(y) as the host's distribution gives it: exp over the softmax sum, then
// over the survivors' total.
__device__ double probability(float l, double top, double sum, double kept_total) {
  return weight_of(l, top) / sum / kept_total;
}

__global__ void __launch_bounds__(kThreads)
    verify_rows_kernel(float* logits, int vocab, int64_t rows, const SampleRowParams* params,
                       const PenaltyEntry* penalties, const VerifyJob* jobs, const int32_t* drafts,
                       const int32_t* q_offsets, const DraftProb* q_entries, const u64* claims, RowState* states,
                       u64* workspace) {
  __shared__ Shared s;
  const int64_t r = blockIdx.x;
  const u64 claim = claims[r];
  if (claim == kUnclaimed) return;
  const auto j = static_cast<int>(claim >> 32);
  const auto position = static_cast<int>(claim & 0xffffffffu);
  const VerifyJob job = jobs[j];
  if (!holds_rows(job, j, rows, claims)) return;
  float* row = logits + r * vocab;
  process_row(s, row, vocab, params[r], penalties, workspace + r * vocab, [&](const ProcessedRow& pr) {
    const bool drafted = position < job.num_drafts;
    const double top = float_of(pr.top_key);

    double kept_total = 0.0;
    if (drafted && !pr.degenerate) {
      for_view(pr.view, [&](int i, bool valid, float l) {
        if (valid && inside(pr.kept, key_of(l), pr.view, i)) kept_total += weight_of(l, top) / pr.sum;
      });
      kept_total = block_reduce(kept_total, Add{}, s.scratch_f64);
    }

    double accept = 0.0;
    if (drafted) {
      const int32_t x = drafts[int64_t{job.draft_begin} + position];
      // q(x): the first entry with that id, as the host's lookup finds it.
      const int32_t* offsets = q_offsets + int64_t{job.q_begin} + position;
      const int64_t q_begin = offsets[0], q_end = offsets[1];
      u64 first = ~u64{0};
      for (int64_t e = q_begin + threadIdx.x; e < q_end; e += kThreads)
        if (q_entries[e].id == x) first = min(first, static_cast<u64>(e));
      first = block_reduce(first, Min{}, s.scratch);
      if (threadIdx.x == 0) {
        const double q_x = first != ~u64{0} ? q_entries[first].p : 0.0;
        double p_x = 0.0;
        if (pr.degenerate) {
          p_x = x == pr.top_id ? 1.0 : 0.0;
        } else if (x >= 0 && x < vocab) {
          const float l = row[x];
          if (inside(pr.kept, key_of(l), View{row, nullptr, vocab}, x)) p_x = probability(l, top, pr.sum, kept_total);
        }
        // The host's rule (modified_rejection_accept_probability), comparisons and all.
        accept = !(q_x > 0.0) ? 0.0 : p_x >= q_x ? 1.0 : p_x / q_x;
      }
    }
    if (threadIdx.x == 0) {
      const bool gathered = pr.view.ids != nullptr;
      states[r] = {pr.sum, kept_total, accept, pr.top_key, pr.top_id, pr.kept.key, pr.kept.id,
                   gathered ? pr.view.n : -1, (pr.degenerate ? kDegenerate : 0) | (pr.sorted ? kSorted : 0)};
    }
  });
}

// The replacement after a rejection at a processed (not degenerate) row:
// a draw with uniform u from max(0, p - q) in p's order, or from p where
// that has no mass. `mass` is the row's, overwritten; `q` a vocab of scratch.
__device__ int draw_residual(Shared& s, const ProcessedRow& pr, double kept_total, u64* mass, double* q,
                             const DraftProb* entries, int64_t q_begin, int64_t q_end, int vocab, double u) {
  for (int i = threadIdx.x; i < vocab; i += kThreads) q[i] = 0.0;
  __syncthreads();
  for (int64_t e = q_begin + threadIdx.x; e < q_end; e += kThreads) {
    const DraftProb d = entries[e];
    if (d.id >= 0 && d.id < vocab) q[d.id] = d.p;
  }
  __syncthreads();

  // The excess in double, kept in the masses' place until its total is known
  // (each position is read back by the thread that wrote it).
  const View& v = pr.view;
  const double top = float_of(pr.top_key);
  auto* excess = reinterpret_cast<double*>(mass);
  double total = 0.0;
  for_view(v, [&](int j, bool valid, float l) {
    if (!valid || !inside(pr.kept, key_of(l), v, j)) return;
    const double p = probability(l, top, pr.sum, kept_total);
    const double e = p > 0.0 ? p - q[v.id(j)] : 0.0;
    excess[j] = e > 0.0 ? e : 0.0;
    total += excess[j];
  });
  total = block_reduce(total, Add{}, s.scratch_f64);

  if (!(total > 0.0)) {
    // q covers p: the host draws from p itself, as sample_rows would.
    for_view(v, [&](int j, bool valid, float l) {
      if (valid && inside(pr.kept, key_of(l), v, j))
        mass[j] = __double2ull_ru(weight_of(l, top) / pr.sum * kMassScale);  // process_row's, bit for bit
    });
    __syncthreads();
    return draw_row(s, pr, mass, u, true);
  }

  for_view(v, [&](int j, bool valid, float l) {
    if (valid && inside(pr.kept, key_of(l), v, j)) mass[j] = __double2ull_ru(excess[j] / total * kMassScale);
  });
  __syncthreads();
  int token = -1;
  if (pr.sorted) {
    const Crossing c = descend<true, false>(s, v, mass, pr.kept, [u](u64 t) { return draw_target(u, t); });
    if (c.found) {
      const uint32_t key = c.key;
      const u64 need = c.target - c.above;
      auto at_key = [&](int j, bool valid, float l) -> u64 {
        const uint32_t k = key_of(l);
        return valid && k == key && inside(pr.kept, k, v, j) ? mass[j] : 0;
      };
      token = first_reaching_in_id_order(s, v, at_key, [need](u64 t) { return need <= t ? need : 0; });
    }
  } else {
    token = draw_in_id_order(s, v, mass, pr.kept, u);
  }
  if (token < 0) token = last_member(s, v, pr.kept, pr.sorted, mass);
  return token;
}

__global__ void __launch_bounds__(kThreads)
    verify_jobs_kernel(float* logits, int vocab, int64_t rows, const VerifyJob* jobs, const int32_t* q_offsets,
                       const DraftProb* q_entries, const double* uniforms, const u64* claims, const RowState* states,
                       int32_t* accepted, int32_t* tokens, u64* workspace) {
  __shared__ Shared s;
  __shared__ int first_rejected;
  const int j = blockIdx.x;
  const VerifyJob job = jobs[j];
  if (!holds_rows(job, j, rows, claims)) {
    if (threadIdx.x == 0) accepted[j] = -1, tokens[j] = -1;
    return;
  }
  const int k = job.num_drafts;
  const double* u = uniforms + job.uniform_begin;
  if (threadIdx.x == 0) {
    int i = 0;
    while (i < k && u[i] < states[int64_t{job.first_row} + i].accept) ++i;
    first_rejected = i;
  }
  __syncthreads();
  const int i = first_rejected;
  const int64_t r = int64_t{job.first_row} + i;
  const RowState st = states[r];
  u64* mass = workspace + r * vocab;
  const ProcessedRow pr = restored(st, logits + r * vocab, vocab, mass);
  int token;
  if (i == k || pr.degenerate) {
    // The bonus token, drawn with U_k; or a one-hot p, whose residual is its token.
    token = draw_row(s, pr, mass, u[i], true);
  } else {
    const int32_t* offsets = q_offsets + int64_t{job.q_begin} + i;
    auto* q = reinterpret_cast<double*>(workspace + (int64_t{job.first_row} + k) * vocab);
    token = draw_residual(s, pr, st.kept_total, mass, q, q_entries, offsets[0], offsets[1], vocab, u[i + 1]);
  }
  if (threadIdx.x == 0) accepted[j] = i, tokens[j] = token;
}

bool aligned(const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

}  // namespace

size_t verify_workspace_bytes(int64_t rows, int32_t vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  // Per row: its masses (or its gathered top-k), its state, its claim.
  return static_cast<size_t>(rows) * (static_cast<size_t>(vocab) * sizeof(u64) + sizeof(RowState) + sizeof(u64));
}

void verify_drafts(float* logits, int64_t rows, int32_t vocab, const SampleRowParams* params,
                   const PenaltyEntry* penalties, const VerifyJob* jobs, int32_t num_jobs, const int32_t* drafts,
                   const int32_t* q_offsets, const DraftProb* q_entries, const double* uniforms, int32_t* accepted,
                   int32_t* tokens, void* workspace, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(rows >= 0 && rows <= INT32_MAX, "verify_drafts: %lld rows (0 to %d)",
                       static_cast<long long>(rows), INT32_MAX);
  EXACTLY_CUDA_REQUIRE(vocab >= 1 && vocab <= kSamplingMaxVocab, "verify_drafts: vocab %d (1 to %d)", vocab,
                       kSamplingMaxVocab);
  EXACTLY_CUDA_REQUIRE(num_jobs >= 0, "verify_drafts: %d jobs", num_jobs);
  if (num_jobs == 0) return;
  // A job takes k + 1 >= 2 rows of its own.
  EXACTLY_CUDA_REQUIRE(rows >= 2 * int64_t{num_jobs}, "verify_drafts: %d jobs need at least %lld rows, got %lld",
                       num_jobs, 2 * static_cast<long long>(num_jobs), static_cast<long long>(rows));
  EXACTLY_CUDA_REQUIRE(logits != nullptr && params != nullptr && jobs != nullptr && drafts != nullptr &&
                           q_offsets != nullptr && uniforms != nullptr && accepted != nullptr && tokens != nullptr &&
                           workspace != nullptr,
                       "verify_drafts: null pointer (logits %p, params %p, jobs %p, drafts %p, q_offsets %p, "
                       "uniforms %p, accepted %p, tokens %p, workspace %p)",
                       static_cast<void*>(logits), static_cast<const void*>(params), static_cast<const void*>(jobs),
                       static_cast<const void*>(drafts), static_cast<const void*>(q_offsets),
                       static_cast<const void*>(uniforms), static_cast<void*>(accepted), static_cast<void*>(tokens),
                       workspace);
  EXACTLY_CUDA_REQUIRE(aligned(logits, alignof(float)) && aligned(params, alignof(SampleRowParams)) &&
                           aligned(penalties, alignof(PenaltyEntry)) && aligned(jobs, alignof(VerifyJob)) &&
                           aligned(drafts, alignof(int32_t)) && aligned(q_offsets, alignof(int32_t)) &&
                           aligned(q_entries, alignof(DraftProb)) && aligned(uniforms, alignof(double)) &&
                           aligned(accepted, alignof(int32_t)) && aligned(tokens, alignof(int32_t)) &&
                           aligned(workspace, alignof(u64)),
                       "verify_drafts: misaligned pointer (logits %p, params %p, penalties %p, jobs %p, drafts %p, "
                       "q_offsets %p, q_entries %p, uniforms %p, accepted %p, tokens %p, workspace %p)",
                       static_cast<void*>(logits), static_cast<const void*>(params),
                       static_cast<const void*>(penalties), static_cast<const void*>(jobs),
                       static_cast<const void*>(drafts), static_cast<const void*>(q_offsets),
                       static_cast<const void*>(q_entries), static_cast<const void*>(uniforms),
                       static_cast<void*>(accepted), static_cast<void*>(tokens), workspace);

  auto* row_space = static_cast<u64*>(workspace);
  auto* states = reinterpret_cast<RowState*>(row_space + rows * vocab);
  auto* claims = reinterpret_cast<u64*>(states + rows);
  check_cuda(cudaMemsetAsync(claims, 0xff, static_cast<size_t>(rows) * sizeof(u64), stream),
             "verify_drafts: clearing the row claims");
  constexpr int kClaimThreads = 256;
  claim_kernel<<<static_cast<unsigned>((num_jobs + kClaimThreads - 1) / kClaimThreads), kClaimThreads, 0, stream>>>(
      jobs, num_jobs, rows, claims);
  check_launch("verify_drafts (claims)");
  verify_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, vocab, rows, params, penalties, jobs, drafts, q_offsets, q_entries, claims, states, row_space);
  check_launch("verify_drafts (rows)");
  verify_jobs_kernel<<<static_cast<unsigned>(num_jobs), kThreads, 0, stream>>>(
      logits, vocab, rows, jobs, q_offsets, q_entries, uniforms, claims, states, accepted, tokens, row_space);
  check_launch("verify_drafts (jobs)");
}

}  // namespace exactly::kernels::cuda
