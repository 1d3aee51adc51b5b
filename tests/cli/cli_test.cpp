// The orzo binary as a user runs it: `orzo bench` output, and bad input ending in one
// clear line and a non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/matmul_blas.hpp"
#include "kernels/cpu/matmul_q8.hpp"
#include "tests/support/cli_harness.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

const std::string kStoriesGguf = std::string(ORZO_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

using testing::CliRun;
using testing::orzo;

TEST(Cli, BenchPrintsOneJsonObject) {
  const CliRun r = orzo("bench -m '" + kStoriesGguf + "' --batch 3 --prompt 20 --gen 5 --threads 2 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["batch"], 3);
  EXPECT_EQ(j["prompt"], 20);
  EXPECT_EQ(j["gen"], 5);
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["model"], kStoriesGguf);
  for (const char* key : {"prefill_tps", "decode_tps", "decode_tps_per_seq"}) EXPECT_GT(j[key].get<double>(), 0) << key;
  EXPECT_NEAR(j["decode_tps"].get<double>(), 3 * j["decode_tps_per_seq"].get<double>(), 1e-6 * j["decode_tps"].get<double>());
  // The record names the CPU and the kernels that ran: the best level it has, unless the
  // environment chose one.
  EXPECT_FALSE(j["cpu"].get<std::string>().empty());
  const char* env = std::getenv("ORZO_CPU_ISA");
  EXPECT_EQ(j["cpu_isa"], env && *env ? std::string(env) : cpu::isa_name(cpu::runnable_isas().back()));
}

// The matmul modes reach the backend and the record says which ran (stories260K has F32
// weights, so the activation roundings leave its figures alone; they are the kernels' tests).
TEST(Cli, BenchRecordsItsMatmulModes) {
  const std::string bf16_default = cpu::kernels().matmul_bf16 ? "bf16" : "f32";
  const auto j0 = nlohmann::json::parse(orzo("bench -m '" + kStoriesGguf + "' --batch 2 --prompt 4 --gen 2 --json").out);
  EXPECT_EQ(j0["bf16_weight_activations"], bf16_default);
  EXPECT_EQ(j0["block_type_activations"], cpu::has_matmul_q16() ? "int8x2" : "f32");
  EXPECT_EQ(j0["batch_invariant"], false);
  if (cpu::kernels().matmul_tiles)
    EXPECT_EQ(j0["tiles_from_rows"]["decoded"], cpu::kernels().tiles_from_rows(DType::Q4_K));
  else
    EXPECT_TRUE(j0["tiles_from_rows"].is_null());
  if (cpu::kernels().one_digit_from_rows > 0)
    EXPECT_EQ(j0["one_digit_from_rows"], cpu::kernels().one_digit_from_rows);
  else
    EXPECT_TRUE(j0["one_digit_from_rows"].is_null());
  const CliRun r = orzo("bench -m '" + kStoriesGguf +
                        "' --batch 2 --prompt 4 --gen 2 --json --f32-activations --batch-invariant");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bf16_weight_activations"], "f32");
  EXPECT_EQ(j["batch_invariant"], true);
  EXPECT_TRUE(j["tiles_from_rows"].is_null());
  EXPECT_TRUE(j["one_digit_from_rows"].is_null());
  const auto two_digits =
      nlohmann::json::parse(orzo("bench -m '" + kStoriesGguf + "' --batch 2 --prompt 4 --gen 2 --json --no-int8-batches").out);
  EXPECT_TRUE(two_digits["one_digit_from_rows"].is_null());
  const auto both = nlohmann::json::parse(
      orzo("bench -m '" + kStoriesGguf + "' --batch 2 --prompt 4 --gen 2 --json --bf16-activations --int8-activations").out);
  EXPECT_EQ(both["bf16_weight_activations"], bf16_default);
  EXPECT_EQ(both["block_type_activations"], "int8");
  EXPECT_EQ(both["one_digit_from_rows"], 1);
  for (const char* flag : {"generate", "serve", "worker"})
    EXPECT_NE(orzo(std::string(flag) + " --help").out.find("--batch-invariant"), std::string::npos) << flag;
}

TEST(Cli, BenchRunsTheKernelsItIsTold) {
  for (cpu::Isa isa : cpu::runnable_isas()) {
    const CliRun r = orzo("bench -m '" + kStoriesGguf + "' --batch 2 --prompt 4 --gen 2 --json --cpu-isa " + cpu::isa_name(isa));
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["cpu_isa"], cpu::isa_name(isa));
  }
  const CliRun text = orzo("bench -m '" + kStoriesGguf + "' --batch 2 --prompt 4 --gen 2 --cpu-isa portable");
  EXPECT_NE(text.out.find(", kernels portable"), std::string::npos) << text.out;
}

// Whether OpenBLAS knew this CPU or orzo ran itself again with OPENBLAS_CORETYPE set (on a
// CPU newer than the library, such as an Emerald Rapids or a Zen 5 under Debian 12's
// 0.3.21), sgemm runs kernels that use the CPU's vector units.
TEST(Cli, BenchRunsOpenBlasKernelsThatSuitTheCpu) {
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: OpenBLAS runs what it names";
  const CliRun r = orzo("bench -m '" + kStoriesGguf + "' --batch 1 --prompt 4 --gen 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string core = nlohmann::json::parse(r.out)["blas_core"];
  // The level bench runs: ORZO_CPU_ISA's where set, as kernels() gives it here.
  EXPECT_EQ(cpu::blas_core_for(core, cpu::kernels().isa, cpu::core_kind()), nullptr) << "OpenBLAS runs " << core;
}

// With no -m, bench runs the built-in stories260K, as generate, chat and serve do.
TEST(Cli, BenchWithoutAModelRunsTheBuiltInOne) {
  for (const std::string mode : {"", " --actors"}) {
    const CliRun r = orzo("bench --batch 2 --prompt 4 --gen 2 --json" + mode);
    ASSERT_EQ(r.status, 0) << mode << ": " << r.out;
    const std::string model = nlohmann::json::parse(r.out)["model"];
    EXPECT_NE(model.find("stories260K.gguf"), std::string::npos) << mode << ": " << model;
  }
}

// The text record says how quantized weights meet the activations at the level it runs:
// at AVX2, two digits and one from the level's one_digit_from_rows, unless
// --no-int8-batches or --int8-activations.
TEST(Cli, BenchSaysHowQuantizedWeightsAreMultiplied) {
  const std::vector<cpu::Isa> levels = cpu::runnable_isas();
  if (std::find(levels.begin(), levels.end(), cpu::Isa::Avx2) == levels.end()) GTEST_SKIP() << "this CPU runs no AVX2";
  const std::string run = "bench -m '" + kStoriesGguf + "' --batch 1 --prompt 4 --gen 1 --cpu-isa avx2";
  const CliRun batches = orzo(run);
  ASSERT_EQ(batches.status, 0) << batches.out;
  const cpu::Isa before = cpu::kernels().isa;
  cpu::use_isa(cpu::Isa::Avx2);
  const std::string one_digit = "one digit from " + std::to_string(cpu::kernels().one_digit_from_rows) + " rows";
  cpu::use_isa(before);
  EXPECT_NE(batches.out.find("quantized weights on two int8 digits, " + one_digit + " (prompts: 32; not in scoring steps)"),
            std::string::npos)
      << batches.out;
  EXPECT_NE(orzo(run + " --no-int8-batches").out.find("quantized weights on two int8 digits\n"), std::string::npos);
  EXPECT_NE(orzo(run + " --int8-activations").out.find("quantized weights on one int8 digit\n"), std::string::npos);
}

// --cpu-isa avx2 runs every product as an AVX2 machine would, prompts' sgemm included: on an
// AVX-512 CPU orzo runs itself again with OpenBLAS's AVX2 kernels.
TEST(Cli, TheAvx2LevelRunsOpenBlasAvx2Kernels) {
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: OpenBLAS runs what it names";
  const std::vector<cpu::Isa> levels = cpu::runnable_isas();
  if (std::find(levels.begin(), levels.end(), cpu::Isa::Avx2) == levels.end()) GTEST_SKIP() << "this CPU runs no AVX2";
  for (const std::string flag : {"--cpu-isa avx2", "--cpu-isa=avx2"}) {
    const CliRun r = orzo("bench -m '" + kStoriesGguf + "' --batch 1 --prompt 4 --gen 1 --json " + flag);
    ASSERT_EQ(r.status, 0) << r.out;
    const std::string core = nlohmann::json::parse(r.out)["blas_core"];
    EXPECT_EQ(cpu::blas_core_for(core, cpu::Isa::Avx2, cpu::core_kind()), nullptr) << "OpenBLAS runs " << core;
  }
  const CliRun text = orzo("bench -m '" + kStoriesGguf + "' --batch 1 --prompt 4 --gen 1 --cpu-isa avx2");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_EQ(text.out.find("sgemm unused"), std::string::npos) << text.out;
}

// --rounds runs the batch again in one process and reports the median round with every round
// listed; --beside-bare runs the bare forward pass before each, for actors / bare.
TEST(Cli, BenchRunsRoundsBesideTheBarePass) {
  const CliRun r = orzo("bench -m '" + kStoriesGguf + "' --actors --beside-bare --rounds 3 --batch 2 --prompt 4 --gen 3 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rounds"].size(), 3u);
  std::vector<double> ratios;
  for (const auto& round : j["rounds"]) {
    EXPECT_GT(round["bare_tps"].get<double>(), 0);
    EXPECT_NEAR(round["actors_over_bare"].get<double>(),
                round["tokens_delivered_per_s"].get<double>() / round["bare_tps"].get<double>(), 1e-9);
    ratios.push_back(round["actors_over_bare"].get<double>());
  }
  std::sort(ratios.begin(), ratios.end());
  EXPECT_EQ(j["actors_over_bare"].get<double>(), ratios[1]);
  // With the prefix cache on, the pool of (batch + 1) sequences fills with registered blocks,
  // so that later rounds evict to grow their tables.
  const CliRun cached =
      orzo("bench -m '" + kStoriesGguf + "' --actors --prefix-caching --rounds 3 --batch 2 --prompt 16 --gen 18 --json");
  ASSERT_EQ(cached.status, 0) << cached.out;
  const auto c = nlohmann::json::parse(cached.out);
  EXPECT_TRUE(c["prefix_caching"].get<bool>());
  EXPECT_EQ(c["rounds"].size(), 3u);
  EXPECT_GT(c["tokens_delivered_per_s"].get<double>(), 0);
  // They need the actor path, and the bare pass needs a model.
  testing::expect_refused("bench -m '" + kStoriesGguf + "' --rounds 2 --batch 1 --prompt 4 --gen 2",
                          "--rounds, --beside-bare and --prefix-caching need --actors");
  testing::expect_refused("bench -m '" + kStoriesGguf + "' --prefix-caching --batch 1 --prompt 4 --gen 2",
                          "--prefix-caching need --actors");
  testing::expect_refused("bench --backend null --beside-bare", "--beside-bare needs a model");
  testing::expect_refused("bench -m '" + kStoriesGguf + "' --actors --rounds 0", "--rounds");
  testing::expect_refused("bench -m '" + kStoriesGguf + "' --actors --rounds many", "--rounds");
}

TEST(Cli, BenchPrintsReadableText) {
  const CliRun r = orzo("bench -m '" + kStoriesGguf + "' --batch 2 --prompt 4 --gen 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("prefill:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode:"), std::string::npos) << r.out;
}

// The environment's choice is read when the kernels are first needed, which the CLI makes
// happen before anything runs, so a bad name is one line, not a failure inside a worker.
TEST(Cli, AnUnknownLevelInTheEnvironmentIsRefused) {
  const char* before = std::getenv("ORZO_CPU_ISA");
  const std::string saved = before ? before : "";
  ::setenv("ORZO_CPU_ISA", "avx9", 1);  // the child orzo inherits it
  for (const std::string& args : {"bench -m '" + kStoriesGguf + "' --batch 1 --prompt 4 --gen 2",
                                 "generate -m '" + kStoriesGguf + "' -p Once -n 2"})
    testing::expect_refused(args, "ORZO_CPU_ISA=avx9 names no ISA level");
  if (before)
    ::setenv("ORZO_CPU_ISA", saved.c_str(), 1);
  else
    ::unsetenv("ORZO_CPU_ISA");
}

using CliErrors = testing::TempDirTest;

TEST_F(CliErrors, BadInputIsOneLineAndNonZero) {
  testing::Bytes truncated = testing::read_bytes(kStoriesGguf);
  truncated.resize(truncated.size() / 2);
  testing::write_bytes(path("half.gguf"), truncated);
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"bench -m " + path("missing.gguf"), path("missing.gguf")},
      {"bench -m " + path("half.gguf"), path("half.gguf")},
      {"bench -m '" + kStoriesGguf + "' --batch 0", "--batch"},
      {"bench -m '" + kStoriesGguf + "' --prompt 100000000", "--prompt"},
      {"bench -m '" + kStoriesGguf + "' --prompt 2000 --gen 100", "exceeds the model's context of 2048"},
      {"bench -m '" + kStoriesGguf + "' --cpu-isa avx9", "--cpu-isa"},
      {"frobnicate", "frobnicate"},
      {"serve -m '" + kStoriesGguf + "' --log-format xml", "--log-format"},
      {"serve -m '" + kStoriesGguf + "' --stats-interval -1", "--stats-interval"},
      {"serve -m '" + kStoriesGguf + "' --recovery-timeout -1", "--recovery-timeout"},
      {"serve -m '" + kStoriesGguf + "' --recovery-timeout soon", "--recovery-timeout"},
      {"serve -m '" + kStoriesGguf + "' --stream-buffer 10", "--stream-buffer"},
      {"serve -m '" + kStoriesGguf + "' --stream-buffer lots", "--stream-buffer"},
      {"serve -m '" + kStoriesGguf + "' --stalled-client-timeout 0", "--stalled-client-timeout"},
      {"serve -m '" + kStoriesGguf + "' --replicas 0", "--replicas"},
      {"serve -m '" + kStoriesGguf + "' --publish -1", "--publish"},
      {"serve -m '" + kStoriesGguf + "' --publish anywhere", "--publish"},
      {"bench -m '" + kStoriesGguf + "' --actors --publish 70000", "--publish"},
      {"serve -m '" + kStoriesGguf + "' --no-async-scheduling=maybe", "--async-scheduling"},
      {"bench -m '" + kStoriesGguf + "' --actors --async-scheduling=sometimes", "--async-scheduling"},
      {"generate -m '" + kStoriesGguf + "' -p Once -n 2 --placement 'cpu;cpu' --replicas 3",
       "placement 'cpu;cpu': lists 2 replicas, but 3 were asked for"},
      // The arithmetic flags take no words, on every command that has them.
      {"bench -m '" + kStoriesGguf + "' --int8-batches=maybe", "--int8-batches"},
      {"generate -m '" + kStoriesGguf + "' -p Once --no-int8-batches=often", "--int8-batches"},
      {"serve -m '" + kStoriesGguf + "' --batch-invariant=sometimes", "--batch-invariant"},
      {"perplexity -m '" + kStoriesGguf + "' -f missing.txt --int8-activations=x", "--int8-activations"},
      {"worker -m '" + kStoriesGguf + "' --connect 127.0.0.1:1 --layers 0-1 --f32-activations=two",
       "--bf16-activations"},
  };
  for (const auto& c : cases) testing::expect_refused(c.args, c.expect);
}

}  // namespace
}  // namespace orzo
