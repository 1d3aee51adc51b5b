#include "core/ordered_json.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace orzo {
namespace {

using Json = nlohmann::ordered_json;

TEST(OrderedJson, KeepsTheOrderKeysCameIn) {
  const Json j = parse_ordered_json(R"({"z": 1, "a": [true, null, 2.5, "s"], "m": {"y": -3, "b": 18446744073709551615}})");
  std::string keys;
  for (const auto& [k, v] : j.items()) keys += k;
  EXPECT_EQ(keys, "zam");
  EXPECT_EQ(j.dump(), R"({"z":1,"a":[true,null,2.5,"s"],"m":{"y":-3,"b":18446744073709551615}})");
}

TEST(OrderedJson, ADuplicateKeepsItsFirstPlaceAndTakesTheLastValue) {
  // As nlohmann's own parser does; with few keys (a scan) and many (a hash).
  EXPECT_EQ(parse_ordered_json(R"({"a": 1, "b": 2, "a": 3})").dump(), R"({"a":3,"b":2})");
  std::string many = "{";
  for (int i = 0; i < 100; ++i) many += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  many += "\"k7\": \"again\", \"k99\": {\"k7\": 1}}";
  const Json j = parse_ordered_json(many);
  EXPECT_EQ(j.dump(), Json::parse(many).dump());
  EXPECT_EQ(j.size(), 100u);
  EXPECT_EQ(j["k7"], "again");
  EXPECT_EQ(j.begin().key(), "k0");
}

TEST(OrderedJson, AgreesWithNlohmannOnValuesOfEveryKind) {
  for (const char* text : {"0", "-1.5e300", "\"\\u00e9\\ud83d\\ude00\"", "[]", "{}", "[[[]],{}]", "  {\"\": \"\"}  ",
                           R"({"a":{"b":{"c":[1,{"d":null}]}},"e":false})"}) {
    EXPECT_EQ(parse_ordered_json(text).dump(), Json::parse(text).dump()) << text;
  }
}

TEST(OrderedJson, BadTextIsAnErrorWithoutNlohmannsTag) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "1 2", "1e999", "\"\\ud800\""}) {
    try {
      parse_ordered_json(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const JsonSyntaxError& e) {
      EXPECT_EQ(std::string(e.what()).find("[json.exception"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(try_parse_ordered_json("{\"a\":"));
  EXPECT_EQ(try_parse_ordered_json("[1]")->dump(), "[1]");
}

TEST(OrderedJson, NestingPastTheLimitIsRefused) {
  EXPECT_NO_THROW(parse_ordered_json(std::string(8, '[') + std::string(8, ']'), 8));
  try {
    parse_ordered_json(std::string(9, '[') + std::string(9, ']'), 8);
    FAIL();
  } catch (const JsonSyntaxError& e) {
    EXPECT_STREQ(e.what(), "nested deeper than 8 levels");
  }
}

// Not a speed measurement: an object of 300,000 keys takes a few hundred milliseconds in
// linear time, and hours in the quadratic time of nlohmann's ordered parser.
TEST(OrderedJson, ALargeObjectParsesInLinearTime) {
  std::string text = "{";
  for (int i = 0; i < 300000; ++i) text += (i ? ",\"" : "\"") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  const auto start = std::chrono::steady_clock::now();
  const Json j = parse_ordered_json(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(j.size(), 300000u);
  EXPECT_EQ(j.back(), 299999);
  EXPECT_LT(seconds, 20.0);
}

}  // namespace
}  // namespace orzo
