#include "tandem/http/router.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_handlers.h"

namespace tandem::http {
namespace {

std::string Call(const Router::Match& match) {
  Request request;
  return std::get<Response>((*match.handler)(request)).body;
}

TEST(RouterTest, DispatchesOnMethodAndExactPath) {
  Router router;
  ASSERT_TRUE(router.Handle("GET", "/v1/models", testing::Fixed("list")).ok());
  ASSERT_TRUE(router.Handle("POST", "/v1/models", testing::Fixed("create")).ok());
  ASSERT_TRUE(router.Handle("GET", "/v1", testing::Fixed("root")).ok());

  EXPECT_EQ(Call(router.Find("GET", "/v1/models")), "list");
  EXPECT_EQ(Call(router.Find("POST", "/v1/models")), "create");
  EXPECT_EQ(Call(router.Find("GET", "/v1")), "root");
  EXPECT_EQ(router.Find("GET", "/v1/models/").handler, nullptr);
  EXPECT_EQ(router.Find("GET", "/v1/model").handler, nullptr);
}

TEST(RouterTest, UnknownPathHasNoAllowedMethods) {
  Router router;
  ASSERT_TRUE(router.Handle("GET", "/a", testing::Fixed("a")).ok());
  Router::Match match = router.Find("GET", "/b");
  EXPECT_EQ(match.handler, nullptr);
  EXPECT_EQ(match.allowed_methods, "");
}

TEST(RouterTest, WrongMethodListsTheAllowedOnes) {
  Router router;
  ASSERT_TRUE(router.Handle("POST", "/a", testing::Fixed("p")).ok());
  ASSERT_TRUE(router.Handle("GET", "/a", testing::Fixed("g")).ok());
  Router::Match match = router.Find("DELETE", "/a");
  EXPECT_EQ(match.handler, nullptr);
  EXPECT_EQ(match.allowed_methods, "GET, POST");
  // Methods are case-sensitive (RFC 9110).
  EXPECT_EQ(router.Find("get", "/a").handler, nullptr);
}

TEST(RouterTest, RejectsBadAndDuplicateRoutes) {
  Router router;
  EXPECT_EQ(router.Handle("GET", "no-slash", testing::Fixed("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Handle("GET", "/q?x=1", testing::Fixed("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Handle("G T", "/a", testing::Fixed("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Handle("", "/a", testing::Fixed("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Handle("GET", "/a", nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(router.Handle("GET", "/a", testing::Fixed("first")).ok());
  EXPECT_EQ(router.Handle("GET", "/a", testing::Fixed("second")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Call(router.Find("GET", "/a")), "first");
}

TEST(RequestTest, FindHeaderIsCaseInsensitive) {
  Request request;
  request.headers = {{"Content-Type", "application/json"}, {"X-Trace", "1"}, {"x-trace", "2"}};
  EXPECT_EQ(request.FindHeader("content-type").value(), "application/json");
  EXPECT_EQ(request.FindHeader("X-TRACE").value(), "1");
  EXPECT_FALSE(request.FindHeader("accept").has_value());
}

}  // namespace
}  // namespace tandem::http
