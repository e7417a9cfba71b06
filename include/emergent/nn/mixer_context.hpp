// MixerContext: the run-time inputs of a token mixer (batch, length, attention bias, padding),
// the same for every mixer (mixers/mixer.hpp) and for the MLP sublayer that shares a block's
// call (nn/mlp.hpp). It sits below both, as it depends on nothing.
#pragma once

namespace emergent {

// Run-time inputs of a mixer that do not change the architecture.
template <class Real>
struct MixerContext {
  int batch = 0;
  int length = 0;
  // Additive attention bias c * P[query, key], P [length, length]; null when there is none.
  // Mixers without attention logits ignore it.
  const Real* bias_pattern = nullptr;
  Real bias_strength = 0;
  // Used by bidirectional mixers (causal ones ignore them):
  //   lengths [batch]: the real tokens of each sequence; keys at or past a sequence's length are
  //     padding and get no attention. Null: every sequence is `length` long.
  //   head_bias_strength [heads]: added to bias_strength per head (a learned per-head slope).
  //   bias_strength_grad [heads]: where backward accumulates dL/d(strength) of each head, the
  //     derivative of the loss along adding strength * P to that head's scores (needs the
  //     pattern, even at strength 0).
  const int* lengths = nullptr;
  const Real* head_bias_strength = nullptr;
  Real* bias_strength_grad = nullptr;
  // 0: one bias pattern for every sequence; length * length: a pattern per sequence
  // [batch, length, length] (a task whose target differs per sequence, Dyck). Causal dot
  // attention reads it; the bidirectional encoder's bias is always shared.
  long bias_stride = 0;
};

}  // namespace emergent
