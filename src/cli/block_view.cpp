#include "cli/block_view.h"

#include <cstdlib>
#include <iterator>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace clover::cli {

namespace {

constexpr const char* kMask = "\u2591";  // light shade: a masked position
constexpr const char* kReset = "\x1b[0m";

// 256-colour backgrounds, one per pass (cycling), far apart for the first passes; white text reads
// on all of them. Index 0: the block's first token, chosen before the block.
constexpr int kPassColours[] = {238, 25, 28, 130, 125, 55, 30, 88, 58};

std::string pass_style(int pass) {
  const int n = static_cast<int>(std::size(kPassColours)) - 1;
  const int c = pass <= 0 ? kPassColours[0] : kPassColours[1 + (pass - 1) % n];
  return fmt::format("\x1b[48;5;{};97m", c);
}

size_t utf8_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

// The end of what is drawn: the first decided end token (exclusive), else the whole block.
size_t drawn_end(const Engine& e, const BlockEvent& b) {
  for (size_t i = 0; i < b.tokens.size(); ++i)
    if (b.decided[i] && e.is_end_token(b.tokens[i])) return i;
  return b.tokens.size();
}

}  // namespace

BlockView::BlockView(const Engine& engine, DecodeMode mode, std::FILE* out, bool tty, int columns)
    : engine_(engine), mode_(mode), out_(out), tty_(tty), columns_(columns < 20 ? 20 : columns) {}

bool BlockView::is_tty(std::FILE* f) { return isatty(fileno(f)) == 1; }

int BlockView::columns(std::FILE* f) {
  winsize ws{};
  if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return 80;
}

std::string BlockView::cell_text(int32_t token) const {
  std::string out;
  for (char ch : engine_.token_text(token)) {
    if (ch == '\n') out += "\u21b5";       // downwards arrow with corner leftwards
    else if (ch == '\t') out += "\u2192";  // rightwards arrow
    else if (static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f) out += ch;
  }
  return out;
}

std::string BlockView::plain_line(const BlockEvent& b) const {
  const size_t end = drawn_end(engine_, b);
  std::string line;
  if (b.accepted >= 0) {
    line = fmt::format("block {} verify: kept {} of {}:", b.block + 1, b.accepted, b.tokens.size() - 1);
    for (size_t i = 0; i < end && i <= static_cast<size_t>(b.accepted); ++i) line += cell_text(b.tokens[i]);
    return line;
  }
  line = mode_ == DecodeMode::Spec ? fmt::format("block {} draft: ", b.block + 1) : fmt::format("block {} pass {}: ", b.block + 1, b.pass);
  for (size_t i = 0; i < end; ++i) line += b.decided[i] ? cell_text(b.tokens[i]) : kMask;
  return line;
}

std::string BlockView::tty_line(const BlockEvent& b) const {
  const size_t end = drawn_end(engine_, b);
  const std::string label = b.accepted >= 0 ? fmt::format("block {:>3} kept {:>2}", b.block + 1, b.accepted)
                            : mode_ == DecodeMode::Spec ? fmt::format("block {:>3} draft  ", b.block + 1)
                                                        : fmt::format("block {:>3} pass {:>2}", b.block + 1, b.pass);
  // The budget leaves the last column free: a full line would wrap on some terminals.
  size_t budget = static_cast<size_t>(columns_) - 1;
  std::string line = "\x1b[2m" + label + kReset + " ";
  budget -= utf8_width(label) + 1;
  for (size_t i = 0; i < end; ++i) {
    const std::string text = b.decided[i] ? cell_text(b.tokens[i]) : kMask;
    if (text.empty()) continue;
    const size_t w = utf8_width(text);
    // While more cells follow, a column stays free for the ellipsis that says the line was cut.
    if (w > budget || (i + 1 < end && w == budget)) {
      if (budget > 0) line += "\u2026";
      break;
    }
    budget -= w;
    std::string style = "\x1b[2m";  // masked
    if (b.decided[i]) {
      style = pass_style(i < committed_at_.size() ? committed_at_[i] : b.pass);
      const float conf = i < b.confidence.size() ? b.confidence[i] : 0.0f;
      if (conf > 0 && conf < 0.9f) style += "\x1b[2m";  // committed unsure (the at-least-one rule)
      if (b.accepted >= 0 && i > 0) style += i <= static_cast<size_t>(b.accepted) ? "\x1b[4m" : "\x1b[9;2m";
    }
    line += style + text + kReset;
  }
  return line;
}

void BlockView::show(const BlockEvent& b) {
  const bool verify = b.accepted >= 0;
  const bool new_block = b.block != block_ || (b.pass == 1 && !verify);
  if (new_block) committed_at_.assign(b.tokens.size(), -1);
  for (size_t i = 0; i < b.tokens.size() && i < committed_at_.size(); ++i)
    if (b.decided[i] && committed_at_[i] < 0) committed_at_[i] = (i == 0 && b.pass == 1) ? 0 : b.pass;
  const bool next_line = new_block && block_ >= 0;
  block_ = b.block;
  if (!tty_) {
    std::fprintf(out_, "%s\n", plain_line(b).c_str());
    return;
  }
  if (next_line) std::fputc('\n', out_);
  // Carriage return + erase line: the block's line is drawn again in place.
  std::fprintf(out_, "\r\x1b[2K%s", tty_line(b).c_str());
  std::fflush(out_);
}

void BlockView::finish() {
  if (tty_ && block_ >= 0) std::fputc('\n', out_);
  block_ = -1;
  std::fflush(out_);
}

}  // namespace clover::cli
