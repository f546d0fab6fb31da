// The counters a TranslatorGroup reports: each engine's, added up field by field.
#include "catch.h"
#include "translator_group.h"

using namespace seqtrans;

TEST_CASE("a group's stats add up every engine's counters and time split", "[unit]") {
  TranslationStats first, second;
  first.sentences = 3;
  first.decoder_steps = 10;
  first.search_seconds = 1.5;
  first.search_split = SessionTimes{0.25, 1.0, 0.25};
  first.sentence_seconds = {0.1, 0.2, 0.3};
  second.sentences = 2;
  second.decoder_steps = 7;
  second.search_seconds = 0.5;
  second.search_split = SessionTimes{0.125, 0.25, 0.125};
  second.sentence_seconds = {0.4, 0.5};

  const TranslationStats total = sum({first, second});
  CHECK(total.sentences == 5);
  CHECK(total.decoder_steps == 17);
  CHECK(total.search_seconds == 2.0);
  CHECK(total.search_split.encode == 0.375);
  CHECK(total.search_split.model_step == 1.25);
  CHECK(total.search_split.search == 0.375);
  CHECK(total.sentence_seconds.size() == 5);

  const SessionTimes run = total.search_split - first.search_split;
  CHECK(run.encode == 0.125);
  CHECK(run.model_step == 0.25);
  CHECK(run.search == 0.125);
}
