// A test fixture that loads the default model once per suite and skips its
// tests when the file is absent (scripts/test always fetches it).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/loaded_model.h"

namespace exactly {

inline std::string test_model_path() {
  if (const char* m = std::getenv("EXACTLY_MODEL")) return m;
  const char* src = std::getenv("EXACTLY_SOURCE_DIR");
  return std::string(src ? src : ".") + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class RealModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(test_model_path())) model_ = new LoadedModel(load_model(test_model_path(), false));
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "model not found at " << test_model_path();
  }
  static inline LoadedModel* model_ = nullptr;
};

}  // namespace exactly
