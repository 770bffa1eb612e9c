// Test tool: renders a chat template over a batch of contexts so the e2e test
// can compare every rendering with Python's jinja2 in one process.
//
//   render_chat_template TEMPLATE_FILE [--now YYYY-MM-DDTHH:MM:SS] < contexts.json
//
// stdin holds a JSON array of context objects (messages, add_generation_prompt,
// bos_token, eos_token, tools, ...); stdout gets a JSON array with, per context,
// {"text": rendering} or {"error": message}.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/chat_template.h"

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--now")) {
    std::cerr << "usage: render_chat_template TEMPLATE_FILE [--now YYYY-MM-DDTHH:MM:SS] < contexts.json\n";
    return 64;
  }
  std::ifstream file(argv[1], std::ios::binary);
  if (!file) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  std::stringstream text;
  text << file.rdbuf();

  exactly::ChatTemplate::Options options;
  if (argc == 4) {
    std::tm now{};
    if (std::sscanf(argv[3], "%d-%d-%dT%d:%d:%d", &now.tm_year, &now.tm_mon, &now.tm_mday, &now.tm_hour, &now.tm_min,
                    &now.tm_sec) != 6) {
      std::cerr << "bad --now value: " << argv[3] << "\n";
      return 64;
    }
    now.tm_year -= 1900;
    now.tm_mon -= 1;
    now.tm_isdst = -1;
    std::mktime(&now);  // fills in the weekday and day of the year
    options.now = now;
  }

  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  try {
    exactly::ChatTemplate chat_template = exactly::ChatTemplate::parse(text.str());
    for (const auto& context : nlohmann::ordered_json::parse(std::cin)) {
      try {
        results.push_back({{"text", chat_template.render(context, options)}});
      } catch (const exactly::Error& e) {
        results.push_back({{"error", e.what()}});
      }
    }
  } catch (const exactly::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  std::cout << results.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return 0;
}
