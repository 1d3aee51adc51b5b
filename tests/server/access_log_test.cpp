// The access log's line, text and JSON: every field, the generation fields only where known,
// and no client-chosen byte able to break a line.

#include "server/access_log.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace orzo {
namespace {

AccessRecord generation_request() {
  AccessRecord r;
  r.method = "POST";
  r.path = "/v1/completions";
  r.status = 200;
  r.generation = AccessRecord::Generation{5, 16, 0.0123};
  r.duration_seconds = 0.0456;
  return r;
}

AccessRecord not_found() {
  AccessRecord r;
  r.method = "GET";
  r.path = "/nowhere";
  r.status = 404;
  r.duration_seconds = 0.0001;
  return r;
}

TEST(AccessLog, TextHasEveryFieldOfAGenerationRequest) {
  EXPECT_EQ(access_line(generation_request(), LogFormat::text),
            "access: POST /v1/completions 200 prompt_tokens=5 completion_tokens=16 ttft=12.3ms duration=45.6ms");
}

TEST(AccessLog, TextLeavesOutWhatIsNotKnown) {
  EXPECT_EQ(access_line(not_found(), LogFormat::text), "access: GET /nowhere 404 duration=0.1ms");
  AccessRecord refused = generation_request();
  refused.status = 429;
  refused.generation->completion_tokens = 0;
  refused.generation->ttft_seconds.reset();
  EXPECT_EQ(access_line(refused, LogFormat::text),
            "access: POST /v1/completions 429 prompt_tokens=5 completion_tokens=0 duration=45.6ms");
}

TEST(AccessLog, JsonHasStableFieldsWithNullWhereUnknown) {
  const auto j = nlohmann::json::parse(access_line(generation_request(), LogFormat::json));
  EXPECT_EQ(j["log"], "access");
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["path"], "/v1/completions");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["prompt_tokens"], 5);
  EXPECT_EQ(j["completion_tokens"], 16);
  EXPECT_DOUBLE_EQ(j["ttft_ms"].get<double>(), 12.3);
  EXPECT_DOUBLE_EQ(j["duration_ms"].get<double>(), 45.6);

  const auto k = nlohmann::json::parse(access_line(not_found(), LogFormat::json));
  EXPECT_EQ(k.size(), j.size());  // the same fields, whatever the request
  for (const char* field : {"prompt_tokens", "completion_tokens", "ttft_ms"}) EXPECT_TRUE(k[field].is_null()) << field;
  EXPECT_EQ(k["status"], 404);
}

TEST(AccessLog, ClientBytesCannotBreakALine) {
  AccessRecord r = not_found();
  r.method = "-";
  r.path = "/a b\n\"\xff";
  const std::string text = access_line(r, LogFormat::text);
  EXPECT_EQ(text, "access: - /a\\x20b\\x0a\"\\xff 404 duration=0.1ms");
  const std::string json = access_line(r, LogFormat::json);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(json)["path"], "/a b\n\"\xef\xbf\xbd");  // invalid UTF-8 becomes U+FFFD
}

}  // namespace
}  // namespace orzo
