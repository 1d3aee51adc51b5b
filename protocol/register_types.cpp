#include "protocol/register_types.hpp"

#include "protocol/errors.hpp"
#include "protocol/interfaces.hpp"

#include <caf/all.hpp>

namespace orzo {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<GenerationRequest>("orzo.generation_request");
  cfg.add_message_type<TokenEvent>("orzo.token_event");
  cfg.add_message_type<PromptScoresEvent>("orzo.prompt_scores_event");
  cfg.add_message_type<FinishedEvent>("orzo.finished_event");
  cfg.add_message_type<StepRequest>("orzo.step_request");
  cfg.add_message_type<StepResult>("orzo.step_result");
  cfg.add_message_type<WorkerInfo>("orzo.worker_info");
  cfg.add_message_type<StageTerms>("orzo.stage_terms");
  cfg.add_message_type<ModelHealth>("orzo.model_health");
  cfg.add_message_type<BatcherStats>("orzo.batcher_stats");
  cfg.add_message_type<TextChunk>("orzo.text_chunk");
  cfg.add_message_type<Completion>("orzo.completion");
  cfg.add_message_type<session_actor>("orzo.session_actor");
  cfg.add_message_type<batcher_actor>("orzo.batcher_actor");
  cfg.add_message_type<worker_actor>("orzo.worker_actor");
  cfg.add_message_type<client_actor>("orzo.client_actor");
  cfg.add_error_category(orzo_error_category, [](uint8_t code, caf::atom_value, const caf::message& context) {
    std::string out = "orzo.";
    out += to_string(static_cast<ErrorCode>(code));
    if (auto message = error_message(caf::error(code, orzo_error_category, context)); !message.empty())
      out += ": " + message;
    return out;
  });
}

}  // namespace orzo
