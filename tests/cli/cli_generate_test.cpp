// `orzo generate` and `orzo chat` as a user runs them: stories260K's greedy story equals
// transformers' from either file form, with no -m the built-in stories260K writes one story, and
// bad input is one line and a non-zero exit.

#include "tests/support/cli_harness.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace orzo {
namespace {

using testing::CliRun;
using testing::orzo;

const std::string kStories = std::string(ORZO_SHARED_DIR) + "/models/stories260K";

// transformers' greedy continuation of "Once upon a time" (tools/make_fixtures.py).
std::string transformers_text() {
  std::ifstream in(std::string(ORZO_FIXTURES_DIR) + "/stories260K/expected.json");
  return nlohmann::json::parse(in)["text"].get<std::string>();
}

TEST(CliGenerate, GreedyStoryEqualsTransformersFromGgufAndHfDirectory) {
  const std::string expected = transformers_text() + "\n";
  for (const std::string& model : {kStories + "/stories260K.gguf", kStories + "/hf"}) {
    const CliRun r = orzo("generate -m '" + model + "' -p 'Once upon a time' --temperature 0 -n 64 -t 1", false);
    ASSERT_EQ(r.status, 0) << model;
    EXPECT_EQ(r.out, expected) << model;
  }
}

TEST(CliGenerate, ReportsTimingAndStopsAtAStopString) {
  const CliRun r = orzo("generate -m '" + kStories + "/stories260K.gguf' -p 'Once upon a time' --temperature 0 -n 64 "
                        "--stop 'park' -t 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find(", there was a little girl named Lily. She loved to play outside in the \n"), 0u) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finish: stop"), std::string::npos) << r.out;
  // The KV pool it made: stories260K has no sliding layers, so one table; 32768 blocks of 16
  // at its 2048-token context are 256 contexts.
  EXPECT_NE(r.out.find("orzo: KV cache: 640.0 MiB of f32 in 32768 blocks of 16 tokens; 256.0 sequences of 2048 tokens at once"),
            std::string::npos)
      << r.out;
}

// An f16 cache takes half the bytes a block: within the CPU's KV budget (1 GiB), twice the
// blocks where 1024 sequences at full context would want more; half the memory where not.
TEST(CliGenerate, AnF16KvCacheHoldsTwiceTheTokensInTheSameMemory) {
  const std::string args = "generate -m '" + kStories + "/stories260K.gguf' -p 'Once upon a time' --temperature 0 -n 16 -t 1";
  const CliRun f32 = orzo(args + " --max-num-seqs 1024");
  const CliRun f16 = orzo(args + " --max-num-seqs 1024 --kv-cache-dtype f16");
  ASSERT_EQ(f32.status, 0) << f32.out;
  ASSERT_EQ(f16.status, 0) << f16.out;
  EXPECT_NE(f32.out.find("KV cache: 1024.0 MiB of f32 in 52428 blocks of 16 tokens; 409.6 sequences"), std::string::npos) << f32.out;
  EXPECT_NE(f16.out.find("KV cache: 1024.0 MiB of f16 in 104857 blocks of 16 tokens; 819.2 sequences"), std::string::npos) << f16.out;
  EXPECT_EQ(f16.out.find(", there was a little girl named Lily. She loved to play"), 0u) << f16.out;
  const CliRun small = orzo(args + " --kv-cache-dtype f16");
  EXPECT_NE(small.out.find("KV cache: 320.0 MiB of f16 in 32768 blocks"), std::string::npos) << small.out;
}

// The CPU's KV memory is the user's to give: the pool takes what it affords (20 KiB a block
// of stories260K's f32 KV: 5 layers x 2 planes x 16 tokens x 64 floats), or what every
// --max-num-seqs context wants where that is less; one that cannot hold a context is refused.
TEST(CliGenerate, TheKvCacheTakesTheMemoryItIsGiven) {
  const std::string args = "generate -m '" + kStories + "/stories260K.gguf' -p 'Once upon a time' --temperature 0 -n 16 -t 1";
  const CliRun given = orzo(args + " --kv-cache-memory 64MiB");
  ASSERT_EQ(given.status, 0) << given.out;
  EXPECT_NE(given.out.find("KV cache: 64.0 MiB of f32 in 3276 blocks of 16 tokens; 25.6 sequences"), std::string::npos) << given.out;
  EXPECT_EQ(given.out.find(", there was a little girl named Lily. She loved to play"), 0u) << given.out;
  const CliRun metric = orzo(args + " --kv-cache-memory 10MB --kv-cache-dtype f16");
  ASSERT_EQ(metric.status, 0) << metric.out;
  EXPECT_NE(metric.out.find("KV cache: 9.5 MiB of f16 in 976 blocks"), std::string::npos) << metric.out;
  const CliRun plenty = orzo(args + " --kv-cache-memory 8GiB --max-num-seqs 4");
  ASSERT_EQ(plenty.status, 0) << plenty.out;
  EXPECT_NE(plenty.out.find("KV cache: 10.0 MiB of f32 in 512 blocks of 16 tokens; 4.0 sequences"), std::string::npos)
      << plenty.out;
  testing::expect_refused(args + " --kv-cache-memory 1MB", "one context of 2048 tokens needs 129");
  const CliRun shorter = orzo(args + " --kv-cache-memory 1MB --max-model-len 256");
  ASSERT_EQ(shorter.status, 0) << shorter.out;
  EXPECT_NE(shorter.out.find("KV cache: 0.9 MiB of f32 in 48 blocks of 16 tokens; 3.0 sequences of 256 tokens"),
            std::string::npos)
      << shorter.out;
}

TEST(CliGenerate, TheDefaultModelIsStories260KAndWritesItsGreedyStory) {
  const CliRun story = orzo("generate --temperature 0 -n 64 -t 1", false);
  ASSERT_EQ(story.status, 0);
  EXPECT_EQ(story.out, transformers_text() + "\n");
  const CliRun said = orzo("generate --temperature 0 -n 1 -t 1");
  EXPECT_NE(said.out.find("built-in default model, stories260K"), std::string::npos) << said.out;
}

// Greedy, this prompt's story ends after 130 tokens, where the model writes BOS and, past it,
// begins the next one.
TEST(CliGenerate, TheDefaultModelStopsWhereItsStoryEnds) {
  const std::string args = "generate --temperature 0 -n 200 -t 1 -p 'Once upon a time, there was a cat. The cat was "
                           "happy. And they lived happily ever after.'";
  const CliRun one = orzo(args);
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_NE(one.out.find("best friends. They played together every day.\n"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("generated 130 tokens"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("finish: stop"), std::string::npos) << one.out;
  const CliRun on = orzo(args + " --ignore-eos");
  ASSERT_EQ(on.status, 0) << on.out;
  EXPECT_NE(on.out.find("every day. Once upon a time, there was"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("finish: length"), std::string::npos) << on.out;
}

class CliGenerateFile : public testing::TempDirTest {};

// -f reads the prompt from a file, as llama.cpp's does: its text, but the newline that ends it.
TEST_F(CliGenerateFile, APromptFileIsThePromptItHolds) {
  const std::string args = "generate -m '" + kStories + "/stories260K.gguf' --temperature 0 -n 24 -t 1";
  std::ofstream(path("ended.txt")) << "The little dog\n";
  std::ofstream(path("two.txt")) << "The little dog\n\n";
  const CliRun given = orzo(args + " -p 'The little dog'", false);
  const CliRun ended = orzo(args + " -f '" + path("ended.txt") + "'", false);
  const CliRun kept = orzo(args + " --file '" + path("two.txt") + "'", false);
  ASSERT_EQ(given.status, 0) << given.out;
  ASSERT_EQ(ended.status, 0) << ended.out;
  ASSERT_EQ(kept.status, 0) << kept.out;
  EXPECT_EQ(ended.out, given.out);
  EXPECT_NE(kept.out, given.out);  // only the last newline is the editor's: the one before it is prompt
  testing::expect_refused(args + " -f '" + path("absent.txt") + "'", path("absent.txt"));
  testing::expect_refused(args + " -f '" + path("ended.txt") + "' -p 'Once'", "excludes");
}

TEST(CliGenerate, BadInputIsOneLineAndNonZero) {
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"generate -m /nonexistent/model.gguf", "/nonexistent/model.gguf"},
      {"generate -m '" + kStories + "/stories260K.gguf' --temperature -1", "--temperature"},
      {"generate -m '" + kStories + "/stories260K.gguf' -n 5000", "exceeds the context length"},
      {"generate -m '" + kStories + "/stories260K.gguf' --placement cpu:0-9", "placement"},
      {"chat -m '" + kStories + "/stories260K.gguf'", "no chat template"},
      {"generate -m '" + kStories + "/stories260K.gguf' --worker-thread sometimes", "--worker-thread"},
      {"generate -m '" + kStories + "/stories260K.gguf' --no-hybrid-kv=banana", "--no-hybrid-kv"},
      {"generate -m '" + kStories + "/stories260K.gguf' --kv-cache-dtype bf16", "--kv-cache-dtype"},
      {"bench -m '" + kStories + "/stories260K.gguf' --kv-cache-dtype q8_0", "--kv-cache-dtype"},
      {"generate -m '" + kStories + "/stories260K.gguf' --gpu-memory-utilization 1.5", "--gpu-memory-utilization"},
      {"generate -m '" + kStories + "/stories260K.gguf' --kv-cache-memory lots", "--kv-cache-memory"},
      {"generate -m '" + kStories + "/stories260K.gguf' --kv-cache-memory 0", "--kv-cache-memory"},
      {"generate -m '" + kStories + "/stories260K.gguf' --kv-cache-memory 1GiB --kv-blocks 64", "--kv-blocks"},
      {"bench --backend gpu --batch 2", "--backend"},
      {"bench --actors -m '" + kStories + "/stories260K.gguf' --worker-thread x", "--worker-thread"},
      {"worker --connect 127.0.0.1:1 --layers 0-2 --device tpu -m '" + kStories + "/stories260K.gguf'",
       "unknown device 'tpu'"},
      {"worker --connect 127.0.0.1:1 --layers 0-2 --connect-wait soon -m '" + kStories + "/stories260K.gguf'",
       "--connect-wait"},
      {"worker --connect 127.0.0.1:1 --layers 0-2 --connect-wait -1 -m '" + kStories + "/stories260K.gguf'",
       "--connect-wait"},
      {"serve -m /nonexistent/model.gguf --port 0", "/nonexistent/model.gguf"},
      {"serve -m '" + kStories + "/stories260K.gguf' --host 1.2.3.4.5 --port 0", "not an IP address"},
      {"serve -m '" + kStories + "/stories260K.gguf' --port 70000", "--port"},
      {"serve -m '" + kStories + "/stories260K.gguf' --port 0 --chat-template /nonexistent.jinja", "/nonexistent.jinja"},
      {"serve -m '" + kStories + "/stories260K.gguf' --port 0 --max-queue 0", "--max-queue"},
      {"serve -m '" + kStories + "/stories260K.gguf' --port 0 --tool-call-parser xml", "--tool-call-parser"},
      {"perplexity -m '" + kStories + "/stories260K.gguf' -f /nonexistent.txt", "/nonexistent.txt"},
  };
  for (const auto& c : cases) testing::expect_refused(c.args, c.expect);
}

}  // namespace
}  // namespace orzo

namespace orzo {
namespace {

// stories260K with a chat template added: a tiny chat model whose replies generate can check.
class CliChat : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
      std::filesystem::create_symlink(kStories + "/hf/" + f, dir_ / f);
    std::ifstream in(kStories + "/hf/tokenizer_config.json");
    auto config = nlohmann::json::parse(in);
    config["chat_template"] =
        "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}{{ eos_token }}"
        "{% endif %}{% endfor %}";
    std::ofstream(path("tokenizer_config.json")) << config.dump();
  }
};

TEST_F(CliChat, EachTurnIsTheTemplateOfTheWholeConversationGenerated) {
  const std::string flags = " --temperature 0 -n 12 -t 1";
  const CliRun chat = orzo("chat -m '" + dir_.string() + "'" + flags, false, "Once upon a time\\n The end.\\n/exit\\n");
  ASSERT_EQ(chat.status, 0) << chat.out;
  const CliRun first = orzo("generate --no-special -m '" + dir_.string() + "' -p '<s>Once upon a time'" + flags, false);
  ASSERT_EQ(first.status, 0);
  const std::string reply = first.out.substr(0, first.out.size() - 1);
  const CliRun second = orzo("generate --no-special -m '" + dir_.string() + "' -p '<s>Once upon a time" + reply +
                                 "</s> The end.'" + flags,
                             false);
  ASSERT_EQ(second.status, 0);
  EXPECT_EQ(chat.out, first.out + second.out);
}

// -p is one turn that reads nothing from stdin, and --system comes first in the template, which
// here writes the contents one after the other.
TEST_F(CliChat, OneShotPromptAnswersOnceAfterTheSystemMessage) {
  const std::string flags = " --temperature 0 -n 12 -t 1";
  const CliRun once = orzo("chat -m '" + dir_.string() + "' --system 'Once upon' -p ' a time'" + flags, false,
                           "The end.\\n");
  ASSERT_EQ(once.status, 0) << once.out;
  const CliRun generated =
      orzo("generate --no-special -m '" + dir_.string() + "' -p '<s>Once upon a time'" + flags, false);
  ASSERT_EQ(generated.status, 0);
  EXPECT_EQ(once.out, generated.out);
  testing::expect_refused("chat -m '" + dir_.string() + "' -p ''", "--prompt");
}

}  // namespace
}  // namespace orzo
