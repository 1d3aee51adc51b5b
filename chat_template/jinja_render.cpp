#include "chat_template/jinja_render.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "chat_template/chat_template_error.hpp"
#include "chat_template/jinja_builtins.hpp"
#include "chat_template/jinja_operators.hpp"

namespace orzo::jinja {
namespace {

// An evaluation error already prefixed with the line:col of the innermost expression that failed.
class PositionedError : public ChatTemplateError {
 public:
  using ChatTemplateError::ChatTemplateError;
};

class Renderer {
 public:
  explicit Renderer(const RenderLimits& limits) : budget_(limits) {}
  ~Renderer() {
    for (const auto& ns : namespaces_) ns->attrs.clear();
  }
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string run(const Body& body, const std::vector<std::pair<std::string, Value>>& variables) {
    for (auto& [name, value] : make_globals(budget_, namespaces_)) globals_[name] = value;
    for (const auto& [name, value] : variables) root_[name] = value;
    scopes_ = {&root_};
    std::string out;
    out_ = &out;
    exec_body(body);
    return out;
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;
  enum class Flow { Normal, Break, Continue };

  [[noreturn]] static void fail(int line, int col, const std::string& what) {
    throw PositionedError(std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  void emit(const std::string& s) {
    budget_.append_of(out_->size() + s.size(), s.size());
    *out_ += s;
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    const auto global = globals_.find(name);
    if (global != globals_.end()) return global->second;
    return Value::undefined("'" + name + "' is undefined");
  }

  void assign(const std::vector<std::string>& targets, const Value& value, int line, int col) {
    if (targets.size() == 1) {
      (*scopes_.back())[targets[0]] = value;
      return;
    }
    const std::vector<Value> items = iterate(value);
    if (items.size() != targets.size()) {
      fail(line, col, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) (*scopes_.back())[targets[i]] = items[i];
  }

  Flow exec_body(const Body& body) {
    for (const StmtPtr& s : body) {
      const Flow flow = exec(*s);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s) {
    budget_.charge(1);
    switch (s.kind) {
      case StmtKind::Text: emit(s.text); return Flow::Normal;
      case StmtKind::Output: {
        const Expr& e = *s.exprs[0];
        std::optional<Value> folded = e.constant ? fold(e) : std::nullopt;
        emit(to_str(folded ? *folded : eval(e)));
        return Flow::Normal;
      }
      case StmtKind::If:
        for (size_t i = 0; i < s.exprs.size(); ++i) {
          if (truthy(eval(*s.exprs[i]))) return exec_body(s.bodies[i]);
        }
        return exec_body(s.bodies.back());
      case StmtKind::For: return exec_for(s);
      case StmtKind::Set: assign(s.targets, eval(*s.exprs[0]), s.line, s.col); return Flow::Normal;
      case StmtKind::SetAttr: {
        const Value target = lookup(s.targets[0]);
        if (target.kind() != Kind::Object || !target.object_data()->assignable) {
          fail(s.line, s.col, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
        }
        if (s.targets[1][0] == '_') fail(s.line, s.col, "namespace attribute '" + s.targets[1] + "' may not start with an underscore");
        Value value = eval(*s.exprs[0]);
        auto& attrs = target.object_data()->attrs;
        for (auto& [name, existing] : attrs) {
          if (name == s.targets[1]) {
            existing = std::move(value);
            return Flow::Normal;
          }
        }
        budget_.list_of(attrs.size() + 1);
        attrs.emplace_back(s.targets[1], std::move(value));
        return Flow::Normal;
      }
      case StmtKind::SetBlock: {
        std::string captured;
        std::string* saved = out_;
        out_ = &captured;
        const Flow flow = exec_body(s.bodies[0]);
        out_ = saved;
        (*scopes_.back())[s.targets[0]] = Value::string(std::move(captured));
        return flow;
      }
      case StmtKind::Macro: (*scopes_.back())[s.targets[0]] = make_macro(s); return Flow::Normal;
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  // jinja2 evaluates constant expressions at compile time, through environment.getitem even for
  // slices, so there a bad literal slice gives undefined instead of an error. A failure while
  // folding leaves the expression to run time, where errors surface. Constant expressions have no
  // side effects, so evaluating one twice is safe. nullopt: not folded.
  std::optional<Value> fold(const Expr& e) {
    folding_ = true;
    try {
      Value v = eval_node(e);
      folding_ = false;
      return v;
    } catch (const ChatTemplateError&) {
      folding_ = false;
    }
    return std::nullopt;
  }

  // The optimizer only substitutes folded values that Python can write back as a literal.
  static bool has_safe_repr(const Value& v) {
    switch (v.kind()) {
      case Kind::None:
      case Kind::Bool:
      case Kind::Int:
      case Kind::Float:
      case Kind::String: return true;
      case Kind::List:
        return v.is_indexable() && std::all_of(v.items().begin(), v.items().end(), has_safe_repr);
      case Kind::Dict:
        return std::all_of(v.dict_data().entries.begin(), v.dict_data().entries.end(), [](const auto& kv) { return has_safe_repr(kv.second); });
      default: return false;
    }
  }

  Flow exec_for(const Stmt& s) {
    const Value iterable = eval(*s.exprs[0]);
    std::vector<Value> items = iterate(iterable);
    if (s.exprs[1]) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        Scope scope;
        scopes_.push_back(&scope);
        assign(s.targets, item, s.line, s.col);
        const bool keep = truthy(eval(*s.exprs[1]));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(s.bodies[1]);
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      budget_.charge(2);  // an iteration costs about two evaluation steps' time
      auto loop = std::make_shared<ObjectData>();
      loop->type_name = "LoopContext";
      const auto idx = static_cast<size_t>(i);
      loop->attrs = {
          {"index0", Value::integer(i)},
          {"index", Value::integer(i + 1)},
          {"revindex0", Value::integer(n - i - 1)},
          {"revindex", Value::integer(n - i)},
          {"first", Value::boolean(i == 0)},
          {"last", Value::boolean(i == n - 1)},
          {"length", Value::integer(n)},
          {"depth0", Value::integer(0)},
          {"depth", Value::integer(1)},
          {"previtem", i > 0 ? items[idx - 1] : Value::undefined("there is no previous item")},
          {"nextitem", i + 1 < n ? items[idx + 1] : Value::undefined("there is no next item")},
          {"cycle", Value::function("loop.cycle", [i](Args& args) {
             if (!args.keyword.empty()) throw ChatTemplateError("loop.cycle() takes no keyword arguments");
             if (args.positional.empty()) throw ChatTemplateError("loop.cycle() needs at least one item to cycle through");
             return args.positional[static_cast<size_t>(i) % args.positional.size()];
           })},
      };
      Scope scope;
      scope["loop"] = Value::object(std::move(loop));
      scopes_.push_back(&scope);
      assign(s.targets, items[idx], s.line, s.col);
      const Flow flow = exec_body(s.bodies[0]);
      scopes_.pop_back();
      if (flow == Flow::Break) break;
    }
    return Flow::Normal;
  }

  Value make_macro(const Stmt& s) {
    const Stmt* def = &s;
    return Value::function(s.targets[0], [this, def](Args& args) { return call_macro(*def, args); });
  }

  Value call_macro(const Stmt& def, Args& args) {
    const std::string& name = def.targets[0];
    const size_t n_params = def.targets.size() - 1;
    if (args.positional.size() > n_params) {
      fail(def.line, def.col, "macro '" + name + "' takes not more than " + std::to_string(n_params) + " argument(s)");
    }
    if (call_depth_ >= budget_.limits().max_call_depth) {
      fail(def.line, def.col, "macro calls nested deeper than " + std::to_string(budget_.limits().max_call_depth) + " levels");
    }
    Scope scope;
    for (size_t i = 0; i < n_params; ++i) {
      const std::string& param = def.targets[i + 1];
      if (i < args.positional.size()) {
        scope[param] = args.positional[i];
      } else if (def.exprs[i]) {
        scope[param] = eval(*def.exprs[i]);
      } else {
        scope[param] = Value::undefined("parameter '" + param + "' of macro '" + name + "' was not provided");
      }
    }
    for (const auto& [kw, value] : args.keyword) {
      bool known = false;
      for (size_t i = 0; i < n_params; ++i) {
        if (def.targets[i + 1] != kw) continue;
        if (i < args.positional.size()) fail(def.line, def.col, "macro '" + name + "' got multiple values for argument '" + kw + "'");
        scope[kw] = value;
        known = true;
      }
      if (!known) fail(def.line, def.col, "macro '" + name + "' takes no keyword argument '" + kw + "'");
    }
    std::vector<Scope*> saved_scopes = {&root_, &scope};
    std::swap(saved_scopes, scopes_);
    std::string captured;
    std::string* saved_out = out_;
    out_ = &captured;
    ++call_depth_;
    try {
      exec_body(def.bodies[0]);
    } catch (...) {
      --call_depth_;
      out_ = saved_out;
      std::swap(saved_scopes, scopes_);
      throw;
    }
    --call_depth_;
    out_ = saved_out;
    std::swap(saved_scopes, scopes_);
    return Value::string(std::move(captured));
  }

  Args eval_args(const Expr& e, size_t first) {
    Args args;
    const size_t n_kw = e.kwarg_names.size();
    const size_t n_pos = e.children.size() - first - n_kw;
    for (size_t i = 0; i < n_pos; ++i) args.positional.push_back(eval(*e.children[first + i]));
    for (size_t i = 0; i < n_kw; ++i) args.keyword.emplace_back(e.kwarg_names[i], eval(*e.children[first + n_pos + i]));
    return args;
  }

  Value eval_or_none(const ExprPtr& e) { return e ? eval(*e) : Value::none(); }

  Value eval(const Expr& e) {
    budget_.charge(1);
    if (e.constant && !folding_ && e.kind != ExprKind::Literal) {
      std::optional<Value> folded = fold(e);
      if (folded && has_safe_repr(*folded)) return *folded;
    }
    try {
      return eval_node(e);
    } catch (const ChatTemplateRaised&) {
      throw;
    } catch (const PositionedError&) {
      throw;
    } catch (const ChatTemplateError& err) {
      throw PositionedError(std::to_string(e.line) + ":" + std::to_string(e.col) + ": " + err.what());
    }
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Literal: return e.literal;
      case ExprKind::Name: return lookup(e.name);
      case ExprKind::List:
      case ExprKind::Tuple: {
        std::vector<Value> items;
        for (const ExprPtr& c : e.children) items.push_back(eval(*c));
        budget_.list_of(items.size());
        return Value::list(std::move(items), e.kind == ExprKind::Tuple ? Sequence::Tuple : Sequence::List);
      }
      case ExprKind::Dict: {
        std::vector<std::pair<std::string, Value>> entries;
        for (size_t i = 0; i < e.children.size(); i += 2) {
          const Value key = eval(*e.children[i]);
          if (!key.is_string()) throw ChatTemplateError("unsupported: dict keys other than strings (got " + type_name(key) + ")");
          entries.emplace_back(key.str(), eval(*e.children[i + 1]));
        }
        budget_.list_of(entries.size());
        return Value::dict(std::move(entries));
      }
      case ExprKind::Getattr: return get_attr(eval(*e.children[0]), e.name, budget_);
      case ExprKind::Getitem: {
        const Value object = eval(*e.children[0]);
        return get_item(object, eval(*e.children[1]), budget_);
      }
      case ExprKind::Slice: {
        const Value object = eval(*e.children[0]);
        const Value start = eval_or_none(e.children[1]);
        const Value stop = eval_or_none(e.children[2]);
        const Value step = eval_or_none(e.children[3]);
        try {
          return slice(object, start, stop, step, budget_);
        } catch (const ChatTemplateError& err) {
          if (folding_ && !object.is_undefined()) return Value::undefined(err.what());
          throw;
        }
      }
      case ExprKind::Call: {
        const Value callee = eval(*e.children[0]);
        Args args = eval_args(e, 1);
        if (callee.is_undefined()) fail_undefined(callee);
        if (callee.kind() != Kind::Function) throw ChatTemplateError("'" + type_name(callee) + "' object is not callable");
        return callee.function_data().call(args);
      }
      case ExprKind::Filter: {
        const Value input = eval(*e.children[0]);
        Args args = eval_args(e, 1);
        return apply_filter(e.name, input, args, budget_);
      }
      case ExprKind::Test: {
        const Value input = eval(*e.children[0]);
        Args args = eval_args(e, 1);
        return Value::boolean(apply_test(e.name, input, args) != e.negated);
      }
      case ExprKind::Neg:
      case ExprKind::Pos: return negate(eval(*e.children[0]), e.kind == ExprKind::Neg);
      case ExprKind::Not: return Value::boolean(!truthy(eval(*e.children[0])));
      case ExprKind::Binary: {
        const Value left = eval(*e.children[0]);
        return binary_op(e.name, left, eval(*e.children[1]), budget_);
      }
      case ExprKind::And: {
        Value left = eval(*e.children[0]);
        return truthy(left) ? eval(*e.children[1]) : left;
      }
      case ExprKind::Or: {
        Value left = eval(*e.children[0]);
        return truthy(left) ? left : eval(*e.children[1]);
      }
      case ExprKind::Compare: {
        Value left = eval(*e.children[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.children[i + 1]);
          if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case ExprKind::CondExpr:
        if (truthy(eval(*e.children[0]))) return eval(*e.children[1]);
        return e.children[2] ? eval(*e.children[2]) : Value::undefined("the inline if had no else branch");
    }
    throw ChatTemplateError("internal error: unknown expression kind");
  }

  static bool compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "notin") return !contains(b, a);
    const int c = compare(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  Budget budget_;
  std::vector<std::shared_ptr<ObjectData>> namespaces_;
  Scope globals_;
  Scope root_;
  std::vector<Scope*> scopes_;
  std::string* out_ = nullptr;
  int call_depth_ = 0;
  bool folding_ = false;  // evaluating an output that jinja2 would have folded at compile time
};

}  // namespace

std::string render(const Body& body, const std::vector<std::pair<std::string, Value>>& variables, const RenderLimits& limits) {
  return Renderer(limits).run(body, variables);
}

}  // namespace orzo::jinja
