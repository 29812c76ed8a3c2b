// Seeded random streams for synthetic weights: one independent stream per (seed, name, index),
// so a tensor's values do not depend on which other tensors exist or how they are stored.
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace clover::synth {

inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** with Box-Muller normals.
class Stream {
 public:
  Stream(uint64_t seed, std::string_view name, uint64_t index) {
    uint64_t h = seed ^ 0x6a09e667f3bcc909ull;
    for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
    h ^= index * 0x9e3779b97f4a7c15ull;
    for (auto& w : s_) w = splitmix64(h);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3], s_[2] ^= t, s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in (0, 1).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller in float: weights need the shape, not the last bits, and the
  // full-size model draws 35 billion of them).
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const float u1 = static_cast<float>(uniform()), u2 = static_cast<float>(uniform());
    const float r = std::sqrt(-2.0f * std::log(u1)), a = 6.2831853f * u2;
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  float spare_ = 0.f;
  bool has_spare_ = false;
};

}  // namespace clover::synth
