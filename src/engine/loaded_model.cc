#include "engine/loaded_model.h"

#include <unistd.h>

#include <cstdio>

#include "core/format.h"

namespace exactly {

namespace {

// Reads one byte per page so the first forward pass does not stall on page
// faults, reporting progress as it goes.
void page_in(const GGUFFile& file, bool draw) {
  uint64_t total = 0, done = 0;
  for (const auto& t : file.tensors()) total += t.nbytes;
  volatile uint8_t sink = 0;
  int last_percent = -1;
  for (const auto& t : file.tensors()) {
    for (uint64_t off = 0; off < t.nbytes; off += 4096) sink = static_cast<uint8_t>(sink + t.data[off]);
    done += t.nbytes;
    int percent = total ? static_cast<int>(100 * done / total) : 100;
    if (draw && percent != last_percent) {
      last_percent = percent;
      const int width = 30, filled = percent * width / 100;
      std::fprintf(stderr, "\rloading %s [%.*s%*s] %3d%%", file.path().c_str(), filled,
                   "##############################", width - filled, "", percent);
    }
  }
  if (draw) std::fprintf(stderr, "\r\033[K");
}

}  // namespace

LoadedModel load_model(const std::string& path, bool show_progress) {
  LoadedModel m;
  m.file = GGUFFile::open(path);
  ModelConfig config = ModelConfig::from_gguf(*m.file);
  m.model = std::make_unique<LlamaModel>(*m.file, std::move(config));
  m.tokenizer = Tokenizer::from_gguf(*m.file);
  page_in(*m.file, show_progress && isatty(STDERR_FILENO));
  return m;
}

}  // namespace exactly
