#include "tandem/image/url_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "image_test_util.h"

namespace tandem::image {
namespace {

using testing::ExpectImageError;

AddressClass Classify(const char* text) {
  absl::StatusOr<AddressClass> c = ClassifyAddress(text);
  EXPECT_TRUE(c.ok()) << text;
  return c.ok() ? *c : AddressClass::kPublic;
}

TEST(AddressClassification, Ipv4Ranges) {
  EXPECT_EQ(Classify("8.8.8.8"), AddressClass::kPublic);
  EXPECT_EQ(Classify("1.1.1.1"), AddressClass::kPublic);
  EXPECT_EQ(Classify("0.0.0.0"), AddressClass::kUnspecified);
  EXPECT_EQ(Classify("127.0.0.1"), AddressClass::kLoopback);
  EXPECT_EQ(Classify("127.255.255.254"), AddressClass::kLoopback);
  EXPECT_EQ(Classify("10.1.2.3"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("172.16.0.1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("172.31.255.255"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("172.32.0.1"), AddressClass::kPublic);
  EXPECT_EQ(Classify("192.168.1.1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("100.64.0.1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("100.128.0.1"), AddressClass::kPublic);
  EXPECT_EQ(Classify("169.254.169.254"), AddressClass::kLinkLocal);  // cloud metadata
  EXPECT_EQ(Classify("224.0.0.1"), AddressClass::kMulticast);
  EXPECT_EQ(Classify("255.255.255.255"), AddressClass::kReserved);
  EXPECT_EQ(Classify("198.18.0.1"), AddressClass::kReserved);
  EXPECT_EQ(Classify("192.0.2.1"), AddressClass::kReserved);
}

TEST(AddressClassification, Ipv6RangesAndEmbeddedIpv4) {
  EXPECT_EQ(Classify("2606:4700:4700::1111"), AddressClass::kPublic);
  EXPECT_EQ(Classify("::"), AddressClass::kUnspecified);
  EXPECT_EQ(Classify("::1"), AddressClass::kLoopback);
  EXPECT_EQ(Classify("[::1]"), AddressClass::kLoopback);
  EXPECT_EQ(Classify("fe80::1"), AddressClass::kLinkLocal);
  EXPECT_EQ(Classify("febf::1"), AddressClass::kLinkLocal);
  EXPECT_EQ(Classify("fc00::1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("fd12:3456::1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("ff02::1"), AddressClass::kMulticast);
  EXPECT_EQ(Classify("2001:db8::1"), AddressClass::kReserved);
  EXPECT_EQ(Classify("2001::1"), AddressClass::kReserved);  // Teredo hides any IPv4 address
  // IPv4 carried inside IPv6 is judged by the IPv4 address.
  EXPECT_EQ(Classify("::ffff:127.0.0.1"), AddressClass::kLoopback);
  EXPECT_EQ(Classify("::ffff:7f00:1"), AddressClass::kLoopback);
  EXPECT_EQ(Classify("::ffff:169.254.169.254"), AddressClass::kLinkLocal);
  EXPECT_EQ(Classify("::ffff:10.0.0.1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("::ffff:8.8.8.8"), AddressClass::kPublic);
  EXPECT_EQ(Classify("64:ff9b::10.0.0.1"), AddressClass::kPrivate);
  EXPECT_EQ(Classify("2002:7f00:1::"), AddressClass::kLoopback);  // 6to4 of 127.0.0.1
  EXPECT_EQ(Classify("::127.0.0.1"), AddressClass::kLoopback);    // IPv4-compatible
  EXPECT_FALSE(ClassifyAddress("localhost").ok());
  EXPECT_FALSE(ClassifyAddress("127.1").ok());  // not numeric for inet_pton: a name to resolve
}

TEST(AddressClassification, ConnectTimeCheckOnSockaddrs) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &v4.sin_addr);
  EXPECT_FALSE(IsFetchableAddress(reinterpret_cast<sockaddr*>(&v4)));
  inet_pton(AF_INET, "93.184.216.34", &v4.sin_addr);
  EXPECT_TRUE(IsFetchableAddress(reinterpret_cast<sockaddr*>(&v4)));
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:192.168.0.1", &v6.sin6_addr);
  EXPECT_FALSE(IsFetchableAddress(reinterpret_cast<sockaddr*>(&v6)));
  inet_pton(AF_INET6, "2606:4700:4700::1111", &v6.sin6_addr);
  EXPECT_TRUE(IsFetchableAddress(reinterpret_cast<sockaddr*>(&v6)));
  sockaddr other{};
  other.sa_family = AF_UNIX;
  EXPECT_FALSE(IsFetchableAddress(&other));
  EXPECT_FALSE(IsFetchableAddress(nullptr));
}

TEST(UrlPolicy, RecipesChecksComeFirst) {
  UrlPolicy policy;
  absl::Status s = CheckImageUrl("ftp://x/y.png", policy, 8192).status();
  ExpectImageError(s, ImageErrorKind::kInvalidUrl);
  EXPECT_EQ(s.message(), "invalid url: \"ftp://x/y.png\"");
  s = CheckImageUrl("http://x/" + std::string(9000, 'a'), policy, 8192).status();
  ExpectImageError(s, ImageErrorKind::kUrlTooLong);
  EXPECT_EQ(s.message(), "external link length 9009 too long, max link length 8192");
}

TEST(UrlPolicy, FetchingIsOffByDefault) {
  ExpectImageError(CheckImageUrl("https://images.example.com/a.png", UrlPolicy{}, 8192).status(),
                   ImageErrorKind::kDestinationRejected);
}

TEST(UrlPolicy, OnlyAllowListedHttpHostsWhenEnabled) {
  UrlPolicy policy;
  policy.fetch_enabled = true;
  policy.allowed_hosts = {"images.example.com", ".cdn.example.net", "8.8.8.8", "127.0.0.1"};
  absl::StatusOr<ImageUrl> ok = CheckImageUrl("HTTPS://Images.Example.COM./a.png?x=1", policy, 8192);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->scheme, "https");
  EXPECT_EQ(ok->host, "images.example.com");
  EXPECT_EQ(ok->port, 443);
  ok = CheckImageUrl("http://a.b.cdn.example.net:8080/x", policy, 8192);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->port, 8080);
  EXPECT_TRUE(CheckImageUrl("http://8.8.8.8/x.png", policy, 8192).ok());
  for (const char* bad : {
           "http://cdn.example.net/x",               // the suffix entry does not admit its apex
           "http://evil.com/images.example.com",     // host, not path
           "http://images.example.com@evil.com/",    // user info
           "http://images.example.com.evil.com/",    // suffix trick
           "httpx://images.example.com/",            // scheme
           "http://127.0.0.1/x",                     // allow-listed, but loopback
           "http://[::ffff:127.0.0.1]/x",            // mapped loopback literal
           "http://[fe80::1]/x",                     // link-local literal
           "http://169.254.169.254/latest/meta-data",
           "http://images.example.com\\@evil.com/",  // backslash confusion
           "http://images.example.com:99999/",       // port
       }) {
    ExpectImageError(CheckImageUrl(bad, policy, 8192).status(), ImageErrorKind::kDestinationRejected);
  }
}

}  // namespace
}  // namespace tandem::image
