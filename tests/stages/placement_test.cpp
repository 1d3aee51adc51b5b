#include "stages/placement.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace orzo {
namespace {

// "device:index:begin-end" per stage, to compare whole placements at once.
std::string show(const std::vector<Stage>& stages) {
  std::string out;
  for (const Stage& s : stages) {
    if (!out.empty()) out += ",";
    out += s.device + ":" + std::to_string(s.device_index) + ":" + std::to_string(s.layers.begin) + "-" +
           std::to_string(s.layers.end);
  }
  return out;
}

TEST(Placement, ParsesStageLists) {
  EXPECT_EQ(show(parse_placement("cpu", 5)), "cpu:0:0-5");
  EXPECT_EQ(show(parse_placement("cuda", 5)), "cuda:0:0-5");
  EXPECT_EQ(show(parse_placement("cuda:1", 5)), "cuda:1:0-5");
  EXPECT_EQ(show(parse_placement("cpu:0-5", 5)), "cpu:0:0-5");
  EXPECT_EQ(show(parse_placement("cpu:0-2,cpu:2-5", 5)), "cpu:0:0-2,cpu:0:2-5");
  EXPECT_EQ(show(parse_placement("cuda:0:0-16,cuda:1:16-32", 32)), "cuda:0:0-16,cuda:1:16-32");
  EXPECT_EQ(show(parse_placement("cuda:0:0-1,cpu:1-2,cuda:3:2-3", 3)), "cuda:0:0-1,cpu:0:1-2,cuda:3:2-3");
}

TEST(Placement, ParsesRemoteStages) {
  EXPECT_EQ(show(parse_placement("cpu:0-2,remote:2-5", 5)), "cpu:0:0-2,remote:0:2-5");
  EXPECT_EQ(show(parse_placement("remote:0-1,cpu:1-3,remote:3-5", 5)), "remote:0:0-1,cpu:0:1-3,remote:0:3-5");
  EXPECT_EQ(show(parse_placement("remote", 5)), "remote:0:0-5");
  EXPECT_EQ(show(parse_placement("remote*2", 5)), "remote:0:0-3,remote:0:3-5");
}

TEST(Placement, SplitsEvenly) {
  EXPECT_EQ(show(parse_placement("cpu*3", 7)), "cpu:0:0-3,cpu:0:3-5,cpu:0:5-7");
  EXPECT_EQ(show(parse_placement("cuda*2", 32)), "cuda:0:0-16,cuda:1:16-32");
  EXPECT_EQ(show(parse_placement("cuda*4", 4)), "cuda:0:0-1,cuda:1:1-2,cuda:2:2-3,cuda:3:3-4");
  EXPECT_EQ(show(split_evenly("cpu", 1, 9)), "cpu:0:0-9");
  EXPECT_EQ(show(split_evenly("cuda", 3, 10)), "cuda:0:0-4,cuda:1:4-7,cuda:2:7-10");
}

// Each bad spec throws std::invalid_argument whose one-line message quotes `names`.
void expect_rejected(const std::string& spec, int32_t layers, const std::string& names) {
  try {
    parse_placement(spec, layers);
    ADD_FAILURE() << "'" << spec << "' was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(names), std::string::npos) << "'" << spec << "': " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(Placement, RejectsMalformedSpecs) {
  expect_rejected("", 4, "empty spec");
  expect_rejected("gpu", 4, "unknown device 'gpu'");
  expect_rejected("CPU", 4, "unknown device 'CPU'");
  expect_rejected("cpu:0-2,tpu:2-4", 4, "'tpu:2-4': unknown device");
  expect_rejected("cpu:0-2,,cpu:2-4", 4, "empty stage");
  expect_rejected("cpu:0-4,", 4, "empty stage");
  expect_rejected("cuda:x:0-4", 4, "bad device index 'x'");
  expect_rejected("cuda:-1", 4, "bad layer range '-1'");
  expect_rejected("cuda:0:0-4:1", 4, "too many fields");
  expect_rejected("cpu:0-", 4, "bad layer range '0-'");
  expect_rejected("cpu:a-4", 4, "bad layer range 'a-4'");
  expect_rejected("cpu:0-2-4", 4, "bad layer range '0-2-4'");
  expect_rejected("cpu:+0-4", 4, "bad layer range '+0-4'");
  expect_rejected("cpu:0-99999999999", 4, "bad layer range");
  expect_rejected("cpu: 0-4", 4, "bad layer range ' 0-4'");
  expect_rejected("cpu:3-3", 4, "'cpu:3-3': layer range '3-3' is empty");
  expect_rejected("cpu:3-1", 4, "is empty");
  expect_rejected("cpu,cpu", 4, "'cpu': each stage of a multi-stage spec needs a layer range");
  expect_rejected("cpu:0-2,cuda:1", 4, "'cuda:1': each stage");
  expect_rejected("cpu\n:0-4", 4, "unknown device 'cpu\\x0a'");
  expect_rejected("remote:1:0-4", 4, "'remote:1:0-4': a remote stage takes no device index");
  expect_rejected("remote:1", 4, "a remote stage takes no device index");
  expect_rejected("cpu:0-2,remote", 4, "'remote': each stage of a multi-stage spec needs a layer range");
  expect_rejected("remote:0-2,remote:3-4", 4, "starts at layer 3 but the previous stage ends at 2");
}

TEST(Placement, RejectsStagesThatDoNotTileTheModel) {
  expect_rejected("cpu:1-4", 4, "'cpu:1-4': the first stage must start at layer 0");
  expect_rejected("cpu:0-2,cpu:3-4", 4, "'cpu:3-4': starts at layer 3 but the previous stage ends at 2");
  expect_rejected("cpu:0-3,cpu:2-4", 4, "starts at layer 2 but the previous stage ends at 3");
  expect_rejected("cpu:0-2", 4, "the stages end at layer 2 but the model has 4");
  expect_rejected("cpu:0-2,cpu:2-5", 4, "'cpu:2-5': ends at layer 5, past the model's 4 layers");
  expect_rejected("cpu", 0, "the model has 0 layers");
}

TEST(Placement, ParsesAWorkersStage) {
  const Stage cpu = parse_worker_stage("cpu", "2-5", 5);
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.layers.begin, 2);
  EXPECT_EQ(cpu.layers.end, 5);
  const Stage gpu = parse_worker_stage("cuda:1", "0-3", 5);
  EXPECT_EQ(gpu.device, "cuda");
  EXPECT_EQ(gpu.device_index, 1);
  EXPECT_EQ(gpu.layers.end, 3);
  EXPECT_EQ(parse_worker_stage("cuda", "0-3", 5).device_index, 0);
  EXPECT_THROW(parse_worker_stage("cpu", "2-6", 5), std::invalid_argument);
  EXPECT_THROW(parse_worker_stage("cpu", "3-3", 5), std::invalid_argument);
  EXPECT_THROW(parse_worker_stage("cpu", "2", 5), std::invalid_argument);
  EXPECT_THROW(parse_worker_stage("cpu", "1:2-3", 5), std::invalid_argument);
  EXPECT_THROW(parse_worker_stage("tpu", "0-2", 5), std::invalid_argument);
  EXPECT_THROW(parse_worker_stage("cuda:x", "0-2", 5), std::invalid_argument);
  for (const auto& [device, layers, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"cpu", "4-9", "ends at layer 9, past the model's 5 layers"},
           {"remote", "0-2", "a worker runs its layers itself"}}) {
    try {
      parse_worker_stage(device, layers, 5);
      ADD_FAILURE() << device << " " << layers;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Placement, RejectsBadEvenSplits) {
  expect_rejected("cpu*0", 4, "cannot split 4 layers into 0");
  expect_rejected("cpu*5", 4, "cannot split 4 layers into 5");
  expect_rejected("cpu*", 4, "bad stage count ''");
  expect_rejected("cpu*x", 4, "bad stage count 'x'");
  expect_rejected("cpu*2,cpu:0-4", 4, "bad stage count '2,cpu:0-4'");
  expect_rejected("gpu*2", 4, "unknown device 'gpu'");
  expect_rejected("cuda:1*2", 4, "unknown device 'cuda:1'");
  EXPECT_THROW(split_evenly("cpu", 2, 1), std::invalid_argument);
  EXPECT_THROW(split_evenly("metal", 1, 1), std::invalid_argument);
}

// Replicas: listed whole-model placements, or one placement repeated on GPUs of their own.
TEST(Placement, ParsesReplicas) {
  const auto listed = parse_replicas("cuda:0;cpu:0-2,remote:2-4", 1, 4);
  ASSERT_EQ(listed.size(), 2u);
  ASSERT_EQ(listed[0].size(), 1u);
  EXPECT_EQ(listed[0][0].device, "cuda");
  ASSERT_EQ(listed[1].size(), 2u);
  EXPECT_EQ(listed[1][1].device, "remote");
  EXPECT_EQ(parse_replicas("cpu;cpu", 2, 4).size(), 2u);

  const auto repeated = parse_replicas("cuda*2", 3, 4);
  ASSERT_EQ(repeated.size(), 3u);
  std::vector<int32_t> gpus;
  for (const auto& replica : repeated)
    for (const auto& stage : replica) gpus.push_back(stage.device_index);
  EXPECT_EQ(gpus, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  const auto cpus = parse_replicas("cpu:0-1,remote:1-4", 2, 4);
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus[1][0].device, "cpu");
  EXPECT_EQ(cpus[1][1].layers.begin, 1);
  EXPECT_EQ(parse_replicas("cpu", 1, 4).size(), 1u);
}

// Counted before the model is loaded, to size the process's threads.
TEST(Placement, CountsTheStagesOnADevice) {
  EXPECT_EQ(count_stages("cpu", 1, "cpu"), 1);
  EXPECT_EQ(count_stages("cpu", 3, "cpu"), 3);
  EXPECT_EQ(count_stages("cpu*4", 2, "cpu"), 8);
  EXPECT_EQ(count_stages("cpu:0-2,cuda:0:2-4", 1, "cpu"), 1);
  EXPECT_EQ(count_stages("cpu:0-2,cuda:0:2-4", 1, "cuda"), 1);
  EXPECT_EQ(count_stages("cpu:0-1,remote:1-4", 2, "cpu"), 2);
  EXPECT_EQ(count_stages("cuda:0;cpu:0-2,cpu:2-4", 1, "cpu"), 2);  // listed replicas count as listed
  EXPECT_EQ(count_stages("cuda*2", 1, "cpu"), 0);
  EXPECT_EQ(count_stages("", 1, "cpu"), 0);
  EXPECT_EQ(count_stages("cpu*999999999;cpu*999999999;cpu*999999999", 1, "cpu"), INT32_MAX);  // saturates
  EXPECT_EQ(count_stages("cpu*999999999", 64, "cpu"), INT32_MAX);
}

TEST(Placement, RejectsBadReplicas) {
  const auto message = [](const std::string& spec, int32_t replicas) {
    try {
      parse_replicas(spec, replicas, 4);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message("cpu;cpu", 3), "placement 'cpu;cpu': lists 2 replicas, but 3 were asked for");
  EXPECT_EQ(message("cpu", 0), "placement 'cpu': 0 replicas (expected 1 to 64)");
  EXPECT_EQ(message("cpu;", 1), "placement '': empty spec");
  EXPECT_EQ(message("cpu;cpu:0-2", 1), "placement 'cpu:0-2': the stages end at layer 2 but the model has 4");
}

}  // namespace
}  // namespace orzo
