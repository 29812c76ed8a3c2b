// The server's lifetime: listen first, load the model in the background (/health says 503 until
// it is ready), serve, and stop cleanly on SIGINT/SIGTERM.
#include "server/server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "server/http_server.h"
#include "server/server_state.h"

namespace clover::server {

namespace {

// The model's weights are read from a shared mapping of its file: a file truncated under a running
// server makes the next read past its new end raise SIGBUS. Passes started after the truncation
// are refused with an error (model::Model::check_file); one already running when it happens cannot
// be saved, and this says why the server stops instead of a bare signal death.
void on_sigbus(int) {
  static const char msg[] =
      "fatal: bus error (SIGBUS) reading mapped memory: the model file was most likely truncated or overwritten while the "
      "server was using it; exiting\n";
  [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  _exit(1);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void load(ServerState& st) {
  EngineOptions eo;
  eo.n_threads = st.opt.n_threads;
  eo.n_ctx = st.opt.n_ctx;
  eo.cache_type_k = st.opt.cache_type_k;
  eo.cache_type_v = st.opt.cache_type_v;
  eo.device = st.opt.device;
  eo.n_gpu_layers = st.opt.n_gpu_layers;
  eo.cpu_moe = st.opt.cpu_moe;
  eo.n_cpu_moe = st.opt.n_cpu_moe;
  eo.stream_experts = st.opt.stream_experts;
  eo.override_tensor = st.opt.override_tensor;
  eo.vram_budget = st.opt.vram_budget;
  eo.n_seq = st.opt.n_slots;
  eo.mmap = st.opt.mmap;
  eo.repack = st.opt.repack;
  eo.mlock = st.opt.mlock;
  eo.prefault = st.opt.prefault;
  eo.on_progress = stderr_progress("clover serve: ", 10);
  st.engine = Engine::load(st.opt.model_path, eo);
  for (const auto& w : st.engine->info().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fprintf(stderr, "%s, %d slots\n", context_summary(st.engine->info()).c_str(), st.opt.n_slots);
  st.defaults.n_vocab = st.engine->info().n_vocab;
  const std::string source = st.opt.chat_template_file.empty() ? st.engine->chat_template() : read_file(st.opt.chat_template_file);
  if (source.empty()) throw Error("the model has no chat template; give one with --chat-template-file");
  try {
    st.chat_template = std::make_unique<chat::ChatTemplate>(source);
    if (!st.opt.special_in_content) st.chat_template->keep_as_text(st.engine->control_texts());
    st.chat_template_source = source;
  } catch (const std::exception& e) {
    throw Error(std::string("the chat template does not parse: ") + e.what());
  }
  for (int32_t id = 0; id < st.engine->info().n_vocab; ++id)
    st.max_token_bytes = std::max(st.max_token_bytes, st.engine->token_text(id).size());
  SchedulerOptions so;
  so.n_slots = st.opt.n_slots;
  so.max_queue = st.opt.max_queue;
  st.scheduler = std::make_unique<Scheduler>(*st.engine, so, st.metrics);
  st.metrics.set_device(st.engine->info().device);
}

}  // namespace

int run_server(const ServerOptions& opt) {
  // SIGINT/SIGTERM are taken by one thread with sigwait(); every other thread blocks them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that disconnects must not kill the server
  signal(SIGBUS, on_sigbus);

  ServerState st;
  st.opt = opt;
  st.model_name = opt.aliases.empty() ? std::filesystem::path(opt.model_path).stem().string() : opt.aliases.front();
  st.defaults.sampling = opt.sampling;
  st.defaults.seed = opt.seed;
  st.defaults.n_predict = opt.n_predict;
  st.defaults.reasoning_budget = opt.reasoning_budget;
  st.defaults.mode = opt.mode;
  st.defaults.threshold = opt.threshold;
  st.defaults.chat_template_kwargs = opt.chat_template_kwargs;

  HttpLimits limits;
  // Each streaming or waiting request holds a thread: enough for every slot and queued request.
  limits.general_threads = opt.n_slots + opt.max_queue + 16;
  limits.header_timeout_s = opt.header_timeout_s;
  limits.body_timeout_s = opt.body_timeout_s;
  HttpServer http(limits);
  http.set_read_timeout(60, 0);
  http.set_write_timeout(60, 0);
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (req.path != "/health" && req.path != "/metrics")
      std::fprintf(stderr, "%s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });
  register_routes(http, st);

  int port = opt.port;
  if (port == 0) {
    port = http.bind_to_any_port(opt.host);
    if (port < 0) port = 0;
  } else if (!http.bind_to_port(opt.host, port)) {
    port = 0;
  }
  if (port == 0) {
    std::fprintf(stderr, "error: cannot listen on %s:%d (the port is taken, or the address is not this machine's)\n",
                 opt.host.c_str(), opt.port);
    return 1;
  }
  http.widen_backlog();
  std::fprintf(stderr, "clover serve: listening on http://%s:%d (model %s loading)\n", opt.host.c_str(), port,
               st.model_name.c_str());

  bool load_failed = false;
  std::atomic<bool> listen_ended{false}, load_done{false};
  std::thread loader([&] {
    try {
      const auto t0 = std::chrono::steady_clock::now();
      load(st);
      st.ready = true;
      std::fprintf(stderr, "clover serve: model %s ready in %.2f s (%d slots of %d tokens)\n", st.opt.model_path.c_str(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), st.scheduler->n_slots(),
                   st.scheduler->n_ctx());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      load_failed = true;
      load_done = true;
      // stop() does nothing before listen starts; once listen has ended there is nothing to stop.
      while (!http.is_running() && !listen_ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      http.stop();
    }
  });
  std::thread signals([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (!st.ready.load() && !load_done) {
      // The load cannot be interrupted and holds nothing that needs flushing (the model file is
      // mapped read-only): leave now rather than after it (and a second signal would be ignored).
      std::fprintf(stderr, "clover serve: stopped while the model was loading\n");
      std::_Exit(128 + sig);
    }
    std::fprintf(stderr, "clover serve: stopping\n");
    if (st.ready.load()) st.scheduler->cancel_all();
    http.stop();
  });

  http.listen_after_bind();
  listen_ended = true;
  loader.join();
  pthread_kill(signals.native_handle(), SIGTERM);  // wakes the signal thread if no signal came
  signals.join();
  st.scheduler.reset();  // cancels what is left and joins the worker
  return load_failed ? 1 : 0;
}

}  // namespace clover::server
