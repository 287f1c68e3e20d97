// MD5 against RFC 1321's vectors, the paired rate-ratio interval, and the trial search's cost
// model.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/halving_cost.h"
#include "common/md5.h"
#include "common/stats.h"

namespace dltune {
namespace {

TEST(Md5, Rfc1321Vectors) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(md5_hex("abcdefghijklmnopqrstuvwxyz"), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234"
                    "567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
  // Fed in pieces, the same.
  Md5 m;
  m.update("message ");
  m.update("digest");
  EXPECT_EQ(m.hex_digest(), "f96b697d7cb7938d525a2f31aaf161d0");
}

TEST(PairedRateRatio, RatioOfRatesOverTheRoundsWithAnInterval) {
  // A does 100 samples in 1 s per round, B in 1.25 s; the machine's phase scales both.
  std::vector<double> wa, ta, wb, tb;
  for (int k = 0; k < 10; ++k) {
    const double phase = 1 + (k % 3) * 0.5;
    wa.push_back(100);
    ta.push_back(1.0 * phase * (k % 2 ? 1.01 : 0.99));
    wb.push_back(100);
    tb.push_back(1.25 * phase);
  }
  const stats::RatioInterval r = stats::paired_rate_ratio(wa, ta, wb, tb);
  EXPECT_EQ(r.rounds, 10);
  EXPECT_NEAR(r.ratio, 1.25, 0.01);
  EXPECT_LE(r.lo, r.ratio);
  EXPECT_GE(r.hi, r.ratio);
  EXPECT_GT(r.lo, 1.2);
  EXPECT_TRUE(r.significant());
  // The same input gives the same interval (every rank decides alike).
  const stats::RatioInterval again = stats::paired_rate_ratio(wa, ta, wb, tb);
  EXPECT_EQ(again.lo, r.lo);
  EXPECT_EQ(again.hi, r.hi);
  // Too few rounds: no interval, not significant.
  const stats::RatioInterval two = stats::paired_rate_ratio({1, 1}, {1, 1}, {1, 1}, {2, 2});
  EXPECT_EQ(two.rounds, 2);
  EXPECT_DOUBLE_EQ(two.ratio, 2.0);
  EXPECT_TRUE(std::isinf(two.hi));
  EXPECT_FALSE(two.significant());
  // Rounds with no time on a side are left out.
  EXPECT_EQ(stats::paired_rate_ratio({1, 1, 1}, {1, 0, 1}, {1, 1, 1}, {1, 1, 1}).rounds, 2);
}

TEST(HalvingCost, EstimatesFromWhatItCostSoFar) {
  halving::CostModel m;
  EXPECT_FALSE(m.knows_setup());
  EXPECT_EQ(m.setup_s(64), 0.0);
  EXPECT_EQ(m.step_s(0, 64), 0.0);
  m.record_setup(64, 10);  // the first set-up generated the data too
  m.record_setup(128, 3);
  EXPECT_TRUE(m.knows_setup());
  EXPECT_DOUBLE_EQ(m.setup_s(128), 3);
  EXPECT_DOUBLE_EQ(m.setup_s(32), 3);   // never scaled down
  EXPECT_DOUBLE_EQ(m.setup_s(256), 6);  // scaled up by the work
  m.record_steps(1, 64, 4, 0.4);        // 0.1 s per step at 64
  EXPECT_DOUBLE_EQ(m.step_s(1, 64), 0.1);
  EXPECT_DOUBLE_EQ(m.step_s(2, 128), 0.2);  // an unmeasured group: the nearest, scaled
  m.record_steps(1, 64, 2, 0.3);            // the latest counts
  EXPECT_DOUBLE_EQ(m.step_s(1, 64), 0.15);
}

}  // namespace
}  // namespace dltune
