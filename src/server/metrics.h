// Server counters and gauges, rendered as Prometheus text (GET /metrics). Updated by the
// scheduler (tokens, passes, slots, queue) and the HTTP layer (requests by endpoint and status).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "clover/clover.h"

namespace clover::server {

class Metrics {
 public:
  void request_done(const std::string& endpoint, int status);
  void generation_done(const GenerateStats& s, bool cancelled);
  void set_queue_depth(int n);
  void set_slots(int busy, int total);
  void set_device(const std::string& device);  // the backend the model runs on (clover_device_info)
  void set_batching(const BatchingStats& b);

  int slots_busy() const;
  std::string prometheus() const;

 private:
  mutable std::mutex mu_;
  std::string device_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t generations_ = 0, cancelled_ = 0;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
  double prompt_seconds_ = 0, generate_seconds_ = 0;
  uint64_t passes_ = 0, denoise_passes_ = 0, blocks_ = 0;
  double last_prompt_tps_ = 0, last_generate_tps_ = 0;
  BatchingStats batching_;
  int queue_depth_ = 0, slots_busy_ = 0, slots_total_ = 0;
};

}  // namespace clover::server
