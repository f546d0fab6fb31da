#include "models/step_runner.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/overlapped_launches.h"
#include "core/profiler.h"
#include "models/engine_tuning.h"

namespace seqtrans {

StepOutputs::StepOutputs(int64_t rows, int k, Device device) : width(std::max(k, 1)) {
  both = Tensor({2, rows, width}, DataType::I32, device);
  const Shape shape = k == kSampled ? Shape{rows} : Shape{rows, width};
  char* base = static_cast<char*>(both.raw());
  values = Tensor::borrow(base, shape, DataType::F32, device);
  ids = Tensor::borrow(base + both.bytes() / 2, shape, DataType::I32, device);
}

StepRunner::StepRunner(Device device, int inputs, int64_t vocab, bool graphs, StepCounts* counts)
    : device_(device), inputs_(inputs), vocab_(vocab), graphs_(graphs), counts_(counts) {}

void StepRunner::resize(int64_t rows) {
  if (rows == rows_) return;
  step_inputs_ = Tensor({inputs_, rows}, DataType::I32, device_);
  sampling_rows_ = Tensor({rows, ops::kSamplingRowWords}, DataType::I32, device_);
  rows_ = rows;
  drop_graphs();
}

Tensor StepRunner::input(int which, int64_t rows) const {
  return step_inputs_.slice_rows(which, which + 1).reshape({rows_}).slice_rows(0, rows);
}

void StepRunner::track_layout(int64_t layout) {
  if (layout == layout_) return;
  layout_ = layout;
  drop_graphs();
}

void StepRunner::drop_graphs() {
  graphs_recorded_.clear();
  launched_.clear();
}

bool StepRunner::use_graphs() const {
  return graphs_ && ops::DeviceGraph::supported(device_) && !Profiler::instance().enabled();
}

int64_t StepRunner::size_step(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                              bool graph, int steps) {
  RowPool& pool = source.row_pool(state);
  const int64_t slots = pool.slots();
  SEQTRANS_CHECK(static_cast<int64_t>(input_ids.size()) == slots, "step: {} ids for {} slots", input_ids.size(),
                 slots);
  SEQTRANS_CHECK(slots > 0, "step: no slots left");
  const int64_t positions = source.max_positions();
  const int32_t furthest = *std::max_element(pool.positions.begin(), pool.positions.end()) + steps - 1;
  SEQTRANS_CHECK(furthest < positions, "output reached the model's {} positions", positions);
  const int64_t rows = graph ? row_bucket(slots) : slots;
  pool.grow_history(rows, doubled_to(std::max(pool.capacity(), kInitialCacheCapacity), furthest + 1, positions));
  resize(pool.rows());
  if (pool.cache_blocks() == 0) pool.grow_blocks(row_bucket(slots) * 2);
  return rows;
}

void StepRunner::upload_sampling_rows(const std::vector<ops::SamplingRow>& draws, int64_t slots) {
  SEQTRANS_CHECK(static_cast<int64_t>(draws.size()) == slots, "step: {} draws for {} slots", draws.size(), slots);
  std::vector<ops::SamplingRow> padded = draws;
  padded.resize(static_cast<size_t>(rows_));  // padding rows draw with the defaults, ignored
  sampling_rows_.copy_from(ops::sampling_rows_tensor(padded));
}

void StepRunner::run(const StepSource& source, DecoderState& state, int64_t rows, int k, bool graph,
                     const RepetitionRequest& repetitions, StepOutputs& outputs) {
  const OverlappedLaunchScope launches(overlapped_launches() && rows <= kOverlappedLaunchMaxRows);
  if (graph) {
    run_graph(source, state, rows, k, outputs);
    return;
  }
  outputs = StepOutputs(rows, k, device_);
  source.decode_and_select(state, rows, k, &repetitions, outputs.values, outputs.ids);
  ++counts_->launched;
}

void StepRunner::run_graph(const StepSource& source, DecoderState& state, int64_t rows, int k, StepOutputs& outputs) {
  const GraphKey key{rows, k, suppressed_.current()};
  StepGraph* step_graph = nullptr;
  if (const auto recorded = graphs_recorded_.find(key); recorded != graphs_recorded_.end()) {
    step_graph = recorded->second.get();
    ++counts_->replayed;
  } else if (launched_.insert(key).second) {
    outputs = StepOutputs(rows, k, device_);
    source.decode_and_select(state, rows, k, /*repetitions=*/nullptr, outputs.values, outputs.ids);
    ++counts_->launched;
    return;
  } else {
    auto created = std::make_unique<StepGraph>(device_);
    step_graph = created.get();
    step_graph->graph.capture([&] {
      step_graph->outputs = StepOutputs(rows, k, device_);  // from the graph's pool
      source.decode_and_select(state, rows, k, nullptr, step_graph->outputs.values, step_graph->outputs.ids);
    });
    graphs_recorded_.emplace(key, std::move(created));
    ++counts_->captured;
  }
  step_graph->graph.replay();
  outputs = step_graph->outputs;
}

int64_t StepRunner::prepare_step(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                                 bool graph) {
  const int64_t rows = size_step(source, state, input_ids, graph, 1);
  std::vector<int32_t> inputs(static_cast<size_t>(inputs_ * rows_));
  source.fill_step_inputs(state, input_ids, inputs.data());
  step_inputs_.copy_from(Tensor::from_ints(step_inputs_.shape(), inputs));
  track_layout(source.layout(state));
  return rows;
}

void StepRunner::fused_step(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                            const OutputRequest& request, std::vector<float>& values, std::vector<int32_t>& ids) {
  suppressed_.select(*request.suppressed_ids, vocab_, device_);
  const bool graph = use_graphs() && !request.repetitions->on();
  RowPool& pool = source.row_pool(state);
  const int64_t slots = pool.slots();
  const int64_t rows = prepare_step(source, state, input_ids, graph);
  if (request.draws != nullptr) upload_sampling_rows(*request.draws, slots);
  StepOutputs outputs;
  run(source, state, rows, request.k, graph, *request.repetitions, outputs);
  pool.advance();
  // One copy: every row's values, then every row's ids. A graph's padding rows come last in each.
  const std::vector<int32_t> both = outputs.both.to_int_vector();
  const size_t kept = static_cast<size_t>(slots * outputs.width), half = both.size() / 2;
  values.resize(kept);
  std::memcpy(values.data(), both.data(), kept * sizeof(float));
  ids.assign(both.begin() + static_cast<std::ptrdiff_t>(half), both.begin() + static_cast<std::ptrdiff_t>(half + kept));
}

void StepRunner::steps_at_once(const StepSource& source, DecoderState& state, const std::vector<int32_t>& input_ids,
                               const std::vector<CandidateRequest>& requests,
                               std::vector<StepCandidates>& candidates) {
  const int steps = static_cast<int>(requests.size());
  std::vector<int> lists;
  for (const CandidateRequest& request : requests) {
    check_run_request(request);
    lists.push_back(suppressed_.select(request.suppressed_ids, vocab_, device_));
  }
  const bool graph = use_graphs();
  RowPool& pool = source.row_pool(state);
  const int64_t slots = pool.slots();
  const int64_t rows = size_step(source, state, input_ids, graph, steps);
  // A copy from the host between two steps would wait for the steps queued before it. Step j > 0 feeds
  // slot s the token step j - 1 chose for it (-(s + 1), resolved on the device).
  const int64_t width = inputs_ * rows_;
  std::vector<int32_t> table(static_cast<size_t>(steps * width));
  std::vector<int32_t> ids = input_ids;
  // Out of memory below, the slots go back to where they were, as after a failed single step: the caller
  // may retry with fewer sentences.
  const std::vector<int32_t> positions = pool.positions, reorder = pool.reorder;
  try {
    for (int j = 0; j < steps; ++j) {
      source.fill_step_inputs(state, ids, table.data() + j * width);
      pool.advance();
      for (int64_t s = 0; s < slots; ++s) ids[static_cast<size_t>(s)] = -static_cast<int32_t>(s + 1);
    }
    track_layout(source.layout(state));
    run_uploaded_steps(source, state, rows, graph, lists, Tensor::from_ints({steps, width}, table), candidates);
  } catch (const OutOfMemoryError&) {
    pool.positions = positions;
    pool.reorder = reorder;
    throw;
  }
}

void StepRunner::run_uploaded_steps(const StepSource& source, DecoderState& state, int64_t rows, bool graph,
                                    const std::vector<int>& lists, const Tensor& table,
                                    std::vector<StepCandidates>& candidates) {
  const int64_t steps = table.dim(0), width = table.dim(1), slots = source.row_pool(state).slots();
  const Tensor inputs = table.to(device_);
  Tensor step_inputs = step_inputs_.reshape({width});
  Tensor results({steps, 2 * rows}, DataType::I32, device_);  // each step's values, then its ids
  StepOutputs last;  // the step before: its ids feed the next one
  const RepetitionRequest no_repetitions;
  for (int j = 0; j < steps; ++j) {
    suppressed_.set_current(lists[static_cast<size_t>(j)]);
    ops::copy_with_fed_ids(inputs.slice_rows(j, j + 1).reshape({width}), rows_, j > 0 ? &last.ids : nullptr,
                           step_inputs);
    run(source, state, rows, 1, graph, no_repetitions, last);  // replays the step's graph: the ids feed it
    Tensor step_results = results.slice_rows(j, j + 1).reshape({2 * rows});
    ops::copy_with_fed_ids(last.both.reshape({2 * rows}), 0, nullptr, step_results);
  }
  counts_->at_once += steps;
  const std::vector<int32_t> all = results.to_int_vector();  // one copy for every step
  candidates.resize(static_cast<size_t>(steps));
  for (int j = 0; j < steps; ++j) {
    StepCandidates& step = candidates[static_cast<size_t>(j)];
    const int32_t* first = all.data() + j * 2 * rows;
    step.slots = slots;
    step.k = 1;
    step.log_probs.resize(static_cast<size_t>(slots));
    std::memcpy(step.log_probs.data(), first, static_cast<size_t>(slots) * sizeof(float));
    step.ids.assign(first + rows, first + rows + slots);
  }
}

}  // namespace seqtrans
