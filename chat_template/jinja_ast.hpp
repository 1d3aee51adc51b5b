#pragma once
// The syntax tree of a parsed Jinja template. Two generic node shapes (expression, statement)
// with a kind tag and child lists, rather than a class per construct: the evaluator switches on
// the kind, and adding a construct does not mean adding a type hierarchy.

#include <memory>
#include <string>
#include <vector>

#include "chat_template/jinja_value.hpp"

namespace orzo::jinja {

enum class ExprKind {
  Literal,   // literal
  Name,      // name
  List,      // children: items
  Tuple,     // children: items
  Dict,      // children: key0, value0, key1, value1, ...
  Getattr,   // children: object; name: attribute
  Getitem,   // children: object, key
  Slice,     // children: object, start, stop, step (each may be null)
  Call,      // children: callee, arguments (the last kwarg_names.size() are keyword arguments)
  Filter,    // name: filter; children: input, arguments (as Call)
  Test,      // name: test; children: input, arguments (as Call); negated
  Neg,       // children: operand
  Pos,       // children: operand
  Not,       // children: operand
  Binary,    // name: operator (+ - * / // % ** ~); children: left, right
  And,       // children: left, right
  Or,        // children: left, right
  Compare,   // children: first, then one operand per entry of ops (chained like Python)
  CondExpr,  // children: condition, then, else (else may be null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;
  std::vector<std::unique_ptr<Expr>> children;
  std::vector<std::string> kwarg_names;
  std::vector<std::string> ops;  // Compare: == != < <= > >= in notin
  bool negated = false;
  int depth = 1;  // height of this subtree
  // No variables, calls or context-dependent filters below: jinja2 evaluates it at compile time.
  bool constant = true;
};
using ExprPtr = std::unique_ptr<Expr>;

enum class StmtKind {
  Text,      // text
  Output,    // exprs: value
  If,        // exprs: one condition per branch; bodies: one per branch, plus the else body
  For,       // targets: loop variables; exprs: iterable, filter (may be null); bodies: body, else body
  Set,       // targets: names (several: tuple unpacking); exprs: value
  SetAttr,   // targets: object name, attribute; exprs: value
  SetBlock,  // targets: name; bodies: body whose output becomes the value
  Macro,     // targets: name, then parameter names; exprs: parameter defaults (null: required); bodies: body
  Break,
  Continue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind;
  int line = 0;
  int col = 0;
  std::string text;
  std::vector<std::string> targets;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
};

}  // namespace orzo::jinja
