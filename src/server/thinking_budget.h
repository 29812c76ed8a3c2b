// The thinking budget (llama-server's --reasoning-budget): watches the output of a generation whose
// prompt opened a think block, counts its thinking tokens, and says when the budget is spent with
// the block still open. The scheduler then stops the generation there, appends the closing text
// (the budget message, then "\n</think>\n\n", as Qwen templates write it) as if the model had
// written it, and lets the model continue with the answer.
// The block ends at "</think>", or at "<tool_call>" (the output parser ends reasoning there too).
#pragma once
#include <string>
#include <string_view>

namespace clover::server {

class ThinkingBudget {
 public:
  // open: the prompt left a think block open. budget: thinking tokens allowed; -1: unlimited.
  ThinkingBudget(bool open, int budget) : open_(open), budget_(budget) {}

  // One output token and its text. Returns true when this token spent the budget with the block
  // still open (the generation should stop after it).
  bool push(std::string_view text);
  // Whether the budget is spent before the first token (budget 0 with the block open).
  bool spent_at_start() const { return open_ && budget_ == 0; }
  // The forced text closes the block.
  void close() { open_ = false; }

  bool open() const { return open_; }
  int thinking_tokens() const { return tokens_; }

  // The text forced when the budget is spent.
  static std::string closing_text(const std::string& message);

 private:
  bool open_;
  int budget_;
  int tokens_ = 0;
  std::string tail_;  // the last few bytes, for a marker split across tokens
};

}  // namespace clover::server
