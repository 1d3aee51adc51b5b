#include "stages/placement.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace orzo {
namespace {

// Copies of one placement a spec may ask for: parse_replicas refuses more, count_stages counts no more.
constexpr int32_t kMaxReplicas = 64;

// Control bytes escaped, so that the message stays one line whatever the spec holds.
std::string printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn]] void bad(std::string_view part, const std::string& why) {
  throw std::invalid_argument("placement '" + printable(part) + "': " + printable(why));
}

// Decimal digits only, at most 9 of them, so the value fits an int32_t.
bool parse_count(std::string_view text, int32_t& value) {
  if (text.empty() || text.size() > 9) return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

void check_device(std::string_view part, std::string_view device) {
  if (device != "cpu" && device != "cuda" && device != "remote")
    bad(part, "unknown device '" + std::string(device) + "' (expected cpu, cuda or remote)");
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0;;) {
    const size_t end = text.find(separator, start);
    pieces.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return pieces;
    start = end + 1;
  }
}

LayerRange parse_range(std::string_view part, std::string_view text) {
  const size_t dash = text.find('-');
  int32_t begin = 0, end = 0;
  if (dash == std::string_view::npos || !parse_count(text.substr(0, dash), begin) || !parse_count(text.substr(dash + 1), end))
    bad(part, "bad layer range '" + std::string(text) + "' (expected begin-end)");
  if (end <= begin) bad(part, "layer range '" + std::string(text) + "' is empty");
  return {begin, end};
}

Stage parse_stage(std::string_view part, bool alone, int32_t num_layers) {
  if (part.empty()) bad(part, "empty stage");
  const std::vector<std::string_view> fields = split(part, ':');
  if (fields.size() > 3) bad(part, "too many fields (expected device[:index][:begin-end])");
  Stage stage;
  check_device(part, fields[0]);
  stage.device = std::string(fields[0]);
  const bool ranged = fields.size() == 3 || (fields.size() == 2 && fields[1].find('-') != std::string_view::npos);
  if (fields.size() == 3 || (fields.size() == 2 && !ranged)) {
    if (stage.device == "remote") bad(part, "a remote stage takes no device index (expected remote[:begin-end])");
    if (!parse_count(fields[1], stage.device_index)) bad(part, "bad device index '" + std::string(fields[1]) + "'");
  }
  if (ranged) {
    stage.layers = parse_range(part, fields.back());
  } else if (alone) {
    stage.layers = {0, num_layers};
  } else {
    bad(part, "each stage of a multi-stage spec needs a layer range begin-end");
  }
  return stage;
}

}  // namespace

Stage parse_worker_stage(const std::string& device, const std::string& layers, int32_t num_layers) {
  const std::string spec = device + ":" + layers;
  if (layers.find(':') != std::string::npos) bad(spec, "bad layer range '" + layers + "' (expected begin-end)");
  Stage stage = parse_stage(spec, false, num_layers);
  if (stage.device == "remote") bad(spec, "a worker runs its layers itself (expected cpu or cuda[:index])");
  if (stage.layers.end > num_layers)
    bad(spec, "ends at layer " + std::to_string(stage.layers.end) + ", past the model's " + std::to_string(num_layers) +
                  " layers");
  return stage;
}

std::vector<Stage> split_evenly(const std::string& device, int32_t stages, int32_t num_layers) {
  check_device(device, device);
  if (stages < 1 || stages > num_layers)
    bad(device, "cannot split " + std::to_string(num_layers) + " layers into " + std::to_string(stages) +
                    " non-empty stages");
  std::vector<Stage> result;
  int64_t begin = 0;
  for (int32_t i = 0; i < stages; ++i) {
    const int64_t length = num_layers / stages + (i < num_layers % stages ? 1 : 0);
    result.push_back({device, device == "cuda" ? i : 0, {begin, begin + length}});
    begin += length;
  }
  return result;
}

std::vector<Stage> parse_placement(const std::string& spec, int32_t num_layers) {
  if (num_layers < 1) bad(spec, "the model has " + std::to_string(num_layers) + " layers");
  if (spec.empty()) bad(spec, "empty spec");
  if (const size_t star = spec.find('*'); star != std::string::npos) {
    int32_t stages = 0;
    if (!parse_count(std::string_view(spec).substr(star + 1), stages))
      bad(spec, "bad stage count '" + spec.substr(star + 1) + "' (expected device*count)");
    return split_evenly(spec.substr(0, star), stages, num_layers);
  }
  const std::vector<std::string_view> parts = split(spec, ',');
  std::vector<Stage> stages;
  int64_t next = 0;
  for (std::string_view part : parts) {
    Stage stage = parse_stage(part, parts.size() == 1, num_layers);
    if (stage.layers.begin != next)
      bad(part, next == 0 ? "the first stage must start at layer 0"
                          : "starts at layer " + std::to_string(stage.layers.begin) + " but the previous stage ends at " +
                                std::to_string(next));
    if (stage.layers.end > num_layers)
      bad(part, "ends at layer " + std::to_string(stage.layers.end) + ", past the model's " + std::to_string(num_layers) +
                    " layers");
    next = stage.layers.end;
    stages.push_back(std::move(stage));
  }
  if (next != num_layers)
    bad(spec, "the stages end at layer " + std::to_string(next) + " but the model has " + std::to_string(num_layers));
  return stages;
}

int32_t count_stages(const std::string& spec, int32_t replicas, const std::string& device) {
  const std::vector<std::string_view> listed = split(spec, ';');
  int64_t count = 0;  // at most 1e9 a placement, and a spec holds fewer than 2^31 of them
  for (std::string_view placement : listed) {
    if (const size_t star = placement.find('*'); star != std::string_view::npos) {
      int32_t stages = 0;
      if (placement.substr(0, star) == device && parse_count(placement.substr(star + 1), stages)) count += stages;
      continue;
    }
    for (std::string_view part : split(placement, ','))
      if (split(part, ':').front() == device) ++count;
  }
  if (listed.size() == 1) count *= std::clamp<int32_t>(replicas, 1, kMaxReplicas);
  return static_cast<int32_t>(std::min<int64_t>(count, INT32_MAX));
}

std::vector<std::vector<Stage>> parse_replicas(const std::string& spec, int32_t replicas, int32_t num_layers) {
  if (replicas < 1 || replicas > kMaxReplicas)
    bad(spec, std::to_string(replicas) + " replicas (expected 1 to " + std::to_string(kMaxReplicas) + ")");
  const std::vector<std::string_view> listed = split(spec, ';');
  std::vector<std::vector<Stage>> result;
  if (listed.size() > 1) {
    if (replicas != 1 && replicas != static_cast<int32_t>(listed.size()))
      bad(spec, "lists " + std::to_string(listed.size()) + " replicas, but " + std::to_string(replicas) + " were asked for");
    for (std::string_view one : listed) result.push_back(parse_placement(std::string(one), num_layers));
    return result;
  }
  const std::vector<Stage> first = parse_placement(spec, num_layers);
  int32_t gpus = 0;  // the device indices one placement spans
  for (const auto& stage : first)
    if (stage.device == "cuda") gpus = std::max(gpus, stage.device_index + 1);
  for (int32_t r = 0; r < replicas; ++r) {
    result.push_back(first);
    for (auto& stage : result.back())
      if (stage.device == "cuda") stage.device_index += r * gpus;
  }
  return result;
}

}  // namespace orzo
