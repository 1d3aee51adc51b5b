#include "formats/safetensors.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/load_error.hpp"

namespace orzo {

namespace {

using nlohmann::json;

// The reference implementation's limit; a larger header is damage, not a real model.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw LoadError(path + ": " + what); }

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, const std::string& what) {
  fail(path, "tensor '" + name + "': " + what);
}

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  return std::nullopt;
}

size_t element_bytes(DType t) { return t == DType::F32 ? 4 : 2; }

uint64_t to_u64(const std::string& path, const std::string& name, const json& v, const char* field) {
  if (!v.is_number_unsigned()) fail_tensor(path, name, std::string(field) + " must be non-negative integers");
  return v.get<uint64_t>();
}

// nlohmann keeps the last of duplicate keys silently; a top-level duplicate would make two
// tensors share a name, so the parse callback refuses it.
json parse_header(const std::string& path, const uint8_t* begin, const uint8_t* end) {
  std::unordered_set<std::string> seen;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second)
      fail(path, "header names '" + parsed.get<std::string>() + "' twice");
    return true;
  };
  try {
    return json::parse(reinterpret_cast<const char*>(begin), reinterpret_cast<const char*>(end), on_event);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
}

struct Range {
  uint64_t begin, end;
  size_t tensor;
};

TensorView parse_tensor(const std::string& path, const std::string& name, const json& info, uint64_t data_bytes,
                        Range& range) {
  if (!info.is_object()) fail_tensor(path, name, "entry is not an object");
  const auto dtype_it = info.find("dtype");
  const auto shape_it = info.find("shape");
  const auto offsets_it = info.find("data_offsets");
  if (dtype_it == info.end() || !dtype_it->is_string()) fail_tensor(path, name, "missing string 'dtype'");
  if (shape_it == info.end() || !shape_it->is_array()) fail_tensor(path, name, "missing array 'shape'");
  if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2)
    fail_tensor(path, name, "'data_offsets' must be [begin, end]");

  const auto& dtype_str = dtype_it->get_ref<const std::string&>();
  const auto dtype = parse_dtype(dtype_str);
  if (!dtype) fail_tensor(path, name, "unsupported dtype '" + dtype_str + "' (supported: F32, F16, BF16)");

  TensorView view;
  view.name = name;
  view.file = path;
  view.dtype = *dtype;
  uint64_t numel = 1;
  for (const auto& d : *shape_it) {
    const uint64_t dim = to_u64(path, name, d, "shape dims");
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, dim, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail_tensor(path, name, "shape " + shape_it->dump() + " has too many elements");
    view.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, element_bytes(*dtype), &nbytes))
    fail_tensor(path, name, "shape " + shape_it->dump() + " has too many bytes");

  range.begin = to_u64(path, name, (*offsets_it)[0], "data_offsets");
  range.end = to_u64(path, name, (*offsets_it)[1], "data_offsets");
  if (range.begin > range.end || range.end > data_bytes)
    fail_tensor(path, name, "data_offsets " + offsets_it->dump() + " are not inside the " +
                                std::to_string(data_bytes) + "-byte data region");
  if (range.end - range.begin != nbytes)
    fail_tensor(path, name, "data_offsets " + offsets_it->dump() + " span " + std::to_string(range.end - range.begin) +
                                " bytes but " + dtype_str + " " + shape_it->dump() + " needs " + std::to_string(nbytes));
  view.nbytes = static_cast<size_t>(nbytes);
  return view;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) { return read_safetensors(MappedFile::open(path)); }

SafetensorsFile read_safetensors(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  const uint8_t* bytes = file->data();
  const uint64_t size = file->size();
  if (size < 8) fail(path, "file of " + std::to_string(size) + " bytes is too short for a safetensors header");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];
  if (header_len > kMaxHeaderBytes) fail(path, "header length " + std::to_string(header_len) + " exceeds 100 MiB");
  if (header_len > size - 8)
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the " + std::to_string(size) +
                   "-byte file (truncated?)");

  const json header = parse_header(path, bytes + 8, bytes + 8 + header_len);
  if (!header.is_object()) fail(path, "header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_bytes = size - data_start;

  SafetensorsFile result;
  std::vector<Range> ranges;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [key, value] : info.items())
        if (!value.is_string()) fail(path, "__metadata__ value for '" + key + "' is not a string");
      continue;
    }
    Range range{};
    result.tensors.push_back(parse_tensor(path, name, info, data_bytes, range));
    range.tensor = result.tensors.size() - 1;
    ranges.push_back(range);
  }

  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const Range* previous = nullptr;
  for (const auto& r : ranges) {
    if (r.begin == r.end) continue;  // an empty tensor occupies no bytes
    if (previous && r.begin < previous->end)
      fail(path, "tensors '" + result.tensors[previous->tensor].name + "' and '" + result.tensors[r.tensor].name +
                     "' overlap");
    previous = &r;
  }

  std::vector<TensorView> ordered;
  ordered.reserve(ranges.size());
  for (const auto& r : ranges) {
    TensorView& view = result.tensors[r.tensor];
    view.data = bytes + data_start + r.begin;
    ordered.push_back(std::move(view));
  }
  result.tensors = std::move(ordered);
  result.file = std::move(file);
  return result;
}

std::vector<SafetensorsFile> read_safetensors_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  const fs::path single = root / "model.safetensors";
  const fs::path index_path = root / "model.safetensors.index.json";
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single, ec)) fail(dir, "no model.safetensors or model.safetensors.index.json");
    std::vector<SafetensorsFile> files;
    files.push_back(read_safetensors(single.string()));
    return files;
  }

  const std::string index_name = index_path.string();
  const auto index_file = MappedFile::open(index_name);
  const uint8_t* text = index_file->data();
  json index;
  try {
    index = json::parse(reinterpret_cast<const char*>(text), reinterpret_cast<const char*>(text + index_file->size()));
  } catch (const json::exception& e) {
    fail(index_name, std::string("not valid JSON: ") + e.what());
  }
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object()) fail(index_name, "missing object 'weight_map'");

  std::map<std::string, std::vector<std::string>> wanted;  // shard -> tensors the index puts there
  for (const auto& [name, shard] : map_it->items()) {
    if (!shard.is_string()) fail(index_name, "tensor '" + name + "': shard is not a string");
    const auto& shard_name = shard.get_ref<const std::string&>();
    // Shards live beside the index; a path elsewhere is damage or mischief.
    if (shard_name.empty() || shard_name == "." || shard_name == ".." || shard_name.find('/') != std::string::npos)
      fail(index_name, "tensor '" + name + "': shard '" + shard_name + "' is not a file name");
    wanted[shard_name].push_back(name);
  }

  std::vector<SafetensorsFile> files;
  std::unordered_map<std::string, const std::string*> owner;  // tensor -> shard path holding it
  for (const auto& [shard_name, names] : wanted) {
    files.push_back(read_safetensors((root / shard_name).string()));
    const SafetensorsFile& shard = files.back();
    std::unordered_set<std::string> present;
    for (const auto& t : shard.tensors) {
      const auto [it, inserted] = owner.emplace(t.name, &shard.file->path());
      if (!inserted) fail(index_name, "tensor '" + t.name + "' is in both " + *it->second + " and " + shard.file->path());
      present.insert(t.name);
    }
    for (const auto& name : names)
      if (!present.count(name))
        fail(index_name, "tensor '" + name + "' is mapped to " + shard.file->path() + ", which does not contain it");
  }
  return files;
}

}  // namespace orzo
