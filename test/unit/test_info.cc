/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ucx-ifunc-info (tools/info), run as a user runs it: the code ids it
 * prints for examples/hello's hello.so are the ones the library computes
 * when it loads it, -c lists every variable the library registers with
 * UCX's parser, a library signed by a key the host does not list is
 * reported refused with the library's reason (and accepted once the key
 * is listed), sandbox code gets the target's verdict (the verifier
 * included), and the options every tool of the package has.
 */
#include "fixture.h"

#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/base/config.h"
#include "ucp/ifunc/format/isa.h"
#include "ucp/ifunc/format/image.h"
#include "ucp/ifunc/load/registry.h"
#include "ucp/ifunc/sandbox/sandbox.h"

#include <elf.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace test {
namespace {

const std::string kInfo     = UCX_IFUNC_TEST_INFO;
const std::string kHelloDir = UCX_IFUNC_TEST_EXAMPLES_DIR "/hello";

struct Output {
    std::string output; /* stdout and stderr */
    int         status; /* exit status */
};

/* Runs ucx-ifunc-info with @a args; @a env: "NAME=VALUE" words set for it
 * (after the UCX_IFUNC_* variables of this process are unset). */
Output info(const std::string &args, const std::string &env = "")
{
    std::string command = "env -u UCX_IFUNC_LIB_DIR -u UCX_IFUNC_TRUST "
                          "-u UCX_IFUNC_TRUSTED_KEYS " +
                          env + " " + kInfo + " " + args + " 2>&1";
    Output run{"", -1};
    FILE  *pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
        ADD_FAILURE() << "cannot run " << command;
        return run;
    }
    char   chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) {
        run.output.append(chunk, n);
    }
    int status = pclose(pipe);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
}

/* The value of the line "#     KEY: VALUE" (or "#   KEY: VALUE") that
 * follows the line "#   ISA image: ..." of @a machine in @a text; "" if
 * there is none. */
std::string image_field(const std::string &text, uint16_t machine,
                        const std::string &key)
{
    size_t image =
            text.find("#   " + ucx_ifunc::machine_name(machine) + " image:");
    if (image == std::string::npos) {
        return "";
    }
    size_t next  = text.find(" image:", text.find('\n', image));
    size_t field = text.find("#     " + key + ":", image);
    if ((field == std::string::npos) || (field > next)) {
        return "";
    }
    size_t start = text.find_first_not_of(' ', text.find(':', field) + 1);
    return text.substr(start, text.find('\n', start) - start);
}

/* An empty directory while it lives. */
class EmptyLibDir {
public:
    EmptyLibDir()
    {
        char name[] = "/tmp/ucx-ifunc-info-test.XXXXXX";
        path_       = (mkdtemp(name) != nullptr) ? name : "/nonexistent";
    }
    ~EmptyLibDir() { rmdir(path_.c_str()); }
    EmptyLibDir(const EmptyLibDir &)            = delete;
    EmptyLibDir &operator=(const EmptyLibDir &) = delete;

    const std::string &path() const { return path_; }

private:
    std::string path_;
};

/* The verdict: what follows "on this host:". */
std::string verdict(const std::string &text)
{
    size_t at = text.find("#   on this host:");
    if (at == std::string::npos) {
        return "";
    }
    size_t start = text.find_first_not_of(' ', at + 17);
    return text.substr(start, text.find('\n', start) - start);
}

TEST(Info, CodeIdsOfHelloAreTheLibrarys)
{
    /* The library's own: hello.so loaded from its directory. */
    std::shared_ptr<ucx_ifunc::Library> library;
    setenv("UCX_IFUNC_LIB_DIR", kHelloDir.c_str(), 1);
    {
        ucx_ifunc::Registry registry;
        EXPECT_EQ(UCS_OK, registry.get("hello", UCS_LOG_LEVEL_ERROR, &library));
    }
    unsetenv("UCX_IFUNC_LIB_DIR");
    ASSERT_NE(nullptr, library);

    Output run = info(kHelloDir + "/hello.so");
    ASSERT_EQ(0, run.status) << run.output;
    EXPECT_NE(std::string::npos, run.output.find("#   ifunc:          hello\n"))
            << run.output;
    EXPECT_EQ(
            library->code_id.hex(),
            image_field(run.output, ucx_ifunc::arch::elf_machine(), "code id"))
            << run.output;
    for (const ucx_ifunc::ForeignImage &foreign : library->foreign_images) {
        EXPECT_EQ(foreign.code_id.hex(),
                  image_field(run.output, foreign.machine, "code id"))
                << run.output;
    }
    EXPECT_EQ(
            "getpid, printf, stdout, fflush",
            image_field(run.output, ucx_ifunc::arch::elf_machine(), "imports"));
    EXPECT_EQ(
            "libc.so.6",
            image_field(run.output, ucx_ifunc::arch::elf_machine(), "needed"));
    /* Signed by the demo's key (make signs it with demo.key). */
    EXPECT_EQ(0u, image_field(run.output, ucx_ifunc::arch::elf_machine(),
                              "signed by")
                          .rfind("key ", 0))
            << run.output;

    /* Refused without its key or library, accepted with either. */
    EXPECT_EQ(0u, verdict(run.output).rfind("refused (UCS_ERR_REJECTED)", 0))
            << run.output;
    Output keyed = info(kHelloDir + "/hello.so",
                        "UCX_IFUNC_TRUSTED_KEYS=" + kHelloDir + "/demo.pub");
    EXPECT_EQ(0u, verdict(keyed.output).rfind("accepted", 0)) << keyed.output;
    EXPECT_NE(std::string::npos, verdict(keyed.output).find("signed by a key"))
            << keyed.output;
    Output same =
            info(kHelloDir + "/hello.so", "UCX_IFUNC_LIB_DIR=" + kHelloDir);
    EXPECT_NE(std::string::npos, verdict(same.output).find("the same code as"))
            << same.output;
}

TEST(Info, ConfigListsEveryRegisteredVariable)
{
    Output run = info("-c", "UCX_IFUNC_PEER_QUEUE=7");
    ASSERT_EQ(0, run.status) << run.output;
    std::vector<ucx_ifunc::ConfigVariable> variables =
            ucx_ifunc::config_variables();
    ASSERT_GE(variables.size(), 16u);
    for (const ucx_ifunc::ConfigVariable &variable : variables) {
        std::string line = "\n" + variable.name + "=";
        size_t      at   = run.output.find(line);
        ASSERT_NE(std::string::npos, at) << variable.name << "\n" << run.output;
        /* Its default and description on the lines before it. */
        size_t doc = run.output.rfind("\n# default: ", at);
        EXPECT_NE(std::string::npos, doc) << variable.name;
        EXPECT_EQ(variable.default_value.empty() ? "(empty)"
                                                 : variable.default_value,
                  run.output.substr(doc + 12,
                                    variable.default_value.empty()
                                            ? 7
                                            : variable.default_value.size()))
                << variable.name;
    }
    EXPECT_NE(std::string::npos, run.output.find("(set in the environment)\n"
                                                 "UCX_IFUNC_PEER_QUEUE=7\n"))
            << run.output;
    EXPECT_NE(std::string::npos,
              run.output.find("\nUCX_IFUNC_PRINT_COUNTERS=n\n"));
}

TEST(Info, KeyTheHostDoesNotListIsRefusedWithTheReason)
{
    std::string lib = std::string(UCX_IFUNC_TEST_LIB_DIR) +
                      "/signed_other/constructs_signed.so";
    std::string site = std::string(UCX_IFUNC_TEST_KEY_DIR) + "/site.pub";
    EmptyLibDir empty;
    Output      run = info(lib, "UCX_IFUNC_LIB_DIR=" + empty.path() +
                                        " UCX_IFUNC_TRUSTED_KEYS=" + site);
    ASSERT_EQ(0, run.status) << run.output;
    std::string key = image_field(run.output, ucx_ifunc::arch::elf_machine(),
                                  "signed by");
    ASSERT_EQ(0u, key.rfind("key ", 0)) << run.output;
    std::string says = verdict(run.output);
    EXPECT_EQ(0u, says.rfind("refused (UCS_ERR_REJECTED): ", 0)) << says;
    EXPECT_NE(std::string::npos,
              says.find("signed by " + key +
                        ", which UCX_IFUNC_TRUSTED_KEYS does not list"))
            << says;
    EXPECT_NE(std::string::npos,
              says.find("no loadable constructs_signed.so in "
                        "UCX_IFUNC_LIB_DIR"))
            << says;

    /* The same library signed by the site key: accepted. */
    std::string signed_lib = std::string(UCX_IFUNC_TEST_LIB_DIR) +
                             "/signed/constructs_signed.so";
    Output ok = info(signed_lib, "UCX_IFUNC_LIB_DIR=" + empty.path() +
                                         " UCX_IFUNC_TRUSTED_KEYS=" + site);
    EXPECT_EQ(0u, verdict(ok.output).rfind("accepted", 0)) << ok.output;
}

/* A copy of library @a from in directory @a dir, its sandbox image's first
 * text bytes a system call (which the verifier refuses); "" if @a from
 * holds no sandbox image. */
std::string with_refused_text(const std::string &from, const std::string &dir)
{
    std::ifstream     in(from, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    uint32_t          magic = UCP_IFUNC_IMAGE_MAGIC;
    for (size_t at = 0; at + sizeof(ucp_ifunc_image_desc_t) <= bytes.size();
         at += 8) {
        ucp_ifunc_image_desc_t d;
        memcpy(&d, bytes.data() + at, sizeof(d));
        if ((d.magic != magic) || !(d.flags & UCP_IFUNC_IMAGE_FLAG_SANDBOX) ||
            (at + d.image_size > bytes.size())) {
            continue;
        }
        size_t text        = at + d.seg[UCP_IFUNC_SEG_TEXT].file_offset;
        bytes[text]        = char(0x0f); /* syscall */
        bytes[text + 1]    = char(0x05);
        std::string   path = dir + "/" + from.substr(from.rfind('/') + 1);
        std::ofstream out(path, std::ios::binary);
        out.write(bytes.data(), std::streamsize(bytes.size()));
        return out ? path : "";
    }
    return "";
}

TEST(Info, SaysWhatTheTargetDecidesOnSandboxCode)
{
    /* Unsigned sandbox code under 'sandboxed': accepted only if the
     * verifier accepts it, on a host that can run it, and never as signed
     * code. */
    const uint16_t host = ucx_ifunc::arch::elf_machine();
    std::string    lib  = std::string(UCX_IFUNC_TEST_LIB_DIR) + "/sandboxed.so";
    if (host != EM_X86_64) {
        GTEST_SKIP() << "the sandbox is built for x86-64 only";
    }
    std::string why;
    bool        runs = ucx_ifunc::sandbox::sandbox_supported(&why);
    Output      good = info(lib, "UCX_IFUNC_TRUST=sandboxed");
    ASSERT_EQ(0, good.status) << good.output;
    std::string says = verdict(good.output);
    if (runs) {
        EXPECT_EQ(0u, says.rfind("accepted (UCX_IFUNC_TRUST=sandboxed): "
                                 "built for the sandbox, and its verifier "
                                 "accepts it",
                                 0))
                << says;
    } else {
        EXPECT_EQ(0u, says.rfind("refused (UCS_ERR_UNSUPPORTED): ", 0)) << says;
    }

    /* Code that imports a function a layer above the sandbox grants. */
    Output relay = info(std::string(UCX_IFUNC_TEST_LIB_DIR) + "/sbx_relay.so",
                        "UCX_IFUNC_TRUST=sandboxed");
    EXPECT_EQ(0u, verdict(relay.output).rfind(runs ? "accepted" : "refused", 0))
            << relay.output;

    EmptyLibDir dir;
    std::string bad = with_refused_text(lib, dir.path());
    ASSERT_FALSE(bad.empty());
    Output refused = info(bad, "UCX_IFUNC_TRUST=sandboxed");
    unlink(bad.c_str());
    ASSERT_EQ(0, refused.status) << refused.output;
    EXPECT_EQ(0u, image_field(refused.output, host, "sandbox")
                          .rfind("built for it; the verifier refuses it: ", 0))
            << refused.output;
    says = verdict(refused.output);
    printf("ucx-ifunc-info on sandboxed.so with a system call: %s\n",
           says.c_str());
    EXPECT_EQ(0u, says.rfind(runs ? "refused (UCS_ERR_REJECTED): "
                                  : "refused (UCS_ERR_UNSUPPORTED): ",
                             0))
            << says;
    EXPECT_EQ(std::string::npos, says.find("UCX_IFUNC_TRUSTED_KEYS")) << says;
}

TEST(Info, NoArgumentsMeansVersionAndConfig)
{
    Output run = info("");
    ASSERT_EQ(0, run.status) << run.output;
    EXPECT_EQ(0u, run.output.rfind("# Package version:  ucx-ifunc " +
                                           std::string(PACKAGE_VERSION) + "\n",
                                   0))
            << run.output;
    EXPECT_NE(std::string::npos, run.output.find("# UCX:              built "
                                                 "against UCP API"));
    EXPECT_NE(std::string::npos,
              run.output.find(
                      "# Runs code for:    " +
                      ucx_ifunc::machine_name(ucx_ifunc::arch::elf_machine())));
    EXPECT_NE(std::string::npos, run.output.find("\nUCX_IFUNC_LIB_DIR="));
    EXPECT_EQ(run.output, info("-v -c").output);
}

TEST(Info, VersionHelpAndErrors)
{
    Output version = info("--version");
    EXPECT_EQ(0, version.status);
    EXPECT_EQ("ucx-ifunc-info " + std::string(PACKAGE_VERSION) + "\n",
              version.output);
    for (const char *help : {"-h", "--help"}) {
        Output run = info(help);
        EXPECT_EQ(0, run.status);
        EXPECT_EQ(0u, run.output.rfind("usage: ucx-ifunc-info [-v] [-c] "
                                       "[LIB.so ...]\n",
                                       0))
                << run.output;
    }
    EXPECT_EQ(2, info("--bogus").status);
    /* Not an ifunc library, and no file at all. */
    Output plain = info(std::string(UCX_IFUNC_TEST_LIB_DIR) + "/plain.so");
    EXPECT_EQ(1, plain.status);
    EXPECT_NE(std::string::npos, plain.output.find("no ifunc image in it"));
    EXPECT_EQ(1, info("/nonexistent/x.so").status);
}

} // namespace
} // namespace test
