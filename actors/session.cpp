#include "actors/session.hpp"

#include "text/detokenizer.hpp"
#include "text/stop_matcher.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <caf/all.hpp>

#include <exception>
#include <optional>
#include <utility>

namespace orzo {
namespace {

struct SessionState {
  batcher_actor batcher;
  std::shared_ptr<const Tokenizer> tokenizer;
  SessionRequest request;
  client_actor client;
  SessionCallbacks callbacks;
  std::optional<Detokenizer> detokenizer;
  std::optional<StopMatcher> stops;
  std::string matched_stop;   // the stop string that ended the output, once one has
  bool stopping = false;      // asked the batcher to stop; its tokens no longer count
  bool done = false;
  static inline const char* name = "orzo.session";
};

using session_pointer = session_actor::stateful_pointer<SessionState>;

void emit(session_pointer self, TextChunk chunk) {
  auto& st = self->state;
  if (st.client)
    self->send(st.client, std::move(chunk));
  else if (st.callbacks.on_text)
    st.callbacks.on_text(chunk);
}

void complete(session_pointer self, Completion done) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  if (st.client)
    self->send(st.client, std::move(done));
  else if (st.callbacks.on_done)
    st.callbacks.on_done(done);
  // The monitor lives in the batcher, not here: left in place, it would hold this actor's
  // memory (its control block, allocated with it) for as long as the batcher runs.
  if (st.batcher) self->demonitor(st.batcher.address());
  self->quit();
}

Completion completion(const SessionState& st, FinishReason reason, ErrorCode error, std::string message, Usage usage) {
  Completion c;
  c.request_id = st.request.id;
  c.reason = reason;
  c.error = error;
  c.message = std::move(message);
  c.usage = usage;
  c.stop = st.matched_stop;
  return c;
}

// Text through the stop matcher: what may be shown now. Sets `stopping` on a match.
std::string release(session_pointer self, std::string_view text) {
  auto& st = self->state;
  if (!st.stops) return std::string(text);
  auto r = st.stops->push(text);
  std::string out(r.text);
  if (r.stopped) {
    st.stopping = true;
    st.matched_stop = st.request.stop[static_cast<size_t>(st.stops->matched())];
    self->send<caf::message_priority::high>(st.batcher, stop_atom::value, st.request.id);
  }
  return out;
}

void on_token(session_pointer self, TokenEvent& ev) {
  auto& st = self->state;
  if (st.stopping || st.done) return;
  TextChunk chunk;
  chunk.request_id = st.request.id;
  chunk.tokens.push_back(ev.token);
  if (st.request.sampling.logprobs || st.request.sampling.top_logprobs > 0) {
    chunk.logprobs.push_back(ev.logprob);
    chunk.top_logprobs.push_back(std::move(ev.top_logprobs));
  }
  if (st.detokenizer) chunk.text = release(self, st.detokenizer->push(ev.token));
  emit(self, std::move(chunk));
}

void on_scores(session_pointer self, PromptScoresEvent& ev) {
  auto& st = self->state;
  if (st.stopping || st.done) return;
  TextChunk chunk;
  chunk.request_id = st.request.id;
  chunk.prompt_scores = std::move(ev.scores);
  emit(self, std::move(chunk));
}

void on_finished(session_pointer self, FinishedEvent& ev) {
  auto& st = self->state;
  if (st.stopping) {
    // The batcher reports our own stop as a cancellation; the client hears why it stopped.
    return complete(self, completion(st, FinishReason::stop, ErrorCode::none, {}, ev.usage));
  }
  if (st.detokenizer) {
    std::string tail = release(self, st.detokenizer->finish());
    if (!st.stopping && st.stops) tail += st.stops->finish();
    if (!tail.empty()) {
      TextChunk chunk;
      chunk.request_id = st.request.id;
      chunk.text = std::move(tail);
      emit(self, std::move(chunk));
    }
    if (st.stopping) ev.reason = FinishReason::stop;
  }
  complete(self, completion(st, ev.reason, ev.error, std::move(ev.message), ev.usage));
}

session_actor::behavior_type session(session_pointer self, batcher_actor batcher,
                                     std::shared_ptr<const Tokenizer> tokenizer, SessionRequest request,
                                     client_actor client, SessionCallbacks callbacks) {
  auto& st = self->state;
  st.batcher = std::move(batcher);
  st.tokenizer = std::move(tokenizer);
  st.request = std::move(request);
  st.client = std::move(client);
  st.callbacks = std::move(callbacks);
  GenerationRequest gen{st.request.id, st.request.prompt_ids, st.request.sampling, st.request.limits,
                        st.request.priority};
  try {
    if (st.tokenizer) {
      // The completion continues its prompt: decoded on its own, a SentencePiece text would
      // lose the space its first word begins with ("The little dog" + "was").
      st.detokenizer.emplace(st.tokenizer->decode_table(), st.request.skip_special_tokens);
      st.detokenizer->continue_after(st.request.prompt_ids);
    }
    if (!st.request.stop.empty()) st.stops.emplace(st.request.stop, st.request.include_stop);
  } catch (const std::exception& e) {
    complete(self, completion(st, FinishReason::error, ErrorCode::invalid_request, e.what(), Usage{}));
    return {[](PromptScoresEvent&) {}, [](TokenEvent&) {}, [](FinishedEvent&) {}, [](cancel_atom) {}, [](pause_atom) {},
            [](resume_atom) {}};
  }
  self->monitor(st.batcher);
  self->set_down_handler([self](caf::down_msg&) {
    complete(self, completion(self->state, FinishReason::error, ErrorCode::batcher_lost, "the batcher is gone", Usage{}));
  });
  self->send(st.batcher, register_atom::value, std::move(gen), caf::actor_cast<session_actor>(self));
  return {
      [self](PromptScoresEvent& ev) { on_scores(self, ev); },
      [self](TokenEvent& ev) { on_token(self, ev); },
      [self](FinishedEvent& ev) { on_finished(self, ev); },
      [self](cancel_atom) {
        self->send<caf::message_priority::high>(self->state.batcher, stop_atom::value, self->state.request.id);
      },
      [self](pause_atom) { self->send(self->state.batcher, pause_atom::value, self->state.request.id); },
      [self](resume_atom) { self->send(self->state.batcher, resume_atom::value, self->state.request.id); },
  };
}

}  // namespace

session_actor spawn_session(caf::actor_system& sys, batcher_actor batcher, std::shared_ptr<const Tokenizer> tokenizer,
                            SessionRequest request, client_actor client) {
  return sys.spawn(session, std::move(batcher), std::move(tokenizer), std::move(request), std::move(client),
                   SessionCallbacks{});
}

session_actor spawn_session(caf::actor_system& sys, batcher_actor batcher, std::shared_ptr<const Tokenizer> tokenizer,
                            SessionRequest request, SessionCallbacks callbacks) {
  return sys.spawn(session, std::move(batcher), std::move(tokenizer), std::move(request), client_actor{},
                   std::move(callbacks));
}

}  // namespace orzo
