#include "tokenizer/jinja_limits.h"

#include "core/format.h"

namespace exactly::jinja {

namespace {

thread_local WorkMeter* g_meter = nullptr;

}  // namespace

WorkMeter::WorkMeter(uint64_t budget) : left_(budget), outer_(g_meter) { g_meter = this; }

WorkMeter::~WorkMeter() { g_meter = outer_; }

void WorkMeter::charge(uint64_t units) {
  WorkMeter* m = g_meter;
  if (!m) return;
  if (units > m->left_) {
    m->left_ = 0;
    throw EvalError(strformat("the template did more work than a render may (%llu units, about two seconds)",
                              static_cast<unsigned long long>(kRenderWork)));
  }
  m->left_ -= units;
}

void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes)
    throw EvalError(strformat("a string of more than %zu bytes (%zu)", kMaxStringBytes, bytes));
}

void check_list_size(size_t items) {
  if (items > kMaxListItems) throw EvalError(strformat("a list of more than %zu items (%zu)", kMaxListItems, items));
}

void append_bounded(std::string& out, std::string_view piece) {
  check_string_size(out.size() + piece.size());
  out += piece;
}

}  // namespace exactly::jinja
