// What xgrammar says while it compiles. Its warnings mean it leaves part of
// a grammar out (an unsupported keyword, a length bound beside a pattern, a
// lookahead): the grammar cache turns them into refusals, so no constraint
// is silently dropped.
#pragma once

#include <string>
#include <vector>

namespace exactly {

// Starts collecting the warnings xgrammar logs on this thread; returns those
// collected since the last call.
std::vector<std::string> take_xgrammar_warnings();

}  // namespace exactly
