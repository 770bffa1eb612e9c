// Renders a parsed template. Scoping follows jinja2: a `for` body (and a macro
// call) gets its own scope, so `set` inside a loop does not leak out of it;
// `if` does not open a scope; namespace() objects are shared and mutable.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "tokenizer/jinja_ast.h"

namespace exactly::jinja {

struct RenderOptions {
  // The time strftime_now() formats; the current local time when absent.
  std::optional<std::tm> now;
};

// `variables` are the template's context (messages, bos_token, ...). Throws
// exactly::Error naming the line and column of the failing expression; for
// raise_exception(msg) the message is msg.
std::string render_template(const Body& body, const ValueDict& variables, const RenderOptions& options);

}  // namespace exactly::jinja
