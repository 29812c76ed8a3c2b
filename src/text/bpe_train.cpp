// train_bpe(): byte-level BPE training over pre-tokenized words.
//
// Words are counted once, then merges are learned with incremental pair counts: each merge only
// revisits the words that contain the merged pair, and the best pair comes from a lazy max-heap
// (entries whose count went stale are skipped). Ties on count go to the smaller (left id, right id),
// so the result depends only on the corpus and the arguments.
#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>

#include "text/pretokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace clover::text {
namespace {

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
int32_t key_left(uint64_t k) { return int32_t(k >> 32); }
int32_t key_right(uint64_t k) { return int32_t(k & 0xFFFFFFFFu); }

struct Candidate {
  int64_t count;
  uint64_t key;
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : key > o.key; }
};

class PairCounter {
 public:
  void add(const std::vector<int32_t>& w, int64_t freq, int32_t word_index, std::vector<uint64_t>* touched) {
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      uint64_t k = pair_key(w[i], w[i + 1]);
      count_[k] += freq;
      where_[k].push_back(word_index);
      if (touched) touched->push_back(k);
    }
  }
  void remove(const std::vector<int32_t>& w, int64_t freq, std::vector<uint64_t>& touched) {
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      uint64_t k = pair_key(w[i], w[i + 1]);
      count_[k] -= freq;
      touched.push_back(k);
    }
  }
  int64_t count(uint64_t k) const {
    auto it = count_.find(k);
    return it == count_.end() ? 0 : it->second;
  }
  std::vector<int32_t> take_words(uint64_t k) {
    std::vector<int32_t> v = std::move(where_[k]);
    where_.erase(k);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }
  const std::unordered_map<uint64_t, int64_t>& counts() const { return count_; }

 private:
  std::unordered_map<uint64_t, int64_t> count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;  // may hold stale or repeated entries
};

bool has_pair(const std::vector<int32_t>& w, int32_t a, int32_t b) {
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i] == a && w[i + 1] == b) return true;
  }
  return false;
}

// Replaces every non-overlapping (a, b), left to right, by c.
void merge_in_word(std::vector<int32_t>& w, int32_t a, int32_t b, int32_t c) {
  size_t out = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
      w[out++] = c;
      ++i;
    } else {
      w[out++] = w[i];
    }
  }
  w.resize(out);
}

}  // namespace

VocabData train_bpe(const std::vector<std::string>& corpus, int n_merges, const std::vector<std::string>& specials,
                    const std::vector<std::string>& user_defined, int32_t pad_to, const std::string& pre) {
  VocabData v;
  v.pre = pre;
  PreTokenizer pretok(pre);

  std::unordered_map<std::string, int64_t> counted;
  for (const std::string& text : corpus) {
    for (std::string& w : pretok.split(text)) ++counted[std::move(w)];
  }
  // Sorted, so word indices (and so the result) do not depend on hashing.
  std::vector<std::pair<std::string, int64_t>> word_freq(counted.begin(), counted.end());
  std::sort(word_freq.begin(), word_freq.end());

  std::unordered_map<std::string, int32_t> to_id;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(unicode::byte_to_unicode(uint8_t(b)));
    to_id.emplace(v.tokens.back(), b);
  }

  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> freq;
  words.reserve(word_freq.size());
  for (const auto& [w, f] : word_freq) {
    words.emplace_back(w.begin(), w.end());
    for (int32_t& x : words.back()) x = int32_t(uint8_t(x));
    freq.push_back(f);
  }

  PairCounter pairs;
  for (size_t i = 0; i < words.size(); ++i) pairs.add(words[i], freq[i], int32_t(i), nullptr);
  std::priority_queue<Candidate> heap;
  for (const auto& [k, c] : pairs.counts()) heap.push(Candidate{c, k});

  std::vector<uint64_t> touched;
  while (int(v.merges.size()) < n_merges && !heap.empty()) {
    Candidate best = heap.top();
    heap.pop();
    if (best.count <= 0) break;
    if (pairs.count(best.key) != best.count) continue;  // stale entry
    const int32_t a = key_left(best.key), b = key_right(best.key);
    std::string merged = v.tokens[size_t(a)] + v.tokens[size_t(b)];
    auto [it, inserted] = to_id.emplace(merged, int32_t(v.tokens.size()));
    if (inserted) v.tokens.push_back(merged);  // else: the same text reached by another route
    const int32_t c = it->second;
    v.merges.push_back(v.tokens[size_t(a)] + " " + v.tokens[size_t(b)]);

    touched.clear();
    for (int32_t wi : pairs.take_words(best.key)) {
      std::vector<int32_t>& w = words[size_t(wi)];
      if (!has_pair(w, a, b)) continue;  // stale entry
      pairs.remove(w, freq[size_t(wi)], touched);
      merge_in_word(w, a, b, c);
      pairs.add(w, freq[size_t(wi)], wi, &touched);
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t k : touched) {
      int64_t cnt = pairs.count(k);
      if (cnt > 0 && k != best.key) heap.push(Candidate{cnt, k});
    }
  }

  v.types.assign(v.tokens.size(), int32_t(TokenType::Normal));
  std::set<std::string> ud(user_defined.begin(), user_defined.end());
  for (const std::string& name : user_defined) {
    if (std::find(specials.begin(), specials.end(), name) == specials.end()) {
      throw TokenizerError("train_bpe: user-defined token '" + name + "' is not among the specials");
    }
  }
  for (const std::string& s : specials) {
    if (s.empty() || !to_id.emplace(s, int32_t(v.tokens.size())).second) {
      throw TokenizerError("train_bpe: special token '" + s + "' is empty or already in the vocabulary");
    }
    v.tokens.push_back(s);
    v.types.push_back(int32_t(ud.count(s) ? TokenType::UserDefined : TokenType::Control));
  }
  while (int32_t(v.tokens.size()) < pad_to) {
    v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
    v.types.push_back(int32_t(TokenType::Unused));
  }
  return v;
}

}  // namespace clover::text
