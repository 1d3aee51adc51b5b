// The actor runtime over the null backend (no math): the delivery contract, limits,
// admission control, cancellation, session deaths, failing and dying workers, and a
// thousand concurrent sessions on a pool small enough to force preemption.

#include "tests/support/actor_harness.hpp"

#include "actors/engine.hpp"
#include "protocol/errors.hpp"
#include "runtime/null_backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

namespace orzo {
namespace {

using testing::Collector;
using testing::eventually;
using testing::stats_of;

constexpr int32_t kVocab = 64;

// Holds steps until opened, so tests can line requests up deterministically.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = true;
  int credits = 0;  // steps still let through while closed
  void set(bool value) {
    std::lock_guard<std::mutex> lock(mutex);
    open = value;
    cv.notify_all();
  }
  // Closes, letting `steps` more steps through first.
  void allow(int steps) {
    std::lock_guard<std::mutex> lock(mutex);
    open = false;
    credits = steps;
    cv.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return open || credits > 0; });
    if (!open) --credits;
  }
};

// The null backend with hooks: a gate before each step, and a step that throws.
class TestBackend final : public LayerBackend {
 public:
  TestBackend(int32_t kv_blocks, Gate* gate, int throw_on_step) : inner_(kVocab, kv_blocks), gate_(gate), throw_on_(throw_on_step) {}
  LayerRange range() const override { return inner_.range(); }
  bool embeds() const override { return true; }
  bool produces_logits() const override { return true; }
  int32_t kv_blocks() const override { return inner_.kv_blocks(); }
  void forward(const ForwardBatch& batch, std::vector<float>& hidden, std::vector<float>& logits) override {
    if (gate_) gate_->pass();
    if (++steps_ == throw_on_) throw std::runtime_error("injected failure");
    inner_.forward(batch, hidden, logits);
  }

 private:
  NullBackend inner_;
  Gate* gate_;
  int throw_on_;
  int steps_ = 0;
};

// Every test runs twice: stepping one step at a time, and planning each step while the one
// before it computes (async scheduling). Set by the fixture for the test at hand.
bool plan_ahead = false;

BatcherOptions options(int32_t kv_blocks = 256) {
  BatcherOptions o;
  o.async_scheduling = plan_ahead;
  o.kv_blocks = kv_blocks;
  o.block_size = 4;
  o.max_model_len = 512;
  o.vocab_size = kVocab;
  o.eos_token_ids = {kVocab - 1};
  o.check_invariants = true;
  return o;
}

std::unique_ptr<Engine> start(caf::actor_system& sys, BatcherOptions o, Gate* gate = nullptr, int throw_on_step = -1,
                              WorkerThread thread = WorkerThread::scheduler) {
  std::vector<std::unique_ptr<LayerBackend>> stages;
  stages.push_back(std::make_unique<TestBackend>(o.kv_blocks, gate, throw_on_step));
  return Engine::start_with(sys, std::move(stages), std::move(o), thread);
}

SessionRequest greedy(const std::string& id, std::vector<int32_t> prompt, int32_t max_tokens) {
  SessionRequest r;
  r.id = id;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.limits.max_tokens = max_tokens;
  return r;
}

// What the null backend generates greedily after `last`, ignoring EOS.
std::vector<int32_t> counting(int32_t last, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) out.push_back(last = (last + 1) % kVocab);
  return out;
}

class Actors : public ::testing::TestWithParam<bool> {
 protected:
  Actors() { plan_ahead = GetParam(); }
  caf::actor_system_config cfg;
  caf::actor_system sys{testing::test_config(cfg)};
};

TEST_P(Actors, StreamsTokensThenOneCompletion) {
  auto engine = start(sys, options());
  Collector c;
  engine->generate(greedy("a", {5, 6, 7}, 10), c.callbacks("a"));
  ASSERT_TRUE(c.wait(1));
  auto o = c.outcomes().at("a");
  EXPECT_EQ(o.tokens, counting(7, 10));
  ASSERT_EQ(o.completions.size(), 1u);
  EXPECT_EQ(o.completions[0].reason, FinishReason::length);
  EXPECT_EQ(o.completions[0].usage.prompt_tokens, 3);
  EXPECT_EQ(o.completions[0].usage.generated_tokens, 10);
  EXPECT_EQ(o.chunks_after_completion, 0);
  EXPECT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).kv_blocks_used == 0; }));
}

TEST_P(Actors, WorkersOnThreadsOfTheirOwnServeTheSame) {
  auto engine = start(sys, options(), nullptr, -1, WorkerThread::own);
  Collector c;
  for (int i = 0; i < 8; ++i) engine->generate(greedy("r" + std::to_string(i), {i}, 12), c.callbacks("r" + std::to_string(i)));
  ASSERT_TRUE(c.wait(8));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c.outcomes().at("r" + std::to_string(i)).tokens, counting(i, 12)) << i;
}

TEST_P(Actors, EosStopIdsMinTokensAndIgnoreEos) {
  auto engine = start(sys, options());
  Collector c;
  engine->generate(greedy("eos", {58}, 20), c.callbacks("eos"));  // 59 .. 63 = EOS
  auto min = greedy("min", {58}, 8);
  min.limits.min_tokens = 7;  // EOS at the 5th token does not count yet
  engine->generate(min, c.callbacks("min"));
  auto ignore = greedy("ignore", {58}, 8);
  ignore.limits.ignore_eos = true;
  engine->generate(ignore, c.callbacks("ignore"));
  auto stop = greedy("stop", {10}, 20);
  stop.limits.stop_token_ids = {13};
  engine->generate(stop, c.callbacks("stop"));
  ASSERT_TRUE(c.wait(4));
  auto all = c.outcomes();
  EXPECT_EQ(all["eos"].tokens, counting(58, 5));
  EXPECT_EQ(all["eos"].completions.at(0).reason, FinishReason::eos);
  EXPECT_EQ(all["min"].tokens, counting(58, 8));
  EXPECT_EQ(all["min"].completions.at(0).reason, FinishReason::length);
  EXPECT_EQ(all["ignore"].tokens, counting(58, 8));
  EXPECT_EQ(all["stop"].tokens, counting(10, 3));
  EXPECT_EQ(all["stop"].completions.at(0).reason, FinishReason::stop);
}

TEST_P(Actors, InvalidRequestsAreRefusedWithOneCompletion) {
  auto engine = start(sys, options());
  Collector c;
  engine->generate(greedy("empty", {}, 4), c.callbacks("empty"));
  engine->generate(greedy("vocab", {kVocab}, 4), c.callbacks("vocab"));
  engine->generate(greedy("context", {1, 2}, 511), c.callbacks("context"));
  auto hot = greedy("temperature", {1}, 4);
  hot.sampling.temperature = -1;
  engine->generate(hot, c.callbacks("temperature"));
  engine->generate(greedy("zero", {1}, 0), c.callbacks("zero"));
  ASSERT_TRUE(c.wait(5));
  for (const auto& [id, o] : c.outcomes()) {
    ASSERT_EQ(o.completions.size(), 1u) << id;
    EXPECT_EQ(o.completions[0].reason, FinishReason::error) << id;
    EXPECT_EQ(o.completions[0].error, ErrorCode::invalid_request) << id;
    EXPECT_FALSE(o.completions[0].message.empty()) << id;
    EXPECT_TRUE(o.tokens.empty()) << id;
  }
}

TEST_P(Actors, QueueLimitRefusesOnlyTheRequestBeyondIt) {
  Gate gate;
  gate.set(false);
  auto o = options();
  o.scheduler.max_num_seqs = 1;
  o.scheduler.max_waiting = 3;
  auto engine = start(sys, o, &gate);
  Collector c;
  engine->generate(greedy("running", {1}, 5), c.callbacks("running"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).running == 1; }));
  for (int i = 0; i < 3; ++i) engine->generate(greedy("w" + std::to_string(i), {1}, 5), c.callbacks("w" + std::to_string(i)));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).waiting == 3; }));
  engine->generate(greedy("over", {1}, 5), c.callbacks("over"));
  ASSERT_TRUE(c.wait(1, std::chrono::seconds(10)));  // refused while every step is held
  EXPECT_EQ(c.outcomes().at("over").completions.at(0).error, ErrorCode::overloaded);
  gate.set(true);
  ASSERT_TRUE(c.wait(5));
  for (const auto& [id, out] : c.outcomes()) {
    if (id == "over") continue;
    EXPECT_EQ(out.tokens, counting(1, 5)) << id;
    EXPECT_EQ(out.completions.at(0).reason, FinishReason::length) << id;
  }
}

TEST_P(Actors, CancelEndsTheRequestAndFreesItsBlocks) {
  Gate gate;
  auto engine = start(sys, options(), &gate);
  Collector c;
  auto long_request = greedy("long", {1}, 400);
  long_request.limits.ignore_eos = true;
  gate.allow(3);  // the fourth step is held while the cancel arrives
  auto session = engine->generate(long_request, c.callbacks("long"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).generated_tokens == 3; }));
  caf::anon_send(session, cancel_atom::value);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.set(true);
  ASSERT_TRUE(c.wait(1));
  auto o = c.outcomes().at("long");
  EXPECT_EQ(o.completions.at(0).reason, FinishReason::cancelled);
  EXPECT_EQ(o.tokens, counting(1, 3));  // the held step's token is not delivered
  EXPECT_TRUE(eventually([&] {
    auto s = stats_of(sys, engine->batcher());
    return s.kv_blocks_used == 0 && s.running == 0;
  }));
}

TEST_P(Actors, ASessionThatDiesIsCancelledAndItsBlocksFreed) {
  Gate gate;
  auto engine = start(sys, options(), &gate);
  Collector c;
  auto doomed = greedy("doomed", {1}, 400);
  doomed.limits.ignore_eos = true;
  gate.allow(3);  // the fourth step is held while the session dies
  auto session = engine->generate(doomed, c.callbacks("doomed"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).generated_tokens == 3; }));
  caf::anon_send_exit(session, caf::exit_reason::kill);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  gate.set(true);
  EXPECT_TRUE(eventually([&] {
    auto s = stats_of(sys, engine->batcher());
    return s.kv_blocks_used == 0 && s.running == 0 && s.finished[static_cast<size_t>(FinishReason::cancelled)] == 1;
  }));
}

// Planned ahead, the next step goes out while one computes: with the worker held in the
// first step, the second is sent already; one at a time, it waits for the first's answer.
// Nothing is planned past a draw that ends its request by length.
TEST_P(Actors, TheNextStepIsSentWhileOneComputesOnlyWhenPlanningAhead) {
  Gate gate;
  gate.set(false);
  auto engine = start(sys, options(), &gate);
  Collector c;
  auto steps_held = [&](uint64_t want) {
    EXPECT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).steps == want; }, std::chrono::seconds(5)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(stats_of(sys, engine->batcher()).steps, want);
    gate.set(true);  // whatever the checks found: a held worker would hang the engine's shutdown
  };
  engine->generate(greedy("one", {1}, 1), c.callbacks("one"));
  steps_held(1);
  ASSERT_TRUE(c.wait(1));
  EXPECT_EQ(c.outcomes().at("one").tokens, counting(1, 1));
  gate.set(false);
  engine->generate(greedy("a", {1}, 10), c.callbacks("a"));
  steps_held(GetParam() ? 3 : 2);
  ASSERT_TRUE(c.wait(2));
  EXPECT_EQ(c.outcomes().at("a").tokens, counting(1, 10));
}

TEST_P(Actors, AFailingStepFailsExactlyItsRequests) {
  // Step 1 runs a; step 2 a and b; step 3 (a, b) throws; x waits all along (two seats).
  // Planned ahead, step 2 (a alone) was planned while step 1 ran, before b came, so step 3 is
  // b's first.
  Gate gate;
  gate.set(false);
  auto o = options();
  o.scheduler.max_num_seqs = 2;
  auto engine = start(sys, o, &gate, /*throw_on_step=*/3);
  Collector c;
  engine->generate(greedy("a", {1}, 10), c.callbacks("a"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).running == 1; }));
  engine->generate(greedy("b", {2}, 10), c.callbacks("b"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).waiting == 1; }));  // b before x
  engine->generate(greedy("x", {3}, 10), c.callbacks("x"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).waiting == 2; }));
  gate.set(true);
  ASSERT_TRUE(c.wait(3));
  auto all = c.outcomes();
  for (const char* id : {"a", "b"}) {
    const auto& done = all[id].completions.at(0);
    EXPECT_EQ(done.error, ErrorCode::step_failed) << id;
    EXPECT_NE(done.message.find("injected failure"), std::string::npos) << done.message;
  }
  EXPECT_EQ(all["a"].tokens, counting(1, 2));
  EXPECT_EQ(all["b"].tokens, counting(2, GetParam() ? 0 : 1));
  EXPECT_EQ(all["x"].tokens, counting(3, 10));
  EXPECT_EQ(all["x"].completions.at(0).reason, FinishReason::length);
  engine->generate(greedy("after", {4}, 6), c.callbacks("after"));
  ASSERT_TRUE(c.wait(4));
  EXPECT_EQ(c.outcomes().at("after").tokens, counting(4, 6));
  EXPECT_TRUE(testing::health_of(sys, engine->batcher()).healthy);
}

TEST_P(Actors, WithoutRecoveryAWorkerThatDiesFailsItsRequestsAtOnce) {
  Gate gate;
  gate.set(false);
  auto o = options();
  o.recovery_timeout = caf::timespan{0};
  auto engine = start(sys, o, &gate);
  Collector c;
  engine->generate(greedy("a", {1}, 10), c.callbacks("a"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).running == 1; }));
  caf::anon_send_exit(engine->workers().front(), caf::exit_reason::kill);
  gate.set(true);
  ASSERT_TRUE(c.wait(1));
  EXPECT_EQ(c.outcomes().at("a").completions.at(0).error, ErrorCode::worker_lost);
  auto health = testing::health_of(sys, engine->batcher());
  EXPECT_FALSE(health.healthy);
  EXPECT_FALSE(health.detail.empty());
  engine->generate(greedy("later", {1}, 4), c.callbacks("later"));
  ASSERT_TRUE(c.wait(2));
  EXPECT_EQ(c.outcomes().at("later").completions.at(0).error, ErrorCode::unavailable);
}

// Nobody takes the lost stage over: the requests wait out the recovery timeout, those that
// arrive meanwhile too, and then each fails once with worker_lost.
TEST_P(Actors, RequestsWaitForALostStageThenFailAfterTheRecoveryTimeout) {
  Gate gate;
  gate.set(false);
  auto o = options();
  o.recovery_timeout = std::chrono::milliseconds(400);
  auto engine = start(sys, o, &gate);
  Collector c;
  engine->generate(greedy("a", {1}, 10), c.callbacks("a"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).running == 1; }));
  const auto lost = std::chrono::steady_clock::now();
  caf::anon_send_exit(engine->workers().front(), caf::exit_reason::kill);
  gate.set(true);
  ASSERT_TRUE(eventually([&] { return !testing::health_of(sys, engine->batcher()).healthy; }));
  engine->generate(greedy("meanwhile", {2}, 4), c.callbacks("meanwhile"));
  ASSERT_TRUE(c.wait(2));
  EXPECT_GE(std::chrono::steady_clock::now() - lost, std::chrono::milliseconds(400));
  for (const char* id : {"a", "meanwhile"}) {
    const auto done = c.outcomes().at(id).completions;
    ASSERT_EQ(done.size(), 1u) << id;
    EXPECT_EQ(done[0].error, ErrorCode::worker_lost) << id;
    EXPECT_NE(done[0].message.find("no worker took over within 400 ms"), std::string::npos) << done[0].message;
  }
  engine->generate(greedy("later", {1}, 4), c.callbacks("later"));
  ASSERT_TRUE(c.wait(3));
  EXPECT_EQ(c.outcomes().at("later").completions.at(0).error, ErrorCode::unavailable);
  const auto stats = stats_of(sys, engine->batcher());
  EXPECT_EQ(stats.recoveries, 0u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

// A join from this process, as `orzo worker` does it from another: the reply, or the orzo
// error's code and message.
std::pair<ErrorCode, std::string> join(caf::actor_system& sys, const batcher_actor& batcher, const worker_actor& worker,
                                       WorkerInfo info) {
  caf::scoped_actor self{sys};
  std::pair<ErrorCode, std::string> out{ErrorCode::none, ""};
  self->request(batcher, std::chrono::seconds(10), join_atom::value, worker, std::move(info))
      .receive([](caf::ok_atom) {}, [&](caf::error& e) { out = {error_code_of(e), error_message(e)}; });
  return out;
}

TEST_P(Actors, AStageThatWaitsForAWorkerServesOnceOneJoinsAndAgainAfterItsLoss) {
  const auto o = options();
  auto batcher = spawn_batcher(sys, o, {{PipelineStage{{0, 1}, worker_actor{}}}});
  auto health = testing::health_of(sys, batcher);
  EXPECT_FALSE(health.healthy);
  EXPECT_EQ(health.detail, "waiting for a worker for layers 0-1");
  auto worker = spawn_worker(sys, std::make_unique<TestBackend>(o.kv_blocks, nullptr, -1), "joiner", {}, WorkerThread::scheduler);

  auto refused = join(sys, batcher, worker, WorkerInfo{"joiner", 0, 2, o.kv_blocks, {0}});
  EXPECT_EQ(refused.first, ErrorCode::invalid_request);
  EXPECT_NE(refused.second.find("the pipeline has no such stage (its stages are 0-1)"), std::string::npos) << refused.second;
  refused = join(sys, batcher, worker, WorkerInfo{"joiner", 0, 1, o.kv_blocks - 1, {0}});
  EXPECT_NE(refused.second.find("its KV pool holds 255 blocks, the batcher plans with 256"), std::string::npos)
      << refused.second;
  refused = join(sys, batcher, worker, WorkerInfo{"joiner", 0, 1, o.kv_blocks, {0, 512}});
  EXPECT_NE(refused.second.find("it keeps 2 groups of KV block tables, the batcher plans 1"), std::string::npos)
      << refused.second;
  EXPECT_EQ(join(sys, batcher, worker, WorkerInfo{"joiner", 0, 1, o.kv_blocks, {0}}).first, ErrorCode::none);
  EXPECT_TRUE(eventually([&] { return testing::health_of(sys, batcher).healthy; }));
  EXPECT_EQ(join(sys, batcher, worker, WorkerInfo{"joiner", 0, 1, o.kv_blocks, {0}}).second,
            "cannot join for layers 0-1: this worker has joined already");

  Collector c;
  spawn_session(sys, batcher, nullptr, greedy("a", {1}, 5), c.callbacks("a"));
  ASSERT_TRUE(c.wait(1));
  EXPECT_EQ(c.outcomes().at("a").tokens, counting(1, 5));

  caf::anon_send_exit(worker, caf::exit_reason::kill);
  EXPECT_TRUE(eventually([&] { return !testing::health_of(sys, batcher).healthy; }));
  health = testing::health_of(sys, batcher);
  EXPECT_NE(health.detail.find("the worker for layers 0-1 was lost"), std::string::npos) << health.detail;
  EXPECT_TRUE(health.replicas.at(0).workers.empty());

  auto again = spawn_worker(sys, std::make_unique<TestBackend>(o.kv_blocks, nullptr, -1), "again", {}, WorkerThread::scheduler);
  EXPECT_EQ(join(sys, batcher, again, WorkerInfo{"again", 0, 1, o.kv_blocks, {0}}).first, ErrorCode::none);
  EXPECT_TRUE(eventually([&] { return testing::health_of(sys, batcher).healthy; }));
  spawn_session(sys, batcher, nullptr, greedy("b", {2}, 5), c.callbacks("b"));
  ASSERT_TRUE(c.wait(2));
  EXPECT_EQ(c.outcomes().at("b").tokens, counting(2, 5));
  caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(again, caf::exit_reason::user_shutdown);
}

// A session told its reader fell behind takes its request out of the batch, which frees its
// blocks; told it caught up, the request goes on by recompute to the same output.
TEST_P(Actors, APausedRequestLeavesTheBatchAndResumesUnchanged) {
  Gate gate;
  auto engine = start(sys, options(), &gate);
  gate.allow(3);
  Collector c;
  auto r = greedy("a", {7, 8}, 40);
  r.limits.ignore_eos = true;
  auto session = engine->generate(r, c.callbacks("a"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).generated_tokens >= 2; }));
  caf::anon_send(session, pause_atom::value);
  // The gate holds the step in flight until the batcher has the pause, so that the request
  // cannot run to its end first.
  ASSERT_TRUE(eventually([&] { return stats_of(sys, engine->batcher()).paused == 1; }));
  gate.set(true);
  ASSERT_TRUE(eventually([&] {
    const auto s = stats_of(sys, engine->batcher());
    return s.paused == 1 && s.running == 0 && s.kv_blocks_used == 0;
  }));
  const auto held = stats_of(sys, engine->batcher()).generated_tokens;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(stats_of(sys, engine->batcher()).generated_tokens, held) << "a paused request generated";
  caf::anon_send(session, resume_atom::value);
  ASSERT_TRUE(c.wait(1));
  const auto out = c.outcomes().at("a");
  EXPECT_EQ(out.tokens, counting(8, 40));
  EXPECT_EQ(out.completions.at(0).reason, FinishReason::length);
  EXPECT_EQ(stats_of(sys, engine->batcher()).paused, 0);
}

// A joinable single stage over the null backend, and workers for it on demand.
struct JoinablePipeline {
  caf::actor_system& sys;
  BatcherOptions o;
  batcher_actor batcher;
  int made = 0;

  // `replicas` pipelines of one stage each, every worker to join.
  JoinablePipeline(caf::actor_system& s, BatcherOptions options, size_t replicas = 1)
      : sys(s),
        o(std::move(options)),
        batcher(spawn_batcher(sys, o, std::vector<Pipeline>(replicas, Pipeline{PipelineStage{{0, 1}, worker_actor{}}}))) {}
  ~JoinablePipeline() { caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown); }

  bool every_replica_serves() const {
    const auto h = testing::health_of(sys, batcher);
    return std::all_of(h.replicas.begin(), h.replicas.end(), [](const ReplicaHealth& r) { return r.healthy; });
  }

  worker_actor join_one(Gate* gate = nullptr) {
    const std::string name = "w" + std::to_string(made++);
    auto w = spawn_worker(sys, std::make_unique<TestBackend>(o.kv_blocks, gate, -1), name, {}, WorkerThread::scheduler);
    EXPECT_EQ(join(sys, batcher, w, WorkerInfo{name, 0, 1, o.kv_blocks, {0}}).first, ErrorCode::none);
    return w;
  }
};

// The serving worker dies mid-generation: a standby takes over at once, and every request
// goes on by recompute to exactly the output of an undisturbed run, with no error.
TEST_P(Actors, AStandbyTakesOverALostStageAndNoRequestNotices) {
  Gate gate;
  JoinablePipeline p(sys, options());
  auto serving = p.join_one(&gate);
  auto standby = p.join_one();
  ASSERT_TRUE(eventually([&] { return testing::health_of(sys, p.batcher).healthy; }));
  auto health = testing::health_of(sys, p.batcher);
  ASSERT_EQ(health.replicas.at(0).workers.size(), 1u);
  EXPECT_EQ(health.replicas.at(0).workers[0].device, "w0");
  ASSERT_EQ(health.replicas.at(0).standby.size(), 1u);
  EXPECT_EQ(health.replicas.at(0).standby[0].device, "w1");

  gate.allow(5);
  Collector c;
  for (int i = 0; i < 8; ++i) {
    auto r = greedy("r" + std::to_string(i), {i + 1, i + 2}, 30);
    r.limits.ignore_eos = true;
    spawn_session(sys, p.batcher, nullptr, r, c.callbacks(r.id));
  }
  ASSERT_TRUE(eventually([&] { return stats_of(sys, p.batcher).generated_tokens > 0; }));
  caf::anon_send_exit(serving, caf::exit_reason::kill);
  gate.set(true);
  ASSERT_TRUE(c.wait(8));
  for (int i = 0; i < 8; ++i) {
    const auto out = c.outcomes().at("r" + std::to_string(i));
    ASSERT_EQ(out.completions.size(), 1u);
    EXPECT_EQ(out.completions[0].reason, FinishReason::length) << out.completions[0].message;
    EXPECT_EQ(out.tokens, counting(i + 2, 30)) << i;
  }
  const auto stats = stats_of(sys, p.batcher);
  EXPECT_EQ(stats.recoveries, 1u);
  EXPECT_GT(stats.recovery_pause_ns, 0u);
  EXPECT_EQ(stats.kv_blocks_used, 0);
  health = testing::health_of(sys, p.batcher);
  EXPECT_TRUE(health.healthy);
  ASSERT_EQ(health.replicas.at(0).workers.size(), 1u);
  EXPECT_EQ(health.replicas.at(0).workers[0].device, "w1");
  EXPECT_TRUE(health.replicas.at(0).standby.empty());
  caf::anon_send_exit(standby, caf::exit_reason::user_shutdown);
}

// Without a standby, the requests wait for a new worker that joins within the timeout.
TEST_P(Actors, ANewWorkerWithinTheRecoveryTimeoutResumesTheLostRequests) {
  Gate gate;
  JoinablePipeline p(sys, options());
  auto first = p.join_one(&gate);
  ASSERT_TRUE(eventually([&] { return testing::health_of(sys, p.batcher).healthy; }));
  gate.allow(3);
  Collector c;
  auto r = greedy("a", {5}, 20);
  r.limits.ignore_eos = true;
  spawn_session(sys, p.batcher, nullptr, r, c.callbacks("a"));
  ASSERT_TRUE(eventually([&] { return stats_of(sys, p.batcher).generated_tokens > 0; }));
  caf::anon_send_exit(first, caf::exit_reason::kill);
  gate.set(true);
  ASSERT_TRUE(eventually([&] { return !testing::health_of(sys, p.batcher).healthy; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(c.wait(1, std::chrono::seconds(0))) << "the request must wait, not fail";
  auto second = p.join_one();
  ASSERT_TRUE(c.wait(1));
  const auto out = c.outcomes().at("a");
  ASSERT_EQ(out.completions.size(), 1u);
  EXPECT_EQ(out.completions[0].reason, FinishReason::length) << out.completions[0].message;
  EXPECT_EQ(out.tokens, counting(5, 20));
  EXPECT_EQ(stats_of(sys, p.batcher).recoveries, 1u);
  caf::anon_send_exit(second, caf::exit_reason::user_shutdown);
}

// A thousand sessions of random lengths, a tenth of them cancelled and some killed: the
// requests, their fates, and the check of what each session saw.
struct ThousandSessions {
  static constexpr int kSessions = 1000;
  enum Fate { run, cancel, kill };
  std::vector<SessionRequest> requests;
  std::vector<Fate> fate;
  std::vector<session_actor> sessions;
  Collector c;

  static BatcherOptions pool() {
    auto o = options(/*kv_blocks=*/96);  // small enough to force preemption
    o.scheduler.max_num_seqs = 64;
    o.scheduler.max_num_batched_tokens = 256;
    o.scheduler.max_waiting = 2000;
    return o;
  }

  explicit ThousandSessions(uint32_t seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < kSessions; ++i) {
      std::vector<int32_t> prompt(1 + rng() % 40);
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % (kVocab - 1));
      auto r = greedy("s" + std::to_string(i), prompt, 1 + static_cast<int32_t>(rng() % 60));
      r.limits.ignore_eos = true;
      fate.push_back(rng() % 10 == 0 ? cancel : (rng() % 10 == 0 ? kill : run));
      requests.push_back(r);
    }
  }

  // Starts every session through `start`; calls `between(i)` after dealing session i its fate.
  template <class Start, class Between>
  void go(Start start, Between between) {
    for (const auto& r : requests) sessions.push_back(start(r, c.callbacks(r.id)));
    for (size_t i = 0; i < requests.size(); ++i) {
      if (fate[i] == cancel) caf::anon_send(sessions[i], cancel_atom::value);
      if (fate[i] == kill) caf::anon_send_exit(sessions[i], caf::exit_reason::kill);
      between(i);
    }
  }

  // Once the batcher is idle: every session not killed saw exactly one Completion, never an
  // error, and its tokens in order (all of them when it ran to the end); returns how many ran.
  size_t check(caf::actor_system& sys, const batcher_actor& batcher) {
    EXPECT_TRUE(eventually([&] { auto s = stats_of(sys, batcher); return s.running == 0 && s.waiting == 0; },
                           std::chrono::seconds(120)));
    // A killed session may have completed before the kill landed: wait for each one that was not killed.
    EXPECT_TRUE(eventually([&] {
      const auto all = c.outcomes();
      for (size_t i = 0; i < requests.size(); ++i) {
        auto it = all.find(requests[i].id);
        if (fate[i] != kill && (it == all.end() || it->second.completions.empty())) return false;
      }
      return true;
    }, std::chrono::seconds(60)));
    const auto all = c.outcomes();
    size_t ran = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto& r = requests[i];
      auto it = all.find(r.id);
      if (fate[i] == kill && (it == all.end() || it->second.completions.empty())) continue;
      if (it == all.end()) {
        ADD_FAILURE() << r.id << " saw nothing";
        continue;
      }
      const auto& out = it->second;
      EXPECT_EQ(out.completions.size(), 1u) << r.id;
      EXPECT_EQ(out.chunks_after_completion, 0) << r.id;
      if (out.completions.empty()) continue;
      EXPECT_NE(out.completions[0].reason, FinishReason::error) << r.id << ": " << out.completions[0].message;
      if (fate[i] == run) {
        EXPECT_EQ(out.completions[0].reason, FinishReason::length) << r.id;
        EXPECT_EQ(out.tokens, counting(r.prompt_ids.back(), r.limits.max_tokens)) << r.id;
        ++ran;
      } else {
        EXPECT_EQ(out.tokens, counting(r.prompt_ids.back(), static_cast<int32_t>(out.tokens.size()))) << r.id;
      }
    }
    return ran;
  }
};

// Every surviving session sees its tokens in order and exactly one Completion, and
// afterwards every block is free.
TEST_P(Actors, AThousandSessionsUnderPreemptionStopsAndDeaths) {
  auto engine = start(sys, ThousandSessions::pool());
  ThousandSessions t(1234);
  t.go([&](const SessionRequest& r, SessionCallbacks cb) { return engine->generate(r, std::move(cb)); }, [](size_t) {});
  EXPECT_GT(t.check(sys, engine->batcher()), 700u);
  auto s = stats_of(sys, engine->batcher());
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_GT(s.preemptions, 0u) << "the pool was meant to be small enough to force preemption";
}

// The same while the serving worker is killed and a new one joins, again and again: those
// that ran to the end have an undisturbed run's output.
TEST_P(Actors, AThousandSessionsThroughWorkerDeathsAndRejoins) {
  JoinablePipeline p(sys, ThousandSessions::pool());
  auto serving = p.join_one();
  ASSERT_TRUE(eventually([&] { return testing::health_of(sys, p.batcher).healthy; }));
  ThousandSessions t(4321);
  int deaths = 0;
  t.go([&](const SessionRequest& r, SessionCallbacks cb) { return spawn_session(sys, p.batcher, nullptr, r, std::move(cb)); },
       [&](size_t i) {
         if (i % 100 != 50) return;
         caf::anon_send_exit(serving, caf::exit_reason::kill);
         ++deaths;
         std::this_thread::sleep_for(std::chrono::milliseconds(5));
         serving = p.join_one();
       });
  EXPECT_GT(t.check(sys, p.batcher), 700u);
  const auto s = stats_of(sys, p.batcher);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_GE(s.recoveries, 1u);
  EXPECT_LE(s.recoveries, static_cast<uint64_t>(deaths));
  caf::anon_send_exit(serving, caf::exit_reason::user_shutdown);
}

// A step that no worker answers within step_timeout fails its requests with worker_lost; the
// next step runs as usual.
TEST_P(Actors, AStepUnansweredWithinTheStepTimeoutFailsItsRequests) {
  Gate gate;
  auto o = options();
  o.step_timeout = std::chrono::milliseconds(300);
  auto engine = start(sys, o, &gate);
  gate.allow(0);
  Collector c;
  const auto began = std::chrono::steady_clock::now();
  engine->generate(greedy("stuck", {3}, 5), c.callbacks("stuck"));
  ASSERT_TRUE(c.wait(1));
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(300));
  const auto out = c.outcomes().at("stuck");
  ASSERT_EQ(out.completions.size(), 1u);
  EXPECT_EQ(out.completions[0].error, ErrorCode::worker_lost);
  EXPECT_NE(out.completions[0].message.find("a worker did not answer"), std::string::npos) << out.completions[0].message;
  gate.set(true);
  engine->generate(greedy("next", {3}, 5), c.callbacks("next"));
  ASSERT_TRUE(c.wait(2));
  EXPECT_EQ(c.outcomes().at("next").tokens, counting(3, 5));
}

// Replicas: joins fill each replica's stage in turn, then stand by; one serving replica is
// enough for the model to be healthy.
TEST_P(Actors, WorkersFillReplicasInTurnThenStandBy) {
  JoinablePipeline p(sys, options(), 2);
  auto health = testing::health_of(sys, p.batcher);
  EXPECT_FALSE(health.healthy);
  EXPECT_EQ(health.detail,
            "replica 0: waiting for a worker for layers 0-1; replica 1: waiting for a worker for layers 0-1");
  auto w0 = p.join_one();
  ASSERT_TRUE(eventually([&] { return testing::health_of(sys, p.batcher).healthy; }));
  health = testing::health_of(sys, p.batcher);
  ASSERT_EQ(health.replicas.size(), 2u);
  EXPECT_TRUE(health.replicas[0].healthy);
  EXPECT_FALSE(health.replicas[1].healthy);
  auto w1 = p.join_one();
  auto w2 = p.join_one();
  ASSERT_TRUE(eventually([&] { return testing::health_of(sys, p.batcher).replicas[1].healthy; }));
  health = testing::health_of(sys, p.batcher);
  ASSERT_EQ(health.replicas[0].workers.size(), 1u);
  EXPECT_EQ(health.replicas[0].workers[0].device, "w0");
  EXPECT_EQ(health.replicas[1].workers.at(0).device, "w1");
  ASSERT_EQ(health.replicas[0].standby.size(), 1u);
  EXPECT_EQ(health.replicas[0].standby[0].device, "w2");
  EXPECT_TRUE(health.replicas[1].standby.empty());
  for (auto& w : {w0, w1, w2}) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}

// Requests spread over both replicas; when one loses its only worker, its requests go on in
// the other at once, to an undisturbed run's output, and nobody sees an error.
TEST_P(Actors, ALostReplicasRequestsGoOnInAnother) {
  Gate gate0;
  JoinablePipeline p(sys, options(), 2);
  auto w0 = p.join_one(&gate0);
  auto w1 = p.join_one();
  ASSERT_TRUE(eventually([&] { return p.every_replica_serves(); }));
  gate0.allow(4);
  Collector c;
  constexpr int kRequests = 16;
  for (int i = 0; i < kRequests; ++i) {
    auto r = greedy("r" + std::to_string(i), {i + 1, i + 2, i + 3}, 30);
    r.limits.ignore_eos = true;
    spawn_session(sys, p.batcher, nullptr, r, c.callbacks(r.id));
  }
  ASSERT_TRUE(eventually([&] {
    const auto s = stats_of(sys, p.batcher);
    return s.replicas[0].steps >= 4 && s.replicas[0].routed + s.replicas[1].routed == static_cast<uint64_t>(kRequests);
  }));
  // How many each takes depends on how far replica 1 got meanwhile (its growing sequences
  // leave it less room); both take some.
  auto s = stats_of(sys, p.batcher);
  EXPECT_GE(s.replicas[0].routed, 1u);
  EXPECT_GE(s.replicas[1].routed, 1u);
  caf::anon_send_exit(w0, caf::exit_reason::kill);
  gate0.set(true);
  ASSERT_TRUE(c.wait(kRequests));
  for (int i = 0; i < kRequests; ++i) {
    const auto out = c.outcomes().at("r" + std::to_string(i));
    ASSERT_EQ(out.completions.size(), 1u);
    EXPECT_EQ(out.completions[0].reason, FinishReason::length) << out.completions[0].message;
    EXPECT_EQ(out.tokens, counting(i + 3, 30)) << i;
  }
  s = stats_of(sys, p.batcher);
  EXPECT_GT(s.moved, 0u);
  EXPECT_EQ(s.recoveries, 1u);
  EXPECT_GE(s.replicas[1].routed, s.moved);
  EXPECT_EQ(s.kv_blocks_used, 0);
  const auto health = testing::health_of(sys, p.batcher);
  EXPECT_TRUE(health.healthy);
  EXPECT_FALSE(health.replicas[0].healthy);
  EXPECT_NE(health.replicas[0].detail.find("the worker for layers 0-1 was lost"), std::string::npos)
      << health.replicas[0].detail;
  // New requests go to the replica that serves; a worker that joins serves the lost one again.
  spawn_session(sys, p.batcher, nullptr, greedy("after", {9}, 5), c.callbacks("after"));
  ASSERT_TRUE(c.wait(kRequests + 1));
  EXPECT_EQ(c.outcomes().at("after").tokens, counting(9, 5));
  auto w2 = p.join_one();
  ASSERT_TRUE(eventually([&] { return testing::health_of(sys, p.batcher).replicas[0].healthy; }));
  for (auto& w : {w1, w2}) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}

// A prompt whose prefix one replica has cached goes there, past an idle replica that a tie
// would choose.
TEST_P(Actors, ARequestGoesToTheReplicaThatCachedItsPrefix) {
  Gate gate0;
  JoinablePipeline p(sys, options(), 2);
  auto w0 = p.join_one(&gate0);
  auto w1 = p.join_one();
  ASSERT_TRUE(eventually([&] { return p.every_replica_serves(); }));
  const auto run = [&](Collector& c, const std::string& id, const std::vector<int32_t>& prompt) {
    auto r = greedy(id, prompt, 3);
    r.limits.ignore_eos = true;
    spawn_session(sys, p.batcher, nullptr, r, c.callbacks(id));
  };
  // A filler held in replica 0 (a tie sends it there) makes the first prompt go to replica 1.
  gate0.allow(0);
  Collector c;
  run(c, "filler", {1, 2, 3, 4, 5, 6, 7, 8});
  ASSERT_TRUE(eventually([&] { return stats_of(sys, p.batcher).replicas[0].routed == 1; }));
  std::vector<int32_t> prompt;
  for (int i = 0; i < 64; ++i) prompt.push_back(i % 50 + 1);
  run(c, "first", prompt);
  ASSERT_TRUE(eventually([&] { return c.outcomes().count("first") && !c.outcomes().at("first").completions.empty(); }));
  EXPECT_EQ(stats_of(sys, p.batcher).replicas[1].routed, 1u);
  gate0.set(true);
  ASSERT_TRUE(c.wait(2));
  const auto before = stats_of(sys, p.batcher);
  ASSERT_EQ(before.kv_blocks_used, 0);  // both idle: only the cache tells them apart
  prompt.push_back(60);
  run(c, "again", prompt);
  ASSERT_TRUE(c.wait(3));
  for (const auto* id : {"filler", "first", "again"})
    EXPECT_EQ(c.outcomes().at(id).completions.at(0).reason, FinishReason::length) << id;
  const auto after = stats_of(sys, p.batcher);
  EXPECT_EQ(after.replicas[1].routed, 2u);
  EXPECT_EQ(after.prefix_hit_tokens - before.prefix_hit_tokens, 64u);
  for (auto& w : {w0, w1}) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}

// A thousand sessions over two replicas while their workers are killed and new ones join in
// turn: exactly one terminal event each, undisturbed outputs, every block free at the end.
TEST_P(Actors, AThousandSessionsOverReplicasThroughWorkerDeaths) {
  JoinablePipeline p(sys, ThousandSessions::pool(), 2);
  std::deque<worker_actor> serving{p.join_one(), p.join_one()};
  ASSERT_TRUE(eventually([&] { return p.every_replica_serves(); }));
  ThousandSessions t(2468);
  t.go([&](const SessionRequest& r, SessionCallbacks cb) { return spawn_session(sys, p.batcher, nullptr, r, std::move(cb)); },
       [&](size_t i) {
         if (i % 100 != 50) return;
         caf::anon_send_exit(serving.front(), caf::exit_reason::kill);
         serving.pop_front();
         std::this_thread::sleep_for(std::chrono::milliseconds(5));
         serving.push_back(p.join_one());
       });
  EXPECT_GT(t.check(sys, p.batcher), 700u);
  const auto s = stats_of(sys, p.batcher);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_GT(s.moved, 0u);
  EXPECT_GT(s.replicas[0].routed, 100u);
  EXPECT_GT(s.replicas[1].routed, 100u);
  for (auto& w : serving) caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
}

INSTANTIATE_TEST_SUITE_P(Scheduling, Actors, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Async" : "OneAtATime"; });

}  // namespace
}  // namespace orzo
