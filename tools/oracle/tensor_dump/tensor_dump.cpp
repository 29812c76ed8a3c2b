// Runs llama.cpp (built by build.sh from node-llama-cpp's source bundle) on token ids in exact mode
// (flash attention off, F32 KV cache, one batch) and writes every F32 tensor of its graph, as the
// scheduler computes it, to DUMPDIR/<name>#<k>.bin (float32, ggml's element order) with an
// index.txt of names, ops and shapes; and all positions' logits to OUT_LOGITS.bin. Comparing these
// with the engine's intermediate rows finds the first operation whose bits differ
// (docs/oracle.md, "Finding the first differing operation").
//   tensor_dump MODEL.gguf IDS.json OUT_LOGITS.bin DUMPDIR|- [THREADS]
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

static std::string g_dir;
static std::map<std::string, int> g_count;
static FILE* g_index;

static bool cb(ggml_tensor* t, bool ask, void*) {
  if (ask) return true;
  if (t->type != GGML_TYPE_F32) return true;
  std::string name = t->name;
  for (auto& c : name) if (c == '/' || c == ' ' || c == '(' || c == ')') c = '_';
  int k = g_count[name]++;
  std::string fname = name + "#" + std::to_string(k);
  size_t n = ggml_nelements(t);
  std::vector<float> buf(n);
  const size_t es = sizeof(float);
  std::vector<uint8_t> raw(ggml_nbytes(t));
  ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
  size_t i = 0;
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          memcpy(&buf[i++], raw.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3] , es);
  FILE* f = fopen((g_dir + "/" + fname + ".bin").c_str(), "wb");
  fwrite(buf.data(), 4, n, f);
  fclose(f);
  fprintf(g_index, "%s %s %lld %lld %lld %lld\n", fname.c_str(), ggml_op_desc(t), (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
  return true;
}

int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "usage: tensor_dump MODEL.gguf IDS.json OUT_LOGITS.bin DUMPDIR|- [THREADS]\n"); return 2; }
  std::ifstream in(argv[2]);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  std::vector<llama_token> ids;
  for (size_t i = 0; i < s.size();) {
    if (isdigit(s[i])) { ids.push_back(atoi(s.c_str() + i)); while (i < s.size() && isdigit(s[i])) ++i; } else ++i;
  }
  g_dir = argv[4];
  int threads = argc > 5 ? atoi(argv[5]) : 1;
  llama_backend_init();
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  auto mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) { fprintf(stderr, "load failed\n"); return 1; }
  auto cp = llama_context_default_params();
  cp.n_ctx = ((ids.size() + 255) / 256) * 256;
  cp.n_batch = cp.n_ubatch = std::min<size_t>(512, cp.n_ctx);
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32;
  cp.n_threads = cp.n_threads_batch = threads;
  if (g_dir != "-") { cp.cb_eval = cb; g_index = fopen((g_dir + "/index.txt").c_str(), "w"); }
  llama_context* ctx = llama_init_from_model(model, cp);
  llama_batch b = llama_batch_init(ids.size(), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    b.token[i] = ids[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
  }
  b.n_tokens = ids.size();
  if (llama_decode(ctx, b) != 0) { fprintf(stderr, "decode failed\n"); return 1; }
  const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* f = fopen(argv[3], "wb");
  for (size_t i = 0; i < ids.size(); ++i) fwrite(llama_get_logits_ith(ctx, i), 4, nv, f);
  fclose(f);
  if (g_index) fclose(g_index);
  fprintf(stderr, "%zu tokens, vocab %d\n", ids.size(), nv);
  return 0;
}
