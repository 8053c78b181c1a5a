#include "tandem/security/api_keys.h"

#include "gtest/gtest.h"
#include "tandem/security/digest.h"

namespace tandem::security {
namespace {

std::string Line(const std::string& key, const std::string& rest = R"("tenant": "acme")") {
  return "{\"key_sha256\": \"" + Sha256Hex(key) + "\", " + rest + "}";
}

TEST(DigestTest, Sha256MatchesTheStandardVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256("abc").size(), 32u);
}

TEST(DigestTest, ConstantTimeEqualsComparesEveryByte) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));  // last byte
  EXPECT_FALSE(ConstantTimeEquals("secret", "Secret"));  // first byte
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  const std::string a(32, '\0');
  std::string b = a;
  b[31] = 1;
  EXPECT_FALSE(ConstantTimeEquals(a, b)) << "embedded zero bytes are compared too";
}

TEST(DigestTest, RandomBytesDiffer) {
  EXPECT_EQ(RandomBytes(32).size(), 32u);
  EXPECT_NE(RandomBytes(32), RandomBytes(32));
  EXPECT_EQ(Base64Url(std::string("\xfb\xff", 2)), "-_8");
}

TEST(ApiKeySetTest, FindsKeysByTheirHashOnly) {
  auto set = ApiKeySet::Parse(
      "# comment\n\n" + Line("k1", R"("tenant": "acme", "traffic_class": "agent", "limits": {"requests_per_minute": 5})") +
      "\n" + Line("k2", R"("tenant": "beta")") + "\n" +
      R"({"tenant": "acme", "limits": {"tokens_per_minute": 1000, "concurrent_streams": 4}})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 2u);
  const ApiKey* k1 = set->Find("k1");
  ASSERT_NE(k1, nullptr);
  EXPECT_EQ(k1->tenant, "acme");
  EXPECT_EQ(k1->traffic_class, "agent");
  EXPECT_EQ(k1->limits.requests_per_minute, 5);
  EXPECT_EQ(k1->key_id, "key-" + Sha256Hex("k1").substr(0, 12));
  ASSERT_NE(set->Find("k2"), nullptr);
  EXPECT_EQ(set->Find("k3"), nullptr);
  EXPECT_EQ(set->Find("k"), nullptr);
  EXPECT_EQ(set->Find(""), nullptr);
  EXPECT_EQ(set->Find(Sha256Hex("k1")), nullptr) << "the stored hash is not a key";
  EXPECT_EQ(set->TenantLimits("acme").tokens_per_minute, 1000);
  EXPECT_EQ(set->TenantLimits("acme").concurrent_streams, 4);
  EXPECT_EQ(set->TenantLimits("beta"), Limits{});
  EXPECT_EQ(set->Tenants(), (std::vector<std::string>{"acme", "beta"}));
}

TEST(ApiKeySetTest, UppercaseHashesMatchToo) {
  std::string hex = Sha256Hex("k1");
  for (char& c : hex) c = static_cast<char>(toupper(c));
  auto set = ApiKeySet::Parse("{\"key_sha256\": \"" + hex + "\", \"tenant\": \"a\"}");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_NE(set->Find("k1"), nullptr);
}

TEST(ApiKeySetTest, RejectsBadLinesNamingTheLineButNotItsContent) {
  const std::vector<std::string> bad = {
      "not json",
      R"({"key_sha256": "sk-plaintext-key-by-mistake", "tenant": "acme"})",
      Line("k", R"("tenant": "")"),
      Line("k", R"("tenant": "has space")"),
      Line("k", R"("tenant": "acme", "traffic_class": "batch")"),
      Line("k", R"("tenant": "acme", "limits": {"requests_per_minute": -1})"),
      Line("k", R"("tenant": "acme", "limits": {"rpm": 1})"),
      Line("k", R"("tenant": "acme", "limits": {"requests_per_minute": 1.5})"),
      Line("k", R"("tenant": "acme", "extra": 1)"),
      Line("k") + "\n" + Line("k"),
      R"({"tenant": "acme"})" "\n" R"({"tenant": "acme"})",
      R"({"tenant": "acme", "traffic_class": "chat"})",
  };
  for (const std::string& text : bad) {
    auto set = ApiKeySet::Parse("# header\n" + text);
    ASSERT_FALSE(set.ok()) << text;
    EXPECT_NE(set.status().message().find("line "), std::string::npos) << set.status();
    EXPECT_EQ(set.status().message().find("sk-plaintext"), std::string::npos) << set.status();
  }
}

TEST(ApiKeySetTest, FileLineRoundTrips) {
  ApiKey entry{.tenant = "acme", .traffic_class = "chat", .limits = {.requests_per_minute = 60, .tokens_per_minute = 0, .concurrent_streams = 2}};
  const std::string line = ApiKeySet::FileLine("tdm-secret", entry);
  EXPECT_EQ(line.find("tdm-secret"), std::string::npos);
  auto set = ApiKeySet::Parse(line);
  ASSERT_TRUE(set.ok()) << set.status() << " " << line;
  const ApiKey* found = set->Find("tdm-secret");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->limits, entry.limits);
  EXPECT_EQ(found->traffic_class, "chat");
}

}  // namespace
}  // namespace tandem::security

#include "tandem/security/cache_salt.h"

namespace tandem::security {
namespace {

TEST(CacheSaltTest, RootsSeparateTenantsAndSalts) {
  EXPECT_EQ(RequestKvHashRoot(false, "acme", ""), 0u) << "shared and no salt: unsalted";
  EXPECT_EQ(RequestKvHashRoot(true, "", ""), 0u) << "no tenant (no keys), no salt";
  const std::uint64_t acme = RequestKvHashRoot(true, "acme", "");
  const std::uint64_t beta = RequestKvHashRoot(true, "beta", "");
  EXPECT_NE(acme, 0u);
  EXPECT_NE(acme, beta);
  EXPECT_EQ(acme, RequestKvHashRoot(true, "acme", "")) << "stable";
  // A client's own salt is combined with its tenant: naming another tenant's name as the salt,
  // or that tenant's salt, never yields that tenant's root.
  EXPECT_NE(RequestKvHashRoot(true, "beta", "acme"), acme);
  EXPECT_NE(RequestKvHashRoot(true, "beta", "s1"), RequestKvHashRoot(true, "acme", "s1"));
  EXPECT_NE(RequestKvHashRoot(true, "acme", "s1"), acme);
  // Shared mode: the salt alone, as vLLM's cache_salt.
  EXPECT_EQ(RequestKvHashRoot(false, "acme", "s1"), RequestKvHashRoot(false, "beta", "s1"));
  EXPECT_NE(RequestKvHashRoot(false, "acme", "s1"), 0u);
  // No ambiguity between the tenant and salt parts.
  EXPECT_NE(RequestKvHashRoot(true, "ab", "c"), RequestKvHashRoot(true, "a", "bc"));
  EXPECT_NE(CacheSaltRoot(""), 0u);
}

}  // namespace
}  // namespace tandem::security
