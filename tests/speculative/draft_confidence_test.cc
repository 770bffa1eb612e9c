#include "speculative/draft_confidence.h"

#include <gtest/gtest.h>

#include <vector>

namespace exactly {
namespace {

TEST(DraftConfidence, ScaleIsAcceptedDraftsPerUnitOfExaminedConfidence) {
  DraftConfidence calibration(8.0);
  EXPECT_DOUBLE_EQ(calibration.scale(), 1.0);  // the prior: confidence taken at its word
  // Three drafts, the first two accepted: all three examined.
  calibration.record(std::vector<double>{0.9, 0.8, 0.3}, 2);
  EXPECT_DOUBLE_EQ(calibration.scale(), (8.0 + 2.0) / (8.0 + 2.0));
  // Three drafts, the first rejected: the other two were never tested.
  calibration.record(std::vector<double>{0.5, 0.99, 0.99}, 0);
  EXPECT_DOUBLE_EQ(calibration.scale(), (8.0 + 2.0) / (8.0 + 2.0 + 0.5));
  // All accepted: every draft examined, none rejected.
  calibration.record(std::vector<double>{0.25, 0.25}, 2);
  EXPECT_DOUBLE_EQ(calibration.scale(), (8.0 + 4.0) / (8.0 + 2.5 + 0.5));
}

TEST(DraftConfidence, AnOverconfidentDraftIsScaledDownAndAnUnderconfidentOneUp) {
  DraftConfidence over, under;
  for (int i = 0; i < 1000; ++i) {
    over.record(std::vector<double>{0.9}, i % 2);         // accepted half the time at 0.9
    under.record(std::vector<double>{0.3}, i % 5 != 0);  // accepted 80% of the time at 0.3
  }
  EXPECT_NEAR(over.scale(), (8.0 + 500.0) / (8.0 + 900.0), 1e-12);  // towards 0.5 / 0.9
  EXPECT_NEAR(under.scale(), (8.0 + 800.0) / (8.0 + 300.0), 1e-12);  // towards 0.8 / 0.3
  EXPECT_LT(over.scale(), 0.57);
  EXPECT_GT(under.scale(), 2.6);
}

TEST(DraftConfidenceDeathTest, MoreAcceptedThanDraftedIsAnError) {
  DraftConfidence calibration;
  EXPECT_DEATH(calibration.record(std::vector<double>{0.5}, 2), "accepted 2 of 1");
}

}  // namespace
}  // namespace exactly
