#include "tokenizer/jinja_eval.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_globals.h"

namespace exactly::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

// The names a body sees: its own frame's, then its parent's, and so on up
// to the builtins. A loop or `with` body's parent is the frame it runs in; a
// macro's is the template's top level, whoever calls it; a call block's
// caller() and a recursive loop's loop() run in frames whose parent is where
// the block stands, above the frames of the macro or loop that calls them.
struct Frame {
  Scope names;
  size_t parent = 0;
};

// Set while a call block or a recursive loop runs: its caller() or loop()
// refers to frames that exist only until then.
class Active {
 public:
  Active() : flag_(std::make_shared<bool>(true)) {}
  ~Active() { *flag_ = false; }
  Active(const Active&) = delete;
  Active& operator=(const Active&) = delete;
  std::shared_ptr<const bool> flag() const { return flag_; }

 private:
  std::shared_ptr<bool> flag_;
};

class Evaluator {
 public:
  Evaluator(const ValueDict& variables, const RenderOptions& options) {
    frames_.push_back({builtin_globals(options), 0});
    frames_.push_back({Scope{}, 0});
    for (const auto& [name, value] : variables.items) frames_.back().names[to_str(name)] = value;
  }

  std::string run(const Body& body) {
    WorkMeter meter(kRenderWork);
    exec_body(body);
    return std::move(out_);
  }

 private:
  // ---- scopes ----

  Value lookup(const std::string& name) const {
    for (size_t i = frames_.size() - 1;; i = frames_[i].parent) {
      auto it = frames_[i].names.find(name);
      if (it != frames_[i].names.end()) return it->second;
      if (i == 0) return Value::undefined("'" + name + "' is undefined");
    }
  }

  Scope& names() { return frames_.back().names; }

  // A frame for as long as it lives, over `parent` (by default the current one).
  class Pushed {
   public:
    explicit Pushed(Evaluator& e, Scope names = {}) : Pushed(e, e.frames_.size() - 1, std::move(names)) {}
    Pushed(Evaluator& e, size_t parent, Scope names) : e_(e) { e_.frames_.push_back({std::move(names), parent}); }
    ~Pushed() { e_.frames_.pop_back(); }
    Pushed(const Pushed&) = delete;
    Pushed& operator=(const Pushed&) = delete;

   private:
    Evaluator& e_;
  };

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
                        " deep (a macro, call block or recursive loop that calls itself without end?)");
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
      case Stmt::Kind::kMacro: names()[s.name] = make_macro(s, s.name); return Flow::kNormal;
      case Stmt::Kind::kCallBlock: exec_call_block(s); return Flow::kNormal;
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kBlock: return exec_body(s.body);
      case Stmt::Kind::kWith: {
        Scope scope;
        for (size_t i = 0; i < s.targets.size(); ++i) scope[s.targets[i]] = eval(*s.values[i]);
        Pushed frame(*this, std::move(scope));
        return exec_body(s.body);
      }
      case Stmt::Kind::kFilterBlock: {
        Value body = Value::from_string(capture(s.body));
        names()[kFilterBodyName] = body;
        Value filtered = eval(*s.expr);
        names().erase(kFilterBodyName);
        out_ += to_str(filtered);
        return Flow::kNormal;
      }
    }
    return Flow::kNormal;
  }

  void set(const Stmt& s, const Value& value) {
    if (s.target_attribute.empty()) {
      assign(s.targets, value, names());
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

  // ---- loops ----

  // Where a recursive loop's loop(items) renders its body again: over the
  // frame the `for` stands in, one level deeper.
  struct LoopSite {
    size_t parent;
    int depth;
    std::shared_ptr<const bool> active;
  };

  void exec_for(const Stmt& s) {
    Active active;
    run_loop(s, eval(*s.expr), LoopSite{frames_.size() - 1, 1, active.flag()});
  }

  void run_loop(const Stmt& s, const Value& iterable, const LoopSite& site) {
    ValueList items = iterate(iterable);
    {
      Pushed frame(*this, site.parent, {});
      if (s.loop_filter) {
        ValueList kept;
        for (const Value& item : items) {
          WorkMeter::charge(kStepWork);
          assign(s.targets, item, names());
          if (eval(*s.loop_filter).truthy()) kept.push_back(item);
        }
        items = std::move(kept);
      }
      for (size_t i = 0; i < items.size(); ++i) {
        WorkMeter::charge(kIterationWork);
        assign(s.targets, items[i], names());
        names()["loop"] = loop_value(s, items, i, site);
        if (exec_body(s.body) == Flow::kBreak) break;
      }
    }
    if (items.empty()) {
      Pushed frame(*this, site.parent, {});
      exec_body(s.else_body);
    }
  }

  Value loop_value(const Stmt& s, const ValueList& items, size_t i, const LoopSite& site) {
    auto n = static_cast<int64_t>(items.size());
    auto index = static_cast<int64_t>(i);
    auto loop = std::make_shared<ValueDict>();
    loop->set("index", Value::from_int(index + 1));
    loop->set("index0", Value::from_int(index));
    loop->set("revindex", Value::from_int(n - index));
    loop->set("revindex0", Value::from_int(n - index - 1));
    loop->set("first", Value::from_bool(i == 0));
    loop->set("last", Value::from_bool(index == n - 1));
    loop->set("length", Value::from_int(n));
    loop->set("depth", Value::from_int(site.depth));
    loop->set("depth0", Value::from_int(site.depth - 1));
    loop->set("previtem", i > 0 ? items[i - 1] : Value::undefined("'loop.previtem' is undefined"));
    loop->set("nextitem", index + 1 < n ? items[i + 1] : Value::undefined("'loop.nextitem' is undefined"));
    loop->set("cycle", Value::from_function([i](CallArgs& args) {
                if (args.positional.empty()) throw EvalError("no items for cycling given");
                return args.positional[i % args.positional.size()];
              }));
    if (!s.recursive) return Value::from_dict(std::move(*loop));
    const Stmt* stmt = &s;
    LoopSite inner{site.parent, site.depth + 1, site.active};
    return Value::new_object("LoopContext", loop, [this, stmt, inner](CallArgs& args) {
      if (!*inner.active) throw EvalError("loop() called after its recursive loop ended");
      if (args.positional.size() != 1 || !args.keyword.empty()) throw EvalError("loop() takes one iterable");
      std::string saved = std::move(out_);
      out_.clear();
      run_loop(*stmt, args.positional[0], inner);
      std::swap(saved, out_);
      return Value::from_string(std::move(saved));
    });
  }

  // ---- macros and call blocks ----

  // A macro (or a call block's caller, named "caller") whose body renders in
  // a frame over `parent`, valid while `active` holds.
  Value make_macro(const Stmt& s, const std::string& name, size_t parent = 1,
                   std::shared_ptr<const bool> active = nullptr) {
    const Stmt* macro = &s;
    return Value::from_function([this, macro, name, parent, active](CallArgs& args) {
      if (active && !*active) throw EvalError("caller() called after its call block ended");
      Scope scope = bind_arguments(*macro, name, args);
      Pushed frame(*this, parent, std::move(scope));
      return Value::from_string(capture(macro->body));
    });
  }

  Scope bind_arguments(const Stmt& macro, const std::string& name, CallArgs& args) {
    const size_t n_params = macro.params.size();
    if (args.positional.size() > n_params && !macro.takes_varargs)
      throw EvalError("macro '" + name + "' takes not more than " + std::to_string(n_params) + " argument(s)");
    Scope scope;
    ValueDict extra_keywords;
    for (const auto& [key, value] : args.keyword) {
      if (std::find(macro.params.begin(), macro.params.end(), key) != macro.params.end()) continue;
      if (key == "caller" && macro.takes_caller) {
        scope["caller"] = value;
        continue;
      }
      if (!macro.takes_kwargs) throw EvalError("macro '" + name + "' takes no keyword argument '" + key + "'");
      extra_keywords.set(key, value);
    }
    if (macro.takes_caller && !scope.count("caller")) scope["caller"] = Value::undefined("No caller defined");
    if (macro.takes_varargs)
      scope["varargs"] = Value::from_tuple(
          args.positional.size() > n_params
              ? ValueList(args.positional.begin() + static_cast<long>(n_params), args.positional.end())
              : ValueList{});
    if (macro.takes_kwargs) scope["kwargs"] = Value::from_dict(std::move(extra_keywords));
    for (size_t i = 0; i < n_params; ++i) {
      Value v = args.get(i, macro.params[i]);
      if (v.is_undefined() && macro.defaults[i]) v = eval(*macro.defaults[i]);
      if (v.is_undefined()) v = Value::undefined("'" + macro.params[i] + "' is undefined");
      scope[macro.params[i]] = v;
    }
    return scope;
  }

  // `{% call(params) f(args) %}body{% endcall %}`: f(args, caller=...) where
  // caller(params) renders the body where the block stands.
  void exec_call_block(const Stmt& s) {
    Active active;
    const Value caller = make_macro(s, "caller", frames_.size() - 1, active.flag());
    const Expr& call = *s.expr;
    const Value callee = eval(*call.children[0]);
    CallArgs args = eval_args(call);
    args.keyword.emplace_back("caller", caller);
    out_ += to_str(invoke(callee, args));
  }

  static Value invoke(const Value& callee, CallArgs& args) {
    if (!callee.function) {
      if (callee.is_undefined()) throw EvalError(callee.undefined_name);
      throw EvalError("'" + callee.type_name() + "' object is not callable");
    }
    return (*callee.function)(args);
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
          d.set(std::move(key), eval(*e.children[i + 1]));
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
        CallArgs args = eval_args(e);
        return invoke(callee, args);
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

  std::vector<Frame> frames_;  // [0] builtins, [1] template top level, then loops and macro calls
  int depth_ = 0;              // evaluations in progress, nested
  std::string out_;
};

}  // namespace

std::string render_template(const Body& body, const ValueDict& variables, const RenderOptions& options) {
  return Evaluator(variables, options).run(body);
}

}  // namespace exactly::jinja
