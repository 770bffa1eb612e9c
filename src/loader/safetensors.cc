#include "loader/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/format.h"

namespace exactly {
namespace {

using Json = nlohmann::json;

// The format's own limit on the header, which also bounds what a corrupt
// length field can make us parse.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DTypeInfo {
  const char* name;
  SafetensorsDType type;
  int size;
};
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", SafetensorsDType::BOOL, 1},       {"U8", SafetensorsDType::U8, 1},
    {"I8", SafetensorsDType::I8, 1},           {"F8_E5M2", SafetensorsDType::F8_E5M2, 1},
    {"F8_E4M3", SafetensorsDType::F8_E4M3, 1}, {"I16", SafetensorsDType::I16, 2},
    {"U16", SafetensorsDType::U16, 2},         {"F16", SafetensorsDType::F16, 2},
    {"BF16", SafetensorsDType::BF16, 2},       {"I32", SafetensorsDType::I32, 4},
    {"U32", SafetensorsDType::U32, 4},         {"F32", SafetensorsDType::F32, 4},
    {"F64", SafetensorsDType::F64, 8},         {"I64", SafetensorsDType::I64, 8},
    {"U64", SafetensorsDType::U64, 8},
};

const DTypeInfo& info_of(SafetensorsDType t) {
  for (const DTypeInfo& d : kDTypes)
    if (d.type == t) return d;
  throw Error("unknown safetensors dtype");
}

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw FileFormatError(file + ": " + what);
}

}  // namespace

int safetensors_dtype_size(SafetensorsDType t) { return info_of(t).size; }
const char* safetensors_dtype_name(SafetensorsDType t) { return info_of(t).name; }

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<MappedFile> mapping = MappedFile::open(path, "a safetensors file");
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const uint8_t* bytes = mapping->data();
  const size_t size = mapping->size();
  f->mapping_ = std::move(mapping);
  f->parse_all(bytes, size);
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* bytes, size_t size, std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  f->parse_all(bytes, size);
  return f;
}

void SafetensorsFile::parse_all(const uint8_t* bytes, size_t size) {
  if (size < 8) bad(path_, strformat("%zu bytes, shorter than the 8-byte header length", size));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8)
    bad(path_, strformat("header length %llu at offset 0 exceeds the file (%zu bytes) or the 100 MiB limit",
                         static_cast<unsigned long long>(header_len), size));
  const auto* header_begin = reinterpret_cast<const char*>(bytes + 8);
  Json header = Json::parse(header_begin, header_begin + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    bad(path_, strformat("the header (offset 8, %llu bytes) is not a JSON object",
                         static_cast<unsigned long long>(header_len)));
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  struct Range {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path_, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad(path_, "__metadata__ value of '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      bad(path_, "tensor '" + name + "' lacks dtype, shape or data_offsets");
    const Json& dt = v["dtype"];
    const DTypeInfo* info = nullptr;
    if (dt.is_string())
      for (const DTypeInfo& d : kDTypes)
        if (dt.get<std::string>() == d.name) info = &d;
    if (info == nullptr) bad(path_, "tensor '" + name + "' has unknown dtype " + dt.dump());
    const Json& shape = v["shape"];
    if (!shape.is_array()) bad(path_, "tensor '" + name + "' shape is not an array");
    SafetensorsTensor t{name, info->type, {}, nullptr, 0, 0};
    uint64_t elements = 1;
    for (const Json& d : shape) {
      if (!d.is_number_unsigned()) bad(path_, "tensor '" + name + "' has a dimension that is not a count: " + d.dump());
      const uint64_t n = d.get<uint64_t>();
      if (n != 0 && elements > std::numeric_limits<uint64_t>::max() / 8 / n)
        bad(path_, "tensor '" + name + "' shape " + shape.dump() + " overflows");
      elements *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const Json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      bad(path_, "tensor '" + name + "' data_offsets is not [begin, end]");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      bad(path_, strformat("tensor '%s' bytes [%llu, %llu) of the data section (offset %llu, %llu bytes) are outside it",
                           name.c_str(), static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
                           static_cast<unsigned long long>(data_start), static_cast<unsigned long long>(data_size)));
    if (end - begin != elements * static_cast<uint64_t>(info->size))
      bad(path_, strformat("tensor '%s' holds %llu bytes but its shape %s of %s needs %llu", name.c_str(),
                           static_cast<unsigned long long>(end - begin), shape.dump().c_str(), info->name,
                           static_cast<unsigned long long>(elements * static_cast<uint64_t>(info->size))));
    t.data = bytes + data_start + begin;
    t.size_bytes = static_cast<int64_t>(end - begin);
    t.file_offset = static_cast<int64_t>(data_start + begin);
    ranges.push_back({begin, end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }
  // The tensors must tile the data section: no overlap, no hole, nothing after.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  uint64_t at = 0;
  for (const Range& r : ranges) {
    if (r.begin != at)
      bad(path_, strformat("tensor '%s' starts at data byte %llu where %llu was expected (overlap or hole)",
                           tensors_[r.tensor].name.c_str(), static_cast<unsigned long long>(r.begin),
                           static_cast<unsigned long long>(at)));
    at = r.end;
  }
  if (at != data_size)
    bad(path_, strformat("the tensors end at data byte %llu but the data section has %llu bytes",
                         static_cast<unsigned long long>(at), static_cast<unsigned long long>(data_size)));
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::string index_path;
  std::string single;
  if (fs::is_directory(path)) {
    if (fs::exists(fs::path(path) / "model.safetensors.index.json"))
      index_path = (fs::path(path) / "model.safetensors.index.json").string();
    else
      single = (fs::path(path) / "model.safetensors").string();
  } else if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    index_path = path;
  } else {
    single = path;
  }
  std::unique_ptr<SafetensorsCheckpoint> c(new SafetensorsCheckpoint());
  c->path_ = single.empty() ? index_path : single;
  if (!single.empty()) {
    c->shards_.push_back(SafetensorsFile::open(single));
    for (const SafetensorsTensor& t : c->shards_.back()->tensors()) c->by_name_.emplace(t.name, &t);
    return c;
  }
  std::ifstream in(index_path);
  if (!in) throw FileFormatError(index_path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  const Json index = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw FileFormatError(index_path + ": not a JSON object with a weight_map object");
  std::map<std::string, const SafetensorsFile*> shard_of_file;
  const fs::path dir = fs::path(index_path).parent_path();
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string()) throw FileFormatError(index_path + ": weight_map entry '" + it.key() + "' is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.find('/') != std::string::npos || file == ".." || file.empty())
      throw FileFormatError(index_path + ": weight_map names '" + file + "', not a file beside the index");
    auto shard = shard_of_file.find(file);
    if (shard == shard_of_file.end()) {
      c->shards_.push_back(SafetensorsFile::open((dir / file).string()));
      shard = shard_of_file.emplace(file, c->shards_.back().get()).first;
    }
    const SafetensorsTensor* t = shard->second->find(it.key());
    if (t == nullptr) throw FileFormatError(index_path + ": tensor '" + it.key() + "' is not in its shard " + file);
    c->by_name_.emplace(t->name, t);
  }
  return c;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const std::string& SafetensorsCheckpoint::file_of(const SafetensorsTensor& t) const {
  for (const auto& shard : shards_) {
    const auto& all = shard->tensors();
    const std::less<const SafetensorsTensor*> before;  // a total order, unlike < on unrelated pointers
    if (!all.empty() && !before(&t, all.data()) && before(&t, all.data() + all.size())) return shard->path();
  }
  return path_;
}

std::vector<const SafetensorsTensor*> SafetensorsCheckpoint::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  for (const auto& [name, t] : by_name_) out.push_back(t);
  return out;
}

}  // namespace exactly
