// Syntax tree of a parsed Jinja template: expressions and statements.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_value.h"

namespace exactly::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,      // literal
    kName,         // name
    kList,         // children: items
    kTuple,        // children: items
    kDict,         // children: key0, value0, key1, value1, ...
    kAttribute,    // children[0].name
    kSubscript,    // children[0][children[1]]
    kSlice,        // children[0][children[1]:children[2]:children[3]], absent parts are null
    kCall,         // children[0](children[1..]); the last keyword_names.size() children are keywords
    kFilter,       // children[0] | name(children[1..]), keywords as for kCall
    kTest,         // children[0] is [not] name(children[1..])
    kNegate,       // -children[0]
    kNot,          // not children[0]
    kBinary,       // children[0] name children[1]: + - * / // % ** ~
    kAnd,
    kOr,
    kCompare,      // children[0] compare_ops[0] children[1] compare_ops[1] children[2] ...
    kConditional,  // children[1] if children[0] else children[2] (absent else: null)
  };

  Kind kind;
  Location where;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::string> keyword_names;
  std::vector<std::string> compare_ops;  // == != < <= > >= in "not in"
  bool negated = false;                  // kTest: "is not"
  int height = 1;                        // nodes on the longest path down to a leaf
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  // kBlock: a body rendered as it stands (transformers' {% generation %});
  // kFilterBlock: a body rendered, then passed through `expr`, a filter chain
  // over the name kFilterBodyName.
  // kWith: `targets` bound to `values` (evaluated outside) in a scope of the body's own.
  // kCallBlock: `expr` (a call) made with a keyword `caller`, a macro of
  // `params` and `defaults` whose body is `body`.
  enum class Kind {
    kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kBlock, kFilterBlock, kWith, kCallBlock
  };

  Kind kind;
  Location where;
  std::string text;                   // kText
  ExprPtr expr;                       // kOutput value, kSet value, kFor iterable
  std::vector<ExprPtr> conditions;    // kIf: one per branch; the else branch has none
  std::vector<Body> branches;         // kIf: conditions.size() or one more (else)
  std::vector<std::string> targets;   // kFor / kSet names; several unpack a sequence
  std::string target_attribute;       // kSet / kSetBlock: `set ns.attribute = ...`
  ExprPtr loop_filter;                // kFor: `for x in xs if cond`
  bool recursive = false;             // kFor: `for ... recursive`, whose body may call loop(items)
  Body body;                          // kFor, kSetBlock, kMacro, kCallBlock
  Body else_body;                     // kFor: rendered when nothing was iterated
  std::string name;                   // kMacro
  std::vector<std::string> params;    // kMacro, kCallBlock
  std::vector<ExprPtr> defaults;      // kMacro, kCallBlock: one per param, null when none
  std::vector<ExprPtr> values;        // kWith: one per target
  bool takes_varargs = false;         // kMacro: its body reads `varargs` (extra positional arguments)
  bool takes_kwargs = false;          // kMacro: its body reads `kwargs` (extra keyword arguments)
  bool takes_caller = false;          // kMacro: its body reads `caller` (a call block's body)
};

// The name a filter block's chain reads its rendered body from; no template can spell it.
inline constexpr const char* kFilterBodyName = "(filter body)";

// Throws exactly::Error naming the line and column of a syntax error, an
// unknown tag or an unclosed block.
Body parse_template(const std::string& source);

}  // namespace exactly::jinja
