#include "cli/actor_bench.hpp"

#include "actors/engine.hpp"
#include "actors/remote.hpp"
#include "actors/system_config.hpp"
#include "cli/bare_bench.hpp"
#include "cli/engine_flags.hpp"
#include "kernels/cpu/isa.hpp"
#include "runtime/model.hpp"
#include "runtime/null_backend.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdio>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace orzo::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int32_t kNullVocab = 256;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Counts what the sessions deliver, from their own threads.
struct Tally {
  std::mutex mutex;
  std::condition_variable changed;
  int completed = 0;
  int errors = 0;
  int started = 0;                       // sessions that have their first token
  Clock::time_point all_started{};       // when the last of the batch got its first token
  std::atomic<int64_t> tokens{0};
  int64_t tokens_at_all_started = 0;
  std::vector<double> ttft;              // per batch request: submission to its first token
  std::vector<double> itl;               // per token after a request's first: the gap before it

  template <typename Predicate>
  void wait_until(Predicate done) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, done);
  }
};

// One batch request's clock, kept by its session's callbacks (which run one at a time).
struct RequestClock {
  Clock::time_point sent, last;
  bool started = false;
  std::vector<double> gaps;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

SessionRequest bench_request(int i, std::vector<int32_t> prompt, int gen) {
  SessionRequest r;
  r.id = "bench-" + std::to_string(i);
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.limits.max_tokens = gen;
  r.limits.ignore_eos = true;
  return r;
}

// Prompts of `length` tokens drawn uniformly from the vocabulary, the same sequence on every run.
class RandomPrompts {
 public:
  RandomPrompts(int32_t vocab, int length) : any_token_(0, vocab - 1), length_(static_cast<size_t>(length)) {}
  std::vector<int32_t> operator()() {
    std::vector<int32_t> p(length_);
    for (auto& t : p) t = any_token_(rng_);
    return p;
  }

 private:
  std::mt19937 rng_{1234};
  std::uniform_int_distribution<int32_t> any_token_;
  size_t length_;
};

// Time to first token of requests sent one at a time while the batch decodes.
std::vector<double> probe_ttft(Engine& engine, const std::vector<int32_t>& prompt, int probes) {
  std::vector<double> out;
  for (int i = 0; i < probes; ++i) {
    std::mutex m;
    std::condition_variable cv;
    bool first = false, done = false;
    SessionCallbacks cb;
    cb.on_text = [&](TextChunk& chunk) {
      std::lock_guard<std::mutex> lock(m);
      if (!chunk.tokens.empty()) first = true;
      cv.notify_all();
    };
    cb.on_done = [&](Completion&) {
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_all();
    };
    const auto t0 = Clock::now();
    engine.generate(bench_request(1000000 + i, prompt, 2), cb);
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return first || done; });
    out.push_back(seconds(Clock::now() - t0));
    cv.wait(lock, [&] { return done; });
  }
  return out;
}

// Publishes the batcher and waits (a minute at most) until every stage has a worker.
void publish_and_wait(caf::actor_system& sys, const batcher_actor& batcher, int port) {
  auto published = publish_batcher(sys, batcher, static_cast<uint16_t>(port));
  if (!published) throw std::runtime_error("bench: cannot publish on port " + std::to_string(port) + ": " + sys.render(published.error()));
  std::fprintf(stderr, "bench: batcher published on 127.0.0.1:%u, waiting for its remote stages\n",
               static_cast<unsigned>(*published));
  caf::scoped_actor self{sys};
  const auto deadline = Clock::now() + std::chrono::minutes(1);
  for (;;) {
    ModelHealth h;
    self->request(batcher, std::chrono::seconds(10), health_atom::value).receive([&](ModelHealth& x) { h = x; }, [](caf::error&) {});
    if (h.healthy) return;
    if (Clock::now() > deadline) throw std::runtime_error("bench: the model did not become healthy: " + h.detail);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct BenchEngine {
  std::unique_ptr<Engine> engine;
  int32_t vocab;
};

// One stage that does no math, with KV room for the batch and one probe at a time.
BenchEngine start_null_engine(caf::actor_system& sys, const BenchOptions& o, int32_t context) {
  BatcherOptions b;
  b.scheduler.max_num_seqs = std::max(o.batch + 1, 1);
  b.scheduler.max_num_batched_tokens = std::max(o.chunk, o.batch + 1);
  b.block_size = 16;
  b.kv_blocks = (o.batch + 1) * ((context + 15) / 16);
  b.max_model_len = context;
  b.vocab_size = kNullVocab;
  b.prefix_caching = o.prefix_caching;
  b.async_scheduling = o.async_scheduling;
  std::vector<std::unique_ptr<LayerBackend>> stages;
  stages.push_back(std::make_unique<NullBackend>(kNullVocab, b.kv_blocks));
  return {Engine::start_with(sys, std::move(stages), std::move(b), parse_worker_thread(o.worker_thread)), kNullVocab};
}

BenchEngine start_model_engine(caf::actor_system& sys, const BenchOptions& o, int32_t context) {
  EngineOptions e;
  e.model = o.model;
  e.placement = o.placement;
  e.backend = o.stage;
  e.scheduler.max_num_seqs = o.batch + 1;
  e.scheduler.max_num_batched_tokens = std::max(o.chunk, o.batch + 1);
  e.kv_blocks = (o.batch + 1) * ((context + 15) / 16);
  // Random prompts share nothing: the work stays equal to the bare bench's either way.
  e.prefix_caching = o.prefix_caching;
  e.load_tokenizer = false;  // prompts are ids, as in the bare bench
  e.worker_thread = parse_worker_thread(o.worker_thread);
  e.async_scheduling = o.async_scheduling;
  auto engine = Engine::start(sys, e);
  const auto vocab = static_cast<int32_t>(engine->model()->config().vocab_size);
  return {std::move(engine), vocab};
}

BatcherStats batcher_stats(caf::actor_system& sys, const batcher_actor& batcher) {
  caf::scoped_actor self{sys};
  BatcherStats s;
  self->request(batcher, std::chrono::seconds(10), stats_atom::value).receive([&](BatcherStats& x) { s = x; }, [](caf::error&) {});
  return s;
}

// A batch request's callbacks: they count its tokens, time its first token and the gaps
// between the others, and tell `tally` when the whole batch has started and when it is done.
SessionCallbacks batch_callbacks(Tally& tally, int batch, std::shared_ptr<RequestClock> clock) {
  SessionCallbacks cb;
  cb.on_text = [&tally, clock, batch](TextChunk& chunk) {
    tally.tokens.fetch_add(static_cast<int64_t>(chunk.tokens.size()), std::memory_order_relaxed);
    if (chunk.tokens.empty()) return;
    const auto now = Clock::now();
    // A chunk of several tokens arrived after one gap: each of them waited its share.
    if (clock->started) {
      const double gap = seconds(now - clock->last) / static_cast<double>(chunk.tokens.size());
      clock->gaps.insert(clock->gaps.end(), chunk.tokens.size(), gap);
    }
    clock->last = now;
    if (clock->started) return;
    clock->started = true;
    std::lock_guard<std::mutex> lock(tally.mutex);
    tally.ttft.push_back(seconds(now - clock->sent));
    if (++tally.started == batch) {
      tally.all_started = Clock::now();
      tally.tokens_at_all_started = tally.tokens.load();
      tally.changed.notify_all();
    }
  };
  cb.on_done = [&tally, clock](Completion& c) {
    std::lock_guard<std::mutex> lock(tally.mutex);
    tally.itl.insert(tally.itl.end(), clock->gaps.begin(), clock->gaps.end());
    ++tally.completed;
    if (c.reason == FinishReason::error) ++tally.errors;
    tally.changed.notify_all();
  };
  return cb;
}

void submit_batch(Engine& engine, const BenchOptions& o, RandomPrompts& random_prompt, Tally& tally) {
  for (int i = 0; i < o.batch; ++i) {
    auto clock = std::make_shared<RequestClock>();
    SessionCallbacks cb = batch_callbacks(tally, o.batch, clock);
    auto request = bench_request(i, random_prompt(), o.gen);
    clock->sent = Clock::now();
    engine.generate(std::move(request), cb);
  }
}

// The batch's run from its submission (t0) to its last token (t_end); `steps` the batcher's
// steps in between; `probes` the TTFT of the probes, if any were sent.
nlohmann::json actor_bench_report(const BenchOptions& o, const Tally& tally, Clock::time_point t0, Clock::time_point t_end,
                                  double steps, const std::vector<double>& probes) {
  const double total_s = seconds(t_end - t0);
  const double decode_s = seconds(t_end - tally.all_started);
  const double delivered = static_cast<double>(tally.tokens.load());
  const double decode_tokens = delivered - static_cast<double>(tally.tokens_at_all_started);
  nlohmann::json j = {{"backend", o.backend},
                      {"cpu", cpu::cpu_model_name()},
                      {"cpu_isa", cpu::isa_name(cpu::kernels().isa)},
                      {"worker_thread", o.worker_thread},
                      {"async_scheduling", o.async_scheduling},
                      {"prefix_caching", o.prefix_caching},
                      {"model", o.model},
                      {"placement", o.placement},
                      {"batch", o.batch},
                      {"prompt", o.prompt},
                      {"gen", o.gen},
                      {"steps", steps},
                      {"seconds", total_s},
                      {"steps_per_s", steps / total_s},
                      {"us_per_step", total_s / steps * 1e6},
                      {"tokens_delivered_per_s", delivered / total_s},
                      {"decode_tps", decode_s > 0 ? decode_tokens / decode_s : 0.0}};
  if (!probes.empty()) {
    j["ttft_p50_ms"] = percentile(probes, 0.5) * 1e3;
    j["ttft_p99_ms"] = percentile(probes, 0.99) * 1e3;
  }
  j["batch_ttft_p50_ms"] = percentile(tally.ttft, 0.5) * 1e3;
  j["batch_ttft_p99_ms"] = percentile(tally.ttft, 0.99) * 1e3;
  j["itl_p50_ms"] = percentile(tally.itl, 0.5) * 1e3;
  j["itl_p99_ms"] = percentile(tally.itl, 0.99) * 1e3;
  return j;
}

void print_actor_bench(const BenchOptions& o, const nlohmann::json& j, size_t probes) {
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s backend, batch %d, prompt %d, gen %d: %.0f steps in %.3f s (%.1f us/step), %.0f tokens/s delivered; "
              "decode: %.1f tokens/s\n",
              o.backend.c_str(), o.batch, o.prompt, o.gen, j["steps"].get<double>(), j["seconds"].get<double>(),
              j["us_per_step"].get<double>(), j["tokens_delivered_per_s"].get<double>(), j["decode_tps"].get<double>());
  std::printf("the batch: TTFT p50 %.2f ms, p99 %.2f ms; inter-token latency p50 %.3f ms, p99 %.3f ms\n",
              j["batch_ttft_p50_ms"].get<double>(), j["batch_ttft_p99_ms"].get<double>(), j["itl_p50_ms"].get<double>(),
              j["itl_p99_ms"].get<double>());
  if (j.contains("bare_tps"))
    std::printf("the bare forward pass, alternating: %.0f tokens/s; actors / bare %.3f\n", j["bare_tps"].get<double>(),
                j["actors_over_bare"].get<double>());
  if (j.contains("rounds"))
    std::printf("the median of %zu rounds\n", j["rounds"].size());
  if (probes > 0)
    std::printf("TTFT while the batch decodes: p50 %.2f ms, p99 %.2f ms (%zu probes)\n", j["ttft_p50_ms"].get<double>(),
                j["ttft_p99_ms"].get<double>(), probes);
}

// The bare forward pass of the same job on the engine's own weights, whole-job generated
// tokens per second (prefill included, as the actor figure counts it).
double bare_job_tps(BareBench& bare, const BenchOptions& o) {
  const double s = bare.prefill() + bare.decode();
  return static_cast<double>(o.batch) * o.gen / s;
}

// One run of the batch through the engine: its report.
nlohmann::json run_batch(caf::actor_system& sys, Engine& engine, const BenchOptions& o, RandomPrompts& random_prompt,
                         size_t& probes_sent) {
  Tally tally;
  const BatcherStats before = batcher_stats(sys, engine.batcher());
  const auto t0 = Clock::now();
  submit_batch(engine, o, random_prompt, tally);
  std::vector<double> probes;
  if (o.ttft_probes > 0) {
    tally.wait_until([&] { return tally.started == o.batch || tally.completed == o.batch; });
    probes = probe_ttft(engine, random_prompt(), o.ttft_probes);
  }
  tally.wait_until([&] { return tally.completed == o.batch; });
  const auto t_end = Clock::now();
  const BatcherStats after = batcher_stats(sys, engine.batcher());
  if (tally.errors > 0) throw std::runtime_error(std::to_string(tally.errors) + " bench requests failed");
  probes_sent = probes.size();
  return actor_bench_report(o, tally, t0, t_end, static_cast<double>(after.steps - before.steps), probes);
}

}  // namespace

void run_actor_bench(const BenchOptions& o) {
  if (o.beside_bare && o.backend == "null") throw std::invalid_argument("bench: --beside-bare needs a model (--backend cpu)");
  caf::actor_system_config cfg;
  // The null backend computes nothing; its figures are of the runtime as it runs beside compute.
  configure_actor_system(cfg, o.backend == "null" ? ProcessThreads{} : engine_threads(o.placement, 1, o.stage.threads));
  if (o.publish) load_middleman(cfg, {});
  caf::actor_system sys{cfg};

  const int32_t context = o.prompt + o.gen + 2;
  BenchEngine started = o.backend == "null" ? start_null_engine(sys, o, context) : start_model_engine(sys, o, context);
  Engine& engine = *started.engine;
  if (o.publish) publish_and_wait(sys, engine.batcher(), *o.publish);
  RandomPrompts random_prompt(started.vocab, o.prompt);
  // Warm-up, as the bare bench does: fault in the weights before timing (one short request,
  // its own time discarded).
  probe_ttft(engine, {1}, 1);
  std::unique_ptr<BareBench> bare;
  if (o.beside_bare) {
    bare = std::make_unique<BareBench>(engine.model(), o);
    bare->warm_up();
  }

  // Rounds alternate the bare pass and the actors, so that both see the same state of a
  // shared machine. The report is the median round (by actors / bare where the bare pass
  // runs, by throughput otherwise), with every round listed.
  std::vector<nlohmann::json> rounds;
  size_t probes = 0;
  for (int r = 0; r < o.rounds; ++r) {
    const double bare_tps = bare ? bare_job_tps(*bare, o) : 0.0;
    nlohmann::json j = run_batch(sys, engine, o, random_prompt, probes);
    if (bare) {
      j["bare_tps"] = bare_tps;
      j["actors_over_bare"] = j["tokens_delivered_per_s"].get<double>() / bare_tps;
    }
    rounds.push_back(std::move(j));
  }
  engine.shutdown();

  const std::string key = bare ? "actors_over_bare" : "tokens_delivered_per_s";
  std::vector<nlohmann::json> sorted = rounds;
  std::sort(sorted.begin(), sorted.end(),
            [&](const nlohmann::json& x, const nlohmann::json& y) { return x[key].get<double>() < y[key].get<double>(); });
  nlohmann::json report = sorted[sorted.size() / 2];
  if (o.rounds > 1) {
    nlohmann::json each = nlohmann::json::array();
    for (const auto& j : rounds) {
      nlohmann::json row = {{"tokens_delivered_per_s", j["tokens_delivered_per_s"]}};
      if (bare) row["bare_tps"] = j["bare_tps"], row["actors_over_bare"] = j["actors_over_bare"];
      each.push_back(std::move(row));
    }
    report["rounds"] = std::move(each);
  }
  print_actor_bench(o, report, probes);
}

}  // namespace orzo::cli
