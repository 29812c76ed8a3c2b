// One value of the MoE layer's output, the twin of the last loop of model/moe.cpp:
//   y[t][i] = sum_j w[t][j] * down[row_of[t * k + j]][i]  +  sigmoid(gamma[t]) * shared[t][i]
// summed in slot order from 0, as the CPU. The including shader declares the buffers `down`
// ([routed rows][n]), `sh` ([tokens][n]), `wts` ([tokens][k]), `grp` (moe_group.comp's layout) and
// `gamma` ([tokens], gamma_stride apart). Shared by moe_combine.comp and rms_norm.comp COMBINE, so
// the fused residual add is bitwise the separate one.
float combine_value(uint t, uint i, uint n, uint k, uint tokens, uint n_expert, uint gamma_stride) {
  const uint row_of = 2u * n_expert + tokens * k;
  float acc = 0.0;
  for (uint j = 0; j < k; ++j) acc += wts[t * k + j] * down[uint(grp[row_of + t * k + j]) * n + i];
  const float gm = 1.0 / (1.0 + exp(-gamma[t * gamma_stride]));
  return acc + gm * sh[t * n + i];
}
