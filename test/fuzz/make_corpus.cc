/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Writes the seed corpus of the fuzz harness (fuzz_frame.cc): real frames,
 * as the source writes them into a target's buffer, made by the library
 * itself (ucp_ifunc_msg_create, then the send step's full_frame/ref_frame
 * and store_direct), so that the corpus follows the frame format when
 * "make fuzz-corpus" runs again. Usage: make_corpus OUTPUT_DIR, with
 * UCX_IFUNC_LIB_DIR set to the test ifunc libraries.
 */
#include "test/common/frames.h"
#include "test/ifuncs/test_ifunc.h"
#include "ucp/ifunc/send.h"

#include <ucp/api/ucp.h>
#include <ucp/api/ucp_ifunc.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace ucx_ifunc;

namespace {

std::string output_dir;
int         n_written = 0;

void write_file(const std::string &name, const void *data, size_t size)
{
    std::string path = output_dir + "/" + name;
    FILE       *file = std::fopen(path.c_str(), "wb");
    if ((file == nullptr) || (std::fwrite(data, 1, size, file) != size) ||
        (std::fclose(file) != 0)) {
        std::fprintf(stderr, "make_corpus: cannot write %s\n", path.c_str());
        std::exit(1);
    }
    ++n_written;
}

/* What the target's buffer holds once @a out has arrived. */
void write_frame(const std::string &name, const OutFrame &out)
{
    std::vector<uint64_t> slot(out.size / 8, 0);
    store_direct(slot.data(), out);
    write_file(name, slot.data(), out.size);
}

/* Writes the full and the reference frame of one message of @a ifunc. */
void write_message(ucp_context_h context, const char *ifunc,
                   const std::string &label, void *source_args,
                   size_t source_args_size)
{
    ucp_ifunc_h     handle;
    ucp_ifunc_msg_t msg;
    if ((ucp_register_ifunc(context, ifunc, &handle) != UCS_OK) ||
        (ucp_ifunc_msg_create(handle, source_args, source_args_size, &msg) !=
         UCS_OK)) {
        std::fprintf(stderr, "make_corpus: cannot make a message of %s\n",
                     ifunc);
        std::exit(1);
    }
    write_frame(label + ".full", full_frame(msg));
    write_frame(label + ".ref", ref_frame(msg));
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(context, handle);
}

} // namespace

int main(int argc, char **argv)
{
    if ((argc != 2) || (std::getenv("UCX_IFUNC_LIB_DIR") == nullptr)) {
        std::fprintf(stderr, "usage: UCX_IFUNC_LIB_DIR=DIR %s OUTPUT_DIR\n",
                     argv[0]);
        return 2;
    }
    output_dir = argv[1];

    ucp_params_t params = {};
    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = UCP_FEATURE_RMA;
    ucp_context_h context;
    if (ucp_init(&params, nullptr, &context) != UCS_OK) {
        std::fprintf(stderr, "make_corpus: ucp_init failed\n");
        return 1;
    }

    /* Small code without imports; code with imports; code with every
     * construct (relocations, imports, .data, .bss) at two optimisation
     * levels; payloads from empty to a few KiB. */
    int64_t increment = 5;
    write_message(context, "counter", "counter", &increment, sizeof(increment));
    write_message(context, "tally", "tally", nullptr, 0);
    write_message(context, "imports_sm", "imports", nullptr, 0);
    int32_t selector = 3;
    write_message(context, "constructs_O0", "constructs_O0", &selector,
                  sizeof(selector));
    write_message(context, "constructs_O2_sp", "constructs_O2_sp", &selector,
                  sizeof(selector));
    std::vector<uint8_t> bytes(4000);
    for (size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = uint8_t(i * 131 + 7);
    }
    for (size_t size : {0, 1, 63, 1000}) {
        write_message(context, "echo", "echo_" + std::to_string(size),
                      bytes.data(), size);
    }
    stress_args stress = {42, bytes.size(), bytes.data()};
    write_message(context, "stress", "stress_4000", &stress, sizeof(stress));

    /* Signed code (an image with a signature block), from its own
     * directory. */
    std::string signed_dir =
            std::string(std::getenv("UCX_IFUNC_LIB_DIR")) + "/signed";
    setenv("UCX_IFUNC_LIB_DIR", signed_dir.c_str(), 1);
    write_message(context, "constructs_signed", "constructs_signed", &selector,
                  sizeof(selector));

    /* A frame of a later format version: only its envelope is known. */
    auto future = test::future_frame(0x1234567800000001ull, 200);
    write_file("future_version", future.data(), future.size() * 8);

    ucp_cleanup(context);
    std::printf("make_corpus: %d files in %s\n", n_written, output_dir.c_str());
    return 0;
}
