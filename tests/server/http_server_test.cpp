// The HTTP layer alone, with handlers of the test's own and a raw socket as the client, so
// every byte on the wire is checked: keep-alive, pipelining, chunked framing, limits,
// timeouts, and noticing a client that leaves while its answer is being produced.
#include "server/api_error.hpp"
#include "server/http_server.hpp"

#include "tests/support/http_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace orzo {
namespace {

using namespace std::chrono_literals;
using testing::Client;
using testing::post;

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpHandler handler, HttpServerOptions options = {}) {
    options.port = 0;
    server_ = std::make_unique<HttpServer>(options, std::move(handler));
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
  }
  uint16_t port() const { return server_->port(); }

  std::unique_ptr<HttpServer> server_;
};

HttpHandler echo() {
  return [](HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
    ex->respond(200, std::string(req.target()) + ":" + req.body(), {}, "text/plain");
  };
}

TEST_F(HttpServerTest, KeepAliveAndPipelinedRequestsAreAnsweredInOrder) {
  start(echo());
  Client c(port());
  c.send(post("/a", "one"));
  EXPECT_NE(c.response().find("\r\n\r\n/a:one"), std::string::npos);
  c.send(post("/b", "two") + post("/c", "three"));  // two at once: pipelined
  const std::string second = c.response();
  const std::string third = c.response();
  EXPECT_NE(second.find("HTTP/1.1 200 OK"), std::string::npos) << second;
  EXPECT_NE(second.find("/b:two"), std::string::npos) << second;
  EXPECT_NE(third.find("/c:three"), std::string::npos) << third;
  EXPECT_EQ(second.find("Connection: close"), std::string::npos);
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  start(echo());
  Client c(port());
  c.send(post("/a", "x", "Connection: close\r\n"));
  EXPECT_NE(c.response().find("Connection: close"), std::string::npos);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, StreamsAreChunkedAndEndWithTheLastChunk) {
  start([](HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    ex->start_stream();
    ex->write("data: a\n\n");
    ex->write("");  // nothing: must not end the stream early
    ex->write("data: bc\n\n");
    ex->finish();
    ex->write("too late");
  });
  Client c(port());
  c.send(post("/s", ""));
  const std::string head = c.read_until("\r\n\r\n");
  EXPECT_NE(head.find("Content-Type: text/event-stream"), std::string::npos) << head;
  EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
  EXPECT_EQ(c.read_until("0\r\n\r\n"), "9\r\ndata: a\n\n\r\na\r\ndata: bc\n\n\r\n0\r\n\r\n");
  c.send(post("/again", "k"));  // the connection is still usable
  EXPECT_NE(c.read_until("\r\n\r\n").find("200 OK"), std::string::npos);
}

TEST_F(HttpServerTest, OversizedBodiesGet413BeforeTheyAreRead) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  start(echo(), o);
  Client c(port());
  c.send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
  const std::string r = c.response();
  EXPECT_NE(r.find("HTTP/1.1 413"), std::string::npos) << r;
  EXPECT_NE(r.find("\"code\":\"request_too_large\""), std::string::npos) << r;
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, ChunkedBodiesOverTheLimitGet413Too) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  start(echo(), o);
  Client c(port());
  c.send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + std::string(2048, 'a') + "\r\n0\r\n\r\n");
  EXPECT_NE(c.response().find("HTTP/1.1 413"), std::string::npos);
}

TEST_F(HttpServerTest, GarbageGets400AndTheConnectionCloses) {
  start(echo());
  Client c(port());
  c.send("NOT HTTP AT ALL\r\n\r\n");
  const std::string r = c.response();
  EXPECT_NE(r.find("HTTP/1.1 400"), std::string::npos) << r;
  EXPECT_NE(r.find("\"error\""), std::string::npos) << r;
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(HttpServerTest, HugeHeadersGet431) {
  start(echo());
  Client c(port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_NE(c.response().find("HTTP/1.1 431"), std::string::npos);
}

TEST_F(HttpServerTest, AStalledRequestGets408AndASilentConnectionIsClosed) {
  HttpServerOptions o;
  o.timeout = 200ms;
  start(echo(), o);
  Client stalled(port());
  stalled.send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  const std::string r = stalled.response();
  EXPECT_NE(r.find("HTTP/1.1 408"), std::string::npos) << r;
  Client silent(port());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.closed_by_peer(2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
}

TEST_F(HttpServerTest, HandlerErrorsBecomeJsonErrors) {
  start([](HttpRequest& req, std::shared_ptr<HttpExchange>) {
    if (req.target() == "/api") throw ApiError(404, "no such thing", "invalid_request_error", "model", "model_not_found");
    throw std::runtime_error("boom");
  });
  Client c(port());
  c.send(post("/api", ""));
  const std::string a = c.response();
  EXPECT_NE(a.find("HTTP/1.1 404"), std::string::npos) << a;
  EXPECT_NE(a.find(R"({"error":{"message":"no such thing","type":"invalid_request_error","param":"model","code":"model_not_found"}})"),
            std::string::npos)
      << a;
  c.send(post("/other", ""));
  const std::string b = c.response();
  EXPECT_NE(b.find("HTTP/1.1 500"), std::string::npos) << b;
  EXPECT_NE(b.find("\"message\":\"boom\""), std::string::npos) << b;
}

TEST_F(HttpServerTest, ExpectContinueIsAnswered) {
  start(echo());
  Client c(port());
  c.send("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_NE(c.read_until("\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  c.send("body");
  EXPECT_NE(c.response().find("/e:body"), std::string::npos);
}

TEST_F(HttpServerTest, AClientLeavingMidAnswerIsNoticedAtOnce) {
  std::promise<void> gone;
  std::mutex m;
  std::shared_ptr<HttpExchange> held;  // the answer never comes: only the disconnect can end it
  start([&](HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    ex->start_stream();
    ex->write("data: first\n\n");
    ex->on_disconnect([&gone] { gone.set_value(); });
    std::lock_guard lock(m);
    held = ex;
  });
  Client c(port());
  c.send(post("/s", ""));
  EXPECT_NE(c.read_until("data: first").find("data: first"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  c.close();
  ASSERT_EQ(gone.get_future().wait_for(1s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  std::lock_guard lock(m);
  held->write("data: nobody listens\n\n");  // harmless after the client left
}

// The access log's hook: one record per request, whatever ended it.
class AccessLogTest : public HttpServerTest {
 protected:
  void start_logged(HttpHandler handler, HttpServerOptions options = {}) {
    options.access_log = [this](const AccessRecord& r) {
      std::lock_guard lock(mutex_);
      records_.push_back(r);
    };
    start(std::move(handler), std::move(options));
  }
  // The records once `n` have come (the last is written after the answer's last byte).
  std::vector<AccessRecord> records(size_t n) {
    const auto end = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < end) {
      {
        std::lock_guard lock(mutex_);
        if (records_.size() >= n) return records_;
      }
      std::this_thread::sleep_for(5ms);
    }
    std::lock_guard lock(mutex_);
    return records_;
  }

  std::mutex mutex_;
  std::vector<AccessRecord> records_;
};

TEST_F(AccessLogTest, EveryRequestIsOneRecordWithItsStatus) {
  HttpServerOptions o;
  o.max_body_bytes = 1024;
  start_logged(
      [](HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
        if (req.target() == "/missing") throw ApiError(404, "no route");
        if (req.target() == "/gen") {
          ex->start_stream();
          ex->report_generation({7, 3, 0.25});
          ex->write("data: x\n\n");
          return ex->finish();
        }
        ex->respond(200, "ok", {}, "text/plain");
      },
      o);
  {
    Client c(port());
    c.send(post("/a?key=secret", "one"));
    c.response();
    c.send(post("/missing", ""));
    c.response();
    c.send(post("/gen", ""));
    c.read_until("0\r\n\r\n");
  }
  {
    Client big(port());
    big.send("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
    big.response();
  }
  {
    Client garbage(port());
    garbage.send("NOT HTTP AT ALL\r\n\r\n");
    garbage.response();
  }
  const auto r = records(5);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].method, "POST");
  EXPECT_EQ(r[0].path, "/a");  // the query string may hold secrets
  EXPECT_EQ(r[0].status, 200);
  EXPECT_FALSE(r[0].generation);
  EXPECT_EQ(r[1].path, "/missing");
  EXPECT_EQ(r[1].status, 404);
  EXPECT_EQ(r[2].status, 200);
  ASSERT_TRUE(r[2].generation);
  EXPECT_EQ(r[2].generation->prompt_tokens, 7);
  EXPECT_EQ(r[2].generation->completion_tokens, 3);
  EXPECT_EQ(r[2].generation->ttft_seconds, 0.25);
  EXPECT_EQ(r[3].path, "/big");
  EXPECT_EQ(r[3].status, 413);
  EXPECT_EQ(r[4].method, "-");
  EXPECT_EQ(r[4].status, 400);
  for (const auto& record : r) EXPECT_GE(record.duration_seconds, 0) << record.path;
}

TEST_F(AccessLogTest, AClientLeavingBeforeAnyStatusIs499) {
  std::mutex m;
  std::shared_ptr<HttpExchange> held;
  start_logged([&](HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    std::lock_guard lock(m);
    held = ex;  // never answered
  });
  {
    Client c(port());
    c.send(post("/slow", ""));
    std::this_thread::sleep_for(50ms);
  }
  const auto r = records(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].path, "/slow");
  EXPECT_EQ(r[0].status, kClientClosedRequest);
  std::lock_guard lock(m);
  held->respond(200, "late");  // too late: no second record
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(records(2).size(), 1u);
}

TEST_F(HttpServerTest, ListeningOnABadAddressIsAClearError) {
  HttpServerOptions o;
  o.host = "not-an-address";
  try {
    HttpServer s(o, echo());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not-an-address"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace orzo
