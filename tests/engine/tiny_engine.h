// The engine tests' shared fixture: a tiny synthetic Q8_0 model (official layout, so every
// decoding mode runs), written once per test suite and loaded with the suite's options.
#pragma once
#include <memory>
#include <string>

#include "clover/clover.h"
#include "../model/model_test_util.h"

namespace clover::testing {

struct TinyEngine {
  explicit TinyEngine(const EngineOptions& o) {
    synth::SynthConfig c = synth::preset("tiny");
    c.type = DType::Q8_0;
    path = write_synth(dir, "tiny.gguf", c);
    engine = Engine::load(path, o);
  }
  TempDir dir;
  std::string path;
  std::unique_ptr<Engine> engine;
};

}  // namespace clover::testing
