// One training step of an ensemble on the device, as the trainer (train/ensemble_trainer.cuh)
// runs it, with nothing in it that waits for the host:
//
//   host:   the step's scalars (each member's step index; its AdamW learning rate and bias
//           corrections) written to the device as launch arguments; a task sampled on the host
//           is uploaded
//   device: the batch of a task the device samples (the linear map, the cellular automaton:
//           reading the step index there), zero
//           gradients, forward, backward, each member's gradient norm and clipping factor, the
//           AdamW update, and the non-finite check, which records each member's first step whose
//           loss or gradient norm is not finite
//
// The losses, gradient norms, held-out parts of the loss and the non-finite record stay on the
// device; report() copies them to the host in one copy, for the steps that log or checkpoint.
//
// Under CUDA the device part is captured once as a CUDA graph (after one direct run, which makes
// cuBLAS's plans and the scratch buffers) and replayed each step: one launch instead of one per
// kernel. EMERGENT_DEVICE_GRAPH=0 runs it directly, as the OpenMP build always does, and so does
// the profiling mode (cuda/profile.cuh), whose events go between the kernels. The graph runs the
// same kernels in the same order on the same buffers, so it gives the same bits (the GPU test
// checks that).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <emergent/cuda/adamw.cuh>
#include <emergent/cuda/cellular_automaton.cuh>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/linear_map.cuh>
#include <emergent/cuda/model.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/optim/adamw.hpp>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace emergent::cuda {

// The samplers of the tasks whose batches the device makes itself, from the CPU's Philox draws:
// nothing is sampled on the host or uploaded for them.
using DeviceSampler = std::variant<DeviceLinearMap, DeviceCellularAutomaton>;

// x is neither infinite nor NaN (on the host and on the device)
EMERGENT_HD inline bool is_finite(double x) { return x - x == 0.0; }

// What held_out() returns for each member: its losses on its held-out set.
struct HeldOutLosses {
  double loss, part_loss, part_accuracy;
};

// What report() returns for each member.
struct MemberReport {
  double loss, gradient_norm, part_loss, part_accuracy;
  std::optional<std::int64_t> nonfinite_step;  // the first step whose loss or norm was not finite
  double nonfinite_loss, nonfinite_norm;       // that step's
};

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = ::emergent::GeluMlp>
class EnsembleStep {
 public:
  using Device = EnsembleModel<MixerT, S, ChannelT>;
  static constexpr std::size_t P = Device::P;
  static constexpr int kReport = 7;  // doubles per member in report_

  // sampler: the members' task, when the device samples it (none: batches uploaded by the
  // caller with upload_batch before each run()); seeds: each member's data seed. The bias
  // intervention is the model's (model.set_bias).
  EnsembleStep(int members, int batch, int length, const AdamWConfig& adamw,
               const std::vector<DecayRange>& ranges, std::optional<DeviceSampler> sampler,
               const std::vector<std::uint64_t>& seeds)
      : model(members, batch, length),
        optimizer(adamw, ranges, P, members),
        members_(members),
        batch_(batch),
        steps_(members),
        nonfinite_step_(members),
        nonfinite_values_(2 * std::size_t(members)),
        report_(kReport * std::size_t(members)),
        data_(std::move(sampler)) {
    copy_to_device<std::uint64_t>(seeds, seeds_);
    fill(raw(nonfinite_step_), members, std::int64_t(-1));
    const char* graph = std::getenv("EMERGENT_DEVICE_GRAPH");
    use_graph_ = EMERGENT_DEVICE_IS_CUDA && !(graph && std::string(graph) == "0");
  }
  EnsembleStep(const EnsembleStep&) = delete;
  EnsembleStep& operator=(const EnsembleStep&) = delete;
  ~EnsembleStep() {
#if EMERGENT_DEVICE_IS_CUDA
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
#endif
  }

  Device model;
  EnsembleAdamW optimizer;

  // A host-sampled batch for the next run() (inputs and targets [E, B, T]).
  void upload_batch(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
    OpScope scope("data.upload");
    copy_to_device<std::int32_t>(inputs, model.inputs);
    copy_to_device<std::int32_t>(targets, model.targets);
  }

  // One step of every member: member e's step steps[e] (0-based; the members of a mixed ensemble
  // resume from their own checkpoints) with learning rate lr[e] (0: the member is left as it
  // is). Returns at once: the device runs on.
  void run(std::span<const std::int64_t> steps, std::span<const double> lr) {
    require(steps.size() == std::size_t(members_), "EnsembleStep", "one step index per member");
    const std::vector<std::uint64_t> indices(steps.begin(), steps.end());
    {
      OpScope scope("step.scalars");
      write_by_launches<std::uint64_t>(indices, raw(steps_));
    }
    optimizer.prepare(lr);
#if EMERGENT_DEVICE_IS_CUDA
    if (use_graph_ && !OpProfiler::instance().enabled()) {
      if (!exec_ && ran_directly_) capture();
      if (exec_) {
        ++device_counts().launches;
        check_cuda(cudaGraphLaunch(exec_, device_stream()), "cudaGraphLaunch");
        return;
      }
    }
#endif
    device_part();
    ran_directly_ = true;
  }
  // Every member at step `step` with learning rate lr.
  void run(std::int64_t step, double lr) {
    run(std::vector<std::int64_t>(members_, step), std::vector<double>(members_, lr));
  }

  // Each member's numbers of the last step, and the non-finite record, in one copy: the held-out
  // part of the loss and its accuracy under the weights `part` [T].
  std::vector<MemberReport> report(const DeviceVector<float>& part) {
    double* out = raw(report_);
    const double* losses = model.losses();
    const double* norms = optimizer.norms();
    const std::int64_t* bad_step = raw(nonfinite_step_);
    const double* bad = raw(nonfinite_values_);
    {
      OpScope scope("report");
      for_each_index(members_, [=] EMERGENT_HD(std::int64_t e) {
        out[e * kReport + 0] = losses[e];
        out[e * kReport + 1] = norms[e];
        out[e * kReport + 4] = double(bad_step[e]);
        out[e * kReport + 5] = bad[2 * e];
        out[e * kReport + 6] = bad[2 * e + 1];
      });
      model.weighted_loss_on_device(out + 2, kReport, part);
      model.weighted_accuracy_on_device(out + 3, kReport, part);
    }
    const std::vector<double> host = copy_to_host(report_);
    std::vector<MemberReport> members(members_);
    for (int e = 0; e < members_; ++e) {
      const double* r = host.data() + std::size_t(e) * kReport;
      members[e] = {r[0], r[1], r[2], r[3], std::nullopt, r[5], r[6]};
      if (r[4] >= 0) members[e].nonfinite_step = std::int64_t(r[4]);
    }
    return members;
  }

  // Each member's losses on its fixed held-out set with its parameters as they are now (the
  // trainer's eval_every, after a step's update, as the CPU trainer evaluates): forward only, the
  // model's loss weights, bias and `part` weights as the steps have them. Batch b of every member
  // is inputs[b], targets[b] ([E, B, T] each); member e averages the first batches[e] of them, in
  // order (as train/compiled_model.hpp's held_out_losses). Uploads each batch, copies back once;
  // it overwrites the last step's batch and losses, so report() them first. `with_batch(b)`, if
  // given, runs after batch b's upload (a task with weights per sequence uploads that batch's
  // weights, `part` among them, and bias patterns there).
  std::vector<HeldOutLosses> held_out(const std::vector<std::vector<std::int32_t>>& inputs,
                                      const std::vector<std::vector<std::int32_t>>& targets,
                                      std::span<const int> batches, const DeviceVector<float>& part,
                                      const std::function<void(int)>& with_batch = {}) {
    const int E = members_, n = int(inputs.size());
    require(targets.size() == inputs.size() && batches.size() == std::size_t(E), "held_out",
            "needs targets for each batch and a batch count per member");
    held_out_.resize(std::size_t(3) * E * n);
    for (int b = 0; b < n; ++b) {
      upload_batch(inputs[b], targets[b]);
      if (with_batch) with_batch(b);
      model.forward_on_device();
      double* out = raw(held_out_) + std::size_t(3) * E * b;  // [E][loss, part, accuracy]
      const double* losses = model.losses();
      OpScope scope("held_out");
      for_each_index(E, [=] EMERGENT_HD(std::int64_t e) { out[3 * e] = losses[e]; });
      model.weighted_loss_on_device(out + 1, 3, part);
      model.weighted_accuracy_on_device(out + 2, 3, part);
    }
    const std::vector<double> host = copy_to_host(held_out_);
    std::vector<HeldOutLosses> members(E, HeldOutLosses{0, 0, 0});
    for (int e = 0; e < E; ++e) {
      const int count = std::min(batches[e], n);
      require(count >= 1, "held_out", "a member evaluates on at least one batch");
      HeldOutLosses& m = members[e];
      for (int b = 0; b < count; ++b) {
        const double* r = host.data() + std::size_t(3) * (std::size_t(E) * b + e);
        m.loss += r[0];
        m.part_loss += r[1];
        m.part_accuracy += r[2];
      }
      m.loss /= count;
      m.part_loss /= count;
      m.part_accuracy /= count;
    }
    return members;
  }

  // Whether the batches are sampled on the device, not uploaded.
  bool samples_on_device() const { return data_.has_value(); }

  // Whether run() replays a CUDA graph (CUDA only; before the first run()).
  void set_graph(bool on) { use_graph_ = EMERGENT_DEVICE_IS_CUDA && on; }

  // The nodes (kernels) of the captured graph (0 before capture, or without a graph).
  std::int64_t graph_launches() const { return graph_launches_; }

  // Everything of a step that runs on the device, reading the step's scalars there (run() calls
  // it, or replays its graph; public only because nvcc's device lambdas may not be in private
  // member functions).
  void device_part() {
    const int E = members_, B = batch_;
    if (data_) {
      OpScope scope("data.sample");
      std::visit(
          [&](const auto& task) {
            task.sample(raw(seeds_), E, raw(steps_), B, raw(model.inputs), raw(model.targets));
          },
          *data_);
    }
    model.zero_gradients();
    model.forward_on_device();
    model.backward();
    optimizer.update(raw(model.params), raw(model.grads));
    OpScope scope("nonfinite_check");
    const double* losses = model.losses();
    const double* norms = optimizer.norms();
    const std::uint64_t* at = raw(steps_);
    std::int64_t* bad_step = raw(nonfinite_step_);
    double* bad = raw(nonfinite_values_);
    for_each_index(E, [=] EMERGENT_HD(std::int64_t e) {
      if (bad_step[e] < 0 && !(is_finite(losses[e]) && is_finite(norms[e]))) {
        bad_step[e] = std::int64_t(at[e]);
        bad[2 * e] = losses[e];
        bad[2 * e + 1] = norms[e];
      }
    });
  }

 private:
#if EMERGENT_DEVICE_IS_CUDA
  // Records device_part() on the stream as a graph; its launches are the graph's, not a step's.
  // Should the capture fail, the step runs directly from then on (and says so once).
  void capture() {
    const DeviceCounts before = device_counts();
    cudaError_t status = cudaStreamBeginCapture(device_stream(), cudaStreamCaptureModeGlobal);
    if (status == cudaSuccess) {
      try {
        device_part();
      } catch (const std::exception& e) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(device_stream(), &broken);
        if (broken) cudaGraphDestroy(broken);
        cudaGetLastError();  // clear the failed call's error, or the next direct launch reports it
        device_counts() = before;
        return give_up_graph(e.what());
      }
      status = cudaStreamEndCapture(device_stream(), &graph_);
    }
    if (status == cudaSuccess) status = cudaGraphInstantiate(&exec_, graph_, 0);
    device_counts() = before;
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it
      return give_up_graph(cudaGetErrorString(status));
    }
    graph_launches_ = 0;
    std::size_t nodes = 0;
    if (cudaGraphGetNodes(graph_, nullptr, &nodes) == cudaSuccess)
      graph_launches_ = std::int64_t(nodes);
  }
  void give_up_graph(const std::string& why) {
    std::fprintf(stderr, "the step's CUDA graph failed (%s); launching its kernels directly\n",
                 why.c_str());
    if (graph_) cudaGraphDestroy(graph_);
    graph_ = nullptr;
    exec_ = nullptr;
    use_graph_ = false;
  }
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
#endif

  int members_, batch_;
  bool use_graph_ = false, ran_directly_ = false;
  std::int64_t graph_launches_ = 0;
  DeviceVector<std::uint64_t> seeds_, steps_;  // [E] each
  DeviceVector<std::int64_t> nonfinite_step_;
  DeviceVector<double> nonfinite_values_, report_, held_out_;
  std::optional<DeviceSampler> data_;
};

}  // namespace emergent::cuda
