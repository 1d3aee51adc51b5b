#include "actors/worker.hpp"

#include "grammar/constraint.hpp"

#include "protocol/errors.hpp"
#include "runtime/batch_sampler.hpp"
#include "runtime/layer_backend.hpp"

#include <caf/all.hpp>

#include <exception>
#include <future>
#include <utility>
#include <vector>

namespace orzo {
namespace {

struct WorkerState {
  std::shared_ptr<LayerBackend> backend;
  std::string device;
  worker_actor next;                // set at spawn, or by the batcher when the next stage joins
  bool last = false;                // the stage that applies the LM head and samples
  BatchSampler sampler;             // used by the last stage only
  std::vector<float> logits;        // step scratch, grown once to the largest step
  std::vector<DrawPlan> plans;      // for a backend that samples on its device
  std::vector<SampleResult> samples;
  static inline const char* name = "orzo.worker";
};

using worker_pointer = worker_actor::stateful_pointer<WorkerState>;

// Sequences come and go before the step runs, so a step that fails leaves no stale state.
void update_sequences(WorkerState& st, StepRequest& req) {
  for (auto seq : req.released) st.sampler.release(seq);
  for (auto& s : req.started) st.sampler.start(s.seq, s.sampling, std::move(s.prompt), s.generated);
}

StepResult step_result(uint64_t step, const std::vector<SampleResult>& samples) {
  StepResult result;
  result.step = step;
  result.samples.reserve(samples.size());
  for (const auto& s : samples) {
    SampledToken t;
    t.token = s.token;
    t.logprob = f32{s.logprob};
    t.rank = s.rank;
    for (const auto& top : s.top_logprobs) t.top_logprobs.push_back(TopLogprob{top.token, f32{top.logprob}});
    result.samples.push_back(std::move(t));
  }
  return result;
}

// The last stage: forward, then one token per logit row, drawn here or on the backend's device.
StepResult last_step(WorkerState& st, StepRequest& req) {
  st.samples.clear();
  st.sampler.fill_pending(req.batch, req.seq_ids);
  if (st.backend->samples()) {
    st.sampler.plan(req.batch, req.seq_ids, st.plans);
    st.backend->forward_and_sample(req.batch, req.hidden, st.plans, st.samples);
    st.sampler.commit(st.samples);
  } else {
    // Masks not built yet are built beside the forward pass, not after it.
    std::future<void> masks;
    if (!st.sampler.masks_ready(req.batch, req.seq_ids))
      masks = std::async(std::launch::async, [&st, &req] { st.sampler.build_masks(req.batch, req.seq_ids); });
    st.backend->forward(req.batch, req.hidden, st.logits);
    if (masks.valid()) masks.get();
    if (!req.batch.logit_rows.empty()) {
      const auto vocab = static_cast<int32_t>(st.logits.size() / req.batch.logit_rows.size());
      st.sampler.sample(req.batch, req.seq_ids, st.logits.data(), vocab, st.samples);
    }
  }
  return step_result(req.step, st.samples);
}

worker_actor::behavior_type worker(worker_pointer self, std::shared_ptr<LayerBackend> backend, std::string device,
                                   worker_actor next, std::shared_ptr<grammar::ConstraintCache> constraints) {
  self->state.sampler = BatchSampler(std::move(constraints));
  self->state.backend = std::move(backend);
  self->state.device = std::move(device);
  self->state.next = std::move(next);
  self->state.last = self->state.backend->produces_logits();
  return {
      [self](StepRequest& req) -> caf::result<StepResult> {
        auto& st = self->state;
        // An exception always kills a CAF 0.17 actor: a bad step must fail its requests,
        // not the worker.
        try {
          if (!st.last && !st.next) return make_orzo_error(ErrorCode::worker_lost, st.device + ": no next stage");
          if (st.last) {
            update_sequences(st, req);
            return last_step(st, req);
          }
          st.backend->forward(req.batch, req.hidden, st.logits);
          return self->delegate(st.next, std::move(req));
        } catch (const std::exception& e) {
          return make_orzo_error(ErrorCode::step_failed, st.device + ": " + e.what());
        }
      },
      [self](describe_atom) -> WorkerInfo {
        const auto range = self->state.backend->range();
        return WorkerInfo{self->state.device, static_cast<int32_t>(range.begin), static_cast<int32_t>(range.end),
                          self->state.backend->kv_blocks(), self->state.backend->kv_windows()};
      },
      [self](chain_atom, caf::actor& following) {
        self->state.next = caf::actor_cast<worker_actor>(std::move(following));
        return caf::ok_atom::value;
      },
  };
}

}  // namespace

worker_actor spawn_worker(caf::actor_system& sys, std::unique_ptr<LayerBackend> backend, std::string device,
                          worker_actor next, WorkerThread thread, std::shared_ptr<grammar::ConstraintCache> constraints) {
  std::shared_ptr<LayerBackend> shared(std::move(backend));
  if (thread == WorkerThread::scheduler)
    return sys.spawn(worker, std::move(shared), std::move(device), std::move(next), std::move(constraints));
  return sys.spawn<caf::detached>(worker, std::move(shared), std::move(device), std::move(next), std::move(constraints));
}

}  // namespace orzo
