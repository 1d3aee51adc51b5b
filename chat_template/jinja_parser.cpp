#include "chat_template/jinja_parser.hpp"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "chat_template/chat_template_error.hpp"
#include "chat_template/jinja_builtins.hpp"
#include "chat_template/jinja_lexer.hpp"

namespace orzo::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_body({});
    if (cur().type != TokenType::End) fail(cur(), "unexpected '" + cur().text + "'");
    return body;
  }

 private:
  // Tracks recursion in the parser; the tree it builds is never deeper than this.
  class DepthGuard {
   public:
    DepthGuard(Parser& p, const Token& at) : p_(p) {
      if (++p_.depth_ > kMaxSyntaxDepth) p_.fail(at, "template nested deeper than " + std::to_string(kMaxSyntaxDepth) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };

  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw ChatTemplateError(std::to_string(at.line) + ":" + std::to_string(at.col) + ": " + what);
  }

  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TokenType::Name && cur().text == name; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::End: return "end of template";
      case TokenType::BlockEnd: return "end of statement block";
      case TokenType::VariableEnd: return "end of print statement";
      case TokenType::Text: return "template text";
      case TokenType::String: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(cur(), std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail(cur(), "expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) fail(cur(), "expected end of statement block, got " + describe(cur()));
    next();
  }

  // Left-deep chains (a+b+c..., a.b.c..., x|f|g...) grow the tree without recursing in the
  // parser, so depth is tracked per node as well.
  void add(Expr& parent, ExprPtr child) {
    if (child) {
      parent.constant = parent.constant && child->constant;
      parent.depth = std::max(parent.depth, child->depth + 1);
      if (parent.depth > kMaxSyntaxDepth) {
        throw ChatTemplateError(std::to_string(parent.line) + ":" + std::to_string(parent.col) + ": expression nested deeper than " +
                                std::to_string(kMaxSyntaxDepth) + " levels");
      }
    }
    parent.children.push_back(std::move(child));
  }

  ExprPtr node(ExprKind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->constant = kind != ExprKind::Name && kind != ExprKind::Call;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  StmtPtr stmt(StmtKind kind, const Token& at) const {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  // Statements until a block tag whose name is in `end_tags` (left unconsumed, pointing at the name).
  Body parse_body(std::initializer_list<const char*> end_tags) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::End) {
        if (end_tags.size() > 0) fail(t, "unexpected end of template, expected '" + std::string(*end_tags.begin()) + "'");
        return body;
      }
      if (t.type == TokenType::Text) {
        auto s = stmt(StmtKind::Text, t);
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.type == TokenType::VariableBegin) {
        next();
        auto s = stmt(StmtKind::Output, t);
        s->exprs.push_back(parse_tuple());
        if (cur().type != TokenType::VariableEnd) fail(cur(), "expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::BlockBegin) {
        const Token& name = peek();
        if (name.type != TokenType::Name) fail(name, "expected a tag name, got " + describe(name));
        for (const char* end : end_tags) {
          if (name.text == end) {
            next();
            return body;
          }
        }
        next();
        parse_statement(body);
      } else {
        fail(t, "unexpected " + describe(t));
      }
    }
  }

  void parse_statement(Body& body) {
    const Token& tag = cur();
    const std::string name = tag.text;
    DepthGuard guard(*this, tag);
    next();
    if (name == "if") {
      body.push_back(parse_if(tag));
    } else if (name == "for") {
      body.push_back(parse_for(tag));
    } else if (name == "set") {
      body.push_back(parse_set(tag));
    } else if (name == "macro") {
      body.push_back(parse_macro(tag));
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(tag, "'" + name + "' outside of a loop");
      expect_block_end();
      body.push_back(stmt(name == "break" ? StmtKind::Break : StmtKind::Continue, tag));
    } else if (name == "generation") {
      // HF's {% generation %} only marks assistant text for masks; the text renders unchanged.
      expect_block_end();
      Body inner = parse_body({"endgeneration"});
      next();
      expect_block_end();
      for (auto& s : inner) body.push_back(std::move(s));
    } else if (name.rfind("end", 0) == 0 || name == "elif" || name == "else") {
      fail(tag, "unexpected tag '" + name + "'");
    } else {
      fail(tag, "unsupported tag '" + name + "'");
    }
  }

  StmtPtr parse_if(const Token& tag) {
    auto s = stmt(StmtKind::If, tag);
    s->exprs.push_back(parse_or());
    expect_block_end();
    while (true) {
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      const std::string which = next().text;
      if (which == "elif") {
        s->exprs.push_back(parse_or());
        expect_block_end();
      } else if (which == "else") {
        expect_block_end();
        s->bodies.push_back(parse_body({"endif"}));
        next();
        expect_block_end();
        return s;
      } else {
        expect_block_end();
        s->bodies.emplace_back();
        return s;
      }
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = accept_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(const Token& tag) {
    auto s = stmt(StmtKind::For, tag);
    s->targets = parse_targets();
    if (!accept_name("in")) fail(cur(), "expected 'in', got " + describe(cur()));
    s->exprs.push_back(parse_tuple(false));
    s->exprs.push_back(accept_name("if") ? parse_expression() : nullptr);
    if (is_name("recursive")) fail(cur(), "unsupported: recursive for loops");
    expect_block_end();
    ++loop_depth_;
    s->bodies.push_back(parse_body({"else", "endfor"}));
    --loop_depth_;
    if (next().text == "else") {
      expect_block_end();
      s->bodies.push_back(parse_body({"endfor"}));
      next();
    } else {
      s->bodies.emplace_back();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set(const Token& tag) {
    if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == ".") {
      auto s = stmt(StmtKind::SetAttr, tag);
      s->targets.push_back(next().text);
      next();
      s->targets.push_back(expect_name());
      expect_op("=");
      s->exprs.push_back(parse_tuple());
      expect_block_end();
      return s;
    }
    std::vector<std::string> targets = parse_targets();
    if (accept_op("=")) {
      auto s = stmt(StmtKind::Set, tag);
      s->targets = std::move(targets);
      s->exprs.push_back(parse_tuple());
      expect_block_end();
      return s;
    }
    if (targets.size() != 1) fail(cur(), "expected '=' after several assignment targets");
    if (is_op("|")) fail(cur(), "unsupported: filters on a block set");
    expect_block_end();
    auto s = stmt(StmtKind::SetBlock, tag);
    s->targets = std::move(targets);
    s->bodies.push_back(parse_body({"endset"}));
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro(const Token& tag) {
    auto s = stmt(StmtKind::Macro, tag);
    s->targets.push_back(expect_name());
    expect_op("(");
    bool seen_default = false;
    while (!is_op(")")) {
      if (s->targets.size() > 1) expect_op(",");
      if (is_op(")")) break;
      s->targets.push_back(expect_name());
      if (accept_op("=")) {
        s->exprs.push_back(parse_expression());
        seen_default = true;
      } else {
        if (seen_default) fail(cur(), "non-default macro argument follows default argument");
        s->exprs.push_back(nullptr);
      }
    }
    next();
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->bodies.push_back(parse_body({"endmacro"}));
    loop_depth_ = saved_loops;
    next();
    if (cur().type == TokenType::Name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  // ---- expressions, lowest precedence first (as jinja2.parser) ----

  ExprPtr parse_tuple(bool with_condexpr = true) {
    const Token& at = cur();
    ExprPtr first = with_condexpr ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto t = node(ExprKind::Tuple, at);
    add(*t, std::move(first));
    while (accept_op(",")) {
      if (!starts_expression()) break;
      add(*t, with_condexpr ? parse_expression() : parse_or());
    }
    return t;
  }

  bool starts_expression() const {
    const Token& t = cur();
    if (t.type == TokenType::Name) return t.text != "in" && t.text != "if" && t.text != "recursive";
    if (t.type == TokenType::Operator) return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" || t.text == "+";
    return t.type == TokenType::String || t.type == TokenType::Integer || t.type == TokenType::Float;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(*this, cur());
    const Token& at = cur();
    ExprPtr e = parse_or();
    while (accept_name("if")) {
      auto c = node(ExprKind::CondExpr, at);
      add(*c, parse_or());
      add(*c, std::move(e));
      add(*c, accept_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind kind, const Token& at, ExprPtr left, ExprPtr right, std::string op = "") {
    auto e = node(kind, at);
    e->name = std::move(op);
    add(*e, std::move(left));
    add(*e, std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    const Token& at = cur();
    ExprPtr left = parse_and();
    while (accept_name("or")) left = binary(ExprKind::Or, at, std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    const Token& at = cur();
    ExprPtr left = parse_not();
    while (accept_name("and")) left = binary(ExprKind::And, at, std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    const Token& at = cur();
    if (accept_name("not")) {
      DepthGuard guard(*this, at);
      auto e = node(ExprKind::Not, at);
      add(*e, parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TokenType::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprKind::Compare, at);
        add(*cmp, std::move(first));
      }
      cmp->ops.push_back(op);
      add(*cmp, parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    const Token& at = cur();
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(ExprKind::Binary, at, std::move(left), parse_concat(), op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const Token& at = cur();
    ExprPtr left = parse_math2();
    while (accept_op("~")) left = binary(ExprKind::Binary, at, std::move(left), parse_math2(), "~");
    return left;
  }

  ExprPtr parse_math2() {
    const Token& at = cur();
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(ExprKind::Binary, at, std::move(left), parse_pow(), op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    const Token& at = cur();
    ExprPtr left = parse_unary(true);
    while (accept_op("**")) left = binary(ExprKind::Binary, at, std::move(left), parse_unary(true), "**");
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    const Token& at = cur();
    DepthGuard guard(*this, at);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool neg = next().text == "-";
      e = node(neg ? ExprKind::Neg : ExprKind::Pos, at);
      add(*e, parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::Name: {
        next();
        if (t.text == "true" || t.text == "True") return literal(t, Value::boolean(true));
        if (t.text == "false" || t.text == "False") return literal(t, Value::boolean(false));
        if (t.text == "none" || t.text == "None") return literal(t, Value::none());
        auto e = node(ExprKind::Name, t);
        e->name = t.text;
        return e;
      }
      case TokenType::String: {
        std::string s;
        while (cur().type == TokenType::String) s += next().text;
        return literal(t, Value::string(std::move(s)));
      }
      case TokenType::Integer: next(); return literal(t, Value::integer(t.int_value));
      case TokenType::Float: next(); return literal(t, Value::number(t.float_value));
      case TokenType::Operator:
        if (t.text == "(") {
          next();
          if (accept_op(")")) return node(ExprKind::Tuple, t);
          ExprPtr inner = parse_expression();
          if (is_op(",")) {
            auto tuple = node(ExprKind::Tuple, t);
            add(*tuple, std::move(inner));
            while (accept_op(",")) {
              if (is_op(")")) break;
              add(*tuple, parse_expression());
            }
            inner = std::move(tuple);
          }
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          next();
          auto list = node(ExprKind::List, t);
          while (!accept_op("]")) {
            if (!list->children.empty()) expect_op(",");
            if (accept_op("]")) break;
            add(*list, parse_expression());
          }
          return list;
        }
        if (t.text == "{") {
          next();
          auto dict = node(ExprKind::Dict, t);
          while (!accept_op("}")) {
            if (!dict->children.empty()) expect_op(",");
            if (accept_op("}")) break;
            add(*dict, parse_expression());
            expect_op(":");
            add(*dict, parse_expression());
          }
          return dict;
        }
        break;
      default: break;
    }
    fail(t, "unexpected " + describe(t));
  }

  ExprPtr literal(const Token& at, Value v) const {
    auto e = node(ExprKind::Literal, at);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const Token& at = cur();
      if (accept_op(".")) {
        if (cur().type == TokenType::Integer) {
          auto item = node(ExprKind::Getitem, at);
          add(*item, std::move(e));
          add(*item, literal(cur(), Value::integer(cur().int_value)));
          next();
          e = std::move(item);
        } else {
          auto attr = node(ExprKind::Getattr, at);
          attr->name = expect_name();
          add(*attr, std::move(e));
          e = std::move(attr);
        }
      } else if (accept_op("[")) {
        e = parse_subscript(std::move(e), at);
      } else if (is_op("(")) {
        e = parse_call(std::move(e), ExprKind::Call, at);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object, const Token& at) {
    ExprPtr parts[3];
    int colons = 0;
    if (!is_op(":")) parts[0] = parse_expression();
    while (colons < 2 && accept_op(":")) {
      ++colons;
      if (!is_op(":") && !is_op("]")) parts[colons] = parse_expression();
    }
    if (is_op(",")) fail(cur(), "unsupported: tuple subscripts");
    expect_op("]");
    auto e = node(colons == 0 ? ExprKind::Getitem : ExprKind::Slice, at);
    add(*e, std::move(object));
    add(*e, std::move(parts[0]));
    if (colons > 0) {
      add(*e, std::move(parts[1]));
      add(*e, std::move(parts[2]));
    }
    return e;
  }

  // Arguments in parentheses, appended to e->children; keyword names into e->kwarg_names.
  void parse_arguments(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!accept_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (accept_op(")")) break;
      if (is_op("*") || is_op("**")) fail(cur(), "unsupported: *args and **kwargs in calls");
      if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        e.kwarg_names.push_back(next().text);
        next();
        add(e, parse_expression());
      } else {
        if (!e.kwarg_names.empty()) fail(cur(), "positional argument follows keyword argument");
        add(e, parse_expression());
      }
    }
  }

  ExprPtr parse_call(ExprPtr callee, ExprKind kind, const Token& at) {
    auto e = node(kind, at);
    add(*e, std::move(callee));
    parse_arguments(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      const Token& at = cur();
      if (accept_op("|")) {
        const Token& name_tok = cur();
        auto f = node(ExprKind::Filter, at);
        f->name = expect_name();
        if (!has_filter(f->name)) fail(name_tok, "unsupported filter '" + f->name + "'");
        // jinja2 never folds the filters that take the render context.
        static const char* const kContextFilters[] = {"map", "select", "reject", "selectattr", "rejectattr"};
        f->constant = std::none_of(std::begin(kContextFilters), std::end(kContextFilters), [&](const char* n) { return f->name == n; });
        add(*f, std::move(e));
        if (is_op("(")) parse_arguments(*f);
        e = std::move(f);
      } else if (accept_name("is")) {
        auto t = node(ExprKind::Test, at);
        t->negated = accept_name("not");
        const Token& name_tok = cur();
        t->name = expect_name();
        if (!has_test(t->name)) fail(name_tok, "unsupported test '" + t->name + "'");
        add(*t, std::move(e));
        if (is_op("(")) {
          parse_arguments(*t);
        } else if ((cur().type == TokenType::Name || cur().type == TokenType::String || cur().type == TokenType::Integer ||
                    cur().type == TokenType::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail(cur(), "cannot chain multiple tests with 'is'");
          add(*t, parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e), ExprKind::Call, at);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace orzo::jinja
