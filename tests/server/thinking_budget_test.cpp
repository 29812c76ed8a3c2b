// The thinking budget's counter (server/thinking_budget.h) and the request defaults of the
// llama-server flags (-n, -s, --reasoning-budget) as parse_chat_request applies them.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/request.h"
#include "server/thinking_budget.h"

namespace clover::server {
namespace {

TEST(ThinkingBudget, StopsAtTheBudgetWithTheBlockOpen) {
  ThinkingBudget b(/*open=*/true, 3);
  EXPECT_FALSE(b.spent_at_start());
  EXPECT_FALSE(b.push("Let"));
  EXPECT_FALSE(b.push(" me"));
  EXPECT_TRUE(b.push(" think"));
  EXPECT_EQ(b.thinking_tokens(), 3);
  EXPECT_TRUE(b.open());
}

TEST(ThinkingBudget, TheModelsOwnCloseEndsCounting) {
  ThinkingBudget b(true, 3);
  EXPECT_FALSE(b.push("ok"));
  EXPECT_FALSE(b.push("</"));  // a marker split across tokens
  EXPECT_FALSE(b.push("think>"));
  EXPECT_FALSE(b.open());
  EXPECT_FALSE(b.push("answer"));
  EXPECT_FALSE(b.push("more"));
  // "ok" and "</" were thinking tokens; the token completing "</think>" is not.
  EXPECT_EQ(b.thinking_tokens(), 2);
}

TEST(ThinkingBudget, ToolCallEndsTheBlock) {
  ThinkingBudget b(true, 2);
  EXPECT_FALSE(b.push("x"));
  EXPECT_FALSE(b.push("<tool_call>"));
  EXPECT_FALSE(b.open());
  EXPECT_EQ(b.thinking_tokens(), 1);
}

TEST(ThinkingBudget, UnlimitedZeroAndClosedPrompt) {
  ThinkingBudget unlimited(true, -1);
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(unlimited.push("a"));
  EXPECT_EQ(unlimited.thinking_tokens(), 1000);
  EXPECT_TRUE(ThinkingBudget(true, 0).spent_at_start());
  ThinkingBudget closed(false, 0);  // the prompt closed the block (thinking off): nothing to do
  EXPECT_FALSE(closed.spent_at_start());
  EXPECT_FALSE(closed.push("a"));
  EXPECT_EQ(closed.thinking_tokens(), 0);
  EXPECT_EQ(ThinkingBudget::closing_text(""), "\n</think>\n\n");
  EXPECT_EQ(ThinkingBudget::closing_text(" Enough."), " Enough.\n</think>\n\n");
}

TEST(ServerRequest, ServerDefaultsAndTheRequestsOwnFields) {
  RequestDefaults d;
  d.n_predict = 7;
  d.seed = 42;
  d.reasoning_budget = 16;
  d.sampling.presence_penalty = 0.9f;
  const json hi = json::parse(R"({"messages":[{"role":"user","content":"hi"}]})");
  CompletionRequest r = parse_chat_request(hi, d);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.gen.max_tokens, 7);
  EXPECT_EQ(r.gen.sampling.seed, 42u);
  EXPECT_EQ(r.reasoning_budget, 16);
  EXPECT_FLOAT_EQ(r.gen.sampling.presence_penalty, 0.9f);

  json body = hi;
  body["max_tokens"] = 3;
  body["seed"] = 5;
  body["presence_penalty"] = 0;
  body["reasoning_budget"] = 0;
  r = parse_chat_request(body, d);
  EXPECT_EQ(r.gen.max_tokens, 3);
  EXPECT_EQ(r.gen.sampling.seed, 5u);
  EXPECT_EQ(r.gen.sampling.presence_penalty, 0.0f);
  EXPECT_EQ(r.reasoning_budget, 0);
  body.erase("reasoning_budget");
  body["thinking_budget_tokens"] = 32;
  EXPECT_EQ(parse_chat_request(body, d).reasoning_budget, 32);
  body["max_tokens"] = -1;  // until the context is full, whatever -n says
  EXPECT_FALSE(parse_chat_request(body, d).max_tokens_given);

  for (const char* bad : {R"({"messages":[{"role":"user","content":"hi"}],"reasoning_budget":-2})",
                          R"({"messages":[{"role":"user","content":"hi"}],"thinking_budget_tokens":"many"})"}) {
    try {
      parse_chat_request(json::parse(bad), d);
      FAIL() << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_NE(e.message.find("budget"), std::string::npos) << e.message;
    }
  }
}

}  // namespace
}  // namespace clover::server
