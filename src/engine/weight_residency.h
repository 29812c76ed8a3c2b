// How the engine brings a model's weights into memory after load (EngineOptions::mmap, mlock,
// prefault; docs/loading.md): locks them (--mlock) and runs the pre-fault, in the background or
// before load returns. Owned by the engine, declared after the model so that it is destroyed
// first: its destructor stops the pre-fault's thread before the mapping goes away.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "clover/clover.h"
#include "runtime/residency.h"

namespace clover::model {
class Model;
}

namespace clover::engine {

class WeightResidency {
 public:
  // Locks and/or starts the pre-fault as the options ask; `reads_host_weights` is the backend's
  // (a GPU backend has its own copy: nothing to do). Warnings (a refused lock) go to `warnings`.
  WeightResidency(const model::Model& model, const EngineOptions& opts, bool reads_host_weights, std::vector<std::string>& warnings);
  ~WeightResidency();

  PrefaultStatus status() const;

 private:
  std::unique_ptr<runtime::BackgroundPrefault> background_;
  PrefaultStatus finished_;  // Wait mode, or Off
};

}  // namespace clover::engine
