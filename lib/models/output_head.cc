#include "models/output_head.h"

#include <algorithm>
#include <limits>

#include "core/profiler.h"

namespace seqtrans {

int SuppressedLists::select(const std::vector<int32_t>& ids, int64_t vocab, Device device) {
  const auto known = std::find(lists_.begin(), lists_.end(), ids);
  if (known != lists_.end()) {
    current_ = static_cast<int>(known - lists_.begin());
    return current_;
  }
  current_ = static_cast<int>(lists_.size());
  lists_.push_back(ids);
  const Tensor host = Tensor::from_ints({static_cast<int64_t>(ids.size())}, ids);
  devices_.push_back(device == Device::CPU ? host : host.to(device));
  bitmaps_.push_back(ids.empty() ? Tensor() : ops::suppression_bitmap(devices_.back(), vocab));
  return current_;
}

const Tensor* SuppressedLists::ids() const {
  const Tensor& list = devices_[static_cast<size_t>(current_)];
  return list.elements() == 0 ? nullptr : &list;
}

const Tensor* SuppressedLists::bitmap() const {
  const Tensor& bitmap = bitmaps_[static_cast<size_t>(current_)];
  return bitmap.defined() ? &bitmap : nullptr;
}

namespace {

constexpr int64_t kAlignedVocab = 8;

// The padded copy's rows: V rounded up to kAlignedVocab where select() pads (see select_weight_), else V.
int64_t select_rows(const Tensor& weight, ops::WeightFormat format) {
  const int64_t vocab = weight.dim(0);
  const bool pads = weight.device() == Device::CUDA && weight.dtype() == DataType::F16 &&
                    format == ops::WeightFormat::Plain && vocab % kAlignedVocab != 0;
  return pads ? (vocab + kAlignedVocab - 1) / kAlignedVocab * kAlignedVocab : vocab;
}

}  // namespace

OutputHead::OutputHead(Tensor weight, Tensor bias, ops::TopkAlgorithm algorithm, ops::WeightFormat format)
    : algorithm_(algorithm) {
  const int64_t vocab = weight.dim(0), rows = select_rows(weight, format);
  if (rows == vocab) {
    weight_ = std::move(weight);
    bias_ = std::move(bias);
    select_weight_ = weight_;
    select_bias_ = bias_;
    prepared_ = ops::prepare_weight(weight_, format);
    return;
  }
  select_weight_ = Tensor({rows, weight.dim(1)}, weight.dtype(), weight.device());
  weight_ = select_weight_.slice_rows(0, vocab);
  weight_.copy_from(weight);
  const Tensor zero_rows = Tensor::from_floats({rows - vocab, weight.dim(1)},
                                               std::vector<float>(static_cast<size_t>((rows - vocab) * weight.dim(1)), 0.0f));
  select_weight_.slice_rows(vocab, rows).copy_from(zero_rows.to(weight.dtype()));
  bias_ = std::move(bias);
  std::vector<float> padded_bias = bias_.defined() ? bias_.to(Device::CPU).to_float_vector()
                                                   : std::vector<float>(static_cast<size_t>(vocab), 0.0f);
  padded_bias.resize(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  select_bias_ = Tensor::from_floats({rows}, padded_bias).to(weight.device());
}

OutputHead::OutputHead(DenseWeight weight, Tensor bias, ops::TopkAlgorithm algorithm) {
  if (weight.prepared == nullptr) {
    *this = OutputHead(std::move(weight.weight), std::move(bias), algorithm);
    return;
  }
  algorithm_ = algorithm;
  weight_ = select_weight_ = std::move(weight.weight);
  bias_ = select_bias_ = std::move(bias);
  prepared_ = std::move(weight.prepared);
}

Tensor OutputHead::product(const Tensor& x, const Tensor& weight) const {
  ops::MatmulOptions options;
  options.fp32_output = true;
  options.prepared_b = prepared_.get();
  return ops::matmul(x, weight, options);
}

Tensor OutputHead::logits(const Tensor& x) const { return product(x, weight_); }  // [rows, V]

Tensor OutputHead::logits_with_bias(const Tensor& x) const {
  Tensor result = logits(x);
  if (bias_.defined()) ops::add_bias(result, bias_);
  return result;
}

void OutputHead::select(const Tensor& x, const OutputSelection& selection, Tensor& values, Tensor& ids) const {
  const ProfileScope profile("output layer");
  const Tensor* suppressed_ids = selection.suppressed->ids();
  const Tensor* suppressed_bitmap = selection.suppressed->bitmap();
  const Tensor* bias = select_bias_.defined() ? &select_bias_ : nullptr;
  Tensor scores = product(x, select_weight_);  // [rows, V or padded]
  bool normalize = true;
  const RepetitionRequest* repetitions = selection.repetitions;
  if (repetitions != nullptr && repetitions->on()) {
    apply_repetition_controls(scores, *repetitions, bias);  // adds the bias
    bias = nullptr;
    normalize = !repetitions->on_log_probs;
  }
  if (selection.k == kSampled) {
    ops::SampleOptions options;
    options.bias = bias;
    options.suppressed_ids = suppressed_ids;
    options.suppressed_bitmap = suppressed_bitmap;
    ops::sample_tokens(scores, selection.sampling_rows->slice_rows(0, x.dim(0)), options, ids, values);
    return;
  }
  ops::TopkOptions options;
  options.k = selection.k;
  options.bias = bias;
  options.suppressed_ids = suppressed_ids;
  options.suppressed_bitmap = suppressed_bitmap;
  options.algorithm = algorithm_;
  options.normalize = normalize;
  ops::log_softmax_topk(scores, options, values, ids);
}

ops::PersistentGreedyOutput OutputHead::persistent_greedy(const SuppressedLists& suppressed, Tensor& values,
                                                          Tensor& ids) const {
  return ops::PersistentGreedyOutput{&weight_, bias_.defined() ? &bias_ : nullptr, suppressed.bitmap(), &values,
                                     &ids};
}

}  // namespace seqtrans
