// The output layer every model kind shares (docs/ARCHITECTURE.md §6): the last hidden rows against the output
// weight, then one fused selection, the k best log-probs per row or one draw per row, with the bias, the
// suppressed ids and the repetition controls; and the suppressed-id lists a run's steps ask for.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "layers/weights.h"
#include "ops/ops.h"
#include "search/step_model.h"

namespace seqtrans {

// The output layer's k for a sampling step: one draw per row instead of the k best.
inline constexpr int kSampled = 0;

// The suppressed-id lists a run's steps have asked for (usually one, and one with EOS while a minimum
// length holds) and their device copies, which recorded graphs read: kept, so that switching lists records
// nothing new.
class SuppressedLists {
 public:
  // Makes `ids` the current list, adding it (and its device forms) the first time; returns its index.
  int select(const std::vector<int32_t>& ids, int64_t vocab, Device device);
  // Makes list `index` (an earlier select's) current.
  void set_current(int index) { current_ = index; }
  int current() const { return current_; }
  // The current list on the device [n] int32, or null when it is empty.
  const Tensor* ids() const;
  // Its bitmap of the vocabulary (ops::suppression_bitmap), or null (empty list, or the CPU).
  const Tensor* bitmap() const;

 private:
  std::vector<std::vector<int32_t>> lists_;
  std::vector<Tensor> devices_;
  std::vector<Tensor> bitmaps_;
  int current_ = -1;
};

// What one step's selection reads besides the hidden rows.
struct OutputSelection {
  int k = 1;                                      // candidates per row, or kSampled
  const SuppressedLists* suppressed = nullptr;    // its current list
  const RepetitionRequest* repetitions = nullptr;  // null or off: none (never in a graph)
  const Tensor* sampling_rows = nullptr;          // kSampled: [rows or more, kSamplingRowWords]
};

class OutputHead {
 public:
  OutputHead() = default;
  // weight [V, d] in the model's dtype; bias [V] fp32 or undefined; the logits' product reads the weight
  // prepared in `format` where the device has such a form (ops::prepare_weight).
  // A tied model's embedding should then read weight(), which may be a view of the padded copy (below).
  OutputHead(Tensor weight, Tensor bias, ops::TopkAlgorithm algorithm,
             ops::WeightFormat format = ops::WeightFormat::Plain);
  // An untied weight as the loader prepared it (WeightLoader::get_dense): on the CPU a large weight then holds
  // only its shape, and its products read the prepared form alone. Nothing prepared: as a plain weight.
  OutputHead(DenseWeight weight, Tensor bias, ops::TopkAlgorithm algorithm);

  // Logits of x [rows, d] -> [rows, V] fp32, without the bias.
  Tensor logits(const Tensor& x) const;
  // The same with the bias added (StepModel::step's full logits).
  Tensor logits_with_bias(const Tensor& x) const;
  // The k best log-probs per row and their ids ([rows, k]), or, for kSampled, one draw per row (ids and
  // log-probs [rows]). Logits stay where they are computed: the fused kernel adds the bias, normalizes
  // and selects or draws.
  void select(const Tensor& x, const OutputSelection& selection, Tensor& values, Tensor& ids) const;
  // The greedy output layer as the persistent decoder kernel folds it in (ops::PersistentGreedyOutput).
  ops::PersistentGreedyOutput persistent_greedy(const SuppressedLists& suppressed, Tensor& values, Tensor& ids) const;

  const Tensor& weight() const { return weight_; }  // may hold its shape only (the DenseWeight constructor)
  const Tensor& bias() const { return bias_; }

 private:
  // x [rows, d] against weight ([V or padded, d]: weight_ or select_weight_) -> fp32, without the bias.
  Tensor product(const Tensor& x, const Tensor& weight) const;

  Tensor weight_;  // [V, d]
  Tensor bias_;    // [V] fp32 (added to fp32 logits), or undefined
  // On the GPU in fp16, a vocabulary that is not a multiple of 8 keeps cuBLAS off its Hopper kernels (NLLB's
  // 256,206 ids, 256 rows: 565 us a product against 237 at 256,208, H200). select() then multiplies by a copy
  // padded with zero rows to a multiple of 8 (weight_ is a view of its first V rows) and adds a bias that is
  // -inf past V: the padded logits are never selected or drawn and add exact zeros to the normalizer.
  Tensor select_weight_;  // [V or padded, d]
  Tensor select_bias_;    // [V or padded] fp32, or undefined
  ops::TopkAlgorithm algorithm_ = ops::TopkAlgorithm::Auto;
  std::shared_ptr<const ops::PreparedWeight> prepared_;  // weight_ for the logits' product, or none
};

}  // namespace seqtrans
