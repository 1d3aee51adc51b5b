// What the Engine gives a front end before it starts a session: the prompt's ids (sessions
// take ids only), and the bounds the batcher holds every request to.

#include "tests/support/actor_harness.hpp"

#include "actors/engine.hpp"
#include "runtime/model.hpp"
#include "runtime/null_backend.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace orzo {
namespace {

const std::string kModel = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

class EngineFrontEnd : public ::testing::Test {
 protected:
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
};

TEST_F(EngineFrontEnd, TokenizeGivesTheModelsTokenizerIds) {
  EngineOptions o;
  o.model = kModel;
  o.backend.threads = 1;
  o.max_model_len = 300;
  auto engine = Engine::start(sys, o);
  EXPECT_EQ(engine->tokenize("Once upon a time"), (std::vector<int32_t>{1, 403, 407, 261, 378}));  // <s> first
  EXPECT_EQ(engine->tokenize("Once upon a time", false), (std::vector<int32_t>{403, 407, 261, 378}));
  EXPECT_EQ(engine->bounds().max_model_len, 300);
  EXPECT_EQ(engine->bounds().vocab_size, static_cast<int32_t>(engine->model()->config().vocab_size));
}

TEST_F(EngineFrontEnd, WithoutATokenizerTokenizeSaysSo) {
  std::vector<std::unique_ptr<LayerBackend>> stages;
  stages.push_back(std::make_unique<NullBackend>(64, 16));
  BatcherOptions b;
  b.kv_blocks = 16;
  b.max_model_len = 128;
  b.vocab_size = 64;
  auto engine = Engine::start_with(sys, std::move(stages), b);
  EXPECT_EQ(engine->bounds().max_model_len, 128);
  EXPECT_EQ(engine->bounds().vocab_size, 64);
  try {
    engine->tokenize("Once");
    FAIL() << "tokenized without a tokenizer";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orzo
