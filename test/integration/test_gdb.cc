/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Debugging shipped code: gdb, running a target whose shipped code crashes,
 * names the ifunc's functions in its backtrace (src/ucp/ifunc/load/gdb_jit.h)
 * and unwinds through them into the runtime that called them.
 */
#include "target.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

namespace test {
namespace {

const char *const kCrashTest = "GdbJit.DISABLED_CrashInShippedCode";

/* The full path of @a program in $PATH, or an empty string. */
std::string find_program(const std::string &program)
{
    const char       *path = getenv("PATH");
    std::stringstream dirs(path ? path : "");
    std::string       dir;
    while (std::getline(dirs, dir, ':')) {
        std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    return {};
}

/* This test program itself (not libtool's wrapper script). */
std::string self_path()
{
    char   buf[4096];
    size_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return (n < sizeof(buf)) ? std::string(buf, n) : std::string();
}

/* Runs @a command with a shell; returns what it printed, both streams. */
std::string run_command(const std::string &command, int *status)
{
    std::string output;
    FILE       *pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) {
        *status = -1;
        return output;
    }
    char   buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) {
        output.append(buf, n);
    }
    *status = pclose(pipe);
    return output;
}

/* The lines of @a text that start a backtrace frame ("#N  ..."). */
std::vector<std::string> frames(const std::string &text)
{
    std::vector<std::string> lines;
    std::stringstream        in(text);
    std::string              line;
    while (std::getline(in, line)) {
        if ((line.size() > 1) && (line[0] == '#') && isdigit(line[1])) {
            lines.push_back(line);
        }
    }
    return lines;
}

} // namespace

/* Not a test of its own: the process that gdb runs below. Shipped code
 * dereferences the NULL target_args given to it. */
TEST(GdbJit, DISABLED_CrashInShippedCode)
{
    Target   target("sm");
    uint32_t handle = target.register_ifunc("crash");
    ASSERT_EQ(UCS_OK, target.send(handle, 0).status);
    target.poll_until_result(0, Target::kBufferSize, nullptr);
    FAIL() << "crash_main returned";
}

TEST(GdbJit, BacktraceNamesShippedFunctions)
{
    std::string gdb = find_program("gdb");
    if (gdb.empty()) {
        GTEST_SKIP() << "gdb is not installed (Debian: apt-get install gdb); "
                        "not checking what it shows of shipped code";
    }
    std::string self = self_path();
    ASSERT_FALSE(self.empty());

    /* No init files, no network, no shell between gdb and the program;
     * ASLR as usual (turning it off needs a permission containers lack). */
    std::string command =
            "DEBUGINFOD_URLS= timeout 120 '" + gdb +
            "' -nx -nh -batch -iex 'set debuginfod enabled off'"
            " -ex 'set startup-with-shell off'"
            " -ex 'set disable-randomization off'"
            " -ex 'set print thread-events off'"
            " -ex run -ex bt -ex kill --args '" +
            self +
            "' --gtest_also_run_disabled_tests --gtest_filter=" + kCrashTest;
    int         status = 0;
    std::string output = run_command(command, &status);
    if (output.find("ptrace:") != std::string::npos) {
        GTEST_SKIP() << "gdb may not trace processes here:\n" << output;
    }
    SCOPED_TRACE("gdb printed:\n" + output);

    ASSERT_NE(std::string::npos, output.find("SIGSEGV"));
    std::vector<std::string> bt = frames(output);
    ASSERT_GE(bt.size(), 3u);
    /* #0 is the static helper crash_poke (the image's symbol table names
     * it), #1 crash_main, and gdb unwinds on into the runtime. */
    EXPECT_TRUE((bt[0].find(" in crash_poke ") != std::string::npos)) << bt[0];
    EXPECT_TRUE((bt[1].find(" in crash_main ") != std::string::npos)) << bt[1];
    bool runtime = false;
    for (const std::string &line : bt) {
        runtime = runtime || (line.find("ucp_poll_ifunc") != std::string::npos);
    }
    EXPECT_TRUE(runtime) << "gdb did not unwind from the shipped code into "
                            "ucp_poll_ifunc";
}

} // namespace test
