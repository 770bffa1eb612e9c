// The request fields each endpoint accepts. A field outside its endpoint's
// list is refused with 400 naming it: a client that asks for something this
// server does not do learns so, rather than getting an answer that silently
// ignored it.
#pragma once

#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_response.h"

namespace exactly::server {

// The accepted top-level fields of an endpoint, in the order the README lists them.
std::span<const std::string_view> accepted_fields(Endpoint endpoint);

// Throws RequestError naming the first field of `body` (an object) that the
// endpoint does not accept, and checks the fields whose meaning depends on
// others (best_of against n, stream_options' members).
void check_fields(Endpoint endpoint, const nlohmann::json& body);

}  // namespace exactly::server
