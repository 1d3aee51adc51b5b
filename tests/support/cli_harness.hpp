#pragma once
// Runs the orzo binary as a user would and captures what it prints.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace orzo::testing {

struct CliRun {
  int status = -1;  // the exit code; -1 when killed by a signal
  std::string out;
};

// `with_stderr`: capture stderr along with stdout; otherwise stderr is dropped.
// `stdin_text` goes through printf %b, so a C++ "\\n" (backslash, n) is a newline there.
inline CliRun orzo(const std::string& args, bool with_stderr = true, const std::string& stdin_text = "") {
  CliRun r;
  std::string command = "'" + std::string(ORZO_CLI_PATH) + "' " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  if (!stdin_text.empty()) command = "printf '%b' '" + stdin_text + "' | " + command;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Bad input: a non-zero exit (not a signal) and a message that contains `expect`.
inline void expect_refused(const std::string& args, const std::string& expect) {
  const CliRun r = orzo(args);
  EXPECT_NE(r.status, 0) << args;
  EXPECT_NE(r.status, -1) << args << ": killed by a signal";
  EXPECT_NE(r.out.find(expect), std::string::npos) << args << " printed: " << r.out;
}

}  // namespace orzo::testing
