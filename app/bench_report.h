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
void print_arrival_report(std::ostream& out, const bench::RunDescription& run,
                          const std::vector<bench::ArrivalResult>& results);

}  // namespace seqtrans::app
