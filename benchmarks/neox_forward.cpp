// Forward-pass throughput of the GPT-NeoX model (neox/model.hpp) on a pythia-160m-shaped
// network with random weights, for the side-by-side comparison with Hugging Face transformers
// (benchmarks/compare_neox_hf.py). A plain program, not a Google Benchmark suite: each
// sequence length prints one JSON line.
//
//   neox_forward                                   # (make bench) T = 128 and 512, default threads
//   neox_forward --threads 2 --lengths 128,512 --repeats 5
//
// tokens_per_s = T / (median seconds of one forward over `repeats` runs after one warm-up);
// one forward is one sequence of T random tokens -> logits [T, 50304] at every position, as
// GPTNeoXForCausalLM(input_ids[1, T]).logits. Weights (values do not change the speed): matrices
// uniform in +-1/sqrt(fan_in) (PyTorch's Linear init), biases uniform in +-1/sqrt(d_model),
// N(0, 1) embeddings, LayerNorm weight 1 and bias 0.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <emergent/core/cpu.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/neox/model.hpp>
#include <emergent/nn/gemm.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  int threads = 0;  // 0: OpenMP's default
  std::vector<int> lengths = {128, 512};
  int repeats = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--threads") {
      o.threads = std::stoi(value());
    } else if (arg == "--repeats") {
      o.repeats = std::max(1, std::stoi(value()));
    } else if (arg == "--lengths") {
      o.lengths.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) o.lengths.push_back(std::stoi(item));
    } else {
      throw std::runtime_error("unknown argument " + arg +
                               " (--threads N, --lengths 128,512, --repeats R)");
    }
  }
  return o;
}

emergent::NeoxConfig pythia_160m_config() {
  emergent::NeoxConfig c;
  c.vocab_size = 50304;
  c.hidden_size = 768;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 12;
  c.intermediate_size = 3072;
  c.rotary_pct = 0.25;
  c.max_position_embeddings = 2048;
  return c;
}

void randomize(emergent::neox::Network& net) {
  std::uint64_t stream = 0;
  for (const auto& t : emergent::neox::checkpoint_tensors(net.config())) {
    const std::span<float> values = net.parameter(t.name);
    const emergent::PhiloxStream rng(2024, stream++);
    if (t.name.find("layernorm") != std::string::npos ||
        t.name.find("layer_norm") != std::string::npos) {
      std::fill(values.begin(), values.end(), t.name.ends_with("weight") ? 1.0f : 0.0f);
    } else if (t.name.find("embed_in") != std::string::npos) {
      emergent::parallel_for(static_cast<std::int64_t>(values.size()), [&](std::int64_t i) {
        values[i] = static_cast<float>(rng.normal(i));
      });
    } else {
      const std::int64_t fan_in = t.shape.back();
      const float bound =
          1.0f /
          std::sqrt(static_cast<float>(t.shape.size() == 2 ? fan_in : net.config().hidden_size));
      emergent::parallel_for(static_cast<std::int64_t>(values.size()), [&](std::int64_t i) {
        values[i] = (2.0f * rng.uniform(i) - 1.0f) * bound;
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  using emergent::neox::NeoxModel;
  using emergent::neox::pythia_160m;
  try {
    const Options o = parse(argc, argv);
    if (o.threads > 0) {
      emergent::set_thread_count(o.threads);
      Eigen::setNbThreads(o.threads);
    }
    NeoxModel<pythia_160m> net(pythia_160m_config());
    randomize(net);
    const emergent::PhiloxStream token_rng(7, 0);
    for (const int T : o.lengths) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(T));
      for (int t = 0; t < T; ++t) tokens[t] = static_cast<std::int32_t>(token_rng.below(t, 50304));
      volatile float sink = net.forward(tokens).back();  // warm-up
      std::vector<double> seconds;
      for (int r = 0; r < o.repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        sink = net.forward(tokens).back();
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      (void)sink;
      std::sort(seconds.begin(), seconds.end());
      const double median = seconds[seconds.size() / 2];
      std::cout << nlohmann::json{{"model", "pythia-160m"},
                                  {"cpu", emergent::cpu::info().model},
                                  {"gemm", emergent::nn::gemm_description()},
                                  {"length", T},
                                  {"threads", emergent::thread_count()},
                                  {"repeats", o.repeats},
                                  {"seconds_median", median},
                                  {"seconds_min", seconds.front()},
                                  {"tokens_per_s", T / median}}
                       .dump()
                << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "neox_forward: " << e.what() << '\n';
    return 1;
  }
}
