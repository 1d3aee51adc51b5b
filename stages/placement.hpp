#pragma once
// Which worker runs which layers: a pipeline of stages, each a device and a contiguous range
// of layers, together covering the model from layer 0 to the last, in order.
//
// Grammar (no spaces):
//   spec   := stage ("," stage)*  |  device "*" count
//   stage  := device [":" index] [":" begin "-" end]  |  "remote" [":" begin "-" end]
//   device := "cpu" | "cuda"
// begin-end means layers [begin, end). The range may be left out only when the spec is a
// single stage, which then runs every layer. index defaults to 0. "device*count" splits the
// layers evenly over count stages (see split_evenly). A remote stage is served by a worker
// that joins from another process (`orzo worker --layers begin-end`), so it has no index.
//   "cpu"                      one CPU stage, all layers
//   "cpu:0-2,cpu:2-5"          two CPU stages
//   "cuda:0:0-16,cuda:1:16-32" two GPUs
//   "cuda*4"                   cuda:0 .. cuda:3, an even split
//   "cpu:0-2,remote:2-5"       layers [2,5) on a worker that joins through the middleman
#include <cstdint>
#include <string>
#include <vector>

#include "core/layer_range.hpp"

namespace orzo {

struct Stage {
  std::string device;  // "cpu", "cuda" or "remote"
  int32_t device_index = 0;
  LayerRange layers;
};

// Throws std::invalid_argument, one line naming the bad part: an unknown device, a malformed
// number or range, a range left out of a multi-stage spec, or stages that do not run
// contiguously from 0 to num_layers with at least one layer each.
std::vector<Stage> parse_placement(const std::string& spec, int32_t num_layers);

// The placements of data-parallel replicas, each a whole model: either `spec` lists them,
// separated by ';' ("cuda:0;cuda:1"), and `replicas` is 1 or their number; or `spec` is one
// placement that `replicas` copies repeat, each on devices of its own: replica r's CUDA stages
// take the device indices of the first plus r times the number of GPUs one placement spans
// ("cuda:0" x 2: cuda:0 and cuda:1; "cuda*2" x 2: cuda:0,1 and cuda:2,3). CPU and remote
// stages repeat as they are. Throws as parse_placement does, and unless 1 <= replicas <= 64.
std::vector<std::vector<Stage>> parse_replicas(const std::string& spec, int32_t replicas, int32_t num_layers);

// How many stages on `device` the placements of `spec` and `replicas` (as parse_replicas reads
// them) hold in all, read before the model's layer count is known: for sizing threads. A spec
// parse_replicas would refuse counts as it reads; the engine refuses it later. At most INT32_MAX.
int32_t count_stages(const std::string& spec, int32_t replicas, const std::string& device);

// The stage `orzo worker` serves: `device` is cpu, cuda or cuda:N (not remote: a worker runs
// its layers itself), `layers` is begin-end within a model of num_layers layers. Throws
// std::invalid_argument, one line naming the bad part.
Stage parse_worker_stage(const std::string& device, const std::string& layers, int32_t num_layers);

// `stages` stages on `device`, the first num_layers % stages of them one layer longer. CUDA
// stages take device indices 0, 1, ...; CPU and remote stages all index 0. Throws std::invalid_argument
// on an unknown device or unless 1 <= stages <= num_layers.
std::vector<Stage> split_evenly(const std::string& device, int32_t stages, int32_t num_layers);

}  // namespace orzo
