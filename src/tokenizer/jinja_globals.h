// The names every template sees before its own variables.
#pragma once

#include <string>
#include <unordered_map>

#include "tokenizer/jinja_eval.h"

namespace exactly::jinja {

using Scope = std::unordered_map<std::string, Value>;

Scope builtin_globals(const RenderOptions& options);

}  // namespace exactly::jinja
