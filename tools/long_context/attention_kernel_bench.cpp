// Attention kernel speed, one thread, 32 query rows against N keys of one KV head, per instruction set
// (CPU time, best of 7). Not part of the build; compile against a built kernels library:
//   g++ -O2 -std=c++20 -Isrc tools/long_context/attention_kernel_bench.cpp build/src/kernels/libclover_kernels.a -o /tmp/akb
//   /tmp/akb HEAD_DIM KEYS [f16]
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/convert.h"
#include <chrono>
#include <ctime>
#include <cstdio>
#include <vector>
#include <random>
using namespace clover; using namespace clover::kernels;
int main(int argc, char** argv){
  int hd = atoi(argv[1]); int64_t n = atoll(argv[2]); DType t = argc>3 && argv[3][0]=='h' ? DType::F16 : DType::F32;
  std::vector<float> kf(n*hd), vf(n*hd); std::mt19937 r(1); std::normal_distribution<float> nd;
  for(auto&x:kf)x=nd(r); for(auto&x:vf)x=nd(r);
  size_t rb = dtype_row_bytes(t, hd);
  std::vector<uint8_t> kb(n*rb), vb(n*rb);
  for(int64_t j=0;j<n;++j){ quantize_row(t,kf.data()+j*hd,kb.data()+j*rb,hd); quantize_row(t,vf.data()+j*hd,vb.data()+j*rb,hd);}  
  std::vector<std::vector<float>> q(32,std::vector<float>(hd)), o(32,std::vector<float>(hd));
  std::vector<const float*> qp; std::vector<float*> op; std::vector<int64_t> nk(32,n);
  for(int i=0;i<32;++i){for(auto&x:q[i])x=nd(r); qp.push_back(q[i].data()); op.push_back(o[i].data());}
  AttentionRows rows{qp.data(),op.data(),nk.data(),32};
  AttentionScratch s;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) { isa_force(isa);
  double sec=1e9; for(int rep=0;rep<7;++rep){
  auto t0=clock();
  attention(rows,hd,0.1f,{t,kb.data(),rb},{t,vb.data(),rb},s);
  sec=std::min(sec,double(clock()-t0)/CLOCKS_PER_SEC);}
  printf("%s hd %d keys %ld: %.3f s, %.2f GMAC/s\n", std::string(isa_name(isa)).c_str(), hd, (long)n, sec, 32.0*n*hd*2/sec/1e9);}
}
