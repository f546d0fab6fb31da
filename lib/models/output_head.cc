#include "models/output_head.h"

#include <algorithm>

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

Tensor OutputHead::logits(const Tensor& x) const {
  ops::MatmulOptions options;
  options.fp32_output = true;
  options.prepared_b = prepared_.get();
  return ops::matmul(x, weight_, options);  // [rows, V]
}

Tensor OutputHead::logits_with_bias(const Tensor& x) const {
  Tensor result = logits(x);
  if (bias_.defined()) ops::add_bias(result, bias_);
  return result;
}

void OutputHead::select(const Tensor& x, const OutputSelection& selection, Tensor& values, Tensor& ids) const {
  const ProfileScope profile("output layer");
  const Tensor* suppressed_ids = selection.suppressed->ids();
  const Tensor* suppressed_bitmap = selection.suppressed->bitmap();
  const Tensor* bias = bias_.defined() ? &bias_ : nullptr;
  Tensor scores = logits(x);  // [rows, V]
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
