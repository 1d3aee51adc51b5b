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
