// Model::load on whole checkpoints: sharded safetensors load like one file, and a model
// whose tensors do not fit its config is refused with the file and tensor named.
#include "runtime/model.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/load_error.hpp"
#include "formats/safetensors.hpp"
#include "formats/safetensors_writer.hpp"
#include "runtime/cpu_backend.hpp"
#include "tests/support/model_harness.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

namespace fs = std::filesystem;

const std::string kLlama = std::string(ORZO_FIXTURES_DIR) + "/llama";

class ModelLoad : public testing::TempDirTest {
 protected:
  // Copies the llama fixture's config into the temp dir and writes the tensors that
  // `keep` accepts into `shards` files (round-robin), with an index when there are several.
  void write_checkpoint(int shards, const std::function<bool(const TensorView&)>& keep) {
    fs::copy_file(kLlama + "/config.json", path("config.json"));
    const auto source = read_safetensors(kLlama + "/model.safetensors");
    nlohmann::json weight_map = nlohmann::json::object();
    for (int s = 0; s < shards; ++s) {
      const std::string name = shards == 1 ? "model.safetensors"
                                           : "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) +
                                                 ".safetensors";
      SafetensorsWriter w(path(name));
      std::vector<const TensorView*> mine;
      for (size_t i = 0; i < source.tensors.size(); ++i)
        if (static_cast<int>(i) % shards == s && keep(source.tensors[i])) mine.push_back(&source.tensors[i]);
      for (const auto* t : mine) {
        w.add_tensor(t->name, t->dtype, t->shape);
        weight_map[t->name] = name;
      }
      for (const auto* t : mine) w.write_tensor_data(t->data, t->nbytes);
      w.finish();
    }
    if (shards > 1) {
      std::ofstream(path("model.safetensors.index.json")) << nlohmann::json{{"weight_map", weight_map}}.dump();
    }
  }

  std::string load_error(const std::string& p) {
    try {
      Model::load(p);
    } catch (const LoadError& e) {
      return e.what();
    }
    return "";
  }

  std::vector<float> first_prompt_logits(const std::string& p) {
    auto model = Model::load(p);
    CpuBackend::Options o;
    o.kv_blocks = 2;
    o.threads = 1;
    CpuBackend backend(model, o);
    testing::Pipeline pipe({&backend}, 2);
    return pipe.prefill_all(0, {5, 17, 99, 3, 64});
  }
};

TEST_F(ModelLoad, ShardedCheckpointLoadsLikeOneFile) {
  write_checkpoint(3, [](const TensorView&) { return true; });
  EXPECT_EQ(first_prompt_logits(dir_.string()), first_prompt_logits(kLlama));
}

TEST_F(ModelLoad, MissingTensorIsNamed) {
  write_checkpoint(1, [](const TensorView& t) { return t.name != "model.layers.1.mlp.up_proj.weight"; });
  const auto e = load_error(dir_.string());
  EXPECT_NE(e.find("missing tensor model.layers.1.mlp.up_proj.weight"), std::string::npos) << e;
}

TEST_F(ModelLoad, UntiedModelWithoutLmHeadIsRefused) {
  write_checkpoint(1, [](const TensorView& t) { return t.name != "lm_head.weight"; });
  EXPECT_NE(load_error(dir_.string()).find("lm_head.weight"), std::string::npos);
}

TEST_F(ModelLoad, ShapeThatDisagreesWithConfigNamesFileAndTensor) {
  write_checkpoint(1, [](const TensorView&) { return true; });
  nlohmann::json config = nlohmann::json::parse(std::ifstream(path("config.json")));
  config["intermediate_size"] = config["intermediate_size"].get<int>() * 2;
  std::ofstream(path("config.json")) << config.dump();
  const auto e = load_error(dir_.string());
  EXPECT_NE(e.find(path("model.safetensors")), std::string::npos) << e;
  EXPECT_NE(e.find("mlp.gate_proj.weight has shape"), std::string::npos) << e;
}

// Phi-3's fused matrices are checked whole before they are split into q/k/v and gate/up.
TEST_F(ModelLoad, FusedMatrixThatDisagreesWithConfigIsNamed) {
  const std::string phi3 = std::string(ORZO_FIXTURES_DIR) + "/phi3";
  fs::copy_file(phi3 + "/model.safetensors", path("model.safetensors"));
  for (const auto& [key, value] : {std::pair{"num_key_value_heads", 4}, std::pair{"intermediate_size", 96}}) {
    nlohmann::json config = nlohmann::json::parse(std::ifstream(phi3 + "/config.json"));
    config[key] = value;
    std::ofstream(path("config.json")) << config.dump();
    const auto e = load_error(dir_.string());
    EXPECT_NE(e.find(std::string(key) == "intermediate_size" ? "mlp.gate_up_proj.weight has shape [128, 64], expected [192, 64]"
                                                              : "self_attn.qkv_proj.weight has shape [128, 64], expected [192, 64]"),
              std::string::npos)
        << e;
  }
}

TEST_F(ModelLoad, ShardListedInIndexButAbsentIsNamed) {
  write_checkpoint(2, [](const TensorView&) { return true; });
  fs::remove(path("model-00002-of-00002.safetensors"));
  EXPECT_NE(load_error(dir_.string()).find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST_F(ModelLoad, TruncatedWeightsAreAnErrorNotACrash) {
  write_checkpoint(1, [](const TensorView&) { return true; });
  auto bytes = testing::read_bytes(path("model.safetensors"));
  bytes.resize(bytes.size() - 1000);
  testing::write_bytes(path("model.safetensors"), bytes);
  EXPECT_NE(load_error(dir_.string()).find(path("model.safetensors")), std::string::npos);
}

TEST_F(ModelLoad, NonexistentPathsAreNamed) {
  EXPECT_NE(load_error(path("nope.gguf")).find(path("nope.gguf")), std::string::npos);
  EXPECT_NE(load_error(dir_.string()).find("config.json"), std::string::npos);  // an empty directory
}

}  // namespace
}  // namespace orzo
