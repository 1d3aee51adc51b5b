// The routes of OpenAIApi before a model is loaded: the server is up, says so honestly
// (/health 503 "loading"), refuses model routes with 503, and still routes, authenticates
// and serves /metrics. Requests against a loaded model are tested end to end (tests/serve/).
#include "actors/system_config.hpp"
#include "server/http_server.hpp"
#include "server/openai_api.hpp"
#include "tests/support/http_client.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

namespace orzo {
namespace {

using testing::Client;

class LoadingApi : public ::testing::Test {
 protected:
  void SetUp() override {
    configure_actor_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    ApiOptions o;
    o.served_model_name = "m";
    o.api_key = "secret";
    api_ = std::make_unique<OpenAIApi>(*sys_, o);
    HttpServerOptions h;
    h.port = 0;
    server_ = std::make_unique<HttpServer>(h, [this](HttpRequest& r, std::shared_ptr<HttpExchange> ex) {
      api_->handle(r, std::move(ex));
    });
    server_->start();
  }
  void TearDown() override { server_->stop(); }

  std::string ask(const std::string& raw) {
    Client c(server_->port());
    c.send(raw);
    return c.response();
  }

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<OpenAIApi> api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(LoadingApi, HealthSaysLoadingAndModelRoutesRefuseWith503) {
  const std::string health = ask(testing::get("/health"));
  EXPECT_NE(health.find("HTTP/1.1 503"), std::string::npos) << health;
  EXPECT_NE(health.find(R"({"status":"loading"})"), std::string::npos) << health;
  const std::string completion =
      ask(testing::post("/v1/completions", R"({"model":"m","prompt":"x"})", "Authorization: Bearer secret\r\n"));
  EXPECT_NE(completion.find("HTTP/1.1 503"), std::string::npos) << completion;
  EXPECT_NE(completion.find(R"("code":"unavailable")"), std::string::npos) << completion;
}

TEST_F(LoadingApi, MetricsAreServedWhileLoading) {
  const std::string metrics = ask(testing::get("/metrics"));
  EXPECT_NE(metrics.find("HTTP/1.1 200"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("text/plain; version=0.0.4"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("orzo:num_requests_running{model_name=\"m\"} 0"), std::string::npos) << metrics;
}

TEST_F(LoadingApi, RoutesMethodsAndKeys) {
  const std::string unknown = ask(testing::get("/v1/nothing"));
  EXPECT_NE(unknown.find("HTTP/1.1 404"), std::string::npos) << unknown;
  const std::string wrong_method = ask(testing::get("/v1/completions"));
  EXPECT_NE(wrong_method.find("HTTP/1.1 405"), std::string::npos) << wrong_method;
  EXPECT_NE(wrong_method.find("Allow: POST"), std::string::npos) << wrong_method;
  const std::string no_key = ask(testing::get("/v1/models"));
  EXPECT_NE(no_key.find("HTTP/1.1 401"), std::string::npos) << no_key;
  EXPECT_NE(no_key.find(R"("code":"invalid_api_key")"), std::string::npos) << no_key;
  const std::string wrong_key = ask("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secreT\r\n\r\n");
  EXPECT_NE(wrong_key.find("HTTP/1.1 401"), std::string::npos) << wrong_key;
  const std::string query = ask("GET /health?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(query.find("HTTP/1.1 503"), std::string::npos) << query;  // routed despite the query string
}

}  // namespace
}  // namespace orzo
