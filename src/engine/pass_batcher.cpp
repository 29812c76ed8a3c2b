#include "engine/pass_batcher.h"

#include <algorithm>
#include <vector>

namespace clover::engine {

void PassBatcher::join() {
  std::lock_guard lk(mu_);
  ++participants_;
}

void PassBatcher::leave() {
  {
    std::lock_guard lk(mu_);
    --participants_;
  }
  cv_.notify_all();  // the others may all be waiting for this one
}

BatchStats PassBatcher::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void PassBatcher::run(const model::SeqPass& pass) {
  Request req{&pass, false, nullptr};
  std::unique_lock lk(mu_);
  pending_.push_back(&req);
  for (;;) {
    if (req.done) break;
    if (ready()) {
      execute(lk);
      continue;  // this request may not have fitted in the round
    }
    cv_.wait(lk);
  }
  if (req.error) std::rethrow_exception(req.error);
}

// Called with the lock held and ready(); runs one round without the lock.
void PassBatcher::execute(std::unique_lock<std::mutex>& lk) {
  executing_ = true;
  std::vector<Request*> round;
  int64_t tokens = 0;
  while (!pending_.empty()) {
    const int64_t n = static_cast<int64_t>(pending_.front()->pass->tokens.size());
    if (!round.empty() && tokens + n > forward_.max_batch()) break;
    round.push_back(pending_.front());
    pending_.pop_front();
    tokens += n;
  }
  ++stats_.rounds;
  stats_.sequences += round.size();
  stats_.max_sequences = std::max(stats_.max_sequences, static_cast<int>(round.size()));
  lk.unlock();

  auto run_alone = [&](Request& r) {
    const model::SeqPass& p = *r.pass;
    try {
      if (p.kind == model::PassKind::Denoise)
        forward_.denoise(*p.state, p.tokens, p.logits, p.reverse_path, p.denoise_rows);
      else
        forward_.causal(*p.state, p.tokens, p.rows, p.logits);
    } catch (...) {
      r.error = std::current_exception();
    }
  };
  if (round.size() == 1) {
    run_alone(*round.front());
  } else {
    std::vector<model::SeqPass> passes;
    for (Request* r : round) passes.push_back(*r->pass);
    try {
      forward_.multi(passes);
    } catch (const model::ModelError&) {
      // multi() validates every sequence before it changes anything: run them one by one so that
      // the error goes to the pass at fault and the others proceed.
      for (Request* r : round) run_alone(*r);
    } catch (...) {
      for (Request* r : round) r->error = std::current_exception();
    }
  }

  lk.lock();
  for (Request* r : round) r->done = true;
  executing_ = false;
  cv_.notify_all();
}

}  // namespace clover::engine
