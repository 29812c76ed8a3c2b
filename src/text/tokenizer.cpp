// Tokenizer: special-token partition, pre-tokenizer, BPE merges by rank; detokenisation.
// Behaviour follows llama.cpp v0.5.0 (src/llama-vocab.cpp): see docs/tokenizer.md.
#include "text/tokenizer.h"

#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>

#include "text/pretokenizer.h"
#include "text/token_attrs.h"
#include "text/unicode.h"

namespace clover::text {
namespace {

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

struct Merge {
  int32_t rank;
  int32_t result;
};

// Merge lookup by (left id, right id): open addressing in one flat array, so a lookup is usually a
// single cache miss (the hot path of encoding is this lookup, once per adjacent pair).
class MergeTable {
 public:
  void build(const std::vector<std::pair<uint64_t, Merge>>& entries) {
    size_t cap = 16;
    while (cap < entries.size() * 2) cap *= 2;
    slots_.assign(cap, Slot{kEmpty, {}});
    mask_ = cap - 1;
    for (const auto& [key, m] : entries) {
      size_t i = hash(key) & mask_;
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
      if (slots_[i].key == kEmpty) slots_[i] = Slot{key, m};  // first (best) rank wins
    }
  }
  const Merge* find(uint64_t key) const {
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are < 2^31, so no real key has all bits set
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static size_t hash(uint64_t k) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20); }
  std::vector<Slot> slots_{Slot{kEmpty, {}}};
  size_t mask_ = 0;
};

// A piece of the input: raw text to pre-tokenize, or a special token found in it.
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t offset, length;
};

// "<0xXX>" -> XX, else -1.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

struct Tokenizer::Impl {
  VocabData data;
  PreTokenizer pre;
  std::vector<std::string> text;  // token texts as llama.cpp keys them ("[EMPTY_i]" for empty ones)
  std::vector<uint32_t> attr;
  std::vector<std::string> piece;  // rendered bytes of each token (special tokens as their text)
  std::vector<bool> eog;
  std::unordered_map<std::string, int32_t> to_id;
  MergeTable merges;
  std::array<int32_t, 256> byte_token{};  // token of the byte-level character for each byte, or -1
  std::vector<int32_t> specials;          // matched in raw text, longest first

  explicit Impl(VocabData d) : data(std::move(d)), pre(data.pre) {}

  void partition(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
};

// llama.cpp's tokenizer_st_partition: for each special token, longest text first, every raw
// fragment is cut around each occurrence. Control (and unknown) tokens only with parse_special.
void Tokenizer::Impl::partition(std::string_view raw, bool parse_special, std::vector<Fragment>& frags) const {
  frags.assign(1, Fragment{-1, 0, raw.size()});
  std::vector<Fragment> next;
  for (int32_t id : specials) {
    if (!parse_special && (attr[size_t(id)] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& st = text[size_t(id)];
    bool any = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0 || raw.substr(f.offset, f.length).find(st) == std::string_view::npos) continue;
      any = true;
      break;
    }
    if (!any) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.offset, end = f.offset + f.length;
      while (pos < end) {
        size_t m = raw.substr(0, end).find(st, pos);
        if (m == std::string_view::npos) break;
        if (m > pos) next.push_back(Fragment{-1, pos, m - pos});
        next.push_back(Fragment{id, m, st.size()});
        pos = m + st.size();
      }
      if (pos < end) next.push_back(Fragment{-1, pos, end - pos});
    }
    frags.swap(next);
  }
}

// Byte-level BPE on one pre-token: start from one symbol per byte and repeatedly merge the adjacent
// pair with the lowest merge rank (leftmost first on ties), as llama.cpp's llm_tokenizer_bpe_session.
void Tokenizer::Impl::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  const int n = int(word.size());
  if (n == 0) return;
  if (n == 1) {
    int32_t id = byte_token[uint8_t(word[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  struct Sym {
    int32_t id;
    int prev, next;
    bool alive;
  };
  struct Cand {
    int32_t rank;
    int left, right;
    int32_t left_id, right_id, result;
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Sym> sym(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    sym[size_t(i)] = Sym{byte_token[uint8_t(word[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Cand> queue;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    int32_t a = sym[size_t(l)].id, b = sym[size_t(r)].id;
    if (a < 0 || b < 0) return;
    const Merge* m = merges.find(pair_key(a, b));
    if (!m) return;
    queue.push(Cand{m->rank, l, r, a, b, m->result});
  };
  for (int i = 0; i + 1 < n; ++i) try_pair(i, i + 1);
  while (!queue.empty()) {
    Cand c = queue.top();
    queue.pop();
    Sym& l = sym[size_t(c.left)];
    Sym& r = sym[size_t(c.right)];
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;  // stale
    l.id = c.result;
    l.next = r.next;
    r.alive = false;
    if (r.next >= 0) sym[size_t(r.next)].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }
  for (int i = 0; i >= 0; i = sym[size_t(i)].next) {
    // A byte whose character is missing from the vocabulary yields nothing, as in llama.cpp.
    if (sym[size_t(i)].id >= 0) out.push_back(sym[size_t(i)].id);
  }
}

Tokenizer Tokenizer::build(VocabData data) {
  const size_t n = data.tokens.size();
  if (n == 0) throw TokenizerError("vocabulary has no tokens");
  if (n > size_t(INT32_MAX)) throw TokenizerError("vocabulary too large");
  if (!data.types.empty() && data.types.size() != n) {
    throw TokenizerError("token_type has " + std::to_string(data.types.size()) + " entries for " + std::to_string(n) +
                         " tokens");
  }
  for (size_t i = 0; i < data.types.size(); ++i) {
    if (data.types[i] < 1 || data.types[i] > 6) {
      throw TokenizerError("token " + std::to_string(i) + " has unknown token_type " + std::to_string(data.types[i]));
    }
  }
  if (!PreTokenizer::known(data.pre)) {
    throw TokenizerError("unknown pre-tokenizer '" + data.pre + "' (known: qwen35, qwen2, default)");
  }
  for (auto [name, id] : {std::pair{"bos", data.bos}, {"eos", data.eos}, {"eot", data.eot}, {"pad", data.pad}}) {
    if (id < -1 || id >= int32_t(n))
      throw TokenizerError(std::string(name) + " token id " + std::to_string(id) + " out of range");
  }
  if (data.add_bos && data.bos < 0) throw TokenizerError("add_bos is set but there is no bos token");

  auto impl = std::make_unique<Impl>(std::move(data));
  Impl& m = *impl;
  const VocabData& d = m.data;
  m.text.resize(n);
  m.to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    m.text[i] = d.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : d.tokens[i];
    if (!m.to_id.emplace(m.text[i], int32_t(i)).second) {
      throw TokenizerError("duplicate token text '" + m.text[i] + "' (ids " + std::to_string(m.to_id[m.text[i]]) +
                           " and " + std::to_string(i) + ")");
    }
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.to_id.find(unicode::byte_to_unicode(uint8_t(b)));
    m.byte_token[size_t(b)] = it == m.to_id.end() ? -1 : it->second;
  }

  std::vector<std::pair<uint64_t, Merge>> merge_entries;
  merge_entries.reserve(d.merges.size());
  for (size_t r = 0; r < d.merges.size(); ++r) {
    const std::string& s = d.merges[r];
    size_t sp = s.find(' ', 1);  // as llama.cpp: a leading space belongs to the first part
    if (sp == std::string::npos) throw TokenizerError("merge " + std::to_string(r) + " '" + s + "' has no space");
    std::string a = s.substr(0, sp), b = s.substr(sp + 1);
    auto ia = m.to_id.find(a), ib = m.to_id.find(b), iab = m.to_id.find(a + b);
    if (ia == m.to_id.end() || ib == m.to_id.end() || iab == m.to_id.end()) {
      throw TokenizerError("merge " + std::to_string(r) + " '" + s + "' names a token not in the vocabulary");
    }
    merge_entries.emplace_back(pair_key(ia->second, ib->second), Merge{int32_t(r), iab->second});
  }
  m.merges.build(merge_entries);

  DerivedAttrs da = derive_token_attrs(d, m.text);
  m.attr = std::move(da.attr);
  m.eog.assign(n, false);
  for (int32_t id : da.eog) m.eog[size_t(id)] = true;
  for (size_t i = 0; i < n; ++i) {
    if (m.attr[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) m.specials.push_back(int32_t(i));
  }
  std::stable_sort(m.specials.begin(), m.specials.end(),
                   [&](int32_t a, int32_t b) { return m.text[size_t(a)].size() > m.text[size_t(b)].size(); });

  // Pieces as llama.cpp's token_to_piece(special = true) renders them.
  m.piece.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t at = m.attr[i];
    const std::string& t = m.text[i];
    if (at & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      m.piece[i] = t;
    } else if (at & kAttrNormal) {
      std::string bytes;
      if (unicode::from_byte_level(t, bytes)) {
        m.piece[i] = std::move(bytes);
      } else {
        m.piece[i] = t;  // not in the byte alphabet (llama.cpp renders "[UNK_BYTE_...]"): keep the text
      }
    } else if (at & kAttrByte) {
      int b = parse_byte_token(t);
      if (b >= 0) m.piece[i] = std::string(1, char(b));
    }  // unused / undefined: nothing
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;  // no BOS here: callers add it when add_bos() says so
  if (text.empty()) return out;
  std::vector<Fragment> frags;
  impl_->partition(text, parse_special, frags);
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    for (const std::string& word : impl_->pre.split(text.substr(f.offset, f.length))) impl_->bpe_word(word, out);
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab()) throw TokenizerError("token id " + std::to_string(id) + " out of range");
  return impl_->piece[size_t(id)];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) throw TokenizerError("token id " + std::to_string(id) + " out of range");
    if (!render_special && (impl_->attr[size_t(id)] & (kAttrControl | kAttrUnknown))) continue;
    out += impl_->piece[size_t(id)];
  }
  return out;
}

std::vector<std::string> Tokenizer::control_texts() const {
  std::vector<std::string> out;
  for (int32_t id : impl_->specials)
    if (impl_->attr[size_t(id)] & (kAttrControl | kAttrUnknown)) out.push_back(impl_->text[size_t(id)]);
  return out;
}

int32_t Tokenizer::n_vocab() const { return int32_t(impl_->text.size()); }

int32_t Tokenizer::find(std::string_view token_text) const {
  auto it = impl_->to_id.find(std::string(token_text));
  return it == impl_->to_id.end() ? -1 : it->second;
}

TokenType Tokenizer::type(int32_t id) const {
  if (id < 0 || id >= n_vocab()) throw TokenizerError("token id " + std::to_string(id) + " out of range");
  return impl_->data.types.empty() ? TokenType::Normal : TokenType(impl_->data.types[size_t(id)]);
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && (impl_->attr[size_t(id)] & kAttrControl);
}

bool Tokenizer::is_eog(int32_t id) const { return id >= 0 && id < n_vocab() && impl_->eog[size_t(id)]; }
int32_t Tokenizer::bos() const { return impl_->data.bos; }
int32_t Tokenizer::eos() const { return impl_->data.eos; }
bool Tokenizer::add_bos() const { return impl_->data.add_bos; }
const VocabData& Tokenizer::data() const { return impl_->data; }

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (Unicode table 3-7): > 0 when complete,
// 0 when s ends before it could complete, -1 when s[i] starts no well-formed sequence.
int utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  int len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    if (i + size_t(k) >= s.size()) return 0;
    uint8_t x = b(i + size_t(k));
    if (k == 1 ? (x < lo || x > hi) : (x & 0xC0) != 0x80) return -1;
  }
  return len;
}

// Moves the complete part of `pending` to the result; malformed bytes become U+FFFD. At the end
// of the stream (`final`) an unfinished sequence becomes U+FFFD too.
std::string drain_utf8(std::string& pending, bool final) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    int len = utf8_sequence(pending, i);
    if (len > 0) {
      out.append(pending, i, size_t(len));
      i += size_t(len);
    } else if (len < 0) {
      out += "\xEF\xBF\xBD";
      i += 1;
    } else if (final) {
      out += "\xEF\xBF\xBD";
      i = pending.size();
    } else {
      break;
    }
  }
  pending.erase(0, i);
  return out;
}

}  // namespace

Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tok, bool render_special)
    : tok_(&tok), render_special_(render_special) {}

std::string Tokenizer::StreamDecoder::push(int32_t id) {
  pending_ += tok_->decode({id}, render_special_);
  return drain_utf8(pending_, false);
}

std::string Tokenizer::StreamDecoder::flush() { return drain_utf8(pending_, true); }

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

}  // namespace clover::text
