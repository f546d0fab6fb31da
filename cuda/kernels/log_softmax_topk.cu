// log_softmax_topk: the fused output layer. One block per row reads the logits once for the log-softmax
// normalizer (online max and sum of exp) and, in the same pass, for a coarse filter of the row; a second,
// smaller pass gathers the candidates that can be among the k best; a bitonic sort of the candidates in
// shared memory gives the exact k best. Keys are the logits mapped to order-preserving uint32, paired with
// the complemented index, so one 64-bit comparison orders by value and then by lower index: the result
// equals a full sort's first k, ties and -inf included.
//
// Filters (ops::TopkAlgorithm):
// - Hierarchical, a group threshold (retrieve and rerank): the max of each group of 64; the k-th largest group max T
//   bounds the k-th best element from below, so only groups whose max >= T are read again, and only their
//   elements >= T are candidates.
// - FullScan, a radix select: a histogram of each key's top 11 bits; the bin holding the k-th best bounds it from
//   below; the second pass reads the whole row.
// When the candidates overflow shared memory (e.g. thousands of -inf ties), the block falls back to an
// exact radix select over the row: 3 histogram passes on the key, up to 3 on the index, one gather.
// k = 1 is a separate single-pass kernel: normalizer and argmax together. Few rows split the first pass
// over many blocks (the argmax, and the group filter's maxima), then merge per row.
//
// Loads, 16 bytes at a time for any vocabulary: a prologue and a tail read element by element around a body
// of aligned vector loads (RowView, load_logits).
#include <cub/block/block_scan.cuh>

#include "core/batch_invariance.h"
#include "core/sampling_math.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/kernels/suppression.cuh"

namespace seqtrans::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBins = 2048;               // 11-bit digits
constexpr int kCandidateCapacity = 2048;  // candidates sorted in shared memory
constexpr int kGroupElements = 64;
// Group maxima kept in shared memory: 8,192 groups, so 262,144 ids even when loads are scalar (32 ids a
// group) and twice that when vectorized; past the default 48 KB with TopkShared, within every opt-in.
constexpr size_t kMaxGroupBytes = 32768;
constexpr uint32_t kNoKey = 0;            // below every real key (the key of -inf is 0x007fffff)

__device__ __forceinline__ unsigned long long composite(uint32_t key, int index) {
  return (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - static_cast<uint32_t>(index));
}

template <typename T, typename B>
struct TopkArguments {
  const T* logits;             // [rows, vocab]
  const B* bias;               // [vocab] or null
  const uint32_t* suppressed;  // [ceil(vocab / 32)] bitmap or null
  float* values;               // [rows, k]
  int32_t* indices;            // [rows, k]
  int vocab;
  int k;
  bool normalize;  // false: the logits already are the scores, returned as they are
};

// One row: its logits plus bias and the suppression bitmap. Vector v (of the kernel's N elements) holds the
// row's elements [v N - shift, v N - shift + N): vectors sit on the tensor's N-element boundaries, so
// aligned loads read the body of a row that starts mid-vector.
template <typename T, typename B>
struct RowView {
  const T* logits;  // element 0 of the row
  const B* bias;
  const uint32_t* suppressed;
  int vocab;
  int shift;  // the row's start past the vector boundary before it: vector 0 begins at element -shift

  __device__ __forceinline__ bool contains(int i) const { return i >= 0 && i < vocab; }
  __device__ __forceinline__ float logit(int i) const {
    float z = to_float(logits[i]);
    if (bias != nullptr) z += to_float(bias[i]);
    return z;
  }
  __device__ __forceinline__ bool is_suppressed(int i) const {
    return seqtrans::cuda::is_suppressed(suppressed, i);
  }
  __device__ __forceinline__ uint32_t key(int i) const {
    return is_suppressed(i) ? order_key(-INFINITY) : order_key(logit(i));
  }
  // The key of position i holding logit z: below every real key outside the row (a partial vector).
  __device__ __forceinline__ uint32_t key(int i, float z) const {
    if (!contains(i)) return kNoKey;
    return is_suppressed(i) ? order_key(-INFINITY) : order_key(z);
  }
};

// Vectors of N elements covering a row that starts `shift` elements past a vector boundary, and the groups
// of kLanesPerGroup<N> vectors they make.
template <int N>
constexpr int kLanesPerGroup = kGroupElements / N < 32 ? kGroupElements / N : 32;

template <int N>
__host__ __device__ constexpr int vector_count(int vocab, int shift) {
  return (vocab + shift + N - 1) / N;
}

template <int N>
__host__ __device__ constexpr int group_count(int vocab, int shift) {
  return (vector_count<N>(vocab, shift) + kLanesPerGroup<N> - 1) / kLanesPerGroup<N>;
}

// The largest shift of any row: N - 1 at most, none when N divides the vocabulary (every row then starts on
// a boundary). Sizes the group maxima and the scratch shared by all rows.
template <int N>
__host__ __device__ constexpr int max_shift(int vocab) {
  return vocab % N == 0 ? 0 : N - 1;
}

template <int N, typename T, typename B>
__device__ __forceinline__ RowView<T, B> row_of(const TopkArguments<T, B>& args, int64_t row_index) {
  const int64_t start = row_index * args.vocab;
  return {args.logits + start, args.bias, args.suppressed, args.vocab, static_cast<int>(start % N)};
}

// Running max and sum of exp(z - max) of one thread's elements, updated a vector at a time: one rescale
// per vector rather than a branch per element. __expf (ex2.approx) keeps the sum within ~1e-6 relative.
struct Normalizer {
  float max = -INFINITY;
  float sum = 0.0f;

  template <int N>
  __device__ __forceinline__ void add(const float (&z)[N]) {
    float top = z[0];
#pragma unroll
    for (int e = 1; e < N; ++e) top = fmaxf(top, z[e]);
    if (top == -INFINITY) return;
    if (top > max) {
      sum *= __expf(max - top);  // 0 while max is still -inf
      max = top;
    }
#pragma unroll
    for (int e = 0; e < N; ++e) sum += __expf(z[e] - max);  // -inf entries add 0
  }
};

// Prologue, body, tail: row r starts r x vocab elements in, mid-vector unless N divides that, so its first and
// last vectors are partial; read whole, they keep the aligned path's thread, group and chunk boundaries.
//
// z = logits + bias for the N elements of vector v of a row, -inf at positions outside the row. A whole
// vector is one aligned load; the bias (aligned at element 0) shares its alignment only in rows with no
// shift, and is read element by element in the others. Partial vectors are read element by element.
template <typename T, typename B, int N>
__device__ __forceinline__ void load_logits(const RowView<T, B>& row, int v, float (&z)[N]) {
  const int first = v * N - row.shift;
  if (first < 0 || first + N > row.vocab) {
#pragma unroll
    for (int e = 0; e < N; ++e) z[e] = row.contains(first + e) ? row.logit(first + e) : -INFINITY;
    return;
  }
  const Vector<T, N> logits = *reinterpret_cast<const Vector<T, N>*>(row.logits + first);
#pragma unroll
  for (int e = 0; e < N; ++e) z[e] = to_float(logits.value[e]);
  if (row.bias == nullptr) return;
  if (row.shift == 0) {
    const Vector<B, N> bias = reinterpret_cast<const Vector<B, N>*>(row.bias)[v];
#pragma unroll
    for (int e = 0; e < N; ++e) z[e] += to_float(bias.value[e]);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) z[e] += to_float(row.bias[first + e]);
  }
}

// logsumexp over the block.
__device__ float block_log_sum_exp(const Normalizer& local, float* scratch) {
  const float max = block_max(local.max, scratch);
  const float scaled = local.max == -INFINITY ? 0.0f : local.sum * expf(local.max - max);
  const float sum = block_sum(scaled, scratch);
  return max == -INFINITY ? -INFINITY : max + logf(sum);
}

struct DigitChoice {
  int digit;  // the bin holding the rank-th largest
  int above;  // keys in higher bins
  int at;     // keys in that bin
};

struct TopkShared {
  int histogram[kBins];
  unsigned long long candidates[kCandidateCapacity];
  typename cub::BlockScan<int, kThreads>::TempStorage scan;
  DigitChoice choice;
  int candidate_count;
  float scratch[32];
};

// Finds the bin of the rank-th largest counted key (rank from 1), scanning bins from the top.
__device__ DigitChoice find_digit(const int* histogram, int rank, TopkShared& shared) {
  constexpr int kPerThread = kBins / kThreads;
  const int chunk = kThreads - 1 - static_cast<int>(threadIdx.x);  // thread 0 owns the top bins
  int local = 0;
#pragma unroll
  for (int b = 0; b < kPerThread; ++b) local += histogram[chunk * kPerThread + b];
  int above = 0;
  cub::BlockScan<int, kThreads>(shared.scan).ExclusiveSum(local, above);
  if (above < rank && above + local >= rank) {
    for (int b = kPerThread - 1; b >= 0; --b) {
      const int bin = chunk * kPerThread + b, count = histogram[bin];
      if (above + count >= rank) {
        shared.choice = {bin, above, count};
        break;
      }
      above += count;
    }
  }
  __syncthreads();
  const DigitChoice choice = shared.choice;
  __syncthreads();
  return choice;
}

__device__ void clear_histogram(TopkShared& shared) {
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) shared.histogram[i] = 0;
  __syncthreads();
}

// The rank-th largest of count keys (with multiplicity), by three 11/11/10-bit histogram passes.
// `needed` gets how many keys equal to it belong to the rank largest, `equal` how many there are.
template <typename KeyAt>
__device__ uint32_t select_key(KeyAt key_at, int count, int rank, TopkShared& shared, int& needed, int& equal) {
  uint32_t prefix = 0, high_mask = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
    const uint32_t digit_mask = pass == 2 ? 0x3ffu : 0x7ffu;
    clear_histogram(shared);
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const uint32_t key = key_at(i);
      if ((key & high_mask) == prefix) atomicAdd(&shared.histogram[(key >> shift) & digit_mask], 1);
    }
    __syncthreads();
    const DigitChoice choice = find_digit(shared.histogram, rank, shared);
    prefix |= static_cast<uint32_t>(choice.digit) << shift;
    high_mask |= digit_mask << shift;
    rank -= choice.above;
    equal = choice.at;
  }
  needed = rank;
  return prefix;
}

// The rank-th lowest index among the elements whose key is `key`, by histogram passes over index bits.
template <typename KeyAt>
__device__ int select_index(KeyAt key_at, int count, uint32_t key, int rank, TopkShared& shared) {
  const int bits = 32 - __clz(max(count - 1, 1));
  uint32_t prefix = 0, high_mask = 0;
  for (int top = bits; top > 0; top -= 11) {
    const int shift = max(top - 11, 0);
    const uint32_t digit_mask = (1u << (top - shift)) - 1u;
    clear_histogram(shared);
    for (int i = threadIdx.x; i < count; i += blockDim.x)
      if (key_at(i) == key && (static_cast<uint32_t>(i) & high_mask) == prefix)
        atomicAdd(&shared.histogram[kBins - 1 - ((static_cast<uint32_t>(i) >> shift) & digit_mask)], 1);
    __syncthreads();
    const DigitChoice choice = find_digit(shared.histogram, rank, shared);  // from the top: lowest index first
    prefix |= static_cast<uint32_t>(kBins - 1 - choice.digit) << shift;
    high_mask |= digit_mask << shift;
    rank -= choice.above;
  }
  return static_cast<int>(prefix);
}

// Exact k best of a row straight from global memory, for rows whose candidates overflow shared memory.
template <typename T, typename B>
__device__ void select_exactly(const RowView<T, B>& row, int k, TopkShared& shared) {
  const int vocab = row.vocab;
  const auto key_at = [&row](int i) { return row.key(i); };
  int needed = 0, equal = 0;
  const uint32_t threshold = select_key(key_at, vocab, k, shared, needed, equal);
  const int last_index = needed == equal ? vocab : select_index(key_at, vocab, threshold, needed, shared);
  if (threadIdx.x == 0) shared.candidate_count = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const uint32_t key = row.key(i);
    if (key > threshold || (key == threshold && i <= last_index))
      shared.candidates[atomicAdd(&shared.candidate_count, 1)] = composite(key, i);
  }
  __syncthreads();
}

// Sorts candidates[0, count) descending; pads to a power of two with kNoKey.
__device__ void sort_candidates(TopkShared& shared, int count) {
  int size = 1;
  while (size < count) size *= 2;
  for (int i = count + threadIdx.x; i < size; i += blockDim.x) shared.candidates[i] = kNoKey;
  __syncthreads();
  for (int span = 2; span <= size; span *= 2) {
    for (int stride = span / 2; stride > 0; stride /= 2) {
      for (int i = threadIdx.x; i < size; i += blockDim.x) {
        const int partner = i ^ stride;
        if (partner <= i) continue;
        const unsigned long long a = shared.candidates[i], b = shared.candidates[partner];
        const bool descending = (i & span) == 0;
        if (descending ? a < b : a > b) {
          shared.candidates[i] = b;
          shared.candidates[partner] = a;
        }
      }
      __syncthreads();
    }
  }
}

__device__ __forceinline__ void append_candidate(TopkShared& shared, uint32_t key, int index) {
  const int slot = atomicAdd(&shared.candidate_count, 1);
  if (slot < kCandidateCapacity) shared.candidates[slot] = composite(key, index);
}

// A thread's next kLoadsAhead vectors of a pass (first + a * kThreads + thread, those before end) are loaded
// before any is used: one 16-byte load in flight a thread left the logits' passes at 1.1-1.4 TB/s (ncu, H200).
// They are then used in the order the pass visited them one by one, so sums and ties are as before.
constexpr int kLoadsAhead = 4;

template <typename T, typename B, int N>
__device__ __forceinline__ void load_ahead(const RowView<T, B>& row, int first, int end, float (&z)[kLoadsAhead][N]) {
#pragma unroll
  for (int a = 0; a < kLoadsAhead; ++a) {
    const int v = first + a * kThreads + static_cast<int>(threadIdx.x);
    if (v < end) load_logits(row, v, z[a]);
  }
}

// Pass 1 over vectors [begin, end) of a row (begin a multiple of kLanesPerGroup<N>): the thread's share of
// the normalizer, and the maximum key of each group into group_max[group] (kGroups) or each key's top bits
// into `histogram`.
template <typename T, typename B, int N, bool kGroups>
__device__ __forceinline__ Normalizer scan_row(const RowView<T, B>& row, int begin, int end, uint32_t* group_max,
                                               int* histogram) {
  constexpr int kLanes = kLanesPerGroup<N>;
  Normalizer normalizer;
  for (int first = begin; first < end; first += kLoadsAhead * kThreads) {  // uniform trip count: shuffles below
    float z[kLoadsAhead][N];
    load_ahead<T, B, N>(row, first, end, z);
#pragma unroll
    for (int a = 0; a < kLoadsAhead; ++a) {
      const int v = first + a * kThreads + static_cast<int>(threadIdx.x);
      uint32_t best = kNoKey;
      if (v < end) {
        normalizer.add(z[a]);
#pragma unroll
        for (int e = 0; e < N; ++e) {
          const int i = v * N - row.shift + e;
          const uint32_t key = row.key(i, z[a][e]);
          if constexpr (kGroups) {
            best = max(best, key);
          } else if (row.contains(i)) {
            atomicAdd(&histogram[key >> 21], 1);
          }
        }
      }
      if constexpr (kGroups) {
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset /= 2)
          best = max(best, __shfl_xor_sync(kFullMask, best, offset));
        if (v < end && v % kLanes == 0) group_max[v / kLanes] = best;
      }
    }
  }
  return normalizer;
}

// Pass 2 and the sort: the candidates that pass the filter (the group maxima of every group in shared
// memory, or the histogram) gathered and sorted into shared.candidates, the k best first. Starts with the
// candidate count at 0 and pass 1 published.
template <typename T, typename B, int N, bool kGroups>
__device__ void select_best(const RowView<T, B>& row, int k, const uint32_t* group_max, TopkShared& shared) {
  const int vocab = row.vocab;
  constexpr int kLanes = kLanesPerGroup<N>;
  if constexpr (kGroups) {
    const int groups = group_count<N>(vocab, row.shift);
    int needed = 0, equal = 0;
    const uint32_t threshold = select_key([&](int g) { return group_max[g]; }, groups, k, shared, needed, equal);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kGroupSize = kLanes * N;
    for (int g = warp; g < groups; g += kThreads / 32) {
      if (group_max[g] < threshold) continue;
      for (int e = lane; e < kGroupSize; e += 32) {
        const int i = g * kGroupSize + e - row.shift;
        if (i >= vocab) break;
        if (i < 0) continue;  // before the row, in its first vector
        const uint32_t key = row.key(i);
        if (key >= threshold) append_candidate(shared, key, i);
      }
    }
  } else {
    const DigitChoice choice = find_digit(shared.histogram, k, shared);
    if (choice.above + choice.at <= kCandidateCapacity) {
      const uint32_t threshold = static_cast<uint32_t>(choice.digit) << 21;
      for (int i = threadIdx.x; i < vocab; i += kThreads) {
        const uint32_t key = row.key(i);
        if (key >= threshold) append_candidate(shared, key, i);
      }
    } else if (threadIdx.x == 0) {
      shared.candidate_count = kCandidateCapacity + 1;
    }
  }
  __syncthreads();
  int count = shared.candidate_count;
  if (count > kCandidateCapacity) {
    __syncthreads();  // everyone has read the count before the fallback resets it
    select_exactly(row, k, shared);
    count = k;
  }
  sort_candidates(shared, count);
}

// The row's k best (sorted candidates) as scores: log-probs when normalizing.
template <typename T, typename B>
__device__ void write_best(const TopkArguments<T, B>& args, int64_t row_index, const TopkShared& shared,
                           float log_sum_exp) {
  for (int i = threadIdx.x; i < args.k; i += kThreads) {
    const unsigned long long best = shared.candidates[i];
    const float z = key_score(static_cast<uint32_t>(best >> 32));
    args.values[row_index * args.k + i] = z == -INFINITY || !args.normalize ? z : z - log_sum_exp;
    args.indices[row_index * args.k + i] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(best));
  }
}

template <typename T, typename B, int N, bool kGroups>
__global__ void __launch_bounds__(kThreads) log_softmax_topk_kernel(TopkArguments<T, B> args) {
  start_after_inputs();
  __shared__ TopkShared shared;
  extern __shared__ uint32_t group_max[];  // [groups], Hierarchical only
  const int64_t row_index = blockIdx.x;
  const RowView<T, B> row = row_of<N>(args, row_index);
  if (!kGroups) clear_histogram(shared);
  const Normalizer normalizer =
      scan_row<T, B, N, kGroups>(row, 0, vector_count<N>(row.vocab, row.shift), group_max, shared.histogram);
  if (threadIdx.x == 0) shared.candidate_count = 0;
  const float log_sum_exp = block_log_sum_exp(normalizer, shared.scratch);  // its barriers publish pass 1
  select_best<T, B, N, kGroups>(row, args.k, group_max, shared);
  write_best(args, row_index, shared, log_sum_exp);
}

// Few rows with the group filter: pass 1 split over chunks of the row, a block each (one block reading a
// whole row waits on one memory round trip after another), then a block per row for the rest. A chunk
// writes its groups' maxima and its normalizer into the row's scratch: [groups] keys (as many as the most
// shifted row makes), then [chunks] pairs (largest logit, sum of exp(z - largest)).
template <typename T, typename B, int N>
__global__ void __launch_bounds__(kThreads)
    log_softmax_topk_scan_kernel(TopkArguments<T, B> args, uint32_t* __restrict__ scratch, int chunk_vectors,
                                 int row_words) {
  start_after_inputs();
  __shared__ float reduction[32];
  const int64_t row_index = blockIdx.y;
  const RowView<T, B> row = row_of<N>(args, row_index);
  const int groups = group_count<N>(args.vocab, max_shift<N>(args.vocab));
  const int begin = blockIdx.x * chunk_vectors, end = min(begin + chunk_vectors, vector_count<N>(row.vocab, row.shift));
  uint32_t* row_scratch = scratch + row_index * row_words;
  const Normalizer normalizer = scan_row<T, B, N, true>(row, begin, end, row_scratch, nullptr);
  const float chunk_max = block_max(normalizer.max, reduction);
  const float chunk_sum =
      block_sum(normalizer.max == -INFINITY ? 0.0f : normalizer.sum * expf(normalizer.max - chunk_max), reduction);
  if (threadIdx.x == 0) {
    float* pair = reinterpret_cast<float*>(row_scratch + groups + 2 * blockIdx.x);
    pair[0] = chunk_max;
    pair[1] = chunk_sum;
  }
}

template <typename T, typename B, int N>
__global__ void __launch_bounds__(kThreads)
    log_softmax_topk_select_kernel(TopkArguments<T, B> args, const uint32_t* __restrict__ scratch, int chunks,
                                   int row_words) {
  start_after_inputs();
  __shared__ TopkShared shared;
  extern __shared__ uint32_t group_max[];  // [groups]
  const int64_t row_index = blockIdx.x;
  const RowView<T, B> row = row_of<N>(args, row_index);
  const int groups = group_count<N>(args.vocab, max_shift<N>(args.vocab));
  const uint32_t* row_scratch = scratch + row_index * row_words;
  for (int g = threadIdx.x; g < group_count<N>(row.vocab, row.shift); g += kThreads) group_max[g] = row_scratch[g];
  float chunk_max = -INFINITY, chunk_sum = 0.0f;
  if (static_cast<int>(threadIdx.x) < chunks) {
    const float* pair = reinterpret_cast<const float*>(row_scratch + groups + 2 * threadIdx.x);
    chunk_max = pair[0];
    chunk_sum = pair[1];
  }
  if (threadIdx.x == 0) shared.candidate_count = 0;
  const float row_max = block_max(chunk_max, shared.scratch);  // its barriers publish the group maxima
  const float sum = block_sum(chunk_max == -INFINITY ? 0.0f : chunk_sum * expf(chunk_max - row_max), shared.scratch);
  select_best<T, B, N, true>(row, args.k, group_max, shared);
  write_best(args, row_index, shared, row_max == -INFINITY ? -INFINITY : row_max + logf(sum));
}

// A thread's share of the argmax pass over vectors [begin, end): its normalizer, and its best key with the
// index as a composite. It visits its indices in increasing order, so a strict comparison keeps the lowest
// index of a tie.
template <typename T, typename B, int N>
__device__ __forceinline__ unsigned long long argmax_pass(const RowView<T, B>& row, int begin, int end,
                                                          Normalizer& normalizer) {
  uint32_t best_key = kNoKey;
  int best_index = 0;
  for (int first = begin; first < end; first += kLoadsAhead * kThreads) {
    float z[kLoadsAhead][N];
    load_ahead<T, B, N>(row, first, end, z);
#pragma unroll
    for (int a = 0; a < kLoadsAhead; ++a) {
      const int v = first + a * kThreads + static_cast<int>(threadIdx.x);
      if (v >= end) break;
      normalizer.add(z[a]);
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const int i = v * N - row.shift + e;
        const uint32_t key = row.key(i, z[a][e]);
        if (key > best_key) {
          best_key = key;
          best_index = i;
        }
      }
    }
  }
  return composite(best_key, best_index);
}

// k = 1: normalizer and argmax in one pass over the row.
template <typename T, typename B, int N>
__global__ void __launch_bounds__(kThreads) log_softmax_argmax_kernel(TopkArguments<T, B> args) {
  start_after_inputs();
  __shared__ float scratch[32];
  __shared__ unsigned long long warp_best[32];
  const int64_t row_index = blockIdx.x;
  const RowView<T, B> row = row_of<N>(args, row_index);
  const int vectors = vector_count<N>(row.vocab, row.shift);
  Normalizer normalizer;
  unsigned long long best = argmax_pass<T, B, N>(row, 0, vectors, normalizer);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  const float log_sum_exp = block_log_sum_exp(normalizer, scratch);  // its barriers publish warp_best
  if (threadIdx.x < 32) {
    best = threadIdx.x < kThreads / 32 ? warp_best[threadIdx.x] : 0;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
    if (threadIdx.x == 0) {
      const float z = key_score(static_cast<uint32_t>(best >> 32));
      args.values[row_index] = z == -INFINITY || !args.normalize ? z : z - log_sum_exp;
      args.indices[row_index] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(best));
    }
  }
}

// k = 1 for few rows, where one block per row would leave most of the GPU idle: each row is split into
// gridDim.x chunks; every chunk's block writes its normalizer and best (key, index), and a second kernel
// merges them per row. Same keys, same tie rule, so the same argmax as the one-block kernel.
struct ArgmaxPartial {
  float max;  // of the chunk's logits
  float sum;  // of exp(z - max) over the chunk
  unsigned long long best;
};

template <typename T, typename B, int N>
__global__ void __launch_bounds__(kThreads)
    log_softmax_argmax_chunk_kernel(TopkArguments<T, B> args, ArgmaxPartial* __restrict__ partials) {
  start_after_inputs();
  __shared__ float scratch[32];
  __shared__ unsigned long long warp_best[32];
  const int64_t row_index = blockIdx.y;
  const RowView<T, B> row = row_of<N>(args, row_index);
  const int vectors = vector_count<N>(row.vocab, row.shift);
  const int per_chunk = (vectors + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_chunk, end = min(vectors, begin + per_chunk);
  Normalizer normalizer;
  unsigned long long best = argmax_pass<T, B, N>(row, begin, end, normalizer);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  const float chunk_max = block_max(normalizer.max, scratch);  // its barriers publish warp_best
  const float scaled = normalizer.max == -INFINITY ? 0.0f : normalizer.sum * expf(normalizer.max - chunk_max);
  const float chunk_sum = block_sum(scaled, scratch);
  if (threadIdx.x < 32) {
    best = threadIdx.x < kThreads / 32 ? warp_best[threadIdx.x] : 0;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
    if (threadIdx.x == 0) partials[row_index * gridDim.x + blockIdx.x] = {chunk_max, chunk_sum, best};
  }
}

// One warp per row merges its chunks (at most 32): logsumexp of the partial sums and the largest key.
// Every chunk holds at least one element (argmax_chunks), so every partial has a real key.
__global__ void log_softmax_argmax_merge_kernel(const ArgmaxPartial* __restrict__ partials, int chunks, bool normalize,
                                                float* __restrict__ values, int32_t* __restrict__ indices) {
  start_after_inputs();
  const int64_t row_index = blockIdx.x;
  const int lane = threadIdx.x;
  ArgmaxPartial part{-INFINITY, 0.0f, 0};
  if (lane < chunks) part = partials[row_index * chunks + lane];
  float row_max = part.max;
  unsigned long long best = part.best;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    row_max = fmaxf(row_max, __shfl_xor_sync(kFullMask, row_max, offset));
    best = max(best, __shfl_xor_sync(kFullMask, best, offset));
  }
  float sum = part.max == -INFINITY ? 0.0f : part.sum * expf(part.max - row_max);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  if (lane == 0) {
    const float log_sum_exp = row_max == -INFINITY ? -INFINITY : row_max + logf(sum);
    const float z = key_score(static_cast<uint32_t>(best >> 32));
    values[row_index] = z == -INFINITY || !normalize ? z : z - log_sum_exp;
    indices[row_index] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(best));
  }
}

// Chunks per row for the split argmax: enough blocks for kChunkBlocksPerSM per multiprocessor, each chunk at
// least one pass of the block over the row; 1 means the one-block-per-row kernel. A thread kept one 16-byte
// load in flight (now kLoadsAhead), so the blocks resident on a multiprocessor bounded the bytes in flight: at two a
// multiprocessor (128 rows of NLLB's 256,206 fp32 logits in 3 chunks a row) the argmax read 1.1 TB/s and the
// top-k scan at 256 rows (2 chunks) 1.4 TB/s (ncu, H200). Batch-invariant mode splits every row as it would
// split a lone row, so that a row's normalizer sums its chunks in the same order at any row count.
constexpr int64_t kChunkBlocksPerSM = 8;
int argmax_chunks(int64_t rows, int vectors) {
  if (batch_invariant()) rows = 1;
  const int64_t wanted =
      (kChunkBlocksPerSM * static_cast<int64_t>(context().properties.multiProcessorCount) + rows - 1) / rows;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({wanted, 32, vectors / kThreads})));
}

// The group filter's maxima beside TopkShared fit the smallest shared memory opt-in since Volta (64 KB,
// Turing). The vocabularies ops::hierarchical_topk_fits promises make few enough groups even with scalar
// loads (32 ids a group), and at least kMaxDeviceTopk with any loads (64 ids a group at most).
static_assert(sizeof(TopkShared) + kMaxGroupBytes <= 65536, "the group filter must fit every GPU's shared memory");
static_assert(group_count<1>(static_cast<int>(ops::kMaxHierarchicalTopkVocab), 0) * sizeof(uint32_t) <= kMaxGroupBytes,
              "the group filter must take ops::kMaxHierarchicalTopkVocab with scalar loads");
static_assert(group_count<8>(static_cast<int>(ops::kMinHierarchicalTopkVocab), 0) >= ops::kMaxDeviceTopk,
              "ops::kMinHierarchicalTopkVocab must make kMaxDeviceTopk groups of 64 ids");

// Lets a group filter kernel take `group_bytes` of dynamic shared memory (up to kMaxGroupBytes, which with
// its static TopkShared passes the 48 KB a launch gets unasked). Asked at every launch rather than only past
// 48 KB, since the static size is the device compiler's; the runtime sets the attribute only as it grows.
void allow_group_memory(const void* kernel, size_t group_bytes) { allow_dynamic_shared_memory(kernel, group_bytes); }

template <typename T, typename B, int N>
void launch_topk(const TopkArguments<T, B>& args, int64_t rows, ops::TopkAlgorithm algorithm, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(rows);
  // The most vectors a row spans (the unshifted rows one fewer, or as many).
  const int vectors = vector_count<N>(args.vocab, max_shift<N>(args.vocab));
  const int chunks = args.k == 1 ? argmax_chunks(rows, vectors) : 1;
  if (chunks > 1) {  // k = 1
    static_assert(sizeof(ArgmaxPartial) % sizeof(int32_t) == 0, "partials are stored in an int32 tensor");
    constexpr int64_t kWords = sizeof(ArgmaxPartial) / sizeof(int32_t);
    Tensor partials({rows, chunks * kWords}, DataType::I32, Device::CUDA);
    auto* partial = static_cast<ArgmaxPartial*>(partials.raw());
    launch_kernel(log_softmax_argmax_chunk_kernel<T, B, N>, dim3(chunks, blocks), kThreads, 0, stream, args, partial);
    launch_kernel(log_softmax_argmax_merge_kernel, blocks, 32, 0, stream, partial, chunks, args.normalize, args.values,
                  args.indices);
  } else if (args.k == 1) {
    launch_kernel(log_softmax_argmax_kernel<T, B, N>, blocks, kThreads, 0, stream, args);
  } else {
    // Shared memory holds the most shifted row's groups; the threshold needs k from the least shifted.
    const int groups = group_count<N>(args.vocab, max_shift<N>(args.vocab));
    const size_t group_bytes = sizeof(uint32_t) * static_cast<size_t>(groups);
    const bool groups_fit = group_count<N>(args.vocab, 0) >= args.k && group_bytes <= kMaxGroupBytes;
    if (algorithm == ops::TopkAlgorithm::Hierarchical)
      SEQTRANS_CHECK(groups_fit, "log_softmax_topk: a vocabulary of {} makes {} groups, the group threshold needs {} to {}",
                     args.vocab, groups, args.k, kMaxGroupBytes / sizeof(uint32_t));
    const bool group_filter = algorithm != ops::TopkAlgorithm::FullScan && groups_fit;
    // Pass 1 split as for the argmax, in whole groups; chunks (at most kThreads) hand their normalizers to
    // the select kernel's threads.
    const int scan_chunks = std::min(argmax_chunks(rows, vectors), kThreads);
    const int chunk_vectors = (vectors + scan_chunks - 1) / scan_chunks;
    const int aligned_vectors = (chunk_vectors + kLanesPerGroup<N> - 1) / kLanesPerGroup<N> * kLanesPerGroup<N>;
    const int chunks = (vectors + aligned_vectors - 1) / aligned_vectors;
    if (group_filter && chunks > 1) {
      const int row_words = groups + 2 * chunks;
      Tensor scratch({rows, row_words}, DataType::I32, Device::CUDA);
      auto* words = static_cast<uint32_t*>(scratch.raw());
      launch_kernel(log_softmax_topk_scan_kernel<T, B, N>, dim3(chunks, blocks), kThreads, 0, stream, args, words,
                    aligned_vectors, row_words);
      const auto select_kernel = log_softmax_topk_select_kernel<T, B, N>;
      allow_group_memory(reinterpret_cast<const void*>(select_kernel), group_bytes);
      launch_kernel(select_kernel, blocks, kThreads, group_bytes, stream, args, words, chunks, row_words);
    } else if (group_filter) {
      const auto filter_kernel = log_softmax_topk_kernel<T, B, N, true>;
      allow_group_memory(reinterpret_cast<const void*>(filter_kernel), group_bytes);
      launch_kernel(filter_kernel, blocks, kThreads, group_bytes, stream, args);
    } else {
      launch_kernel(log_softmax_topk_kernel<T, B, N, false>, blocks, kThreads, 0, stream, args);
    }
  }
}

template <typename T, typename B>
void dispatch_width(const TopkArguments<T, B>& args, int64_t rows, ops::TopkAlgorithm algorithm, cudaStream_t stream) {
  constexpr int kWidth = kVectorWidth<T>;
  // Vector loads need the logits and the bias to start on a vector boundary (rows may start anywhere:
  // RowView's shift).
  const bool vectorized = is_aligned(args.logits, sizeof(T) * kWidth) &&
                          (args.bias == nullptr || is_aligned(args.bias, sizeof(B) * kWidth));
  if (vectorized)
    launch_topk<T, B, kWidth>(args, rows, algorithm, stream);
  else
    launch_topk<T, B, 1>(args, rows, algorithm, stream);
}

template <typename T, typename B>
void launch_log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, const uint32_t* suppressed,
                             Tensor& values, Tensor& indices, cudaStream_t stream) {
  TopkArguments<T, B> args;
  args.logits = logits.data<T>();
  args.bias = options.bias != nullptr ? options.bias->data<B>() : nullptr;
  args.suppressed = suppressed;
  args.values = values.data<float>();
  args.indices = indices.data<int32_t>();
  args.vocab = static_cast<int>(logits.dim(1));
  args.k = options.k;
  args.normalize = options.normalize;
  dispatch_width(args, logits.dim(0), options.algorithm, stream);
}

}  // namespace

void log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, Tensor& values, Tensor& indices,
                      cudaStream_t stream) {
  const char* op = "log_softmax_topk";
  check_on_device(op, "logits", logits);
  SEQTRANS_CHECK(logits.rank() == 2, "{}: logits must be [rows, vocab], got {}", op, shape_string(logits.shape()));
  SEQTRANS_CHECK(logits.dtype() == DataType::F32 || logits.dtype() == DataType::F16, "{}: logits must be fp32 or fp16",
                 op);
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  SEQTRANS_CHECK(options.k >= 1 && options.k <= ops::kMaxDeviceTopk && options.k <= vocab,
                 "{}: k = {} must be in [1, min({}, vocabulary {})]", op, options.k, ops::kMaxDeviceTopk, vocab);
  SEQTRANS_CHECK(vocab < (int64_t{1} << 31), "{}: vocabulary {} is too large", op, vocab);
  SEQTRANS_CHECK(rows <= context().properties.maxGridSize[0], "{}: {} rows exceed the grid limit", op, rows);
  for (const Tensor* output : {&values, &indices}) {
    check_on_device(op, "output", *output);
    SEQTRANS_CHECK(output->shape() == (Shape{rows, options.k}), "{}: outputs must be [{}, {}], got {}", op, rows,
                   options.k, shape_string(output->shape()));
  }
  check_same_dtype(op, "values", values, DataType::F32);
  check_same_dtype(op, "indices", indices, DataType::I32);
  if (options.bias != nullptr) {
    check_on_device(op, "bias", *options.bias);
    SEQTRANS_CHECK(options.bias->elements() == vocab, "{}: bias has {} elements for a vocabulary of {}", op,
                   options.bias->elements(), vocab);
    SEQTRANS_CHECK(options.bias->dtype() == logits.dtype() || options.bias->dtype() == DataType::F32,
                   "{}: bias must be fp32 or the logits' dtype", op);
  }
  if (rows == 0) return;

  // Suppressed ids become a bitmap of the vocabulary, built once for all rows (or made once by the caller).
  const Tensor bitmap = launch_bitmap(op, options.suppressed_ids, options.suppressed_bitmap, vocab, stream);
  const uint32_t* suppressed = bitmap.defined() ? bitmap.data<uint32_t>() : nullptr;

  const bool f32_bias = options.bias != nullptr && options.bias->dtype() == DataType::F32;
  if (logits.dtype() == DataType::F32)
    launch_log_softmax_topk<float, float>(logits, options, suppressed, values, indices, stream);
  else if (f32_bias)
    launch_log_softmax_topk<__half, float>(logits, options, suppressed, values, indices, stream);
  else
    launch_log_softmax_topk<__half, __half>(logits, options, suppressed, values, indices, stream);
}

}  // namespace seqtrans::cuda
