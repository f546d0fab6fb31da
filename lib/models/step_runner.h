// How a decoder step runs, for every model kind (docs/ARCHITECTURE.md §5): one upload of the step's per-row
// inputs, the model's device work op by op or replayed as a CUDA graph per row bucket, and the output
// layer's choices back to the host in one copy; greedy steps several at once, fed on the device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "models/output_head.h"
#include "models/row_pool.h"
#include "ops/graph.h"
#include "search/step_model.h"

namespace seqtrans {

// How decoder steps ran (fused output layer only): op by op, recorded into a new graph, or replayed.
struct StepCounts {
  int64_t launched = 0;
  int64_t captured = 0;
  int64_t replayed = 0;
  int64_t memory_compactions = 0;  // times the encoder memory pool moved the runs in flight to its front
  int64_t persistent = 0;  // steps launched or recorded through the persistent decoder kernel
  int64_t persistent_argmax = 0;  // of which with the output layer folded in (greedy)
  int64_t at_once = 0;     // steps run in groups, fed on the device (StepRunner::run_at_once)
};

// The output layer's values and ids side by side in one 32-bit buffer [2, rows, width] (width k, or 1 for a
// draw), so that a step brings both to the host in one synchronous copy instead of two (H100: no change
// measurable beyond the spread of runs, docs/BENCHMARKS.md; one driver call less a step).
struct StepOutputs {
  Tensor both;
  Tensor values;  // [rows, k] log-probs, or [rows] of a sampling step: a view of `both`
  Tensor ids;     // [rows, k], or [rows] drawn ids: a view of `both`
  int64_t width = 0;

  StepOutputs() = default;
  StepOutputs(int64_t rows, int k, Device device);
};

// What a fused step's output layer computes: the k best per slot, or (k = kSampled, draws given) one draw.
struct OutputRequest {
  int k = 1;
  const std::vector<int32_t>* suppressed_ids = nullptr;
  const RepetitionRequest* repetitions = nullptr;
  const std::vector<ops::SamplingRow>* draws = nullptr;  // [slots]
};

// A model's side of a step, which the runner drives. Each takes a state the model started.
class StepSource {
 public:
  virtual ~StepSource() = default;
  // The state's decoder rows.
  virtual RowPool& row_pool(DecoderState& state) const = 0;
  // A number that changes whenever one of the state's device buffers moves (graphs read them in place).
  virtual int64_t layout(DecoderState& state) const = 0;
  // Positions a decoder row holds: no step writes past it.
  virtual int64_t max_positions() const = 0;
  // One step's per-row inputs ([inputs, runner rows] int32, padding rows included; the ids first) into
  // `inputs` on the host, for the slots at their positions (the row pool assigns their blocks).
  virtual void fill_step_inputs(DecoderState& state, const std::vector<int32_t>& input_ids, int32_t* inputs) const = 0;
  // The step's device work over `rows` rows, which a graph can record: the decoder, then the output layer's
  // k best (or one draw, kSampled) into values and ids. repetitions: null or off inside a graph.
  virtual void decode_and_select(DecoderState& state, int64_t rows, int k, const RepetitionRequest* repetitions,
                                 Tensor& values, Tensor& ids) const = 0;
};

// Per decoder state: the step inputs on the device, the suppressed-id lists, the sampling rows and the
// graphs recorded for (rows, k or kSampled, suppressed list).
class StepRunner {
 public:
  // Steps feed `inputs` rows of int32 per slot, the first of them the ids (steps at once feed it on the
  // device), to a model of `vocab` output ids; `graphs`: the model allows graphs (they also need a device
  // that has them and no profiling).
  StepRunner(Device device, int inputs, int64_t vocab, bool graphs, StepCounts* counts);

  int64_t rows() const { return rows_; }
  // Inputs and sampling rows for `rows` rows (dropping the graphs, which point at the old ones).
  void resize(int64_t rows);
  // Input `which` of the first `rows` rows, [rows] int32 on the device.
  Tensor input(int which, int64_t rows) const;
  const Tensor& sampling_rows() const { return sampling_rows_; }
  SuppressedLists& suppressed() { return suppressed_; }
  const SuppressedLists& suppressed() const { return suppressed_; }
  void drop_graphs();

  // Sizes the row pool for one step, makes and uploads its inputs; returns the rows it computes (the slots,
  // padded up to a bucket when it runs as a graph). fused_step does this itself.
  int64_t prepare_step(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                       bool graph);
  // One step through the fused output layer, as a graph when it can: the slots' values and ids, [slots, k]
  // or [slots], on the host.
  void fused_step(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                  const OutputRequest& request, std::vector<float>& values, std::vector<int32_t>& ids);
  // Greedy steps at once (StepModel::step_candidates_run): every step's inputs made on the host and uploaded
  // before any runs, step j > 0 fed the ids step j - 1 chose, on the device; one download.
  void steps_at_once(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                     const std::vector<CandidateRequest>& requests, std::vector<StepCandidates>& candidates);

 private:
  bool use_graphs() const;
  // Checks the step's ids, sizes the row pool for `steps` steps from the slots' positions and returns the
  // rows a step computes: the slots, padded up to a bucket when it runs as a graph.
  int64_t size_step(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids, bool graph,
                    int steps);
  // Graphs hold the buffers they were recorded against: those recorded before the layout changed go.
  void track_layout(int64_t layout);
  void run(const StepSource& source, DecoderState& state, int64_t rows, int k, bool graph,
           const RepetitionRequest& repetitions, StepOutputs& outputs);
  // Replayed if recorded; else launched op by op on the shape's first step and recorded on its second (a
  // shape met once costs no recording, which takes longer than launching the ops).
  void run_graph(const StepSource& source, DecoderState& state, int64_t rows, int k, StepOutputs& outputs);
  void run_uploaded_steps(const StepSource& source, DecoderState& state, int64_t rows, bool graph,
                          const std::vector<int>& lists, const Tensor& table, std::vector<StepCandidates>& candidates);
  void upload_sampling_rows(const std::vector<ops::SamplingRow>& draws, int64_t slots);

  struct StepGraph {
    explicit StepGraph(Device device) : graph(device) {}
    ops::DeviceGraph graph;
    StepOutputs outputs;
  };
  using GraphKey = std::tuple<int64_t, int, int>;

  Device device_ = Device::CPU;
  int inputs_ = 0;
  int64_t vocab_ = 0;
  bool graphs_ = false;
  StepCounts* counts_ = nullptr;
  int64_t rows_ = 0;
  int64_t layout_ = -1;
  Tensor step_inputs_;    // [inputs, rows] int32, uploaded once per step
  Tensor sampling_rows_;  // [rows, kSamplingRowWords] int32: sampling steps' draws
  SuppressedLists suppressed_;  // the steps' suppressed-id lists; its current one is this step's
  std::map<GraphKey, std::unique_ptr<StepGraph>> graphs_recorded_;
  std::set<GraphKey> launched_;  // keys run op by op since the buffers last changed
};

}  // namespace seqtrans
