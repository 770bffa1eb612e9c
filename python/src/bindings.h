// The parts of the `_exactly` extension module, each registered by its own file.
#pragma once

#include <nanobind/nanobind.h>

namespace exactly::python {

void bind_engine(nanobind::module_& m);   // engine_binding.cc: Engine, EngineConfig, the tokenizer's calls
void bind_outputs(nanobind::module_& m);  // outputs_binding.cc: what a step returns

}  // namespace exactly::python
