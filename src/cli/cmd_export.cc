// `exactly export --layers L`: writes a model made of the first L layers of
// another (plus its embedding, final norm and head), e.g. a draft model for
// `--spec draft:PATH` that shares the target's vocabulary by construction.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "loader/gguf.h"
#include "loader/layer_export.h"

namespace exactly::cli {

namespace {

struct ExportOptions {
  std::string model;
  std::string output;
  int64_t layers = 0;
};

void run(const ExportOptions& o) {
  std::unique_ptr<GGUFFile> in = GGUFFile::open(o.model);
  export_first_layers(*in, o.layers, o.output);
  std::fprintf(stderr, "wrote %s: the first %lld layers of %s\n", o.output.c_str(), static_cast<long long>(o.layers),
               o.model.c_str());
}

}  // namespace

void register_export(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "write a GGUF model made of the first layers of another");
  o->model = default_model_path();
  cmd->add_option("-m,--model", o->model, "GGUF model file to cut")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "GGUF file to write")->required();
  cmd->add_option("--layers", o->layers, "decoder layers to keep (the first L)")->required();
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
