#pragma once
// JSON schemas (draft 2020-12, the subset real clients send) as the regular language of the
// JSON texts they accept, written compactly: at most one space after ':' and ',' and none
// elsewhere, properties in the schema's order, the optional ones free to be left out.
//
// Supported: type (one or a list), properties, required, additionalProperties (false, true
// or a schema: undeclared properties are never generated, only allowed), items, minItems,
// maxItems, enum, const, anyOf, oneOf (as anyOf), allOf of one schema, $ref into the document
// ($defs, definitions, any JSON pointer; recursion unrolled kMaxRefDepth deep), minLength,
// maxLength, pattern, format (date, time, date-time, uuid, email), minimum, maximum and their
// exclusive forms (integers exactly; numbers generated as integers or, where it cannot cross
// a bound, with a fraction), and annotations (title, description, default, ...), which change
// nothing. `strict` holds the schema to OpenAI's strict mode: every object closed
// (additionalProperties false) with every property required. Anything else that constrains
// (not, if/then/else, uniqueItems, patternProperties, ...) is GrammarError naming it and where.
#include <string>

#include "grammar/regex.hpp"

namespace orzo::grammar {

inline constexpr int kMaxRefDepth = 4;
// How deep a value of unconstrained shape (the schema {}, a json_object response) may nest.
inline constexpr int kAnyJsonDepth = 4;

// schema: the schema's JSON text. GrammarError when it is not JSON, not a schema, or uses
// what is not supported.
RegexPtr json_schema_regex(const std::string& schema, bool strict = false);

// Any JSON object (OpenAI's response_format json_object), nesting at most kAnyJsonDepth deep.
RegexPtr json_object_regex();

// Where compact JSON may hold a space (after ':' and ','): one space or none.
RegexPtr json_space();

// The language of a JSON text's string contents for `content`: what a JSON string holding
// text of that language looks like between its quotes (escapes where JSON needs them).
RegexPtr json_escaped(const RegexPtr& content);

}  // namespace orzo::grammar
