#pragma once
// The p-th percentile (p in [0, 100]) of a benchmark's samples, by linear interpolation between
// the closest ranks, as numpy.percentile computes it, so the C++ load generators report what
// the Python bench scripts would; 0 for no samples.
#include <algorithm>
#include <cmath>
#include <vector>

namespace orzo::bench {

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace orzo::bench
