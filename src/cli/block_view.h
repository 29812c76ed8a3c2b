// `clover run --show-blocks`: draws each block as it fills in, on stderr.
//
// On a terminal every block is one line, redrawn in place after each pass (carriage return and
// erase-line), cut to the terminal's width so it never wraps; each token is coloured by the pass
// that committed it (dim when its confidence was low), masked positions are shaded boxes, and
// nothing after the end token is drawn. Guess-then-verify draws the drafted block, then marks the
// run the verifier kept. Without a terminal it prints one plain line per pass instead (no escape
// sequences), for logs and pipes.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "clover/clover.h"

namespace clover::cli {

class BlockView {
 public:
  // `tty`: redraw in place with colours; `columns`: the terminal's width (tty only).
  BlockView(const Engine& engine, DecodeMode mode, std::FILE* out, bool tty, int columns);
  void show(const BlockEvent& b);
  // Ends the last block's line (tty).
  void finish();

  // Whether `f` is a terminal, and its width (80 when unknown).
  static bool is_tty(std::FILE* f);
  static int columns(std::FILE* f);

 private:
  std::string plain_line(const BlockEvent& b) const;
  std::string tty_line(const BlockEvent& b) const;
  // A token as one cell: newlines and tabs made visible, control bytes dropped.
  std::string cell_text(int32_t token) const;

  const Engine& engine_;
  DecodeMode mode_;
  std::FILE* out_;
  bool tty_;
  int columns_;
  int block_ = -1;                 // the block on the current line (tty)
  std::vector<int> committed_at_;  // per position of block_: the pass that committed it (0: before)
};

}  // namespace clover::cli
