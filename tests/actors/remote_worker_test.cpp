// Pipelines and clients across processes: the batcher and the worker for layers [0,2) of stories260K
// run here, `orzo worker --layers 2-5` joins from a second process through the CAF
// middleman, and a client may run in a third. Checks that greedy outputs equal the
// single-process run's; that the requests a killed or frozen (SIGSTOP) worker held go on
// unchanged on a standby or on a worker that joins within the recovery timeout, and fail
// with worker_lost after it; and that a killed client process gives its KV blocks back.

#include "tests/support/actor_harness.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/temp_dir.hpp"

#include "actors/engine.hpp"
#include "actors/remote.hpp"

#include <arpa/inet.h>
#include <caf/io/all.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <thread>

namespace orzo {
namespace {

using Clock = std::chrono::steady_clock;
using testing::ChildProcess;
using testing::run_command;
using testing::Collector;
using testing::eventually;
using testing::health_of;
using testing::stats_of;

const std::string kModel = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
// The tokens a long request asks for (start_long_requests).
constexpr int32_t kLongTokens = 1200;
// Short enough for a test to see a frozen worker go; heartbeats 5x as often.
constexpr std::chrono::milliseconds kConnectionTimeout{1000};
constexpr std::chrono::milliseconds kHeartbeat{200};

// The last is long enough for whole KV blocks of its prompt to enter the prefix cache.
const std::vector<std::string> kPrompts = {
    "Once upon a time", "The cat sat", "Lily and Ben went to the park",
    "One day, a little girl named Lily went to the park with her mom. She saw a big tree with a swing. She ran to "
    "the swing and sat on it. Her mom pushed her high in the sky. Lily laughed and said"};

SessionRequest greedy(const Engine& engine, const std::string& id, const std::string& prompt, int32_t max_tokens,
                      bool ignore_eos = false) {
  SessionRequest r;
  r.id = id;
  r.prompt_ids = engine.tokenize(prompt);
  r.sampling.temperature = 0;
  r.limits.max_tokens = max_tokens;
  r.limits.ignore_eos = ignore_eos;
  return r;
}

class AcrossProcesses : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    boot({});
  }
  void TearDown() override {
    halt();
    TempDirTest::TearDown();
  }
  void boot(const TlsFiles& tls) {
    halt();
    cfg_ = std::make_unique<caf::actor_system_config>();
    configure_actor_system(*cfg_, ProcessThreads{2}, Liveness{kHeartbeat, kConnectionTimeout});
    load_middleman(*cfg_, tls);
    sys_ = std::make_unique<caf::actor_system>(*cfg_);
  }
  void halt() {
    if (engine_) engine_->shutdown();
    engine_.reset();
    sys_.reset();
    cfg_.reset();
  }

  // Process 1 (this one): the batcher and the local worker for layers [0,2), published on
  // loopback; layers [2,5) wait for a worker to join.
  void start_engine(const std::string& placement = "cpu:0-2,remote:2-5", uint16_t port = 0,
                    caf::timespan recovery_timeout = std::chrono::seconds(30)) {
    EngineOptions o;
    o.model = kModel;
    o.backend.threads = 1;
    o.placement = placement;
    o.recovery_timeout = recovery_timeout;
    engine_ = Engine::start(*sys_, o);
    auto published = publish_batcher(*sys_, engine_->batcher(), port);
    ASSERT_TRUE(published) << sys_->render(published.error());
    port_ = *published;
  }

  // Process 2: `orzo worker` for `layers`.
  std::unique_ptr<ChildProcess> start_worker(const std::string& layers = "2-5", const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{ORZO_CLI_PATH, "worker", "--connect", "127.0.0.1:" + std::to_string(port_), "--layers",
                                  layers, "-m", kModel, "-t", "1", "--heartbeat-ms", std::to_string(kHeartbeat.count()),
                                  "--connection-timeout-ms", std::to_string(kConnectionTimeout.count())};
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<ChildProcess>(args, path("worker-" + std::to_string(++workers_started_) + ".log"));
  }

  bool healthy() { return health_of(*sys_, engine_->batcher()).healthy; }

  // Greedy tokens for each prompt, from `engine`.
  std::vector<std::vector<int32_t>> generate_all(Engine& engine, int32_t max_tokens) {
    Collector c;
    for (size_t i = 0; i < kPrompts.size(); ++i)
      engine.generate(greedy(engine, "p" + std::to_string(i), kPrompts[i], max_tokens),
                      c.callbacks("p" + std::to_string(i)));
    EXPECT_TRUE(c.wait(kPrompts.size()));
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      const auto o = c.outcomes().at("p" + std::to_string(i));
      EXPECT_EQ(o.completions.size(), 1u);
      if (!o.completions.empty()) {
        EXPECT_NE(o.completions[0].reason, FinishReason::error) << o.completions[0].message;
      }
      out.push_back(o.tokens);
    }
    return out;
  }

  // Long requests, some tokens of which have arrived: the pipeline is mid-generation. Long
  // enough that none ends while this thread waits for a core before its next step (a whole
  // request through a remote stage takes a fraction of a second).
  void start_long_requests(Collector& c, int n, int32_t max_tokens = kLongTokens) {
    for (int i = 0; i < n; ++i)
      engine_->generate(greedy(*engine_, "long" + std::to_string(i), kPrompts[static_cast<size_t>(i) % kPrompts.size()],
                               max_tokens, true),
                        c.callbacks("long" + std::to_string(i)));
    ASSERT_TRUE(eventually([&] {
      auto outcomes = c.outcomes();
      return outcomes.size() == static_cast<size_t>(n) && outcomes.begin()->second.tokens.size() >= 2;
    }));
  }

  // Every long request ended once, with worker_lost, before its kLongTokens tokens.
  void expect_all_lost(Collector& c, int n, std::chrono::seconds within = std::chrono::seconds(10)) {
    ASSERT_TRUE(c.wait(static_cast<size_t>(n), within));
    for (const auto& [id, o] : c.outcomes()) {
      ASSERT_EQ(o.completions.size(), 1u) << id;
      EXPECT_EQ(o.completions[0].error, ErrorCode::worker_lost) << id << ": " << o.completions[0].message;
      EXPECT_LT(o.tokens.size(), static_cast<size_t>(kLongTokens)) << id;
      EXPECT_EQ(o.chunks_after_completion, 0) << id;
    }
  }

  // The long requests' outputs when nothing goes wrong, to hold a disturbed run to.
  std::map<std::string, std::vector<int32_t>> undisturbed_long(int n, int32_t max_tokens) {
    Collector c;
    start_long_requests(c, n, max_tokens);
    EXPECT_TRUE(c.wait(static_cast<size_t>(n), std::chrono::seconds(120)));
    std::map<std::string, std::vector<int32_t>> out;
    for (const auto& [id, o] : c.outcomes()) out[id] = o.tokens;
    return out;
  }

  // Kills the worker while every long request of c is still generating.
  void kill_mid_generation(ChildProcess& worker, Collector& c) {
    worker.signal(SIGKILL);
    for (const auto& [id, o] : c.outcomes()) EXPECT_TRUE(o.completions.empty()) << id << " ended before the kill";
  }

  // Every long request ended once, undisturbed: no error, and the tokens of `reference`.
  void expect_all_unchanged(Collector& c, const std::map<std::string, std::vector<int32_t>>& reference) {
    ASSERT_TRUE(c.wait(reference.size(), std::chrono::seconds(120)));
    for (const auto& [id, o] : c.outcomes()) {
      ASSERT_EQ(o.completions.size(), 1u) << id;
      EXPECT_EQ(o.completions[0].error, ErrorCode::none) << id << ": " << o.completions[0].message;
      EXPECT_EQ(o.completions[0].reason, FinishReason::length) << id;
      EXPECT_EQ(o.tokens, reference.at(id)) << id;
    }
    const auto stats = stats_of(*sys_, engine_->batcher());
    EXPECT_GE(stats.recoveries, 1u);
    EXPECT_EQ(stats.kv_blocks_used, 0);
  }

  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<Engine> engine_;
  uint16_t port_ = 0;
  int workers_started_ = 0;
};

TEST_F(AcrossProcesses, ThreeProcessesGiveTheSingleProcessGreedyOutputs) {
  EngineOptions single;
  single.model = kModel;
  single.backend.threads = 1;
  auto reference_engine = Engine::start(*sys_, single);
  const auto reference = generate_all(*reference_engine, 48);
  Collector c;
  reference_engine->generate(greedy(*reference_engine, "story", "Once upon a time", 48), c.callbacks("story"));
  ASSERT_TRUE(c.wait(1));
  const std::string reference_text = c.outcomes().at("story").text;
  reference_engine->shutdown();

  start_engine();
  const auto h = health_of(*sys_, engine_->batcher());
  EXPECT_FALSE(h.healthy);
  EXPECT_NE(h.detail.find("waiting for a worker for layers 2-5"), std::string::npos) << h.detail;
  Collector refused;
  engine_->generate(greedy(*engine_, "early", "Once", 4), refused.callbacks("early"));
  ASSERT_TRUE(refused.wait(1));
  EXPECT_EQ(refused.outcomes().at("early").completions.at(0).error, ErrorCode::unavailable);

  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  EXPECT_EQ(health_of(*sys_, engine_->batcher()).replicas.at(0).workers.size(), 2u);
  EXPECT_EQ(generate_all(*engine_, 48), reference);

  // Process 3: a client of its own.
  int status = 0;
  const std::string text = run_command(std::string(ORZO_STREAM_COMPLETION_PATH) + " " + kModel +
                                           " 'Once upon a time' 48 127.0.0.1:" + std::to_string(port_) + " 2>/dev/null",
                                       status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(text, reference_text);
}

TEST_F(AcrossProcesses, JoinsAStageOfExactlyItsRangeAndStandsByWhileItIsServed) {
  start_engine();
  auto wrong = start_worker("1-5");
  EXPECT_EQ(wrong->wait(), 1);
  EXPECT_NE(wrong->output().find("the pipeline has no such stage (its stages are 0-2, 2-5)"), std::string::npos)
      << wrong->output();
  auto first = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << first->output();
  auto second = start_worker();
  ASSERT_TRUE(eventually([&] { return health_of(*sys_, engine_->batcher()).replicas.at(0).standby.size() == 1; })) << second->output();
  EXPECT_TRUE(eventually([&] { return second->output().find("standing by (another worker serves them) for layers 2-5") !=
                                      std::string::npos; }))
      << second->output();
  EXPECT_TRUE(healthy());
  first->signal(SIGTERM);
  EXPECT_EQ(first->wait(), 0) << first->output();
  ASSERT_TRUE(eventually([&] {
    const auto h = health_of(*sys_, engine_->batcher());
    return h.healthy && h.replicas.at(0).standby.empty() && h.replicas.at(0).workers.size() == 2;
  }));
  second->signal(SIGTERM);
  EXPECT_EQ(second->wait(), 0) << second->output();
  EXPECT_TRUE(eventually([&] { return !healthy(); }));
}

// kill -9 of the serving worker with a standby present: every request in flight completes,
// its output that of an undisturbed run, and no client sees an error.
TEST_F(AcrossProcesses, AKilledWorkerWithAStandbyLosesNoRequest) {
  start_engine();
  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  const auto reference = undisturbed_long(6, 480);
  auto standby = start_worker();
  ASSERT_TRUE(eventually([&] { return health_of(*sys_, engine_->batcher()).replicas.at(0).standby.size() == 1; })) << standby->output();
  Collector c;
  start_long_requests(c, 6, 480);
  kill_mid_generation(*worker, c);
  expect_all_unchanged(c, reference);
  EXPECT_TRUE(healthy());
}

// Without a standby, a worker that joins within the recovery timeout takes the requests on.
TEST_F(AcrossProcesses, AKilledWorkerReplacedWithinTheTimeoutLosesNoRequest) {
  start_engine();
  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  const auto reference = undisturbed_long(6, 480);
  Collector c;
  start_long_requests(c, 6, 480);
  kill_mid_generation(*worker, c);
  ASSERT_TRUE(eventually([&] { return !healthy(); }));
  auto again = start_worker();
  expect_all_unchanged(c, reference);
}

TEST_F(AcrossProcesses, AKilledWorkerNotReplacedFailsItsRequestsAfterTheRecoveryTimeout) {
  start_engine("cpu:0-2,remote:2-5", 0, std::chrono::milliseconds(1500));
  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  const auto before = generate_all(*engine_, 32);

  Collector c;
  start_long_requests(c, 6);
  ASSERT_GT(stats_of(*sys_, engine_->batcher()).prefix_hit_tokens, 0u);  // the long prompt's blocks are cached
  worker->signal(SIGKILL);
  expect_all_lost(c, 6);
  for (const auto& [id, o] : c.outcomes())
    EXPECT_NE(o.completions.at(0).message.find("no worker took over within 1500 ms"), std::string::npos) << id;
  const auto h = health_of(*sys_, engine_->batcher());
  EXPECT_FALSE(h.healthy);
  EXPECT_NE(h.detail.find("the worker for layers 2-5 was lost"), std::string::npos) << h.detail;
  EXPECT_NE(h.detail.find("waiting for a worker for layers 2-5"), std::string::npos) << h.detail;
  EXPECT_EQ(stats_of(*sys_, engine_->batcher()).kv_blocks_used, 0);
  Collector refused;
  engine_->generate(greedy(*engine_, "meanwhile", "Once", 4), refused.callbacks("meanwhile"));
  ASSERT_TRUE(refused.wait(1));
  EXPECT_EQ(refused.outcomes().at("meanwhile").completions.at(0).error, ErrorCode::unavailable);

  // The new worker's KV pool is empty: the same prompts must not be served from a prefix
  // cache that points at the dead worker's KV.
  auto again = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << again->output();
  EXPECT_EQ(generate_all(*engine_, 32), before);
}

// Detection alone: without recovery the requests fail the moment the worker is found lost.
TEST_F(AcrossProcesses, AFrozenWorkerIsLostWithinTheConnectionTimeout) {
  start_engine("cpu:0-2,remote:2-5", 0, caf::timespan{0});
  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  Collector c;
  start_long_requests(c, 4);
  worker->signal(SIGSTOP);
  const auto stopped = Clock::now();
  expect_all_lost(c, 4);
  const auto detected = Clock::now() - stopped;
  std::printf("frozen worker detected after %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(detected).count()));
  // One connection timeout, plus up to a heartbeat for the check to run, plus slack for a
  // loaded machine.
  EXPECT_LT(detected, kConnectionTimeout + kHeartbeat + std::chrono::milliseconds(1000));
  EXPECT_FALSE(healthy());
  worker->signal(SIGKILL);
  worker->signal(SIGCONT);

  auto again = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << again->output();
  const auto tokens = generate_all(*engine_, 16);
  for (const auto& t : tokens) EXPECT_EQ(t.size(), 16u);
}

TEST_F(AcrossProcesses, TheWorkerExitsWhenTheBatcherGoesAway) {
  start_engine();
  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  engine_->shutdown();
  EXPECT_EQ(worker->wait(), 1);
  const std::string out = worker->output();
  EXPECT_NE(out.find("orzo worker: the batcher at 127.0.0.1:" + std::to_string(port_) + " went away"), std::string::npos)
      << out;
}

TEST_F(AcrossProcesses, AKilledClientProcessFreesItsBlocks) {
  start_engine();
  auto worker = start_worker();
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  ChildProcess client({ORZO_STREAM_COMPLETION_PATH, kModel, "Once upon a time", "2000", "127.0.0.1:" + std::to_string(port_)},
                      path("client.log"));
  ASSERT_TRUE(eventually([&] {
    const auto s = stats_of(*sys_, engine_->batcher());
    return s.running == 1 && s.kv_blocks_used > 0 && s.generated_tokens >= 2;
  })) << client.output();
  // stories260K writes 400 tokens in tens of ms, less than this thread may wait for a core on a
  // loaded machine (CI once saw the request end by its length before the kill). The frozen
  // worker holds a step in flight, so the request is still running when its client dies; once
  // thawed, each step's reply comes through the middleman that sees the client's socket close.
  worker->signal(SIGSTOP);
  client.signal(SIGKILL);
  EXPECT_EQ(client.wait(), -SIGKILL);
  worker->signal(SIGCONT);
  EXPECT_TRUE(eventually([&] {
    const auto s = stats_of(*sys_, engine_->batcher());
    return s.running == 0 && s.kv_blocks_used == 0;
  }));
  const auto s = stats_of(*sys_, engine_->batcher());
  EXPECT_LT(s.generated_tokens, 2000u);  // it was cut short, not run to its end
  EXPECT_EQ(s.finished.at(static_cast<size_t>(FinishReason::cancelled)), 1u);
}

const std::string kTls = std::string(ORZO_FIXTURES_DIR) + "/tls/";

std::vector<std::string> tls_flags(const std::string& who) {
  return {"--tls-cert", kTls + who + "-cert.pem", "--tls-key", kTls + who + "-key.pem", "--tls-ca", kTls + "node-cert.pem"};
}

TEST_F(AcrossProcesses, OverTlsOnlyAWorkerWithATrustedCertificateJoins) {
  boot(TlsFiles{kTls + "node-cert.pem", kTls + "node-key.pem", kTls + "node-cert.pem"});
  start_engine();
  auto plain = start_worker();
  EXPECT_EQ(plain->wait(), 1);
  EXPECT_NE(plain->output().find("cannot reach the batcher"), std::string::npos) << plain->output();
  auto stranger = start_worker("2-5", tls_flags("stranger"));
  EXPECT_EQ(stranger->wait(), 1);
  EXPECT_NE(stranger->output().find("cannot reach the batcher"), std::string::npos) << stranger->output();
  EXPECT_FALSE(healthy());

  auto trusted = start_worker("2-5", tls_flags("node"));
  ASSERT_TRUE(eventually([&] { return healthy(); })) << trusted->output();
  const auto tokens = generate_all(*engine_, 16);
  for (const auto& t : tokens) EXPECT_EQ(t.size(), 16u);
}

TEST(Tls, PartialCertificatesAreRefused) {
  caf::actor_system_config cfg;
  EXPECT_THROW(load_middleman(cfg, TlsFiles{kTls + "node-cert.pem", "", kTls + "node-cert.pem"}), std::invalid_argument);
  EXPECT_THROW(load_middleman(cfg, TlsFiles{"", "", kTls + "node-cert.pem"}), std::invalid_argument);
  EXPECT_THROW(load_middleman(cfg, TlsFiles{kTls + "missing.pem", kTls + "node-key.pem", kTls + "node-cert.pem"}),
               std::invalid_argument);
}

// A loopback port nobody listens on: bound, read back, released.
uint16_t unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(AcrossProcesses, WorkerRefusesABatcherItCannotReach) {
  port_ = unused_port();
  const uint16_t port = port_;
  auto worker = start_worker("2-5", {"--connect-wait", "0"});
  EXPECT_EQ(worker->wait(), 1);
  const std::string out = worker->output();
  EXPECT_NE(out.find("cannot reach the batcher at 127.0.0.1:" + std::to_string(port)), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST_F(AcrossProcesses, WorkerGivesUpAfterItsConnectWait) {
  port_ = unused_port();
  const auto started = std::chrono::steady_clock::now();
  auto worker = start_worker("2-5", {"--connect-wait", "1"});
  EXPECT_EQ(worker->wait(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  const std::string out = worker->output();
  EXPECT_NE(out.find("orzo worker: waiting up to 1s for the batcher at 127.0.0.1:" + std::to_string(port_)),
            std::string::npos) << out;
  EXPECT_NE(out.find("cannot reach the batcher at 127.0.0.1:" + std::to_string(port_)), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

// Two terminals, or a cluster's units, start in any order: a worker whose batcher is not
// listening yet waits for it and joins once it is.
TEST_F(AcrossProcesses, AWorkerStartedBeforeItsBatcherJoinsIt) {
  const uint16_t port = unused_port();
  port_ = port;
  auto worker = start_worker("2-5", {"--connect-wait", "60"});
  ASSERT_TRUE(eventually([&] { return worker->output().find("waiting up to 60s") != std::string::npos; }))
      << worker->output();
  start_engine("cpu:0-2,remote:2-5", port);
  ASSERT_TRUE(eventually([&] { return healthy(); })) << worker->output();
  for (const auto& tokens : generate_all(*engine_, 16)) EXPECT_EQ(tokens.size(), 16u);
}

}  // namespace
}  // namespace orzo
