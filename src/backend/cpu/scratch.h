// Scratch memory of the CPU executor's passes (private to src/backend/cpu). Sized once for the
// largest batch; nothing here is allocated per token.
#pragma once
#include <initializer_list>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/matmul.h"

namespace clover::backend::cpu {

// A row-major [rows][cols] float matrix that keeps its storage.
struct Mat {
  std::vector<float> v;
  int64_t cols = 0;
  void resize(int64_t rows, int64_t c) {
    cols = c;
    v.assign(static_cast<size_t>(rows * c), 0.f);
  }
  float* row(int64_t r) { return v.data() + r * cols; }
  const float* row(int64_t r) const { return v.data() + r * cols; }
};

// One input matrix converted for every activation type its consumers need (files may mix weight
// types per tensor). prepare() converts, get() is then safe to call from any thread.
class ActSet {
 public:
  void reset(const float* x, int64_t rows, int64_t cols, int64_t stride) {
    x_ = x, rows_ = rows, cols_ = cols, stride_ = stride;
    for (bool& r : ready_) r = false;
  }
  void prepare(std::initializer_list<DType> weight_types) {
    for (DType w : weight_types) {
      const int i = index(kernels::activation_type(w));
      if (!ready_[i]) sets_[i].convert(x_, rows_, cols_, stride_, kernels::activation_type(w)), ready_[i] = true;
    }
  }
  const kernels::ActRows& get(DType weight_type) const { return sets_[index(kernels::activation_type(weight_type))]; }

 private:
  static int index(DType a) {
    return a == DType::F32 ? 0 : a == DType::F16 ? 1 : a == DType::BF16 ? 2 : a == DType::Q8_0 ? 3 : a == DType::Q8_1 ? 5 : 4;  // 4: Q8_K
  }
  kernels::ActRows sets_[6];
  bool ready_[6] = {};
  const float* x_ = nullptr;
  int64_t rows_ = 0, cols_ = 0, stride_ = 0;
};

}  // namespace clover::backend::cpu
