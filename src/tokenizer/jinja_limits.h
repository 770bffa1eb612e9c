// Limits that hold whatever a template or its variables say. Templates come
// from model files and variables from requests; neither may decide a
// recursion depth, an allocation or a render time without a bound:
// - values nest at most kMaxValueDepth lists and dicts deep;
// - a string a template makes (its output included) has at most
//   kMaxStringBytes bytes, a list at most kMaxListItems items;
// - expressions and blocks nest at most kMaxParseDepth deep in a template's
//   text, evaluations (macro calls included) kMaxEvalDepth deep;
// - one render does at most kRenderWork units of work, a unit being about a
//   nanosecond on a current core: a byte made or copied is one, a byte
//   decoded into code points kDecodeWork, an evaluation step kStepWork, a
//   loop iteration kIterationWork. About two seconds in all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace exactly::jinja {

// A failure inside a template; the evaluator adds the template location.
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kMaxValueDepth = 256;
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;
inline constexpr size_t kMaxListItems = size_t{1} << 20;
inline constexpr int kMaxParseDepth = 200;
inline constexpr int kMaxEvalDepth = 500;
inline constexpr uint64_t kRenderWork = uint64_t{1} << 31;
inline constexpr uint64_t kStepWork = 64;
inline constexpr uint64_t kIterationWork = 1024;
inline constexpr uint64_t kDecodeWork = 4;

// The work budget of the render running on this thread (RAII: a render
// creates one; nested meters restore the outer one).
class WorkMeter {
 public:
  explicit WorkMeter(uint64_t budget);
  ~WorkMeter();
  WorkMeter(const WorkMeter&) = delete;
  WorkMeter& operator=(const WorkMeter&) = delete;

  // Counts `units` against this thread's render; throws EvalError once the
  // budget is spent. Without a render (a unit test calling an operation) it
  // does nothing.
  static void charge(uint64_t units);

 private:
  uint64_t left_;
  WorkMeter* outer_;
};

// out += piece, refused (EvalError) past kMaxStringBytes.
void append_bounded(std::string& out, std::string_view piece);
void check_string_size(size_t bytes);
void check_list_size(size_t items);

}  // namespace exactly::jinja
