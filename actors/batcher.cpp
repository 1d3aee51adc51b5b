#include "actors/batcher.hpp"

#include "batching/block_manager.hpp"
#include "batching/sequence.hpp"
#include "protocol/errors.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <map>
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
  size_t replica = 0;            // whose scheduler and KV pool hold it
  bool sampler_started = false;  // the replica's sampling worker knows this sequence
  bool cancelled = false;        // stopped while in a step: ends when the step returns
  // Its terminal event is sent, but a step in flight still names it (seq.in_flight): the
  // object stays until that step returns, and the step's rows for it are discarded.
  bool ended = false;
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

// One stage of a pipeline as the batcher sees it.
struct StageSlot {
  LayerRange layers;
  worker_actor worker;             // null while the stage waits for a worker to join
  std::optional<WorkerInfo> info;  // once the worker described itself or joined
  std::vector<Standby> standby;    // in the order they joined
};

// A step sent to a replica's pipeline and not yet answered.
struct Flight {
  uint64_t step = 0;
  StepPlan plan;
  std::vector<int32_t> scores;  // per chunk of plan: its rows that score a prompt token
  std::chrono::steady_clock::time_point began;
};

// One whole-model pipeline with its own KV pool, scheduler and steps in flight. Replicas step
// independently; a request lives in one at a time.
struct Replica {
  std::vector<StageSlot> stages;
  std::unique_ptr<BlockManager> blocks;
  std::unique_ptr<Scheduler> scheduler;
  bool step_queued = false;     // a step_atom for it is in the mailbox
  // Oldest first: one step, or two when the next is planned while one computes (async
  // scheduling). The pipeline answers them in order.
  std::deque<Flight> flights;
  bool watched = false;         // a watch_atom for it is on the clock
  std::vector<uint64_t> released;  // sequences its sampling worker may forget
  std::string fault;               // what no joining worker can cure (a local stage's pool is short)
  std::string lost;                // why a stage was last lost, until every stage has a worker again
  int32_t pending_chains = 0;      // chain messages not yet acknowledged
  uint64_t pipeline_epoch = 0;     // bumped on every loss: older chain acknowledgements are stale
  bool healthy = false;
  std::string unhealthy_reason;
  // From a stage's loss until its requests are served again, here or in another replica (or
  // recovery_timeout passes): they wait, preempted, instead of failing.
  bool recovering = false;
  uint64_t recovery = 0;  // numbers the recoveries, for their deadlines
  std::chrono::steady_clock::time_point lost_at;
  uint64_t steps = 0;
  uint64_t routed = 0;
  uint64_t recoveries = 0;
};

struct BatcherState {
  BatcherOptions options;
  std::vector<Replica> replicas;
  std::unordered_map<uint64_t, std::unique_ptr<Live>> live;  // by sequence id
  std::unordered_map<std::string, uint64_t> by_request;      // request id -> sequence id
  uint64_t next_seq = 1;
  uint64_t next_step = 1;
  std::mt19937_64 seeds{std::random_device{}()};  // for requests that bring no seed
  BatcherStats stats;
  static inline const char* name = "orzo.batcher";
};

using batcher_pointer = batcher_actor::stateful_pointer<BatcherState>;

int32_t generated(const Live& l) { return l.seq.num_known() - l.seq.prompt_len; }

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

// Ends a request: its terminal event goes now, and its blocks go back. A step still in flight
// may write into them, which is safe: the pipeline runs steps in order, so any step that hands
// them to another sequence runs after it. The object stays until no step in flight names it.
void finish(batcher_pointer self, uint64_t seq_id, FinishReason reason, ErrorCode error = ErrorCode::none,
            std::string message = {}) {
  auto& st = self->state;
  auto it = st.live.find(seq_id);
  if (it == st.live.end() || it->second->ended) return;
  Live& l = *it->second;
  auto& rep = st.replicas[l.replica];
  rep.scheduler->remove(l.seq);
  if (l.sampler_started) rep.released.push_back(seq_id);
  if (l.session) self->send(l.session, finished(l, reason, error, std::move(message)));
  st.stats.finished[static_cast<size_t>(reason)]++;
  st.by_request.erase(l.request.id);
  if (l.seq.in_flight > 0)
    l.ended = true;
  else
    st.live.erase(it);
}

// A step that named sequence `id` came back (or never will): true when the caller is done
// with it, because it ended meanwhile (its object goes once no step names it).
bool leaves_step(BatcherState& st, uint64_t id) {
  auto it = st.live.find(id);
  if (it == st.live.end()) return true;
  Live& l = *it->second;
  --l.seq.in_flight;
  if (!l.ended) return false;
  if (l.seq.in_flight == 0) st.live.erase(it);
  return true;
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

// Async scheduling plans a step while the one before it computes, with a kPendingToken where
// that one draws, which only a pipeline whose one stage both embeds and samples can fill in.
bool plans_ahead(const BatcherState& st, const Replica& rep) {
  return st.options.async_scheduling && rep.stages.size() == 1;
}

void queue_step(batcher_pointer self, size_t r) {
  auto& rep = self->state.replicas[r];
  const size_t depth = plans_ahead(self->state, rep) ? 2 : 1;
  if (rep.step_queued || rep.flights.size() >= depth || !rep.healthy) return;
  rep.step_queued = true;
  self->send(self, step_atom::value, static_cast<int32_t>(r));
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
  if (l.seq.num_known() >= st.options.max_model_len) return FinishReason::length;
  return std::nullopt;
}

// Ends every request replica r holds (every request at all when r is none).
void fail_all(batcher_pointer self, ErrorCode code, const std::string& message,
              std::optional<size_t> r = std::nullopt) {
  std::vector<uint64_t> ids;
  for (const auto& [id, l] : self->state.live)
    if (!r || l->replica == *r) ids.push_back(id);
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

StepRequest build_step(BatcherState& st, Replica& rep, Flight& flight) {
  StepRequest req;
  req.step = flight.step = st.next_step++;
  auto& batch = req.batch;
  for (const auto& chunk : flight.plan.chunks) {
    auto& l = *st.live.at(chunk.seq->id);
    ++l.seq.in_flight;
    const auto index = static_cast<int32_t>(batch.block_tables.size());
    batch.block_tables.push_back(chunk.seq->blocks.table);
    req.seq_ids.push_back(chunk.seq->id);
    const int32_t scores = score_rows(l, chunk);
    flight.scores.push_back(scores);
    batch.add_chunk_with_logits(index, chunk.seq->tokens.data() + chunk.first_pos, chunk.count, chunk.first_pos,
                                scores + (chunk.sample ? 1 : 0));
    if (!l.sampler_started) {
      l.sampler_started = true;
      if (l.queue_us == 0)
        l.queue_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - l.admitted).count();
      const auto& tokens = chunk.seq->tokens;
      const auto prompt_end = tokens.begin() + chunk.seq->prompt_len;
      req.started.push_back(SequenceStart{chunk.seq->id, l.request.sampling, std::vector<int32_t>(tokens.begin(), prompt_end),
                                          std::vector<int32_t>(prompt_end, tokens.begin() + chunk.seq->num_known())});
    }
  }
  // The sliding groups' tables follow group 0's, in the same order (ForwardBatch::table).
  batch.kv_groups = static_cast<int32_t>(st.options.kv_windows.size());
  for (int32_t g = 1; g < batch.kv_groups; ++g)
    for (const auto& chunk : flight.plan.chunks) batch.block_tables.push_back(chunk.seq->blocks.windowed[static_cast<size_t>(g - 1)]);
  req.released = std::move(rep.released);
  rep.released.clear();
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

void deliver(batcher_pointer self, Replica& rep, const Flight& flight, const StepResult& result) {
  auto& st = self->state;
  rep.scheduler->commit(flight.plan);
  size_t next = 0;  // the first result of the chunk at hand
  for (size_t c = 0; c < flight.plan.chunks.size(); ++c) {
    const auto& chunk = flight.plan.chunks[c];
    const int32_t scores = flight.scores[c];
    const size_t first = next;
    next += static_cast<size_t>(scores) + (chunk.sample ? 1 : 0);
    const uint64_t id = chunk.seq->id;
    if (leaves_step(st, id)) continue;
    Live& l = *st.live.at(id);
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
    if (l.seq.pending > 0)
      l.seq.tokens[static_cast<size_t>(l.seq.num_known())] = s.token, --l.seq.pending;
    else
      l.seq.tokens.push_back(s.token);
    ++st.stats.generated_tokens;
    self->send(l.session, TokenEvent{l.request.id, s.token, generated(l) - 1, s.logprob, s.top_logprobs});
    if (auto reason = finish_reason(st, l, s.token))
      finish(self, id, *reason);
    else if (l.paused)
      rep.scheduler->park(l.seq);
  }
}

size_t expected_results(const Flight& flight) {
  size_t n = 0;
  for (size_t c = 0; c < flight.plan.chunks.size(); ++c)
    n += static_cast<size_t>(flight.scores[c]) + (flight.plan.chunks[c].sample ? 1 : 0);
  return n;
}

// In async scheduling, the token each continuing draw of a step just sent will bring is
// already a row of the next plan: a kPendingToken until the step returns. A draw that ends
// its sequence by length (or a prompt scored alone) gets none, so no row is planned past it.
void expect_tokens(BatcherState& st, const Flight& flight) {
  for (const auto& chunk : flight.plan.chunks) {
    if (!chunk.sample) continue;
    const Live& l = *st.live.at(chunk.seq->id);
    const int32_t after = chunk.seq->num_tokens() + 1;  // tokens once this draw is known
    if (l.request.limits.max_tokens == 0 || after - chunk.seq->prompt_len >= l.request.limits.max_tokens ||
        after >= st.options.max_model_len)
      continue;
    chunk.seq->tokens.push_back(kPendingToken);
    ++chunk.seq->pending;
  }
}

void fail_step(batcher_pointer self, const Flight& flight, const caf::error& err) {
  auto& st = self->state;
  const auto code = error_code_of(err);
  const std::string message = code == ErrorCode::step_failed ? error_message(err)
                                                             : "a worker did not answer: " + self->system().render(err);
  for (const auto& chunk : flight.plan.chunks) {
    const uint64_t id = chunk.seq->id;
    if (leaves_step(st, id)) continue;
    if (st.live.at(id)->cancelled)
      finish(self, id, FinishReason::cancelled);
    else
      finish(self, id, FinishReason::error, code, message);
  }
}

// Arms the step watchdog of replica r for its step in flight, unless it is armed already.
// Steps go out without a CAF request timeout: CAF 0.17 keeps every request's timeout on its
// clock until it fires, a reply or not, so a 10-minute timeout per step held hundreds of
// thousands of entries (about 550 bytes per request served, for ten minutes). One timer per
// replica, re-armed for the step then in flight, bounds that.
void watch_step(batcher_pointer self, size_t r) {
  auto& rep = self->state.replicas[r];
  if (rep.watched || rep.flights.empty()) return;
  rep.watched = true;
  const auto& oldest = rep.flights.front();
  const auto due = oldest.began + self->state.options.step_timeout - std::chrono::steady_clock::now();
  self->delayed_send(self, std::max(due, std::chrono::steady_clock::duration::zero()), watch_atom::value,
                     static_cast<int32_t>(r), oldest.step);
}

// The watchdog of replica r, armed for step `step`: a step in flight for step_timeout fails
// its requests with worker_lost, as an unanswered request would, and so does any step sent
// after it (the pipeline answers in order).
void on_watch(batcher_pointer self, size_t r, uint64_t step) {
  if (r >= self->state.replicas.size()) return;
  auto& rep = self->state.replicas[r];
  rep.watched = false;
  if (rep.flights.empty()) return;
  if (rep.flights.front().step != step ||
      std::chrono::steady_clock::now() - rep.flights.front().began < self->state.options.step_timeout)
    return watch_step(self, r);
  auto flights = std::exchange(rep.flights, {});
  for (const auto& flight : flights) fail_step(self, flight, caf::make_error(caf::sec::request_timeout));
  queue_step(self, r);
}

void run_step(batcher_pointer self, size_t r) {
  auto& st = self->state;
  if (r >= st.replicas.size()) return;
  auto& rep = st.replicas[r];
  rep.step_queued = false;
  const bool ahead = plans_ahead(st, rep);
  if (rep.flights.size() >= (ahead ? 2u : 1u) || !rep.healthy) return;
  Flight flight;
  flight.plan = rep.scheduler->schedule();
  st.stats.preemptions += flight.plan.preempted.size();
  if (flight.plan.empty()) return;
  flight.began = std::chrono::steady_clock::now();
  ++st.stats.steps;
  ++rep.steps;
  auto req = build_step(st, rep, flight);
  rep.scheduler->advance(flight.plan);
  if (ahead) expect_tokens(st, flight);
  const uint64_t step = flight.step;
  rep.flights.push_back(std::move(flight));
  watch_step(self, r);
  self->request(rep.stages.front().worker, caf::infinite, std::move(req))
      .then(
          [self, r, step](StepResult& result) {
            auto& rp = self->state.replicas[r];
            if (rp.flights.empty() || rp.flights.front().step != step || result.step != step) return;
            const Flight done = std::move(rp.flights.front());
            rp.flights.pop_front();
            if (result.samples.size() != expected_results(done))
              fail_step(self, done, make_orzo_error(ErrorCode::step_failed,
                                                    "the last worker answered " + std::to_string(result.samples.size()) +
                                                        " logit rows of " + std::to_string(expected_results(done))));
            else
              deliver(self, rp, done, result);
            if (self->state.options.check_invariants) rp.blocks->check(rp.scheduler->live_blocks());
            queue_step(self, r);
          },
          [self, r, step](caf::error& err) {
            auto& rp = self->state.replicas[r];
            if (rp.flights.empty() || rp.flights.front().step != step) return;
            // A stage died under the step; its down message, which follows, is where the
            // batcher deals with a loss (lose_stage: recovery, or worker_lost).
            if (err == caf::sec::request_receiver_down) return;
            const Flight done = std::move(rp.flights.front());
            rp.flights.pop_front();
            fail_step(self, done, err);
            queue_step(self, r);
          });
  // The next step is planned while this one computes.
  if (ahead) queue_step(self, r);
}

// The session's reader fell behind: the request leaves the batch, and its blocks go, once it
// is out of the step in flight (deliver parks it then), until resume.
void pause_request(batcher_pointer self, uint64_t id) {
  auto& st = self->state;
  Live& l = *st.live.at(id);
  l.paused = true;
  if (l.seq.in_flight == 0) st.replicas[l.replica].scheduler->park(l.seq);
}

void resume_request(batcher_pointer self, uint64_t id) {
  auto& st = self->state;
  Live& l = *st.live.at(id);
  l.paused = false;
  if (l.seq.state == Sequence::State::parked) {
    st.replicas[l.replica].scheduler->unpark(l.seq);
    queue_step(self, l.replica);
  }
}

// A session's word about its request, which may have ended meanwhile (then it is dropped).
void for_request(batcher_pointer self, const std::string& request_id, void (*act)(batcher_pointer, uint64_t)) {
  auto it = self->state.by_request.find(request_id);
  if (it != self->state.by_request.end()) act(self, it->second);
}

void stop_request(batcher_pointer self, uint64_t id) {
  auto& l = *self->state.live.at(id);
  if (l.seq.in_flight > 0)
    l.cancelled = true;  // ends with the step's answer, which may complete it meanwhile
  else
    finish(self, id, FinishReason::cancelled);
}

// ---- Routing: which replica a request goes to ----

// What replica r could give a sequence of these tokens, in blocks: those free, less those its
// waiting requests will take, plus the blocks of the sequence's prefix it has cached (they
// need no recompute and no new block).
int64_t room_for(const Replica& rep, const std::vector<int32_t>& tokens) {
  const int64_t block = rep.blocks->block_size();
  int64_t waiting = 0;
  for (const Sequence* seq : rep.scheduler->waiting()) waiting += (seq->num_tokens() + block - 1) / block;
  const int64_t cached = rep.blocks->prefix_caching()
                             ? rep.blocks->cached_prefix_tokens(tokens.data(), static_cast<int32_t>(tokens.size())) / block
                             : 0;
  return rep.blocks->num_free() - waiting + cached;
}

// The replica for a sequence: among those serving, the one with the most room for it (fewer
// requests on a tie); when none serves, one recovering, where it waits for its stage; none
// when no replica can take it. When the requests of a lost replica (`except`) move, `promised`
// holds the blocks each replica was given already.
std::optional<size_t> route(const BatcherState& st, const std::vector<int32_t>& tokens,
                            std::optional<size_t> except = std::nullopt, const std::vector<int64_t>* promised = nullptr) {
  std::vector<size_t> serving;
  for (size_t r = 0; r < st.replicas.size(); ++r)
    if (st.replicas[r].healthy && r != except) serving.push_back(r);
  // One candidate needs no scoring: the usual single replica pays nothing for routing (the
  // prefix lookup hashes the whole prompt).
  if (serving.size() == 1) return serving.front();
  if (serving.empty()) {
    if (except) return std::nullopt;
    for (size_t r = 0; r < st.replicas.size(); ++r)
      if (st.replicas[r].recovering) return r;
    return std::nullopt;
  }
  std::vector<size_t> holds(st.replicas.size(), 0);
  for (const auto& [id, l] : st.live) holds[l->replica]++;
  size_t best = serving.front();
  int64_t best_room = std::numeric_limits<int64_t>::min();
  for (size_t r : serving) {
    const int64_t room = room_for(st.replicas[r], tokens) - (promised ? (*promised)[r] : 0);
    if (room > best_room || (room == best_room && holds[r] < holds[best])) {
      best = r;
      best_room = room;
    }
  }
  return best;
}

// How a message about replica r begins: nothing when it is the only one.
std::string replica_prefix(const BatcherState& st, size_t r) {
  return st.replicas.size() > 1 ? "replica " + std::to_string(r) + ": " : std::string();
}

// Why no replica serves, for a request refused and for /health.
std::string unhealthy_reason(const BatcherState& st) {
  std::string why;
  for (size_t r = 0; r < st.replicas.size(); ++r)
    why += (why.empty() ? "" : "; ") + replica_prefix(st, r) + st.replicas[r].unhealthy_reason;
  return why;
}

void admit(batcher_pointer self, GenerationRequest& req, session_actor& session) {
  auto& st = self->state;
  const auto r = route(st, req.prompt);
  if (!r) return refuse(self, req, session, ErrorCode::unavailable, "the model is unhealthy: " + unhealthy_reason(st));
  auto& rep = st.replicas[*r];
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
  l->replica = *r;
  if (req.sampling.prompt_logprobs >= 0) mark_scored(*l, 1);
  // A sequence that outgrew the whole pool could never finish, and would hold up every
  // admission behind it.
  if (!rep.scheduler->fits(l->seq) || total_tokens(req) > rep.scheduler->capacity_tokens())
    return refuse(self, req, session, ErrorCode::invalid_request,
                  "prompt + max_tokens = " + std::to_string(total_tokens(req)) + " tokens exceed the KV cache's " +
                      std::to_string(rep.scheduler->capacity_tokens()));
  if (!rep.scheduler->add(l->seq))
    return refuse(self, req, session, ErrorCode::overloaded,
                  "the waiting queue is full (" + std::to_string(st.options.scheduler.max_waiting) + " requests)");
  st.stats.prompt_tokens += req.prompt.size();
  ++rep.routed;
  l->session = std::move(session);
  req.prompt = {};  // the sequence holds the tokens from here on
  l->request = std::move(req);
  self->monitor(l->session);
  const auto id = l->seq.id;
  st.by_request.emplace(l->request.id, id);
  st.live.emplace(id, std::move(l));
  queue_step(self, *r);
}

// ---- The pipelines: stages that describe themselves, join, get chained and are lost ----

// Replica r's recovery is over: its requests are served again, here or in another replica.
void end_recovery(BatcherState& st, Replica& rep) {
  if (!rep.recovering) return;
  rep.recovering = false;
  ++rep.recoveries;
  ++st.stats.recoveries;
  st.stats.recovery_pause_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - rep.lost_at).count());
}

// Replica `from` lost a stage and waits for it: its requests, all preempted (or parked), go on
// in the replicas that serve, each where route() finds it the most room, ahead of the requests
// waiting there. Nothing moves while no other replica serves.
void move_requests(batcher_pointer self, size_t from) {
  auto& st = self->state;
  auto& source = st.replicas[from];
  if (std::none_of(st.replicas.begin(), st.replicas.end(), [](const Replica& rep) { return rep.healthy; })) return;
  std::vector<Sequence*> queued(source.scheduler->waiting().begin(), source.scheduler->waiting().end());
  std::vector<Sequence*> parked;
  for (const auto& [id, l] : st.live)
    if (l->replica == from && l->seq.state == Sequence::State::parked) parked.push_back(&l->seq);
  std::vector<int64_t> promised(st.replicas.size(), 0);
  std::map<size_t, std::vector<Sequence*>> adopted;  // by replica
  for (auto* list : {&queued, &parked})
    for (Sequence* seq : *list) {
      const size_t to = *route(st, seq->tokens, from, &promised);
      promised[to] += (seq->num_tokens() + source.blocks->block_size() - 1) / source.blocks->block_size();
      source.scheduler->hand_off(*seq);
      st.live.at(seq->id)->replica = to;
      ++st.replicas[to].routed;
      ++st.stats.moved;
      if (list == &queued) adopted[to].push_back(seq);
    }
  for (auto& [to, seqs] : adopted) {
    st.replicas[to].scheduler->adopt(seqs);
    queue_step(self, to);
  }
  end_recovery(st, source);
}

// Healthy when nothing is broken for good, every stage has a worker and every chain is
// acknowledged; the reason says what is missing otherwise.
void update_health(batcher_pointer self, size_t r) {
  auto& st = self->state;
  auto& rep = st.replicas[r];
  std::string why = rep.fault;
  if (why.empty()) {
    std::string missing;
    for (const auto& stage : rep.stages)
      if (!stage.worker) missing += (missing.empty() ? "" : ", ") + layers_text(stage.layers);
    if (!missing.empty())
      why = (rep.lost.empty() ? "" : rep.lost + "; ") + "waiting for a worker for layers " + missing;
    else if (rep.pending_chains > 0)
      why = "chaining the pipeline";
  }
  const bool was = rep.healthy;
  rep.healthy = why.empty();
  rep.unhealthy_reason = std::move(why);
  // A standby that took over a lone stage leaves the replica healthy throughout: its requests,
  // preempted by the loss, still need a step.
  if (rep.healthy && (!was || rep.recovering)) {
    rep.lost.clear();
    end_recovery(st, rep);
    queue_step(self, r);
    // The requests of replicas still waiting for a stage can go on here.
    for (size_t q = 0; q < st.replicas.size(); ++q)
      if (st.replicas[q].recovering && !st.replicas[q].healthy) move_requests(self, q);
  }
}

// Nothing can advance in replica r without its whole pipeline: every request it holds ends
// now rather than waiting for a worker that may never come back.
void abandon_steps(batcher_pointer self, size_t r);

void stop_serving(batcher_pointer self, size_t r, const std::string& why) {
  abandon_steps(self, r);
  fail_all(self, ErrorCode::worker_lost, why, r);
}

void set_fault(batcher_pointer self, size_t r, std::string why) {
  auto& rep = self->state.replicas[r];
  rep.fault = std::move(why);
  stop_serving(self, r, rep.fault);
  update_health(self, r);
}

void chain(batcher_pointer self, size_t r, size_t i);

// Replica r's steps in flight will never be answered (or their answers are stale): their
// sequences leave them, without the tokens they were to draw; those stopped meanwhile end now.
void abandon_steps(batcher_pointer self, size_t r) {
  auto& st = self->state;
  auto& rep = st.replicas[r];
  auto flights = std::exchange(rep.flights, {});
  std::vector<uint64_t> cancelled;
  for (const auto& flight : flights)
    for (const auto& chunk : flight.plan.chunks) {
      if (leaves_step(st, chunk.seq->id)) continue;
      Live& l = *st.live.at(chunk.seq->id);
      l.seq.tokens.resize(static_cast<size_t>(l.seq.num_known()));
      l.seq.pending = 0;
      if (l.seq.in_flight > 0) continue;
      if (l.cancelled)
        cancelled.push_back(chunk.seq->id);
      else if (l.paused)
        rep.scheduler->park(l.seq);
    }
  for (auto id : cancelled) finish(self, id, FinishReason::cancelled);
}

// Stage i of replica r lost its worker (dead, unreachable, hung past the middleman's
// connection timeout), and the KV of the replica's every stage is of no use without it. Every
// request the replica holds is preempted, its tokens kept, to be recomputed: here once a
// standby takes over (at once) or a worker joins, or in another replica that serves; after
// recovery_timeout they fail with worker_lost. The sampling worker hears of each sequence
// again, with what it drew, so its draws go on where they stood. The prefix cache, which
// points at the lost KV, is forgotten, which the preemptions make possible (they release every
// block).
void lose_stage(batcher_pointer self, size_t r, size_t i, const std::string& why) {
  auto& st = self->state;
  auto& rep = st.replicas[r];
  auto& stage = rep.stages[i];
  stage.worker = nullptr;
  stage.info.reset();
  rep.lost = "the worker for layers " + layers_text(stage.layers) + " was lost: " + why;
  ++rep.pipeline_epoch;
  rep.pending_chains = 0;
  if (st.options.recovery_timeout.count() <= 0) {
    stop_serving(self, r, replica_prefix(st, r) + rep.lost);
  } else {
    abandon_steps(self, r);
    rep.scheduler->preempt_all();
    // Released before they start again (a worker handles a step's releases first), so that a
    // surviving sampling worker forgets even those that end before they run again.
    for (auto& [id, l] : st.live)
      if (l->replica == r && std::exchange(l->sampler_started, false)) rep.released.push_back(id);
    if (!rep.recovering) {
      rep.recovering = true;
      rep.lost_at = std::chrono::steady_clock::now();
      self->delayed_send(self, st.options.recovery_timeout, recover_atom::value, static_cast<int32_t>(r), ++rep.recovery);
    }
  }
  rep.blocks->forget_cached();
  if (!stage.standby.empty()) {
    stage.worker = std::move(stage.standby.front().worker);
    stage.info = std::move(stage.standby.front().info);
    stage.standby.erase(stage.standby.begin());
  }
  // Every chain is renewed: the epoch made the acknowledgements still pending stale.
  for (size_t s = 0; s + 1 < rep.stages.size(); ++s) chain(self, r, s);
  update_health(self, r);
  if (rep.recovering && !rep.healthy) move_requests(self, r);
}

// recovery_timeout after the loss that began replica r's recovery `n`: still not served, its
// requests fail.
void recovery_deadline(batcher_pointer self, size_t r, uint64_t n) {
  auto& st = self->state;
  if (r >= st.replicas.size()) return;
  auto& rep = st.replicas[r];
  if (!rep.recovering || n != rep.recovery) return;
  rep.recovering = false;
  fail_all(self, ErrorCode::worker_lost,
           replica_prefix(st, r) + rep.lost + "; no worker took over within " +
               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(st.options.recovery_timeout).count()) +
               " ms",
           r);
}

// Tells stage i's worker of replica r to delegate steps to stage i + 1's, when both have one.
void chain(batcher_pointer self, size_t r, size_t i) {
  auto& rep = self->state.replicas[r];
  if (i + 1 >= rep.stages.size() || !rep.stages[i].worker || !rep.stages[i + 1].worker) return;
  ++rep.pending_chains;
  self->request(rep.stages[i].worker, std::chrono::seconds(30), chain_atom::value,
                caf::actor_cast<caf::actor>(rep.stages[i + 1].worker))
      .then(
          [self, r, epoch = rep.pipeline_epoch](caf::ok_atom) {
            auto& rp = self->state.replicas[r];
            if (epoch != rp.pipeline_epoch) return;
            --rp.pending_chains;
            update_health(self, r);
          },
          [self, r, i, epoch = rep.pipeline_epoch](caf::error& err) {
            if (epoch != self->state.replicas[r].pipeline_epoch) return;
            lose_stage(self, r, i, "it did not take its next stage: " + self->system().render(err));
          });
}

// Why a worker's KV cannot serve this batcher's steps, if it cannot: a pool smaller than the
// batcher plans with, or other groups of block tables, would corrupt KV, which no join can cure.
std::optional<std::string> kv_mismatch(const BatcherState& st, const WorkerInfo& info) {
  if (info.kv_blocks < st.options.kv_blocks)
    return "its KV pool holds " + std::to_string(info.kv_blocks) + " blocks, the batcher plans with " +
           std::to_string(st.options.kv_blocks);
  if (info.kv_windows != st.options.kv_windows)
    return "it keeps " + std::to_string(info.kv_windows.size()) + " groups of KV block tables, the batcher plans " +
           std::to_string(st.options.kv_windows.size());
  return std::nullopt;
}

// A worker that joins for a layer range serves the first replica whose stage of that range has
// no worker; when every one has, it stands by for the stage with the fewest standbys.
caf::result<caf::ok_atom> join(batcher_pointer self, worker_actor& worker, WorkerInfo& info) {
  auto& st = self->state;
  const LayerRange layers{info.first_layer, info.end_layer};
  auto refuse_join = [&](const std::string& why) {
    return make_orzo_error(ErrorCode::invalid_request, "cannot join for layers " + layers_text(layers) + ": " + why);
  };
  if (!worker) return refuse_join("the join names no worker");
  const auto serves = [&](const worker_actor& w) { return w && w.address() == worker.address(); };
  struct Slot {
    size_t replica, stage;
  };
  std::optional<Slot> vacant, standby;
  for (size_t r = 0; r < st.replicas.size(); ++r) {
    const auto& stages = st.replicas[r].stages;
    for (size_t i = 0; i < stages.size(); ++i) {
      const auto& s = stages[i];
      if (serves(s.worker) || std::any_of(s.standby.begin(), s.standby.end(), [&](const Standby& b) { return serves(b.worker); }))
        return refuse_join("this worker has joined already");
      if (s.layers.begin != layers.begin || s.layers.end != layers.end) continue;
      if (!s.worker && !vacant) vacant = Slot{r, i};
      if (s.worker && (!standby || s.standby.size() < st.replicas[standby->replica].stages[standby->stage].standby.size()))
        standby = Slot{r, i};
    }
  }
  if (!vacant && !standby) {
    std::string ranges;
    for (const auto& s : st.replicas.front().stages) ranges += (ranges.empty() ? "" : ", ") + layers_text(s.layers);
    return refuse_join("the pipeline has no such stage (its stages are " + ranges + ")");
  }
  if (auto why = kv_mismatch(st, info)) return refuse_join(*why);
  self->monitor(worker);
  if (!vacant) {
    st.replicas[standby->replica].stages[standby->stage].standby.push_back(Standby{worker, std::move(info)});
    return caf::ok_atom::value;
  }
  auto& slot = st.replicas[vacant->replica].stages[vacant->stage];
  slot.worker = worker;
  slot.info = std::move(info);
  if (vacant->stage > 0) chain(self, vacant->replica, vacant->stage - 1);
  chain(self, vacant->replica, vacant->stage);
  update_health(self, vacant->replica);
  return caf::ok_atom::value;
}

// The workers spawned with the batcher say what they serve; a pool smaller than the
// batcher plans with would corrupt KV, which no join can cure.
void describe_stages(batcher_pointer self) {
  auto& st = self->state;
  for (size_t r = 0; r < st.replicas.size(); ++r) {
    auto& stages = st.replicas[r].stages;
    if (stages.empty()) {
      set_fault(self, r, "no workers");
      continue;
    }
    for (size_t i = 0; i < stages.size(); ++i) {
      const auto worker = stages[i].worker;
      if (!worker) continue;
      self->monitor(worker);
      self->request(worker, std::chrono::seconds(30), describe_atom::value)
          .then(
              [self, r, i, worker](WorkerInfo& info) {
                auto& rp = self->state.replicas[r];
                if (rp.stages[i].worker != worker) return;
                if (auto why = kv_mismatch(self->state, info)) set_fault(self, r, info.device + ": " + *why);
                rp.stages[i].info = std::move(info);
              },
              [self, r](caf::error& err) { set_fault(self, r, "a worker did not describe itself: " + self->system().render(err)); });
    }
    update_health(self, r);
  }
}

// True when the down message was a stage's worker, serving or standing by.
bool on_stage_down(batcher_pointer self, const caf::down_msg& dm) {
  auto& replicas = self->state.replicas;
  for (size_t r = 0; r < replicas.size(); ++r) {
    auto& stages = replicas[r].stages;
    for (size_t i = 0; i < stages.size(); ++i) {
      if (stages[i].worker && stages[i].worker.address() == dm.source) {
        lose_stage(self, r, i, self->system().render(dm.reason));
        return true;
      }
      auto& standby = stages[i].standby;
      auto it = std::find_if(standby.begin(), standby.end(), [&](const Standby& s) { return s.worker.address() == dm.source; });
      if (it != standby.end()) {
        standby.erase(it);
        return true;
      }
    }
  }
  return false;
}

ModelHealth health(const BatcherState& st) {
  ModelHealth h;
  for (const auto& rep : st.replicas) {
    ReplicaHealth rh{rep.healthy, rep.unhealthy_reason, {}, {}};
    for (const auto& stage : rep.stages) {
      if (stage.info) rh.workers.push_back(*stage.info);
      for (const auto& s : stage.standby) rh.standby.push_back(s.info);
    }
    h.healthy = h.healthy || rep.healthy;
    h.replicas.push_back(std::move(rh));
  }
  if (!h.healthy) h.detail = unhealthy_reason(st);
  return h;
}

BatcherStats stats(BatcherState& st) {
  auto s = st.stats;
  s.running = s.waiting = s.kv_blocks_total = s.kv_blocks_used = 0;
  s.prefix_query_tokens = s.prefix_hit_tokens = 0;
  for (const auto& rep : st.replicas) {
    ReplicaStats rs;
    rs.healthy = rep.healthy;
    rs.running = static_cast<int32_t>(rep.scheduler->num_running());
    rs.waiting = static_cast<int32_t>(rep.scheduler->num_waiting());
    rs.kv_blocks_total = rep.blocks->num_blocks();
    rs.kv_blocks_used = rep.blocks->num_used();
    rs.steps = rep.steps;
    rs.routed = rep.routed;
    rs.recoveries = rep.recoveries;
    s.running += rs.running;
    s.waiting += rs.waiting;
    s.kv_blocks_total += rs.kv_blocks_total;
    s.kv_blocks_used += rs.kv_blocks_used;
    s.prefix_query_tokens += rep.blocks->stats().prefix_query_tokens;
    s.prefix_hit_tokens += rep.blocks->stats().prefix_hit_tokens;
    s.replicas.push_back(rs);
  }
  s.paused = static_cast<int32_t>(
      std::count_if(st.live.begin(), st.live.end(), [](const auto& entry) { return entry.second->paused; }));
  return s;
}

StageTerms terms(const BatcherState& st) {
  return StageTerms{st.options.kv_blocks,
                    st.options.block_size,
                    st.options.scheduler.max_num_batched_tokens,
                    st.options.scheduler.max_num_seqs,
                    st.options.max_model_len,
                    st.options.kv_windows};
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

batcher_actor::behavior_type batcher(batcher_pointer self, BatcherOptions options, std::vector<Pipeline> pipelines) {
  auto& st = self->state;
  st.options = std::move(options);
  st.replicas.resize(pipelines.size());
  for (size_t r = 0; r < pipelines.size(); ++r) {
    auto& rep = st.replicas[r];
    for (auto& stage : pipelines[r]) rep.stages.push_back(StageSlot{stage.layers, std::move(stage.worker), std::nullopt, {}});
    rep.blocks = std::make_unique<BlockManager>(st.options.kv_blocks, st.options.block_size, st.options.prefix_caching,
                                                st.options.kv_windows);
    rep.scheduler = std::make_unique<Scheduler>(st.options.scheduler, *rep.blocks);
  }
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
      [self](step_atom, int32_t r) { run_step(self, static_cast<size_t>(r)); },
      [self](recover_atom, int32_t r, uint64_t n) { recovery_deadline(self, static_cast<size_t>(r), n); },
      [self](watch_atom, int32_t r, uint64_t step) { on_watch(self, static_cast<size_t>(r), step); },
      [self](health_atom) { return health(self->state); },
      [self](stats_atom) { return stats(self->state); },
      [self](terms_atom) { return terms(self->state); },
      [self](join_atom, worker_actor& worker, WorkerInfo& info) { return join(self, worker, info); },
  };
}

}  // namespace

batcher_actor spawn_batcher(caf::actor_system& sys, BatcherOptions options, std::vector<Pipeline> replicas) {
  if (replicas.empty()) replicas.emplace_back();
  return sys.spawn(batcher, std::move(options), std::move(replicas));
}

}  // namespace orzo
