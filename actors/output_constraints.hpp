#pragma once
// What the sampling worker needs to hold outputs to their constraints (grammar/): the model's
// vocabulary as the bytes each token stands for, taken from its tokenizer, with the ids that
// end an output, in a cache of compiled constraints.
#include <memory>

namespace orzo {

class Tokenizer;
struct ModelConfig;
namespace grammar {
class ConstraintCache;
}

std::shared_ptr<grammar::ConstraintCache> output_constraints(const Tokenizer& tokenizer, const ModelConfig& config);

}  // namespace orzo
