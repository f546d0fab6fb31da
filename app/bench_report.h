// The human-readable report of `seqtrans bench` on stdout: a header, the results table, the profiled
// breakdown and the ablations.
#pragma once

#include <ostream>

#include "bench/arrivals.h"
#include "bench/records.h"

namespace seqtrans::app {

void print_synthetic_report(std::ostream& out, const bench::RunDescription& run, const bench::SyntheticReport& report);
void print_real_report(std::ostream& out, const bench::RunDescription& run, const bench::RealReport& report,
                       const TranslatorOptions& translator);
// `synthetic`: the random-weight model's config, named under the title (--synthetic); null for a real run.
void print_arrival_report(std::ostream& out, const bench::RunDescription& run,
                          const std::vector<bench::ArrivalResult>& results, const ModelConfig* synthetic = nullptr);

}  // namespace seqtrans::app
