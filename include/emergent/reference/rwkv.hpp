// RWKV-4 time mixing and channel mixing of ONE sequence (Peng et al., arXiv:2305.13048;
// BlinkDL/RWKV-LM RWKV-v4neo/src/model.py), in double, written for clarity, with hand-derived
// backward passes. They check mixers/rwkv.hpp and mixers/rwkv_channel_mix.hpp (tests only).
// Parameters by the mixers' local names; x [T,D].
//
// Token shift and mix (both mixers): shifted_t = x_{t-1}, shifted_0 = 0;
//   mixed = x * mix + shifted * (1 - mix)                       (mix [1,D], per channel)
//   backward: dx_t += d_mixed_t * mix + d_mixed_{t+1} * (1 - mix);  d_mix += sum_t d_mixed_t (x_t -
//   shifted_t)
//
// WKV, per channel, written as what it is: a causal softmax over the logits
//   logit_{t,i} = k_i - (t-1-i) w   (i < t),   logit_{t,t} = u + k_t,   w = exp(time_decay), u =
//   time_first p_{t,.} = softmax(logit_{t,.}),  wkv_t = sum_{i<=t} p_{t,i} v_i
// This is the direct formula of the research notes (A3.3) with the maximum logit subtracted
// before exp, and it is independent of the fast path's running-max recurrence. Its backward is
// the softmax one: with g_t = dL/dwkv_t and dlogit_{t,i} = g_t p_{t,i} (v_i - wkv_t),
//   dv_i += g_t p_{t,i},  dk_i += dlogit_{t,i},  du += dlogit_{t,t},
//   dw += -(t-1-i) dlogit_{t,i} (i < t),  d time_decay = dw * w.
//
// Time mixing:  k, v, r = xk Wk^T, xv Wv^T, xr Wr^T;  y = (sigmoid(r) * wkv) Wo^T.
// Channel mixing: h = relu(xk Wk^T)^2 [T,F];  y = sigmoid(xr Wr^T) * (h Wv^T).
#pragma once

#include <algorithm>
#include <cmath>
#include <emergent/core/error.hpp>
#include <emergent/reference/linear.hpp>
#include <emergent/reference/matrix.hpp>
#include <emergent/reference/mixer.hpp>
#include <limits>
#include <vector>

namespace emergent::reference {

namespace rwkv {

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// x [T,D] -> x shifted down one row, zero first row
inline Matrix token_shift(const Matrix& x) {
  Matrix shifted = Matrix::Zero(x.rows(), x.cols());
  for (Index t = 1; t < x.rows(); ++t) shifted.row(t) = x.row(t - 1);
  return shifted;
}

// x, shifted [T,D], mix [1,D] -> x * mix + shifted * (1 - mix)
inline Matrix mix(const Matrix& x, const Matrix& shifted, const Matrix& mix) {
  Matrix out(x.rows(), x.cols());
  for (Index t = 0; t < x.rows(); ++t)
    for (Index c = 0; c < x.cols(); ++c)
      out(t, c) = x(t, c) * mix(0, c) + shifted(t, c) * (1.0 - mix(0, c));
  return out;
}

// Adds the gradient of mix(x, token_shift(x), mix) into dx [T,D] and d_mix [1,D].
inline void mix_backward(const Matrix& d_mixed, const Matrix& x, const Matrix& mix, Matrix& dx,
                         Matrix& d_mix) {
  const Matrix shifted = token_shift(x);
  for (Index t = 0; t < x.rows(); ++t)
    for (Index c = 0; c < x.cols(); ++c) {
      dx(t, c) += d_mixed(t, c) * mix(0, c);
      if (t + 1 < x.rows()) dx(t, c) += d_mixed(t + 1, c) * (1.0 - mix(0, c));
      d_mix(0, c) += d_mixed(t, c) * (x(t, c) - shifted(t, c));
    }
}

// Softmax weights p_{t,0..t} of one channel at step t (see the header).
inline std::vector<double> wkv_weights(const Matrix& k, Index t, Index c, double decay_rate,
                                       double bonus) {
  std::vector<double> p(static_cast<std::size_t>(t + 1));
  double largest = -std::numeric_limits<double>::infinity();
  for (Index i = 0; i <= t; ++i) {
    const double logit = i < t ? k(i, c) - double(t - 1 - i) * decay_rate : bonus + k(t, c);
    p[static_cast<std::size_t>(i)] = logit;
    largest = std::max(largest, logit);
  }
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - largest));
  for (double& v : p) v /= sum;
  return p;
}

// k, v [T,C], time_decay, time_first [1,C] -> wkv [T,C]
inline Matrix wkv_forward(const Matrix& k, const Matrix& v, const Matrix& time_decay,
                          const Matrix& time_first) {
  require(k.rows() == v.rows() && k.cols() == v.cols(), "wkv_forward", "k and v differ in shape");
  Matrix wkv = Matrix::Zero(k.rows(), k.cols());
  for (Index c = 0; c < k.cols(); ++c) {
    const double w = std::exp(time_decay(0, c)), u = time_first(0, c);
    for (Index t = 0; t < k.rows(); ++t) {
      const std::vector<double> p = wkv_weights(k, t, c, w, u);
      for (Index i = 0; i <= t; ++i) wkv(t, c) += p[static_cast<std::size_t>(i)] * v(i, c);
    }
  }
  return wkv;
}

struct WkvGradients {
  Matrix dk, dv;                      // [T,C]
  Matrix d_time_decay, d_time_first;  // [1,C]
};

// d_wkv [T,C] -> gradients of k, v, time_decay, time_first
inline WkvGradients wkv_backward(const Matrix& k, const Matrix& v, const Matrix& time_decay,
                                 const Matrix& time_first, const Matrix& d_wkv) {
  const Index T = k.rows(), C = k.cols();
  WkvGradients g{Matrix::Zero(T, C), Matrix::Zero(T, C), Matrix::Zero(1, C), Matrix::Zero(1, C)};
  for (Index c = 0; c < C; ++c) {
    const double w = std::exp(time_decay(0, c)), u = time_first(0, c);
    double dw = 0;
    for (Index t = 0; t < T; ++t) {
      const std::vector<double> p = wkv_weights(k, t, c, w, u);
      double wkv = 0;
      for (Index i = 0; i <= t; ++i) wkv += p[static_cast<std::size_t>(i)] * v(i, c);
      for (Index i = 0; i <= t; ++i) {
        const double pi = p[static_cast<std::size_t>(i)];
        const double d_logit = d_wkv(t, c) * pi * (v(i, c) - wkv);
        g.dv(i, c) += d_wkv(t, c) * pi;
        g.dk(i, c) += d_logit;
        if (i == t)
          g.d_time_first(0, c) += d_logit;
        else
          dw -= double(t - 1 - i) * d_logit;
      }
    }
    g.d_time_decay(0, c) = dw * w;
  }
  return g;
}

}  // namespace rwkv

// RWKV-4 time mixing (mixers/rwkv.hpp).
struct RwkvReference {
  struct Forward {
    Matrix xk, xv, xr, k, v, r, wkv, gated;  // gated = sigmoid(r) * wkv
  };

  static Forward run(const MixerParameters& p, const Matrix& x) {
    Forward f;
    const Matrix shifted = rwkv::token_shift(x);
    f.xk = rwkv::mix(x, shifted, p.at("time_mix_k"));
    f.xv = rwkv::mix(x, shifted, p.at("time_mix_v"));
    f.xr = rwkv::mix(x, shifted, p.at("time_mix_r"));
    f.k = linear_forward(f.xk, p.at("key.weight"));
    f.v = linear_forward(f.xv, p.at("value.weight"));
    f.r = linear_forward(f.xr, p.at("receptance.weight"));
    f.wkv = rwkv::wkv_forward(f.k, f.v, p.at("time_decay"), p.at("time_first"));
    f.gated = f.wkv;
    for (Index i = 0; i < f.gated.size(); ++i) f.gated.data()[i] *= rwkv::sigmoid(f.r.data()[i]);
    return f;
  }

  Matrix forward(const MixerParameters& p, const Matrix& x) const {
    return linear_forward(run(p, x).gated, p.at("output.weight"));
  }

  MixerGradients backward(const MixerParameters& p, const Matrix& x, const Matrix& dy) const {
    const Forward f = run(p, x);
    MixerGradients g{Matrix::Zero(x.rows(), x.cols()), zeros_like(p)};
    const Matrix d_gated =
        linear_backward(dy, f.gated, p.at("output.weight"), g.dparams["output.weight"]);
    Matrix d_wkv(d_gated.rows(), d_gated.cols()), d_r(d_gated.rows(), d_gated.cols());
    for (Index i = 0; i < d_gated.size(); ++i) {
      const double s = rwkv::sigmoid(f.r.data()[i]);
      d_wkv.data()[i] = d_gated.data()[i] * s;
      d_r.data()[i] = d_gated.data()[i] * f.wkv.data()[i] * s * (1.0 - s);
    }
    const rwkv::WkvGradients gw =
        rwkv::wkv_backward(f.k, f.v, p.at("time_decay"), p.at("time_first"), d_wkv);
    g.dparams["time_decay"] = gw.d_time_decay;
    g.dparams["time_first"] = gw.d_time_first;
    const Matrix d_xk = linear_backward(gw.dk, f.xk, p.at("key.weight"), g.dparams["key.weight"]);
    const Matrix d_xv =
        linear_backward(gw.dv, f.xv, p.at("value.weight"), g.dparams["value.weight"]);
    const Matrix d_xr =
        linear_backward(d_r, f.xr, p.at("receptance.weight"), g.dparams["receptance.weight"]);
    rwkv::mix_backward(d_xk, x, p.at("time_mix_k"), g.dx, g.dparams["time_mix_k"]);
    rwkv::mix_backward(d_xv, x, p.at("time_mix_v"), g.dx, g.dparams["time_mix_v"]);
    rwkv::mix_backward(d_xr, x, p.at("time_mix_r"), g.dx, g.dparams["time_mix_r"]);
    return g;
  }
};

// RWKV-4 channel mixing (mixers/rwkv_channel_mix.hpp).
struct RwkvChannelMixReference {
  struct Forward {
    Matrix xk, xr, pre, hidden, kv, r;  // pre = xk Wk^T, hidden = relu(pre)^2, kv = hidden Wv^T
  };

  static Forward run(const MixerParameters& p, const Matrix& x) {
    Forward f;
    const Matrix shifted = rwkv::token_shift(x);
    f.xk = rwkv::mix(x, shifted, p.at("time_mix_k"));
    f.xr = rwkv::mix(x, shifted, p.at("time_mix_r"));
    f.pre = linear_forward(f.xk, p.at("key.weight"));
    f.hidden = f.pre;
    for (Index i = 0; i < f.hidden.size(); ++i) {
      const double relu = std::max(0.0, f.pre.data()[i]);
      f.hidden.data()[i] = relu * relu;
    }
    f.kv = linear_forward(f.hidden, p.at("value.weight"));
    f.r = linear_forward(f.xr, p.at("receptance.weight"));
    return f;
  }

  Matrix forward(const MixerParameters& p, const Matrix& x) const {
    const Forward f = run(p, x);
    Matrix y = f.kv;
    for (Index i = 0; i < y.size(); ++i) y.data()[i] *= rwkv::sigmoid(f.r.data()[i]);
    return y;
  }

  MixerGradients backward(const MixerParameters& p, const Matrix& x, const Matrix& dy) const {
    const Forward f = run(p, x);
    MixerGradients g{Matrix::Zero(x.rows(), x.cols()), zeros_like(p)};
    Matrix d_kv(dy.rows(), dy.cols()), d_r(dy.rows(), dy.cols());
    for (Index i = 0; i < dy.size(); ++i) {
      const double s = rwkv::sigmoid(f.r.data()[i]);
      d_kv.data()[i] = dy.data()[i] * s;
      d_r.data()[i] = dy.data()[i] * f.kv.data()[i] * s * (1.0 - s);
    }
    Matrix d_pre = linear_backward(d_kv, f.hidden, p.at("value.weight"), g.dparams["value.weight"]);
    for (Index i = 0; i < d_pre.size(); ++i)
      d_pre.data()[i] *= 2.0 * std::max(0.0, f.pre.data()[i]);
    const Matrix d_xk = linear_backward(d_pre, f.xk, p.at("key.weight"), g.dparams["key.weight"]);
    const Matrix d_xr =
        linear_backward(d_r, f.xr, p.at("receptance.weight"), g.dparams["receptance.weight"]);
    rwkv::mix_backward(d_xk, x, p.at("time_mix_k"), g.dx, g.dparams["time_mix_k"]);
    rwkv::mix_backward(d_xr, x, p.at("time_mix_r"), g.dx, g.dparams["time_mix_r"]);
    return g;
  }
};

}  // namespace emergent::reference
