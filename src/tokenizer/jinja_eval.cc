#include "tokenizer/jinja_eval.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

using Scope = std::unordered_map<std::string, Value>;

class Evaluator {
 public:
  Evaluator(const ValueDict& variables, const RenderOptions& options) : options_(options) {
    scopes_.push_back(builtin_globals());
    scopes_.emplace_back();
    for (const auto& [name, value] : variables.items) scopes_.back()[name] = value;
  }

  std::string run(const Body& body) {
    WorkMeter meter(kRenderWork);
    exec_body(body);
    return std::move(out_);
  }

 private:
  // ---- scopes ----

  Value lookup(const std::string& name) const {
    // A macro sees its own scopes and the template's top level, not its caller's locals.
    for (size_t i = scopes_.size(); i-- > 0;) {
      if (i < visible_from_ && i > 1) continue;
      auto it = scopes_[i].find(name);
      if (it != scopes_[i].end()) return it->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  void assign(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
    if (targets.size() == 1) {
      scope[targets[0]] = value;
      return;
    }
    ValueList items = iterate(value);
    if (items.size() != targets.size())
      throw EvalError("cannot unpack " + std::to_string(items.size()) + " values into " +
                      std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scope[targets[i]] = items[i];
  }

  // ---- statements ----

  Flow exec_body(const Body& body) {
    for (const StmtPtr& s : body) {
      Flow flow = exec(*s);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  // Counts one level of evaluation for as long as it lives: expressions and
  // blocks nest as deep as the template's text (bounded by the parser), macro
  // calls as deep as they recurse, which this bounds.
  class Nested {
   public:
    explicit Nested(int& depth) : depth_(depth) {
      if (++depth_ > kMaxEvalDepth) {
        --depth_;
        throw EvalError("evaluation nests more than " + std::to_string(kMaxEvalDepth) +
                        " deep (a macro that calls itself without end?)");
      }
      WorkMeter::charge(kStepWork);
    }
    ~Nested() { --depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    int& depth_;
  };

  Flow exec(const Stmt& s) {
    try {
      Nested level(depth_);
      Flow flow = exec_unlocated(s);
      check_string_size(out_.size());
      return flow;
    } catch (const EvalError& e) {
      throw Error(located(s.where, e.what()), ExitCode::kBadInput);
    }
  }

  Flow exec_unlocated(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::kText: out_ += s.text; return Flow::kNormal;
      case Stmt::Kind::kOutput: out_ += to_str(eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.branches.size(); ++i)
          if (i >= s.conditions.size() || eval(*s.conditions[i]).truthy()) return exec_body(s.branches[i]);
        return Flow::kNormal;
      case Stmt::Kind::kFor: exec_for(s); return Flow::kNormal;
      case Stmt::Kind::kSet: set(s, eval(*s.expr)); return Flow::kNormal;
      case Stmt::Kind::kSetBlock: set(s, Value::from_string(capture(s.body))); return Flow::kNormal;
      case Stmt::Kind::kMacro: scopes_.back()[s.name] = make_macro(s); return Flow::kNormal;
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kBlock: return exec_body(s.body);
      case Stmt::Kind::kWith: {
        Scope scope;
        for (size_t i = 0; i < s.targets.size(); ++i) scope[s.targets[i]] = eval(*s.values[i]);
        scopes_.push_back(std::move(scope));
        const Flow flow = exec_body(s.body);
        scopes_.pop_back();
        return flow;
      }
      case Stmt::Kind::kFilterBlock: {
        Value body = Value::from_string(capture(s.body));
        scopes_.back()[kFilterBodyName] = body;
        Value filtered = eval(*s.expr);
        scopes_.back().erase(kFilterBodyName);
        out_ += to_str(filtered);
        return Flow::kNormal;
      }
    }
    return Flow::kNormal;
  }

  void set(const Stmt& s, const Value& value) {
    if (s.target_attribute.empty()) {
      assign(s.targets, value, scopes_.back());
      return;
    }
    Value ns = lookup(s.targets[0]);
    if (ns.kind != Value::Kind::kNamespace)
      throw EvalError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    // A namespace in a namespace could close a cycle that is never freed.
    if (value.holds_namespace) throw EvalError("a namespace attribute cannot hold a namespace");
    ns.dict->set(s.target_attribute, value);
  }

  std::string capture(const Body& body) {
    std::string saved = std::move(out_);
    out_.clear();
    exec_body(body);
    std::string captured = std::move(out_);
    out_ = std::move(saved);
    return captured;
  }

  void exec_for(const Stmt& s) {
    ValueList items = iterate(eval(*s.expr));
    scopes_.emplace_back();
    if (s.loop_filter) {
      ValueList kept;
      for (const Value& item : items) {
        WorkMeter::charge(kStepWork);
        assign(s.targets, item, scopes_.back());
        if (eval(*s.loop_filter).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      WorkMeter::charge(kIterationWork);
      assign(s.targets, items[i], scopes_.back());
      scopes_.back()["loop"] = loop_value(items, i);
      if (exec_body(s.body) == Flow::kBreak) break;
    }
    scopes_.pop_back();
    if (items.empty()) {
      scopes_.emplace_back();
      exec_body(s.else_body);
      scopes_.pop_back();
    }
  }

  static Value loop_value(const ValueList& items, size_t i) {
    auto n = static_cast<int64_t>(items.size());
    auto index = static_cast<int64_t>(i);
    ValueDict loop;
    loop.set("index", Value::from_int(index + 1));
    loop.set("index0", Value::from_int(index));
    loop.set("revindex", Value::from_int(n - index));
    loop.set("revindex0", Value::from_int(n - index - 1));
    loop.set("first", Value::from_bool(i == 0));
    loop.set("last", Value::from_bool(index == n - 1));
    loop.set("length", Value::from_int(n));
    loop.set("depth", Value::from_int(1));
    loop.set("depth0", Value::from_int(0));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("'loop.previtem' is undefined"));
    loop.set("nextitem", index + 1 < n ? items[i + 1] : Value::undefined("'loop.nextitem' is undefined"));
    loop.set("cycle", Value::from_function([i](CallArgs& args) {
               if (args.positional.empty()) throw EvalError("no items for cycling given");
               return args.positional[i % args.positional.size()];
             }));
    return Value::from_dict(std::move(loop));
  }

  Value make_macro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::from_function([this, macro](CallArgs& args) {
      const size_t n_params = macro->params.size();
      if (args.positional.size() > n_params && !macro->takes_varargs)
        throw EvalError("macro '" + macro->name + "' takes not more than " + std::to_string(n_params) +
                        " argument(s)");
      ValueDict extra_keywords;
      for (const auto& [key, value] : args.keyword) {
        if (std::find(macro->params.begin(), macro->params.end(), key) != macro->params.end()) continue;
        if (!macro->takes_kwargs) throw EvalError("macro '" + macro->name + "' takes no keyword argument '" + key + "'");
        extra_keywords.set(key, value);
      }
      Scope scope;
      if (macro->takes_varargs)
        scope["varargs"] = Value::from_tuple(
            args.positional.size() > n_params
                ? ValueList(args.positional.begin() + static_cast<long>(n_params), args.positional.end())
                : ValueList{});
      if (macro->takes_kwargs) scope["kwargs"] = Value::from_dict(std::move(extra_keywords));
      for (size_t i = 0; i < macro->params.size(); ++i) {
        Value v = args.get(i, macro->params[i]);
        if (v.is_undefined() && macro->defaults[i]) v = eval(*macro->defaults[i]);
        if (v.is_undefined()) v = Value::undefined("'" + macro->params[i] + "' is undefined");
        scope[macro->params[i]] = v;
      }
      size_t saved_visible = visible_from_;
      scopes_.push_back(std::move(scope));
      visible_from_ = scopes_.size() - 1;
      std::string text;
      try {
        text = capture(macro->body);
      } catch (...) {
        scopes_.pop_back();
        visible_from_ = saved_visible;
        throw;
      }
      scopes_.pop_back();
      visible_from_ = saved_visible;
      return Value::from_string(std::move(text));
    });
  }

  // ---- expressions ----

  // Every value an expression makes is counted against the render's work
  // and checked against the size limits.
  Value eval(const Expr& e) {
    try {
      Nested level(depth_);
      Value v = eval_unlocated(e);
      if (v.is_string()) {
        check_string_size(v.text.size());
        WorkMeter::charge(v.text.size());
      } else if (v.is_list()) {
        WorkMeter::charge(v.list->size() * sizeof(Value));
      }
      return v;
    } catch (const EvalError& err) {
      throw Error(located(e.where, err.what()), ExitCode::kBadInput);
    }
  }

  CallArgs eval_args(const Expr& e) {
    CallArgs args;
    size_t first_keyword = e.children.size() - e.keyword_names.size();
    for (size_t i = 1; i < first_keyword; ++i) args.positional.push_back(eval(*e.children[i]));
    for (size_t i = first_keyword; i < e.children.size(); ++i)
      args.keyword.emplace_back(e.keyword_names[i - first_keyword], eval(*e.children[i]));
    return args;
  }

  Value eval_unlocated(const Expr& e) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::kLiteral: return e.literal;
      case K::kName: return lookup(e.name);
      case K::kList:
      case K::kTuple: {
        ValueList items;
        for (const ExprPtr& c : e.children) items.push_back(eval(*c));
        return e.kind == K::kTuple ? Value::from_tuple(std::move(items)) : Value::from_list(std::move(items));
      }
      case K::kDict: {
        ValueDict d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value key = eval(*e.children[i]);
          if (!key.is_string()) throw EvalError("dict keys must be strings, got " + key.type_name());
          d.set(key.text, eval(*e.children[i + 1]));
        }
        return Value::from_dict(std::move(d));
      }
      case K::kAttribute: return get_attribute(eval(*e.children[0]), e.name);
      case K::kSubscript: return get_item(eval(*e.children[0]), eval(*e.children[1]));
      case K::kSlice: {
        auto part = [&](size_t i) { return e.children[i] ? eval(*e.children[i]) : Value::undefined(); };
        return get_slice(eval(*e.children[0]), part(1), part(2), part(3));
      }
      case K::kCall: {
        Value callee = eval(*e.children[0]);
        if (callee.kind != Value::Kind::kFunction) {
          if (callee.is_undefined()) throw EvalError(callee.undefined_name);
          throw EvalError("'" + callee.type_name() + "' object is not callable");
        }
        CallArgs args = eval_args(e);
        return (*callee.function)(args);
      }
      case K::kFilter: {
        if (!is_known_filter(e.name)) throw EvalError("no filter named '" + e.name + "'");
        Value subject = eval(*e.children[0]);
        return apply_filter(e.name, subject, eval_args(e));
      }
      case K::kTest: {
        if (!is_known_test(e.name)) throw EvalError("no test named '" + e.name + "'");
        Value subject = eval(*e.children[0]);
        return Value::from_bool(apply_test(e.name, subject, eval_args(e)) != e.negated);
      }
      case K::kNegate: return negate(eval(*e.children[0]));
      case K::kNot: return Value::from_bool(!eval(*e.children[0]).truthy());
      case K::kBinary: return binary_op(e.name, eval(*e.children[0]), eval(*e.children[1]));
      case K::kAnd: {
        Value lhs = eval(*e.children[0]);
        return lhs.truthy() ? eval(*e.children[1]) : lhs;
      }
      case K::kOr: {
        Value lhs = eval(*e.children[0]);
        return lhs.truthy() ? lhs : eval(*e.children[1]);
      }
      case K::kCompare: return Value::from_bool(eval_compare(e));
      case K::kConditional:
        if (eval(*e.children[0]).truthy()) return eval(*e.children[1]);
        return e.children[2] ? eval(*e.children[2]) : Value::undefined("conditional expression has no else");
    }
    return Value::undefined();
  }

  bool eval_compare(const Expr& e) {
    Value lhs = eval(*e.children[0]);
    for (size_t i = 0; i < e.compare_ops.size(); ++i) {
      Value rhs = eval(*e.children[i + 1]);
      const std::string& op = e.compare_ops[i];
      bool ok = op == "==" ? equals(lhs, rhs)
                : op == "!=" ? !equals(lhs, rhs)
                : op == "in" ? contains(rhs, lhs)
                : op == "not in" ? !contains(rhs, lhs)
                : op == "<" ? compare(lhs, rhs) < 0
                : op == "<=" ? compare(lhs, rhs) <= 0
                : op == ">" ? compare(lhs, rhs) > 0
                : compare(lhs, rhs) >= 0;
      if (!ok) return false;
      lhs = std::move(rhs);
    }
    return true;
  }

  // ---- globals ----

  Scope builtin_globals() {
    Scope g;
    g["range"] = Value::from_function([](CallArgs& args) {
      std::vector<int64_t> bounds;
      for (const Value& v : args.positional) {
        if (!v.is_integral()) throw EvalError("range() arguments must be integers");
        bounds.push_back(v.as_int());
      }
      if (bounds.empty() || bounds.size() > 3) throw EvalError("range expected 1 to 3 arguments");
      int64_t start = bounds.size() > 1 ? bounds[0] : 0;
      int64_t stop = bounds.size() > 1 ? bounds[1] : bounds[0];
      int64_t step = bounds.size() > 2 ? bounds[2] : 1;
      if (step == 0) throw EvalError("range() arg 3 must not be zero");
      ValueList out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 100000) throw EvalError("range too big");  // jinja2's sandbox limit
        out.push_back(Value::from_int(i));
      }
      return Value::from_list(std::move(out));
    });
    auto make_mapping = [](CallArgs& args, bool is_namespace) {
      ValueDict d;
      for (const Value& p : args.positional) {
        if (!p.is_dict()) throw EvalError("expected a mapping argument");
        for (const auto& [k, v] : p.dict->items) d.set(k, v);
      }
      for (const auto& [k, v] : args.keyword) d.set(k, v);
      return is_namespace ? Value::new_namespace(std::move(d)) : Value::from_dict(std::move(d));
    };
    g["namespace"] = Value::from_function([make_mapping](CallArgs& args) { return make_mapping(args, true); });
    g["dict"] = Value::from_function([make_mapping](CallArgs& args) { return make_mapping(args, false); });
    g["raise_exception"] = Value::from_function([](CallArgs& args) -> Value {
      throw EvalError(to_str(args.get(0, "message")));
    });
    g["strftime_now"] = Value::from_function([this](CallArgs& args) {
      std::tm now{};
      if (options_.now) {
        now = *options_.now;
      } else {
        std::time_t t = std::time(nullptr);
        localtime_r(&t, &now);
      }
      char buf[512];
      size_t n = std::strftime(buf, sizeof(buf), to_str(args.get(0, "format")).c_str(), &now);
      return Value::from_string(std::string(buf, n));
    });
    return g;
  }

  const RenderOptions& options_;
  std::vector<Scope> scopes_;  // [0] builtins, [1] template top level, then loops and macro calls
  size_t visible_from_ = 0;    // scopes below this (except 0 and 1) are a macro caller's, hidden
  int depth_ = 0;              // evaluations in progress, nested
  std::string out_;
};

}  // namespace

std::string render_template(const Body& body, const ValueDict& variables, const RenderOptions& options) {
  return Evaluator(variables, options).run(body);
}

}  // namespace exactly::jinja
