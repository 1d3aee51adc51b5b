#include "runtime/batch_sampler.hpp"

#include "grammar/grammar_error.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace orzo {

void BatchSampler::start(uint64_t seq, const SamplingParams& params, std::vector<int32_t> prompt,
                         const std::vector<int32_t>& generated) {
  const size_t prompt_len = prompt.size();
  Entry e{Sampler(params), std::move(prompt), prompt_len, std::nullopt, false};
  e.history.insert(e.history.end(), generated.begin(), generated.end());
  e.sampler.resume_at(generated.size());
  if (params.constraint.kind != OutputConstraint::Kind::none) {
    // Front ends have compiled the constraint already (check_request), so failing here means
    // this stage has no vocabulary, or the constraint needs one it lacks.
    try {
      if (constraints_) e.matcher.emplace(constraints_->get(params.constraint));
    } catch (const grammar::GrammarError&) {
    }
    // Tokens it drew once under the constraint; a dead end would have ended the sequence.
    for (int32_t token : generated)
      if (e.matcher && !e.matcher->advance(token)) e.matcher.reset();
    e.unusable = !e.matcher;
  }
  release(seq);
  constrained_ += e.matcher ? 1 : 0;
  seqs_.emplace(seq, std::move(e));
}

std::shared_ptr<const TokenMask> BatchSampler::mask_for(Entry& e, bool& refuse) const {
  refuse = e.unusable;
  if (!e.matcher || refuse) return nullptr;
  auto mask = e.matcher->mask();
  refuse = mask->allowed == 0;
  return mask;
}

void BatchSampler::release(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  constrained_ -= it->second.matcher ? 1 : 0;
  seqs_.erase(it);
}

void BatchSampler::fill_pending(ForwardBatch& batch, const std::vector<uint64_t>& seq_ids) {
  for (size_t r = 0; r < batch.tokens.size(); ++r) {
    if (batch.tokens[r] != kPendingToken) continue;
    const auto seq = static_cast<size_t>(batch.seq_index.at(r));
    if (seq >= seq_ids.size()) throw std::invalid_argument("row " + std::to_string(r) + " names no sequence");
    // No draw for this position: the step that was to draw it failed, and the batcher ends the
    // sequence and discards this row. Failing the step instead would fail its other sequences.
    auto it = seqs_.find(seq_ids[seq]);
    const bool drawn = it != seqs_.end() && it->second.drawn_at == static_cast<size_t>(batch.positions.at(r)) &&
                       it->second.drawn != kNoToken;
    batch.tokens[r] = drawn ? it->second.drawn : 0;
  }
}

BatchSampler::Entry& BatchSampler::entry(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw std::invalid_argument("no sampling state for sequence " + std::to_string(seq));
  return it->second;
}

void BatchSampler::record(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids) {
  if (seq_ids.size() != static_cast<size_t>(batch.sequences()))
    throw std::invalid_argument("a step names " + std::to_string(seq_ids.size()) + " sequences for " +
                                std::to_string(batch.sequences()) + " sequences' block tables");
  // A recomputed sequence (preempted, then readmitted) sends its rows again: writing by
  // position keeps the history exact either way.
  for (size_t r = 0; r < batch.positions.size(); ++r) {
    const auto seq = static_cast<size_t>(batch.seq_index[r]);
    if (seq >= seq_ids.size()) throw std::invalid_argument("row " + std::to_string(r) + " names no sequence");
    auto& history = entry(seq_ids[seq]).history;
    const auto pos = static_cast<size_t>(batch.positions[r]);
    if (history.size() <= pos) history.resize(pos + 1);
    history[pos] = batch.tokens[r];
  }
}

std::pair<BatchSampler::Entry*, size_t> BatchSampler::logit_row(const ForwardBatch& batch,
                                                                const std::vector<uint64_t>& seq_ids, size_t i) {
  const auto row = static_cast<size_t>(batch.logit_rows[i]);
  return {&entry(seq_ids[static_cast<size_t>(batch.seq_index[row])]), static_cast<size_t>(batch.positions[row]) + 1};
}

void BatchSampler::sample(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, float* logits,
                          int32_t vocab, std::vector<SampleResult>& out) {
  record(batch, seq_ids);
  out.clear();
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    auto [e, seen] = logit_row(batch, seq_ids, i);
    float* const row = logits + i * static_cast<size_t>(vocab);
    if (scores(*e, seen)) {
      out.push_back(e->sampler.score(row, vocab, e->history[seen], std::max(e->sampler.params().prompt_logprobs, 0)));
      continue;
    }
    bool refuse = false;
    const auto mask = mask_for(*e, refuse);
    e->drawn_at = seen;
    if (refuse) {
      e->sampler.take_step();  // the step is spent all the same: later draws stay where they were
      out.push_back(SampleResult{kNoToken, 0.0f, {}, 0});
      e->drawn = kNoToken;
      continue;
    }
    out.push_back(e->sampler.sample(row, vocab, e->history.data(), seen, mask.get()));
    e->drawn = out.back().token;
    if (e->matcher && !e->matcher->advance(out.back().token)) e->unusable = true;
  }
}

void BatchSampler::plan(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, std::vector<DrawPlan>& out) {
  record(batch, seq_ids);
  out.clear();
  planned_.clear();
  planned_draws_.clear();
  plan_masks_.clear();
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    auto [e, seen] = logit_row(batch, seq_ids, i);
    const SamplingParams& p = e->sampler.params();
    if (scores(*e, seen)) {
      out.push_back(DrawPlan{&p, e->sampler.seed(), 0, nullptr, 0, e->history[seen]});
      continue;
    }
    const size_t window = std::min(seen, static_cast<size_t>(std::max(p.penalty_window, 0)));
    DrawPlan draw{&p, e->sampler.seed(), e->sampler.take_step(), e->history.data() + (seen - window), window};
    planned_draws_.push_back({out.size(), e, seen});
    if (e->matcher || e->unusable) {
      bool refuse = false;
      auto mask = mask_for(*e, refuse);
      if (mask) draw.allowed = mask->words.data();
      planned_.push_back({out.size(), e, refuse});
      plan_masks_.push_back(std::move(mask));
    }
    out.push_back(draw);
  }
}

template <class Visit>
void BatchSampler::for_constrained_draws(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids, Visit visit) {
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    auto [e, seen] = logit_row(batch, seq_ids, i);
    if (!scores(*e, seen) && e->matcher && !e->unusable) visit(*e->matcher);
  }
}

bool BatchSampler::masks_ready(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids) {
  if (constrained_ == 0) return true;
  bool ready = true;
  for_constrained_draws(batch, seq_ids, [&](const grammar::ConstraintMatcher& m) { ready = ready && m.mask_ready(); });
  return ready;
}

void BatchSampler::build_masks(const ForwardBatch& batch, const std::vector<uint64_t>& seq_ids) {
  for_constrained_draws(batch, seq_ids, [](const grammar::ConstraintMatcher& m) { m.mask(); });
}

void BatchSampler::commit(std::vector<SampleResult>& drawn) {
  for (const Planned& p : planned_) {
    SampleResult& r = drawn.at(p.row);
    if (p.refuse) {
      r = SampleResult{kNoToken, 0.0f, {}, 0};
    } else if (!p.entry->matcher->advance(r.token)) {
      p.entry->unusable = true;
    }
  }
  for (const PlannedDraw& d : planned_draws_) {
    d.entry->drawn = drawn.at(d.row).token;
    d.entry->drawn_at = d.position;
  }
  planned_.clear();
  planned_draws_.clear();
  plan_masks_.clear();
}

}  // namespace orzo
