#include "actors/output_constraints.hpp"

#include "grammar/constraint.hpp"

#include "runtime/model_config.hpp"
#include "text/tokenizer/tokenizer.hpp"

#include <algorithm>

namespace orzo {

std::shared_ptr<grammar::ConstraintCache> output_constraints(const Tokenizer& tokenizer, const ModelConfig& config) {
  const DecodeTable& table = tokenizer.decode_table();
  std::vector<int32_t> eos = config.eos_token_ids;
  for (int32_t id : tokenizer.eos_ids())
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  auto vocab = std::make_shared<const grammar::Vocabulary>(table.bytes, table.special, std::move(eos),
                                                           static_cast<int32_t>(config.vocab_size));
  return std::make_shared<grammar::ConstraintCache>(std::move(vocab));
}

}  // namespace orzo
