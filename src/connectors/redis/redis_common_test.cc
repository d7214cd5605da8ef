#include "connectors/redis/redis_common.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace sluice::redis {
namespace {

RedisUrl parse_ok(std::string_view text, Credentials c = {}) {
  auto u = parse_redis_url(text, std::move(c));
  EXPECT_TRUE(u.ok()) << text << ": " << (u.ok() ? "" : u.error().message());
  return u.ok() ? u.value() : RedisUrl{};
}

std::string parse_error(std::string_view text) {
  auto u = parse_redis_url(text);
  EXPECT_FALSE(u.ok()) << text;
  if (u.ok()) return "";
  EXPECT_EQ(u.error().code(), Errc::invalid_argument);
  return u.error().message();
}

TEST(RedisUrlTest, ParsesEveryPart) {
  RedisUrl u = parse_ok("redis://sluice:se%40cret@127.0.0.1:16379/3");
  EXPECT_EQ(u.user, "sluice");
  EXPECT_EQ(u.password, "se@cret");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 16379);
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.redacted(), "redis://sluice:***@127.0.0.1:16379/3");
}

TEST(RedisUrlTest, DefaultsAndPasswordOnly) {
  RedisUrl u = parse_ok("redis://localhost");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  EXPECT_TRUE(u.user.empty());
  EXPECT_TRUE(u.password.empty());
  EXPECT_EQ(u.redacted(), "redis://localhost:6379/0");

  RedisUrl p = parse_ok("redis://:pw@[::1]:7000/");
  EXPECT_TRUE(p.user.empty());
  EXPECT_EQ(p.password, "pw");
  EXPECT_EQ(p.host, "::1");
  EXPECT_EQ(p.redacted(), "redis://:***@[::1]:7000/0");
}

TEST(RedisUrlTest, CredentialSettingsOverrideTheUrl) {
  RedisUrl u = parse_ok("redis://h:1",
                        Credentials{.user = "app", .password = "p@ss/%", .password_file = ""});
  EXPECT_EQ(u.user, "app");
  EXPECT_EQ(u.password, "p@ss/%");
}

TEST(RedisUrlTest, RefusesWhatItCannotHonour) {
  EXPECT_NE(parse_error("rediss://h:6380").find("TLS"), std::string::npos);
  EXPECT_NE(parse_error("http://h").find("redis://"), std::string::npos);
  EXPECT_NE(parse_error("redis://h:0").find("port"), std::string::npos);
  EXPECT_NE(parse_error("redis://h:1/x").find("database"), std::string::npos);
  EXPECT_NE(parse_error("redis://h:1/-1").find("database"), std::string::npos);
  EXPECT_NE(parse_error("redis://h?db=1").find("query"), std::string::npos);
  EXPECT_NE(parse_error("redis://user@h").find("no password"), std::string::npos);
  EXPECT_NE(parse_error("redis://").find("host"), std::string::npos);
  std::string e = parse_error("redis://u:topsecret@h:99999");
  EXPECT_EQ(e.find("topsecret"), std::string::npos) << e;
}

TEST(RedisReplyText, RendersNestedReplies) { EXPECT_EQ(reply_text(nullptr), "(no reply)"); }

// The same reply, field by field (the default hiredis reply against ours).
void expect_same_reply(const redisReply* want, const redisReply* got, const std::string& path) {
  ASSERT_NE(got, nullptr) << path;
  ASSERT_EQ(got->type, want->type) << path;
  switch (want->type) {
    case REDIS_REPLY_INTEGER: EXPECT_EQ(got->integer, want->integer) << path; break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      ASSERT_EQ(got->len, want->len) << path;
      EXPECT_EQ(std::string_view(got->str, got->len), std::string_view(want->str, want->len))
          << path;
      EXPECT_EQ(got->str[got->len], '\0') << path;
      break;
    case REDIS_REPLY_ARRAY:
      ASSERT_EQ(got->elements, want->elements) << path;
      for (size_t i = 0; i < want->elements; ++i)
        expect_same_reply(want->element[i], got->element[i], path + "/" + std::to_string(i));
      break;
    default: break;
  }
}

struct ReaderDeleter {
  void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
};
using ReaderPtr = std::unique_ptr<redisReader, ReaderDeleter>;

// Feeds `bytes` in pieces of `step` and returns every complete reply.
std::vector<void*> read_all(redisReader* r, const std::string& bytes, size_t step) {
  std::vector<void*> out;
  for (size_t at = 0; at < bytes.size(); at += step) {
    EXPECT_EQ(redisReaderFeed(r, bytes.data() + at, std::min(step, bytes.size() - at)), REDIS_OK);
    void* reply = nullptr;
    while (redisReaderGetReply(r, &reply) == REDIS_OK && reply != nullptr) {
      out.push_back(reply);
      reply = nullptr;
    }
  }
  return out;
}

std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// An XREADGROUP-shaped reply: [[stream, [[id, [f, v, ...]], ...]]].
std::string stream_reply(int entries, int fields, size_t value_size) {
  std::string out = "*1\r\n*2\r\n" + bulk("s") + "*" + std::to_string(entries) + "\r\n";
  for (int e = 0; e < entries; ++e) {
    out += "*2\r\n" + bulk(std::to_string(e) + "-0") + "*" + std::to_string(2 * fields) + "\r\n";
    for (int f = 0; f < fields; ++f)
      out += bulk("field" + std::to_string(f)) +
             bulk(std::string(value_size + size_t(e % 7), 'a' + char(f)));
  }
  return out;
}

// Replies built by reply_functions() are the replies hiredis builds, whatever their shape and
// however the bytes arrive; a reply larger than a block, and the partial reply of a read that
// fails or of a reader freed mid-reply, are freed whole (ASan and LeakSanitizer check it in
// `make test-asan`).
TEST(RedisReplies, OurRepliesAreHiredissRepliesInBlocksOfTheirOwn) {
  std::string bytes = "+OK\r\n-ERR wrong\r\n:-42\r\n$-1\r\n*-1\r\n*0\r\n$0\r\n\r\n";
  bytes += bulk(std::string("a\0b\r\nc", 6));
  bytes += "*3\r\n:1\r\n*2\r\n$-1\r\n*1\r\n+deep\r\n" + bulk("x");
  bytes += bulk(std::string(3u << 20, 'z'));  // above the largest block
  bytes += stream_reply(1000, 10, 12);        // several blocks
  bytes += stream_reply(3, 2, 70000);
  for (size_t step : {bytes.size(), size_t(1) << 16, size_t(7)}) {
    ReaderPtr theirs(redisReaderCreate());
    ReaderPtr ours(redisReaderCreateWithFunctions(reply_functions()));
    std::vector<void*> want = read_all(theirs.get(), bytes, step);
    std::vector<void*> got = read_all(ours.get(), bytes, step);
    ASSERT_EQ(want.size(), 12u);
    ASSERT_EQ(got.size(), want.size()) << "step " << step;
    for (size_t i = 0; i < want.size(); ++i) {
      expect_same_reply(static_cast<redisReply*>(want[i]), static_cast<redisReply*>(got[i]),
                        "reply " + std::to_string(i) + ", step " + std::to_string(step));
      freeReplyObject(want[i]);
    }
    for (void* g : got) Reply own(static_cast<redisReply*>(g));  // ReplyDeleter: free_reply
  }

  // A protocol error in the middle of a reply: the reader frees what it built.
  {
    ReaderPtr ours(redisReaderCreateWithFunctions(reply_functions()));
    const std::string bad = "*3\r\n" + bulk("kept") + "*2\r\n:1\r\n!bad\r\n";
    ASSERT_EQ(redisReaderFeed(ours.get(), bad.data(), bad.size()), REDIS_OK);
    void* reply = nullptr;
    EXPECT_EQ(redisReaderGetReply(ours.get(), &reply), REDIS_ERR);
    EXPECT_EQ(reply, nullptr);
  }
  // A reader freed with a reply half read.
  {
    ReaderPtr ours(redisReaderCreateWithFunctions(reply_functions()));
    const std::string half = stream_reply(50, 4, 20).substr(0, 900);
    ASSERT_EQ(redisReaderFeed(ours.get(), half.data(), half.size()), REDIS_OK);
    void* reply = nullptr;
    ASSERT_EQ(redisReaderGetReply(ours.get(), &reply), REDIS_OK);
    EXPECT_EQ(reply, nullptr);
  }
  free_reply(nullptr);
}

}  // namespace
}  // namespace sluice::redis
