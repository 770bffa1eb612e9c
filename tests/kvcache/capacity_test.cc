#include "kvcache/capacity.h"

#include <gtest/gtest.h>

namespace exactly {
namespace {

TEST(Capacity, WholeBlocksThatFit) {
  // 1 KiB per slot, 16 slots per block: 16 KiB blocks.
  EXPECT_EQ(num_blocks_for_memory(int64_t{1} << 30, 1024, 16), 65536);
  EXPECT_EQ(num_blocks_for_memory(16 * 1024 * 3 - 1, 1024, 16), 2) << "a partial block does not count";
  EXPECT_EQ(num_blocks_for_memory(0, 1024, 16), 0);
  EXPECT_EQ(num_blocks_for_memory(-5, 1024, 16), 0);
}

TEST(Capacity, ParsesSizesAsPeopleWriteThem) {
  EXPECT_EQ(parse_byte_size("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GB"), int64_t{1500000000});
  EXPECT_EQ(parse_byte_size("1.5 gib"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  EXPECT_EQ(parse_byte_size("10KB"), 10000);
  EXPECT_EQ(parse_byte_size("10kib"), 10240);
  EXPECT_EQ(parse_byte_size("3B"), 3);
  EXPECT_EQ(parse_byte_size("1TiB"), int64_t{1} << 40);
}

TEST(Capacity, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "-1GiB", "2 GiBs", "2XB", "1..5GB", "12 34", "1e9", "99999999999TB"}) {
    EXPECT_EQ(parse_byte_size(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace exactly
