#include "actors/batcher.hpp"

#include "batching/block_manager.hpp"
#include "batching/sequence.hpp"
#include "protocol/errors.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>

namespace orzo {
namespace {

// One admitted request, from register to finished. Its prompt and generated tokens live in
// `seq` only (request.prompt is emptied on admission).
struct Live {
  GenerationRequest request;
  session_actor session;
  Sequence seq;
  bool sampler_started = false;  // the sampling worker knows this sequence
  bool in_step = false;          // part of the step in flight
  bool cancelled = false;        // stopped while in the step: ends when the step returns
  bool paused = false;           // its reader fell behind: parked, once out of the step, until resumed
  int32_t scored = 1;            // the next prompt position to score, when sampling.prompt_logprobs asks
  std::chrono::steady_clock::time_point admitted = std::chrono::steady_clock::now();
  int64_t queue_us = 0;          // admission to its first step
};

// A worker that joined for a stage another worker serves: it takes over when that one is lost.
struct Standby {
  worker_actor worker;
  WorkerInfo info;
};

// One stage of the pipeline as the batcher sees it.
struct StageSlot {
  LayerRange layers;
  worker_actor worker;             // null while the stage waits for a worker to join
  std::optional<WorkerInfo> info;  // once the worker described itself or joined
  std::vector<Standby> standby;    // in the order they joined
};

struct BatcherState {
  BatcherOptions options;
  std::vector<StageSlot> stages;
  std::unique_ptr<BlockManager> blocks;
  std::unique_ptr<Scheduler> scheduler;
  std::unordered_map<uint64_t, std::unique_ptr<Live>> live;  // by sequence id
  std::unordered_map<std::string, uint64_t> by_request;      // request id -> sequence id
  uint64_t next_seq = 1;
  uint64_t next_step = 1;
  bool step_queued = false;     // a step_atom is in the mailbox
  bool step_in_flight = false;
  uint64_t in_flight_step = 0;
  StepPlan in_flight;
  std::vector<int32_t> in_flight_scores;  // per chunk of in_flight: its rows that score a prompt token
  std::vector<uint64_t> released;  // sequences the sampling worker may forget
  std::string fault;               // what no joining worker can cure (a local stage's pool is short)
  std::string lost;                // why a stage was last lost, until every stage has a worker again
  int32_t pending_chains = 0;      // chain messages not yet acknowledged
  uint64_t pipeline_epoch = 0;     // bumped on every loss: older chain acknowledgements are stale
  bool healthy = false;
  std::string unhealthy_reason;
  // From a stage's loss until every stage is served again (or recovery_timeout passes): the
  // admitted requests wait, preempted, instead of failing.
  bool recovering = false;
  uint64_t recovery = 0;  // numbers the recoveries, for their deadlines
  std::chrono::steady_clock::time_point lost_at;
  std::mt19937_64 seeds{std::random_device{}()};  // for requests that bring no seed
  BatcherStats stats;
  static inline const char* name = "orzo.batcher";
};

using batcher_pointer = batcher_actor::stateful_pointer<BatcherState>;

int32_t generated(const Live& l) { return l.seq.num_tokens() - l.seq.prompt_len; }

FinishedEvent finished(const Live& l, FinishReason reason, ErrorCode error = ErrorCode::none,
                       std::string message = {}) {
  FinishedEvent ev;
  ev.request_id = l.request.id;
  ev.reason = reason;
  ev.error = error;
  ev.message = std::move(message);
  ev.usage = Usage{l.seq.prompt_len, l.seq.num_cached, generated(l), l.queue_us};
  return ev;
}

// Ends a request that is not part of the step in flight: its blocks go back at once.
void finish(batcher_pointer self, uint64_t seq_id, FinishReason reason, ErrorCode error = ErrorCode::none,
            std::string message = {}) {
  auto& st = self->state;
  auto it = st.live.find(seq_id);
  if (it == st.live.end()) return;
  Live& l = *it->second;
  st.scheduler->remove(l.seq);
  if (l.sampler_started) st.released.push_back(seq_id);
  if (l.session) self->send(l.session, finished(l, reason, error, std::move(message)));
  st.stats.finished[static_cast<size_t>(reason)]++;
  st.by_request.erase(l.request.id);
  st.live.erase(it);
}

// A request refused before admission still gets its one terminal event.
void refuse(batcher_pointer self, const GenerationRequest& req, const session_actor& session, ErrorCode code,
            std::string message) {
  FinishedEvent ev;
  ev.request_id = req.id;
  ev.reason = FinishReason::error;
  ev.error = code;
  ev.message = std::move(message);
  ev.usage.prompt_tokens = static_cast<int32_t>(req.prompt.size());
  self->state.stats.finished[static_cast<size_t>(FinishReason::error)]++;
  if (session) self->send(session, std::move(ev));
}

int64_t total_tokens(const GenerationRequest& req) {
  return static_cast<int64_t>(req.prompt.size()) + req.limits.max_tokens;
}

void queue_step(batcher_pointer self) {
  auto& st = self->state;
  if (st.step_queued || st.step_in_flight || !st.healthy) return;
  st.step_queued = true;
  self->send(self, step_atom::value);
}

std::optional<FinishReason> finish_reason(const BatcherState& st, const Live& l, int32_t token) {
  const auto& limits = l.request.limits;
  const int32_t n = generated(l);
  if (n >= limits.min_tokens) {
    const auto& eos = st.options.eos_token_ids;
    if (!limits.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) return FinishReason::eos;
    const auto& stops = limits.stop_token_ids;  // sorted at admission
    if (std::binary_search(stops.begin(), stops.end(), token)) return FinishReason::stop;
  }
  if (n >= limits.max_tokens) return FinishReason::length;
  if (static_cast<int32_t>(l.seq.tokens.size()) >= st.options.max_model_len) return FinishReason::length;
  return std::nullopt;
}

void fail_all(batcher_pointer self, ErrorCode code, const std::string& message) {
  std::vector<uint64_t> ids;
  for (const auto& [id, l] : self->state.live) ids.push_back(id);
  for (auto id : ids) finish(self, id, FinishReason::error, code, message);
}

bool scores_prompt(const Live& l) { return l.request.sampling.prompt_logprobs >= 0; }

// The rows of `chunk` that score a prompt token: those predicting positions [scored,
// prompt_len). They end where the chunk ends, or just before its sampled last row, so with
// that row they are the chunk's last rows.
int32_t score_rows(const Live& l, const ScheduledChunk& chunk) {
  if (!scores_prompt(l)) return 0;
  const int32_t from = std::max(chunk.first_pos, l.scored - 1);
  const int32_t to = std::min(chunk.first_pos + chunk.count, l.seq.prompt_len - 1);
  return std::max(0, to - from);
}

// Scored positions are never recomputed for their logits again: a preempted sequence may take
// them from the prefix cache.
void mark_scored(Live& l, int32_t scored) {
  l.scored = scored;
  l.seq.cacheable = scored >= l.seq.prompt_len ? std::numeric_limits<int32_t>::max() : scored - 1;
}

StepRequest build_step(BatcherState& st) {
  StepRequest req;
  req.step = st.next_step++;
  auto& batch = req.batch;
  st.in_flight_scores.clear();
  for (const auto& chunk : st.in_flight.chunks) {
    auto& l = *st.live.at(chunk.seq->id);
    l.in_step = true;
    const auto index = static_cast<int32_t>(batch.block_tables.size());
    batch.block_tables.push_back(chunk.seq->blocks.table);
    req.seq_ids.push_back(chunk.seq->id);
    const int32_t scores = score_rows(l, chunk);
    st.in_flight_scores.push_back(scores);
    batch.add_chunk_with_logits(index, chunk.seq->tokens.data() + chunk.first_pos, chunk.count, chunk.first_pos,
                                scores + (chunk.sample ? 1 : 0));
    if (!l.sampler_started) {
      l.sampler_started = true;
      if (l.queue_us == 0)
        l.queue_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - l.admitted).count();
      const auto& tokens = chunk.seq->tokens;
      const auto prompt_end = tokens.begin() + chunk.seq->prompt_len;
      req.started.push_back(SequenceStart{chunk.seq->id, l.request.sampling, std::vector<int32_t>(tokens.begin(), prompt_end),
                                          std::vector<int32_t>(prompt_end, tokens.end())});
    }
  }
  req.released = std::move(st.released);
  st.released.clear();
  return req;
}

void send_scores(batcher_pointer self, Live& l, const StepResult& result, size_t first, int32_t count) {
  PromptScoresEvent ev;
  ev.request_id = l.request.id;
  for (int32_t i = 0; i < count; ++i) {
    const auto& s = result.samples[first + static_cast<size_t>(i)];
    ev.scores.push_back(PromptTokenScore{l.scored + i, s.token, s.logprob, s.rank, s.top_logprobs});
  }
  mark_scored(l, l.scored + count);
  if (l.session) self->send(l.session, std::move(ev));
}

void deliver(batcher_pointer self, const StepResult& result) {
  auto& st = self->state;
  st.scheduler->complete(st.in_flight);
  size_t next = 0;  // the first result of the chunk at hand
  for (size_t c = 0; c < st.in_flight.chunks.size(); ++c) {
    const auto& chunk = st.in_flight.chunks[c];
    const int32_t scores = st.in_flight_scores[c];
    const size_t first = next;
    next += static_cast<size_t>(scores) + (chunk.sample ? 1 : 0);
    const uint64_t id = chunk.seq->id;
    auto it = st.live.find(id);
    if (it == st.live.end()) continue;
    Live& l = *it->second;
    l.in_step = false;
    if (l.cancelled) {
      finish(self, id, FinishReason::cancelled);
      continue;
    }
    if (scores > 0) send_scores(self, l, result, first, scores);
    if (!chunk.sample) continue;
    // A request that only scores its prompt ends with it.
    if (l.request.limits.max_tokens == 0) {
      finish(self, id, FinishReason::length);
      continue;
    }
    const auto& s = result.samples[next - 1];
    if (s.token < 0) {
      finish(self, id, FinishReason::error, ErrorCode::invalid_request,
             "the output constraint allows no token of this model's vocabulary here (or the sampling worker has no "
             "tokenizer to apply it)");
      continue;
    }
    l.seq.tokens.push_back(s.token);
    ++st.stats.generated_tokens;
    self->send(l.session, TokenEvent{l.request.id, s.token, generated(l) - 1, s.logprob, s.top_logprobs});
    if (auto reason = finish_reason(st, l, s.token))
      finish(self, id, *reason);
    else if (l.paused)
      st.scheduler->park(l.seq);
  }
}

size_t expected_results(const BatcherState& st) {
  size_t n = 0;
  for (size_t c = 0; c < st.in_flight.chunks.size(); ++c)
    n += static_cast<size_t>(st.in_flight_scores[c]) + (st.in_flight.chunks[c].sample ? 1 : 0);
  return n;
}

void fail_step(batcher_pointer self, const caf::error& err) {
  auto& st = self->state;
  const auto code = error_code_of(err);
  const std::string message = code == ErrorCode::step_failed ? error_message(err)
                                                             : "a worker did not answer: " + self->system().render(err);
  std::vector<uint64_t> ids;
  for (const auto& chunk : st.in_flight.chunks) ids.push_back(chunk.seq->id);
  for (auto id : ids) {
    auto it = st.live.find(id);
    if (it == st.live.end()) continue;
    it->second->in_step = false;
    if (it->second->cancelled)
      finish(self, id, FinishReason::cancelled);
    else
      finish(self, id, FinishReason::error, code, message);
  }
}

void run_step(batcher_pointer self) {
  auto& st = self->state;
  st.step_queued = false;
  if (st.step_in_flight || !st.healthy) return;
  st.in_flight = st.scheduler->schedule();
  st.stats.preemptions += st.in_flight.preempted.size();
  if (st.in_flight.empty()) return;
  st.step_in_flight = true;
  ++st.stats.steps;
  auto req = build_step(st);
  st.in_flight_step = req.step;
  self->request(st.stages.front().worker, st.options.step_timeout, std::move(req))
      .then(
          [self](StepResult& result) {
            auto& s = self->state;
            if (!s.step_in_flight || result.step != s.in_flight_step) return;
            s.step_in_flight = false;
            if (result.samples.size() != expected_results(s))
              fail_step(self, make_orzo_error(ErrorCode::step_failed,
                                              "the last worker answered " + std::to_string(result.samples.size()) +
                                                  " logit rows of " + std::to_string(expected_results(s))));
            else
              deliver(self, result);
            if (s.options.check_invariants) s.blocks->check(s.scheduler->live_blocks());
            queue_step(self);
          },
          [self, step = st.in_flight_step](caf::error& err) {
            auto& s = self->state;
            if (!s.step_in_flight || s.in_flight_step != step) return;
            // A stage died under the step; its down message, which follows, is where the
            // batcher deals with a loss (lose_stage: recovery, or worker_lost).
            if (err == caf::sec::request_receiver_down) return;
            s.step_in_flight = false;
            fail_step(self, err);
            queue_step(self);
          });
}

// The session's reader fell behind: the request leaves the batch, and its blocks go, once it
// is out of the step in flight (deliver parks it then), until resume.
void pause_request(batcher_pointer self, uint64_t id) {
  auto& st = self->state;
  Live& l = *st.live.at(id);
  l.paused = true;
  if (!l.in_step) st.scheduler->park(l.seq);
}

void resume_request(batcher_pointer self, uint64_t id) {
  auto& st = self->state;
  Live& l = *st.live.at(id);
  l.paused = false;
  if (l.seq.state == Sequence::State::parked) {
    st.scheduler->unpark(l.seq);
    queue_step(self);
  }
}

// A session's word about its request, which may have ended meanwhile (then it is dropped).
void for_request(batcher_pointer self, const std::string& request_id, void (*act)(batcher_pointer, uint64_t)) {
  auto it = self->state.by_request.find(request_id);
  if (it != self->state.by_request.end()) act(self, it->second);
}

void stop_request(batcher_pointer self, uint64_t id) {
  auto& l = *self->state.live.at(id);
  if (l.in_step)
    l.cancelled = true;  // its blocks may be in use by the running step
  else
    finish(self, id, FinishReason::cancelled);
}

void admit(batcher_pointer self, GenerationRequest& req, session_actor& session) {
  auto& st = self->state;
  if (!st.healthy && !st.recovering)
    return refuse(self, req, session, ErrorCode::unavailable, "the model is unhealthy: " + st.unhealthy_reason);
  if (auto problem = check_request(req, RequestBounds{st.options.max_model_len, st.options.vocab_size}))
    return refuse(self, req, session, ErrorCode::invalid_request, std::move(problem->message));
  if (st.by_request.count(req.id)) return refuse(self, req, session, ErrorCode::invalid_request, "duplicate request id " + req.id);
  // Each sampled token is looked up in the stop ids: a search, not a scan of a list a client
  // may have made long. The server sends them sorted, so this sorts only other clients' lists.
  auto& stops = req.limits.stop_token_ids;
  if (!std::is_sorted(stops.begin(), stops.end())) std::sort(stops.begin(), stops.end());
  // A request recomputed on another worker after a loss draws there what it would have drawn
  // here: its draws depend on the seed and the step only, so an unseeded one gets its seed now.
  if (!req.sampling.seed) req.sampling.seed = self->state.seeds();
  auto l = std::make_unique<Live>();
  l->seq.id = st.next_seq++;
  l->seq.prompt_len = static_cast<int32_t>(req.prompt.size());
  l->seq.tokens = req.prompt;
  l->seq.priority = req.priority;
  if (req.sampling.prompt_logprobs >= 0) mark_scored(*l, 1);
  // A sequence that outgrew the whole pool could never finish, and would hold up every
  // admission behind it.
  if (!st.scheduler->fits(l->seq) || total_tokens(req) > st.scheduler->capacity_tokens())
    return refuse(self, req, session, ErrorCode::invalid_request,
                  "prompt + max_tokens = " + std::to_string(total_tokens(req)) + " tokens exceed the KV cache's " +
                      std::to_string(st.scheduler->capacity_tokens()));
  if (!st.scheduler->add(l->seq))
    return refuse(self, req, session, ErrorCode::overloaded,
                  "the waiting queue is full (" + std::to_string(st.options.scheduler.max_waiting) + " requests)");
  st.stats.prompt_tokens += req.prompt.size();
  l->session = std::move(session);
  req.prompt = {};  // the sequence holds the tokens from here on
  l->request = std::move(req);
  self->monitor(l->session);
  const auto id = l->seq.id;
  st.by_request.emplace(l->request.id, id);
  st.live.emplace(id, std::move(l));
  queue_step(self);
}

// ---- The pipeline: stages that describe themselves, join, get chained and are lost ----

// Healthy when nothing is broken for good, every stage has a worker and every chain is
// acknowledged; the reason says what is missing otherwise.
void update_health(batcher_pointer self) {
  auto& st = self->state;
  std::string why = st.fault;
  if (why.empty()) {
    std::string missing;
    for (const auto& stage : st.stages)
      if (!stage.worker) missing += (missing.empty() ? "" : ", ") + layers_text(stage.layers);
    if (!missing.empty())
      why = (st.lost.empty() ? "" : st.lost + "; ") + "waiting for a worker for layers " + missing;
    else if (st.pending_chains > 0)
      why = "chaining the pipeline";
  }
  const bool was = st.healthy;
  st.healthy = why.empty();
  st.unhealthy_reason = std::move(why);
  // A standby that took over a lone stage leaves the model healthy throughout: its requests,
  // preempted by the loss, still need a step.
  if (st.healthy && (!was || st.recovering)) {
    st.lost.clear();
    if (st.recovering) {
      st.recovering = false;
      ++st.stats.recoveries;
      st.stats.recovery_pause_ns += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - st.lost_at).count());
    }
    queue_step(self);
  }
}

// Nothing can advance without the whole pipeline: every admitted request ends now rather
// than waiting for a worker that may never come back.
void stop_serving(batcher_pointer self, const std::string& why) {
  self->state.step_in_flight = false;
  fail_all(self, ErrorCode::worker_lost, why);
}

void set_fault(batcher_pointer self, std::string why) {
  self->state.fault = std::move(why);
  stop_serving(self, self->state.fault);
  update_health(self);
}

void chain(batcher_pointer self, size_t i);

// The step in flight will never be answered (or its answer is stale): its sequences leave it,
// those stopped meanwhile end now.
void abandon_step(batcher_pointer self) {
  auto& st = self->state;
  if (!st.step_in_flight) return;
  st.step_in_flight = false;
  std::vector<uint64_t> cancelled;
  for (const auto& chunk : st.in_flight.chunks) {
    auto it = st.live.find(chunk.seq->id);
    if (it == st.live.end()) continue;
    Live& l = *it->second;
    l.in_step = false;
    if (l.cancelled)
      cancelled.push_back(chunk.seq->id);
    else if (l.paused)
      st.scheduler->park(l.seq);
  }
  for (auto id : cancelled) finish(self, id, FinishReason::cancelled);
}

// Stage i's worker is gone (dead, unreachable, hung past the middleman's connection
// timeout), and the KV of every stage is of no use without it. Every admitted request is
// preempted, its tokens kept, to be recomputed once each stage has a worker again: a standby
// takes over at once, else one that joins within recovery_timeout; after that they fail
// with worker_lost. The sampling worker hears of each sequence again, with what it drew, so
// its draws go on where they stood. The prefix cache, which points at the lost KV, is
// forgotten, which the preemptions make possible (they release every block).
void lose_stage(batcher_pointer self, size_t i, const std::string& why) {
  auto& st = self->state;
  auto& stage = st.stages[i];
  stage.worker = nullptr;
  stage.info.reset();
  st.lost = "the worker for layers " + layers_text(stage.layers) + " was lost: " + why;
  ++st.pipeline_epoch;
  st.pending_chains = 0;
  if (st.options.recovery_timeout.count() <= 0) {
    stop_serving(self, st.lost);
  } else {
    abandon_step(self);
    st.scheduler->preempt_all();
    // Released before they start again (a worker handles a step's releases first), so that a
    // surviving sampling worker forgets even those that end before they run again.
    for (auto& [id, l] : st.live)
      if (std::exchange(l->sampler_started, false)) st.released.push_back(id);
    if (!st.recovering) {
      st.recovering = true;
      st.lost_at = std::chrono::steady_clock::now();
      self->delayed_send(self, st.options.recovery_timeout, recover_atom::value, ++st.recovery);
    }
  }
  st.blocks->forget_cached();
  if (!stage.standby.empty()) {
    stage.worker = std::move(stage.standby.front().worker);
    stage.info = std::move(stage.standby.front().info);
    stage.standby.erase(stage.standby.begin());
  }
  // Every chain is renewed: the epoch made the acknowledgements still pending stale.
  for (size_t s = 0; s + 1 < st.stages.size(); ++s) chain(self, s);
  update_health(self);
}

// recovery_timeout after the loss that began recovery `n`: still not served, its requests fail.
void recovery_deadline(batcher_pointer self, uint64_t n) {
  auto& st = self->state;
  if (!st.recovering || n != st.recovery) return;
  st.recovering = false;
  fail_all(self, ErrorCode::worker_lost,
           st.lost + "; no worker took over within " +
               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(st.options.recovery_timeout).count()) +
               " ms");
}

// Tells stage i's worker to delegate steps to stage i + 1's, when both have one.
void chain(batcher_pointer self, size_t i) {
  auto& st = self->state;
  if (i + 1 >= st.stages.size() || !st.stages[i].worker || !st.stages[i + 1].worker) return;
  ++st.pending_chains;
  self->request(st.stages[i].worker, std::chrono::seconds(30), chain_atom::value,
                caf::actor_cast<caf::actor>(st.stages[i + 1].worker))
      .then(
          [self, epoch = st.pipeline_epoch](caf::ok_atom) {
            auto& s = self->state;
            if (epoch != s.pipeline_epoch) return;
            --s.pending_chains;
            update_health(self);
          },
          [self, i, epoch = st.pipeline_epoch](caf::error& err) {
            if (epoch != self->state.pipeline_epoch) return;
            lose_stage(self, i, "it did not take its next stage: " + self->system().render(err));
          });
}

caf::result<caf::ok_atom> join(batcher_pointer self, worker_actor& worker, WorkerInfo& info) {
  auto& st = self->state;
  const LayerRange layers{info.first_layer, info.end_layer};
  auto refuse_join = [&](const std::string& why) {
    return make_orzo_error(ErrorCode::invalid_request, "cannot join for layers " + layers_text(layers) + ": " + why);
  };
  if (!worker) return refuse_join("the join names no worker");
  auto it = std::find_if(st.stages.begin(), st.stages.end(), [&](const StageSlot& s) {
    return s.layers.begin == layers.begin && s.layers.end == layers.end;
  });
  if (it == st.stages.end()) {
    std::string ranges;
    for (const auto& s : st.stages) ranges += (ranges.empty() ? "" : ", ") + layers_text(s.layers);
    return refuse_join("the pipeline has no such stage (its stages are " + ranges + ")");
  }
  if (info.kv_blocks < st.options.kv_blocks)
    return refuse_join("its KV pool holds " + std::to_string(info.kv_blocks) + " blocks, the batcher plans with " +
                       std::to_string(st.options.kv_blocks));
  const auto serves = [&](const worker_actor& w) { return w && w.address() == worker.address(); };
  if (serves(it->worker) || std::any_of(it->standby.begin(), it->standby.end(), [&](const Standby& s) { return serves(s.worker); }))
    return refuse_join("this worker has joined already");
  if (it->worker) {
    self->monitor(worker);
    it->standby.push_back(Standby{worker, std::move(info)});
    return caf::ok_atom::value;
  }
  const auto i = static_cast<size_t>(it - st.stages.begin());
  it->worker = worker;
  it->info = std::move(info);
  self->monitor(worker);
  if (i > 0) chain(self, i - 1);
  chain(self, i);
  update_health(self);
  return caf::ok_atom::value;
}

// The workers spawned with the batcher say what they serve; a pool smaller than the
// batcher plans with would corrupt KV, which no join can cure.
void describe_stages(batcher_pointer self) {
  auto& st = self->state;
  if (st.stages.empty()) return set_fault(self, "no workers");
  for (size_t i = 0; i < st.stages.size(); ++i) {
    const auto worker = st.stages[i].worker;
    if (!worker) continue;
    self->monitor(worker);
    self->request(worker, std::chrono::seconds(30), describe_atom::value)
        .then(
            [self, i, worker](WorkerInfo& info) {
              auto& s = self->state;
              if (s.stages[i].worker != worker) return;
              if (info.kv_blocks < s.options.kv_blocks)
                set_fault(self, info.device + " holds " + std::to_string(info.kv_blocks) +
                                    " KV blocks, the batcher plans with " + std::to_string(s.options.kv_blocks));
              s.stages[i].info = std::move(info);
            },
            [self](caf::error& err) { set_fault(self, "a worker did not describe itself: " + self->system().render(err)); });
  }
  update_health(self);
}

// True when the down message was a stage's worker, serving or standing by.
bool on_stage_down(batcher_pointer self, const caf::down_msg& dm) {
  auto& stages = self->state.stages;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].worker && stages[i].worker.address() == dm.source) {
      lose_stage(self, i, self->system().render(dm.reason));
      return true;
    }
    auto& standby = stages[i].standby;
    auto it = std::find_if(standby.begin(), standby.end(), [&](const Standby& s) { return s.worker.address() == dm.source; });
    if (it != standby.end()) {
      standby.erase(it);
      return true;
    }
  }
  return false;
}

ModelHealth health(const BatcherState& st) {
  ModelHealth h{st.healthy, st.unhealthy_reason, {}, {}};
  for (const auto& stage : st.stages) {
    if (stage.info) h.workers.push_back(*stage.info);
    for (const auto& s : stage.standby) h.standby.push_back(s.info);
  }
  return h;
}

StageTerms terms(const BatcherState& st) {
  return StageTerms{st.options.kv_blocks, st.options.block_size, st.options.scheduler.max_num_batched_tokens,
                    st.options.scheduler.max_num_seqs, st.options.max_model_len};
}

// ---- Sessions ----

void on_down(batcher_pointer self, const caf::down_msg& dm) {
  if (on_stage_down(self, dm)) return;
  auto& st = self->state;
  std::vector<uint64_t> ids;
  for (const auto& [id, l] : st.live)
    if (l->session.address() == dm.source) ids.push_back(id);
  for (auto id : ids) {
    st.live.at(id)->session = nullptr;  // nobody to tell
    stop_request(self, id);
  }
}

batcher_actor::behavior_type batcher(batcher_pointer self, BatcherOptions options, std::vector<PipelineStage> stages) {
  auto& st = self->state;
  st.options = std::move(options);
  for (auto& stage : stages) st.stages.push_back(StageSlot{stage.layers, std::move(stage.worker), std::nullopt, {}});
  st.blocks = std::make_unique<BlockManager>(st.options.kv_blocks, st.options.block_size, st.options.prefix_caching);
  st.scheduler = std::make_unique<Scheduler>(st.options.scheduler, *st.blocks);
  st.stats.finished.assign(static_cast<size_t>(FinishReason::error) + 1, 0);
  describe_stages(self);
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  self->set_exit_handler([self](caf::exit_msg& msg) {
    fail_all(self, ErrorCode::unavailable, "the batcher is shutting down");
    self->quit(msg.reason);
  });
  return {
      [self](register_atom, GenerationRequest& req, session_actor& session) { admit(self, req, session); },
      [self](stop_atom, const std::string& request_id) { for_request(self, request_id, stop_request); },
      [self](pause_atom, const std::string& request_id) { for_request(self, request_id, pause_request); },
      [self](resume_atom, const std::string& request_id) { for_request(self, request_id, resume_request); },
      [self](step_atom) { run_step(self); },
      [self](recover_atom, uint64_t n) { recovery_deadline(self, n); },
      [self](health_atom) { return health(self->state); },
      [self](stats_atom) {
        auto& s = self->state;
        s.stats.running = static_cast<int32_t>(s.scheduler->num_running());
        s.stats.waiting = static_cast<int32_t>(s.scheduler->num_waiting());
        s.stats.paused = static_cast<int32_t>(
            std::count_if(s.live.begin(), s.live.end(), [](const auto& entry) { return entry.second->paused; }));
        s.stats.kv_blocks_total = s.blocks->num_blocks();
        s.stats.kv_blocks_used = s.blocks->num_used();
        s.stats.prefix_query_tokens = s.blocks->stats().prefix_query_tokens;
        s.stats.prefix_hit_tokens = s.blocks->stats().prefix_hit_tokens;
        return s.stats;
      },
      [self](terms_atom) { return terms(self->state); },
      [self](join_atom, worker_actor& worker, WorkerInfo& info) { return join(self, worker, info); },
  };
}

}  // namespace

batcher_actor spawn_batcher(caf::actor_system& sys, BatcherOptions options, std::vector<PipelineStage> stages) {
  return sys.spawn(batcher, std::move(options), std::move(stages));
}

}  // namespace orzo
