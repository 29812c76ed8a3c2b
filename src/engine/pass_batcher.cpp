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

BatchingStats PassBatcher::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void PassBatcher::run(backend::Pass& pass) {
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
    if (!round.empty() && tokens + n > executor_.max_batch()) break;
    round.push_back(pending_.front());
    pending_.pop_front();
    tokens += n;
  }
  ++stats_.passes;
  stats_.sequences += round.size();
  stats_.max_sequences = std::max(stats_.max_sequences, static_cast<int>(round.size()));
  lk.unlock();

  auto run_alone = [&](Request& r) {
    try {
      executor_.run(*r.pass);
    } catch (...) {
      r.error = std::current_exception();
    }
  };
  if (round.size() == 1) {
    run_alone(*round.front());
  } else {
    // The passes are copied into one list and their results (statistics) copied back: the
    // participants' own Pass objects are written only by this thread, before they are woken.
    std::vector<backend::Pass> passes;
    for (Request* r : round) passes.push_back(*r->pass);
    try {
      executor_.run(passes);
      for (size_t i = 0; i < round.size(); ++i) round[i]->pass->stats = passes[i].stats;
    } catch (const model::ModelError&) {
      // The executor validates every pass before it changes anything: run them one by one so
      // that the error goes to the pass at fault and the others proceed.
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
