#include "server/metrics.h"

#include <sstream>

namespace clover::server {

void Metrics::request_done(const std::string& endpoint, int status) {
  std::lock_guard lk(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::generation_done(const GenerateStats& s, bool cancelled) {
  std::lock_guard lk(mu_);
  ++generations_;
  if (cancelled) ++cancelled_;
  prompt_tokens_ += static_cast<uint64_t>(s.prompt_tokens);
  cached_tokens_ += static_cast<uint64_t>(s.cached_tokens);
  generated_tokens_ += static_cast<uint64_t>(s.generated_tokens);
  prompt_seconds_ += s.prompt_seconds;
  generate_seconds_ += s.generate_seconds;
  passes_ += static_cast<uint64_t>(s.passes);
  denoise_passes_ += static_cast<uint64_t>(s.denoise_passes);
  blocks_ += static_cast<uint64_t>(s.blocks);
  if (s.prompt_seconds > 0) last_prompt_tps_ = s.prompt_tokens / s.prompt_seconds;
  if (s.generate_seconds > 0) last_generate_tps_ = s.generated_tokens / s.generate_seconds;
}

void Metrics::set_queue_depth(int n) {
  std::lock_guard lk(mu_);
  queue_depth_ = n;
}

void Metrics::set_slots(int busy, int total) {
  std::lock_guard lk(mu_);
  slots_busy_ = busy;
  slots_total_ = total;
}

void Metrics::set_device(const std::string& device) {
  std::lock_guard lk(mu_);
  device_ = device;
}

void Metrics::set_batching(const BatchingStats& b) {
  std::lock_guard lk(mu_);
  batching_ = b;
}

int Metrics::slots_busy() const {
  std::lock_guard lk(mu_);
  return slots_busy_;
}

std::string Metrics::prometheus() const {
  std::lock_guard lk(mu_);
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    o << "# HELP clover_" << name << ' ' << help << "\n# TYPE clover_" << name << ' ' << type << "\nclover_" << name << ' '
      << value << '\n';
  };
  o << "# HELP clover_requests_total HTTP requests answered, by endpoint and status.\n"
       "# TYPE clover_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    o << "clover_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << '\n';
  if (!device_.empty()) {
    std::string label;  // a Prometheus label value: backslash and quote escaped
    for (char c : device_) {
      if (c == '\\' || c == '"') label += '\\';
      label += c;
    }
    o << "# HELP clover_device_info The backend the model runs on.\n# TYPE clover_device_info gauge\nclover_device_info{device=\""
      << label << "\"} 1\n";
  }
  metric("generations_total", "counter", "Generations run by the scheduler.", generations_);
  metric("generations_cancelled_total", "counter", "Generations stopped because the client went away.", cancelled_);
  metric("prompt_tokens_total", "counter", "Prompt tokens evaluated (excluding reused cached prefixes).", prompt_tokens_);
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache.", cached_tokens_);
  metric("tokens_predicted_total", "counter", "Tokens generated.", generated_tokens_);
  metric("prompt_seconds_total", "counter", "Seconds spent evaluating prompts.", prompt_seconds_);
  metric("tokens_predicted_seconds_total", "counter", "Seconds spent generating.", generate_seconds_);
  metric("prompt_tokens_per_second", "gauge", "Prompt throughput over all requests.",
         prompt_seconds_ > 0 ? prompt_tokens_ / prompt_seconds_ : 0.0);
  metric("predicted_tokens_per_second", "gauge", "Generation throughput over all requests.",
         generate_seconds_ > 0 ? generated_tokens_ / generate_seconds_ : 0.0);
  metric("last_predicted_tokens_per_second", "gauge", "Generation throughput of the last request.", last_generate_tps_);
  metric("passes_total", "counter", "Forward passes after the prompt.", passes_);
  metric("denoise_passes_total", "counter", "Denoising passes (diffusion and spec drafts).", denoise_passes_);
  metric("blocks_total", "counter", "Blocks completed (diffusion blocks, spec cycles).", blocks_);
  metric("passes_per_block", "gauge", "Denoising passes per completed block.",
         blocks_ > 0 ? static_cast<double>(denoise_passes_) / static_cast<double>(blocks_) : 0.0);
  metric("tokens_per_pass", "gauge", "Generated tokens per forward pass.",
         passes_ > 0 ? static_cast<double>(generated_tokens_) / static_cast<double>(passes_) : 0.0);
  metric("batched_passes_total", "counter", "Forward passes run for generations (one per batching round).", batching_.passes);
  metric("batched_sequences_total", "counter", "Sequence passes in them (divided by passes: the mean batch).", batching_.sequences);
  metric("batch_sequences_max", "gauge", "The most sequences one forward pass held.", batching_.max_sequences);
  metric("requests_deferred", "gauge", "Requests waiting in the queue.", queue_depth_);
  metric("slots_busy", "gauge", "Slots generating now.", slots_busy_);
  metric("slots_total", "gauge", "Slots (sessions with their own cache).", slots_total_);
  return o.str();
}

}  // namespace clover::server
