// How much an encoder's attention prefers nearby tokens (the "proximity bias" of the
// self-pretraining study, docs/paper-notes.md §7), per layer and head, from the last forward
// pass of an Encoder over a batch (padding excluded):
//   score profile   S(o): the mean pre-softmax score q_i . k_j / sqrt(d_head) over the real
//                   pairs with offset o = j - i (the bias of an intervention not included);
//   mass profile    M(o): the mean attention probability A_i,i+o over the queries that have a
//                   key at that offset;
//   distance        the mean over real queries of sum_j A_ij |i - j|;
//   proximity       1 - distance / (the same with uniform attention over the sequence): 0 for
//                   uniform attention, 1 for attention on the query itself, negative for
//                   attention farther than uniform;
// and for the first layer, the position-position part of the query-key form,
//   Q(o) = mean_i p_i^T W_Q,h^T W_K,h p_{i+o} / sqrt(d_head)   (p = the position table),
// the term through which absolute positions become distance-biased scores. It leaves out the
// first LayerNorm (which rescales p with the token), so it is the form's shape, not its size.
// Profiles cover offsets -max_offset .. max_offset.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

namespace emergent {

struct HeadProximity {
  std::vector<double> score_profile, mass_profile;  // [2 * max_offset + 1], offset -max..max
  double distance = 0, proximity = 0;
};

struct ProximityReport {
  int max_offset = 0;
  std::vector<std::vector<HeadProximity>> heads;   // [layers][heads]
  std::vector<std::vector<double>> position_form;  // [heads][2 * max_offset + 1], layer 0
};

// Per layer and head, from the Encoder workspace `ws` of the last forward (Net::Workspace).
template <class Net>
ProximityReport proximity_report(std::span<const typename Net::Scalar> params,
                                 const typename Net::Workspace& ws, int max_offset) {
  constexpr int H = Net::H, L = Net::L, D = Net::D, Dh = D / H;
  const int B = ws.batch, T = ws.length, width = 2 * max_offset + 1;
  const double scale = 1.0 / std::sqrt(double(Dh));
  ProximityReport report;
  report.max_offset = max_offset;
  report.heads.assign(L, std::vector<HeadProximity>(H));
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      HeadProximity& out = report.heads[l][h];
      std::vector<double> score_sum(width, 0.0), mass_sum(width, 0.0);
      std::vector<std::int64_t> pairs(width, 0);
      double distance = 0, uniform = 0;
      std::int64_t queries = 0;
      const auto& acts = ws.layers[l].mixer;
      for (int b = 0; b < B; ++b) {
        const int n = ws.lengths[b];
        const std::size_t head = (static_cast<std::size_t>(b) * H + h) * T;
        const auto* q = acts.q + head * Dh;
        const auto* k = acts.k + head * Dh;
        const auto* att = acts.att + head * T;
        for (int i = 0; i < n; ++i) {
          double d = 0, u = 0;
          for (int j = 0; j < n; ++j) {
            const double a = att[static_cast<std::size_t>(i) * T + j];
            d += a * std::abs(i - j);
            u += std::abs(i - j);
            const int o = j - i;
            if (std::abs(o) > max_offset) continue;
            double s = 0;
            for (int e = 0; e < Dh; ++e) s += double(q[i * Dh + e]) * double(k[j * Dh + e]);
            score_sum[o + max_offset] += s * scale;
            mass_sum[o + max_offset] += a;
            pairs[o + max_offset]++;
          }
          distance += d;
          uniform += u / n;
          ++queries;
        }
      }
      out.score_profile.resize(width);
      out.mass_profile.resize(width);
      for (int o = 0; o < width; ++o) {
        out.score_profile[o] = pairs[o] ? score_sum[o] / double(pairs[o]) : 0.0;
        out.mass_profile[o] = pairs[o] ? mass_sum[o] / double(pairs[o]) : 0.0;
      }
      out.distance = queries ? distance / double(queries) : 0.0;
      out.proximity = uniform > 0 ? 1.0 - distance / uniform : 0.0;
    }

  // Layer 0's position-position form over the positions of the batch.
  const auto* p = params.data() + Net::pos;
  const auto* w = params.data() + Net::mixer_offset(0) + Net::Mixer::qkv_weight;  // [3D, D]
  report.position_form.assign(H, std::vector<double>(width, 0.0));
  std::vector<double> qp(static_cast<std::size_t>(T) * D), kp(static_cast<std::size_t>(T) * D);
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < D; ++r) {
      double sq = 0, sk = 0;
      for (int c = 0; c < D; ++c) {
        sq += double(w[static_cast<std::size_t>(r) * D + c]) * double(p[t * D + c]);
        sk += double(w[static_cast<std::size_t>(D + r) * D + c]) * double(p[t * D + c]);
      }
      qp[static_cast<std::size_t>(t) * D + r] = sq;
      kp[static_cast<std::size_t>(t) * D + r] = sk;
    }
  for (int h = 0; h < H; ++h)
    for (int o = -max_offset; o <= max_offset; ++o) {
      double sum = 0;
      int count = 0;
      for (int i = 0; i < T; ++i) {
        const int j = i + o;
        if (j < 0 || j >= T) continue;
        double s = 0;
        for (int e = h * Dh; e < (h + 1) * Dh; ++e)
          s += qp[static_cast<std::size_t>(i) * D + e] * kp[static_cast<std::size_t>(j) * D + e];
        sum += s * scale;
        ++count;
      }
      report.position_form[h][o + max_offset] = count ? sum / count : 0.0;
    }
  return report;
}

// The report as metrics.jsonl columns: per layer, per head.
inline void add_proximity_columns(nlohmann::json& row, const ProximityReport& r) {
  nlohmann::json distance, proximity, scores, masses;
  for (const auto& layer : r.heads) {
    nlohmann::json d, p, s, m;
    for (const HeadProximity& h : layer) {
      d.push_back(h.distance);
      p.push_back(h.proximity);
      s.push_back(h.score_profile);
      m.push_back(h.mass_profile);
    }
    distance.push_back(d);
    proximity.push_back(p);
    scores.push_back(s);
    masses.push_back(m);
  }
  row["attention_distance"] = distance;
  row["proximity"] = proximity;
  row["score_profile"] = scores;
  row["mass_profile"] = masses;
  row["position_form"] = r.position_form;
  row["profile_offsets"] = nlohmann::json::array({-r.max_offset, r.max_offset});
}

}  // namespace emergent
