#pragma once
// JSON schemas (draft 2020-12, the subset real clients send) as the grammar of the JSON texts
// they accept (a regular language unless a $ref recurs or a value may take any shape), written compactly: at most one space after ':' and ',' and none
// elsewhere, properties in the schema's order, the optional ones free to be left out.
//
// Supported: type (one or a list), properties, required, additionalProperties (false, true
// or a schema: undeclared properties are never generated, only allowed), items, minItems,
// maxItems, enum, const, anyOf, oneOf (as anyOf), allOf of one schema, $ref into the document
// ($defs, definitions, any JSON pointer; recursive ones to any depth), minLength,
// maxLength, pattern, format (date, time, date-time, uuid, email), minimum, maximum and their
// exclusive forms (integers exactly; numbers generated as integers or, where it cannot cross
// a bound, with a fraction), and annotations (title, description, default, ...), which change
// nothing. `strict` holds the schema to OpenAI's strict mode: every object closed
// (additionalProperties false) with every property required. Anything else that constrains
// (not, if/then/else, uniqueItems, patternProperties, ...) is GrammarError naming it and where.
#include <string>

#include "grammar/grammar.hpp"

namespace orzo::grammar {

// schema: the schema's JSON text. GrammarError when it is not JSON, not a schema, or uses
// what is not supported. The whole output: the value, a space allowed around it.
Grammar json_schema_grammar(const std::string& schema, bool strict = false);
// The schema's value alone, its $refs and any-shape values made rules of `grammar`.
RegexPtr json_schema_value(const std::string& schema, bool strict, Grammar& grammar);

// Any JSON object (OpenAI's response_format json_object), nested as deep as it likes.
Grammar json_object_grammar();
RegexPtr json_object_value(Grammar& grammar);
// Any JSON value: a rule of `grammar`, added on first use.
RegexPtr any_json_value(Grammar& grammar);

// Where compact JSON may hold a space (after ':' and ','): one space or none.
RegexPtr json_space();

// The language of a JSON text's string contents for `content`: what a JSON string holding
// text of that language looks like between its quotes (escapes where JSON needs them).
RegexPtr json_escaped(const RegexPtr& content);

}  // namespace orzo::grammar
