// The protocol really crosses processes: a batcher published on 127.0.0.1 through the CAF
// middleman serves the example client (examples/stream_completion) running as a second
// process, whose session registers remotely and receives its tokens as serialized messages.

#include "tests/support/actor_harness.hpp"
#include "tests/support/child_process.hpp"

#include "actors/engine.hpp"

#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>

namespace orzo {
namespace {

using testing::run_command;

const std::string kModel = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

TEST(RemoteClient, StreamsACompletionFromAnotherProcess) {
  caf::actor_system_config cfg;
  testing::test_config(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  EngineOptions o;
  o.model = kModel;
  o.backend.threads = 1;
  auto engine = Engine::start(sys, o);

  // What the same request gives in this process.
  testing::Collector c;
  SessionRequest r;
  r.id = "local";
  r.prompt_ids = engine->tokenize("Once upon a time");
  r.sampling.temperature = 0;
  r.limits.max_tokens = 48;
  engine->generate(r, c.callbacks("local"));
  ASSERT_TRUE(c.wait(1));
  const std::string local = c.outcomes().at("local").text;
  ASSERT_NE(local.find("Lily"), std::string::npos) << local;

  auto port = sys.middleman().publish(engine->batcher(), 0, "127.0.0.1", true);
  ASSERT_TRUE(port) << sys.render(port.error());
  int status = 0;
  const std::string remote = run_command(std::string(ORZO_STREAM_COMPLETION_PATH) + " " + kModel +
                                             " 'Once upon a time' 48 127.0.0.1:" + std::to_string(*port) + " 2>/dev/null",
                                         status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(remote, local);
  engine->shutdown();
}

}  // namespace
}  // namespace orzo
