// Issue #26, finding 1: request bodies cost time linear in their size, and each limit (nesting,
// values, keys per object) is a 400 naming it. Also replays the request fuzzer's corpus.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz_request.h"
#include "server/api_error.h"
#include "server/request.h"

namespace clover::server {
namespace {

using Clock = std::chrono::steady_clock;

// The message of the ApiError that parse_body throws for `body` ("" when it parses), and the time.
std::string error_of(const std::string& body, double& seconds) {
  const auto t0 = Clock::now();
  std::string msg;
  try {
    parse_body(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    msg = e.message;
  }
  seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return msg;
}

TEST(ServerRequestLimits, ManyKeysAreRefusedAtOnce) {
  std::string body = "{\"content\":\"x\",\"junk\":{";
  for (int i = 0; i < 150000; ++i) body += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  body += "}}";
  double s = 0;
  EXPECT_NE(error_of(body, s).find("more than 256 keys"), std::string::npos);
  EXPECT_LT(s, 1.0);
}

TEST(ServerRequestLimits, ManyValuesAreRefusedAndManyEmptyObjectsAreCheap) {
  std::string big = "{\"junk\":[";
  for (int i = 0; i < 300000; ++i) big += i ? ",{}" : "{}";
  big += "]}";
  double s = 0;
  EXPECT_NE(error_of(big, s).find("more than 262144 JSON values"), std::string::npos);
  EXPECT_LT(s, 1.0);
  std::string ok = "{\"junk\":[";
  for (int i = 0; i < 160000; ++i) ok += i ? ",{}" : "{}";
  ok += "]}";
  EXPECT_EQ(error_of(ok, s), "");
  EXPECT_LT(s, 2.0);
}

TEST(ServerRequestLimits, DeepNestingNamesTheLimit) {
  double s = 0;
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(error_of(deep, s).find("nests deeper than 128 levels"), std::string::npos);
  EXPECT_NE(error_of("{\"a\":[1,", s).find("not valid JSON"), std::string::npos);
}

TEST(ServerRequestLimits, ToolCallArgumentsAreBoundedToo) {
  std::string args = "{\"a\":";
  for (int i = 0; i < 300; ++i) args += "{\"k\":";
  args += "1" + std::string(301, '}');
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}},
                                               {{"role", "assistant"},
                                                {"tool_calls", json::array({{{"id", "c"},
                                                                             {"type", "function"},
                                                                             {"function", {{"name", "f"}, {"arguments", args}}}}})}}})}};
  try {
    parse_chat_request(body, RequestDefaults{});
    FAIL() << "accepted 300-deep arguments";
  } catch (const ApiError& e) {
    EXPECT_NE(e.message.find("messages[1].tool_calls[].function.arguments nests deeper"), std::string::npos) << e.message;
  }
}

TEST(ServerRequestLimits, RepeatPenaltyZeroIsABadRequest) {
  const json body = {{"prompt", "x"}, {"repeat_penalty", 0}};
  try {
    parse_completion_request(body, RequestDefaults{}, 100);
    FAIL() << "accepted repeat_penalty 0";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.extra.value("param", ""), "repeat_penalty");
  }
}

// Issue #26, finding 10: logprobs and logit_bias are parsed into the engine's options, and bad
// values are 400s naming the field (the entry, for a bias).
std::string param_of(const json& body, bool chat) {
  RequestDefaults d;
  d.n_vocab = 100;
  try {
    if (chat) parse_chat_request(body, d);
    else parse_completion_request(body, d, d.n_vocab);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.extra.value("param", "?");
  }
  return "";
}

TEST(ServerRequestLimits, LogprobsAndLogitBias) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  RequestDefaults d;
  d.n_vocab = 100;
  json b = chat;
  b["logprobs"] = true;
  b["top_logprobs"] = 5;
  b["logit_bias"] = {{"7", -100}, {"99", 2.5}};
  CompletionRequest r = parse_chat_request(b, d);
  EXPECT_EQ(r.gen.logprobs, 5);
  ASSERT_EQ(r.gen.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.gen.sampling.logit_bias[0], (std::pair<int32_t, float>{7, -100.0f}));
  EXPECT_EQ(r.gen.sampling.logit_bias[1], (std::pair<int32_t, float>{99, 2.5f}));
  EXPECT_EQ(parse_chat_request(chat, d).gen.logprobs, -1);
  EXPECT_EQ(parse_completion_request({{"prompt", "x"}, {"logprobs", 0}}, d, 100).gen.logprobs, 0);

  auto with = [&](json extra) {
    json x = chat;
    for (auto it = extra.begin(); it != extra.end(); ++it) x[it.key()] = it.value();
    return x;
  };
  EXPECT_EQ(param_of(with({{"top_logprobs", 2}}), true), "top_logprobs");
  EXPECT_EQ(param_of(with({{"logprobs", true}, {"top_logprobs", 21}}), true), "top_logprobs");
  EXPECT_EQ(param_of(with({{"logprobs", true}, {"clover", {{"mode", "spec"}}}}), true), "");  // every mode
  EXPECT_EQ(param_of({{"prompt", "x"}, {"logprobs", 6}}, false), "logprobs");
  EXPECT_EQ(param_of(with({{"logit_bias", {{"100", 1}}}}), true), "logit_bias.100");
  EXPECT_EQ(param_of(with({{"logit_bias", {{"x1", 1}}}}), true), "logit_bias.x1");
  EXPECT_EQ(param_of(with({{"logit_bias", {{"3", -100.5}}}}), true), "logit_bias.3");
  EXPECT_EQ(param_of(with({{"logit_bias", json::array()}}), true), "logit_bias");
  json many = json::object();
  for (int i = 0; i < 301; ++i) many[std::to_string(i)] = 0;  // counted before the ids are checked
  EXPECT_EQ(param_of(with({{"logit_bias", many}}), true), "logit_bias");
}

TEST(ServerRequestLimits, FuzzCorpusReplays) {
  const std::filesystem::path dir = std::filesystem::path(CLOVER_SERVER_TEST_DIR) / "fuzz_corpus";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string data = ss.str();
    SCOPED_TRACE(e.path().string());
    fuzz::request_one(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    ++n;
  }
  EXPECT_GT(n, 0u);
}

}  // namespace
}  // namespace clover::server
