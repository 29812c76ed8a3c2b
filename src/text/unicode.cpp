#include "text/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace clover::text::unicode {
namespace {

constexpr uint32_t kMaxCp = 0x110000;
constexpr uint32_t kBlock = 256;

// Unicode White_Space (PropList.txt), the set llama.cpp's tables use.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Codepoints assigned in Unicode 15.0 and 15.1 that matter to a pre-tokenizer. llama.cpp v0.5.0's
// tables are Unicode 15.1; Debian 12's PCRE2 10.42 knows Unicode 14 and calls these unassigned.
// (Found by comparing the two tables over every codepoint; the oracle's random test hit them.)
struct ClassRange {
  uint32_t first, last;
  CpClass cls;
};
using C = CpClass;
constexpr ClassRange kUnicode15[] = {
    {0x00CF3, 0x00CF3, C::Mark}, {0x00ECE, 0x00ECE, C::Mark}, {0x02FFC, 0x02FFF, C::Symbol},
    {0x031EF, 0x031EF, C::Symbol}, {0x10EFD, 0x10EFF, C::Mark}, {0x1123F, 0x11240, C::Letter},
    {0x11241, 0x11241, C::Mark}, {0x11B00, 0x11B09, C::Punct}, {0x11F00, 0x11F01, C::Mark},
    {0x11F02, 0x11F02, C::Letter}, {0x11F03, 0x11F03, C::Mark}, {0x11F04, 0x11F10, C::Letter},
    {0x11F12, 0x11F33, C::Letter}, {0x11F34, 0x11F3A, C::Mark}, {0x11F3E, 0x11F42, C::Mark},
    {0x11F43, 0x11F4F, C::Punct}, {0x11F50, 0x11F59, C::Number}, {0x1342F, 0x1342F, C::Letter},
    {0x13439, 0x1343F, C::Other}, {0x13440, 0x13440, C::Mark}, {0x13441, 0x13446, C::Letter},
    {0x13447, 0x13455, C::Mark}, {0x1B132, 0x1B132, C::Letter}, {0x1B155, 0x1B155, C::Letter},
    {0x1D2C0, 0x1D2D3, C::Number}, {0x1DF25, 0x1DF2A, C::Letter}, {0x1E030, 0x1E06D, C::Letter},
    {0x1E08F, 0x1E08F, C::Mark}, {0x1E4D0, 0x1E4EB, C::Letter}, {0x1E4EC, 0x1E4EF, C::Mark},
    {0x1E4F0, 0x1E4F9, C::Number}, {0x1F6DC, 0x1F6DC, C::Symbol}, {0x1F774, 0x1F776, C::Symbol},
    {0x1F77B, 0x1F77F, C::Symbol}, {0x1F7D9, 0x1F7D9, C::Symbol}, {0x1FA75, 0x1FA77, C::Symbol},
    {0x1FA87, 0x1FA88, C::Symbol}, {0x1FAAD, 0x1FAAF, C::Symbol}, {0x1FABB, 0x1FABD, C::Symbol},
    {0x1FABF, 0x1FABF, C::Symbol}, {0x1FACE, 0x1FACF, C::Symbol}, {0x1FADA, 0x1FADB, C::Symbol},
    {0x1FAE8, 0x1FAE8, C::Symbol}, {0x1FAF7, 0x1FAF8, C::Symbol}, {0x2B739, 0x2B739, C::Letter},
    {0x2EBF0, 0x2EE5D, C::Letter}, {0x31350, 0x323AF, C::Letter},
};

CpClass unicode15_class(uint32_t cp, CpClass fallback) {
  for (const ClassRange& r : kUnicode15) {
    if (cp >= r.first && cp <= r.last) return r.cls;
  }
  return fallback;
}

// One anchored PCRE2 (UTF + UCP) pattern whose capture group number is the general category.
class CategoryMatcher {
 public:
  CategoryMatcher() {
    const char* pat = "(\\p{L})|(\\p{N})|(\\p{M})|(\\p{P})|(\\p{S})|(\\p{Cn})";
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
    if (!code_) throw std::runtime_error("clover::text: cannot compile the category pattern");
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
  }
  ~CategoryMatcher() { pcre2_code_free(code_); }

  CpClass classify_uncached(uint32_t cp, pcre2_match_data* md) const {
    if (is_white_space(cp)) return CpClass::Whitespace;
    if (cp >= 0xD800 && cp <= 0xDFFF) return CpClass::Other;
    std::string s;
    append_utf8(s, cp);
    int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr);
    if (rc <= 0) return CpClass::Other;
    static constexpr CpClass by_group[] = {CpClass::Other, CpClass::Letter, CpClass::Number,   CpClass::Mark,
                                           CpClass::Punct, CpClass::Symbol, CpClass::Undefined};
    return by_group[rc - 1 < 7 ? rc - 1 : 0];
  }

  pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

struct ClassTable {
  CategoryMatcher matcher;
  std::array<std::once_flag, kMaxCp / kBlock> filled;
  std::unique_ptr<CpClass[]> cls{new CpClass[kMaxCp]};

  void fill(uint32_t block) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(matcher.code(), nullptr);
    for (uint32_t cp = block * kBlock; cp < (block + 1) * kBlock; ++cp) {
      CpClass c = matcher.classify_uncached(cp, md);
      cls[cp] = c == CpClass::Undefined ? unicode15_class(cp, c) : c;
    }
    pcre2_match_data_free(md);
  }
};

ClassTable& class_table() {
  static ClassTable t;
  return t;
}

struct ByteAlphabet {
  std::array<std::string, 256> to_text;
  std::array<int16_t, 512> from_cp;  // every alphabet character is below U+0200
  ByteAlphabet() {
    from_cp.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + n++);
      append_utf8(to_text[b], cp);
      from_cp[cp] = int16_t(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

CpClass classify(uint32_t cp) {
  if (cp >= kMaxCp) return CpClass::Undefined;
  ClassTable& t = class_table();
  uint32_t block = cp / kBlock;
  std::call_once(t.filled[block], [&] { t.fill(block); });
  return t.cls[cp];
}

int utf8_seq_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

std::vector<uint32_t> decode_lenient(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size(), i = 0;
  auto cont = [&](size_t k) { return k < n && (p[k] & 0xC0) == 0x80; };
  while (i < n) {
    uint8_t b = p[i];
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
      out.push_back(uint32_t(b & 0x1F) << 6 | (p[i + 1] & 0x3F));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      out.push_back(uint32_t(b & 0x0F) << 12 | uint32_t(p[i + 1] & 0x3F) << 6 | (p[i + 2] & 0x3F));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      out.push_back(uint32_t(b & 0x07) << 18 | uint32_t(p[i + 1] & 0x3F) << 12 | uint32_t(p[i + 2] & 0x3F) << 6 |
                    (p[i + 3] & 0x3F));
      i += 4;
    } else {
      out.push_back(0xFFFD);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < kMaxCp) {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    append_utf8(out, 0xFFFD);
  }
}

const std::string& byte_to_unicode(uint8_t b) { return alphabet().to_text[b]; }

int unicode_to_byte(std::string_view ch) {
  const auto* p = reinterpret_cast<const uint8_t*>(ch.data());
  uint32_t cp;
  if (ch.size() == 1 && p[0] < 0x80) {
    cp = p[0];
  } else if (ch.size() == 2 && (p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
    cp = uint32_t(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
  } else {
    return -1;
  }
  return cp < 512 ? alphabet().from_cp[cp] : -1;
}

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += alphabet().to_text[c];
  return out;
}

bool from_byte_level(std::string_view text, std::string& out) {
  size_t i = 0;
  while (i < text.size()) {
    size_t len = size_t(utf8_seq_len(uint8_t(text[i])));
    if (i + len > text.size()) return false;
    int b = unicode_to_byte(text.substr(i, len));
    if (b < 0) return false;
    out.push_back(char(b));
    i += len;
  }
  return true;
}

}  // namespace clover::text::unicode
