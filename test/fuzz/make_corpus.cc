/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Writes the seed corpora of the fuzz harnesses, made by the library
 * itself, so that they follow the formats when "make fuzz-corpus" runs
 * again:
 *  - for fuzz_frame.cc, real frames as the source writes them into a
 *    target's buffer (ucp_ifunc_msg_create, then the send step's
 *    full_frame/ref_frame and store_direct);
 *  - for fuzz_am.cc, real active messages, as ucp_ifunc_am_send_nbx sends
 *    them through UCP (its header and data, caught by a handler of this
 *    program in place of the target's), in the harness's input format
 *    (am_input.h): a full frame for every ISA of the library (what goes to a
 *    target whose ISA the source does not know yet), then, after a reply
 *    in the target's place, a full frame of one ISA, a reference, the
 *    other ISA's frame.
 * Usage: make_corpus FRAME_DIR AM_DIR, with UCX_IFUNC_LIB_DIR set to the
 * test ifunc libraries.
 */
#include "test/common/bitcode.h"
#include "test/common/frames.h"
#include "test/fuzz/am_input.h"
#include "test/ifuncs/test_ifunc.h"
#include "ucp/ifunc/paths/am.h"
#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/format/isa.h"
#include "ucp/ifunc/deliver/multi_isa.h"
#include "ucp/ifunc/deliver/send.h"

#include <ucp/api/ucp.h>
#include <ucp/api/ucp_ifunc.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace ucx_ifunc;

namespace {

/* A code index for the seeds' references: slot 0 of generation 1. A
 * target's generations start at a random value (link.cc), so it names no
 * code there; mutations of it reach the index checks. */
constexpr uint64_t kFirstCodeIndex = uint64_t(1) << 32;


std::string output_dir;
std::string am_output_dir;
int         n_written = 0;

void write_file(const std::string &name, const void *data, size_t size,
                const std::string &dir = output_dir)
{
    std::string path = dir + "/" + name;
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

/* Writes the full and the reference frame of one message of @a ifunc,
 * @a hop_count sends-on from the host (frame.h), asking for a delivery
 * report of id @a report (0: none). */
void write_message(ucp_context_h context, const char *ifunc,
                   const std::string &label, void *source_args,
                   size_t source_args_size, uint16_t hop_count = 0,
                   uint16_t report = 0)
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
    if (hop_count != 0) {
        frame_set_hop_count(static_cast<char *>(msg.frame), msg.frame_size,
                            hop_count);
    }
    if (report != 0) {
        frame_set_report(static_cast<char *>(msg.frame), msg.frame_size,
                         report);
    }
    write_frame(label + ".full", full_frame(msg));
    /* A reference by kFirstCodeIndex. */
    uint64_t  seal;
    RefHeader ref =
            ref_header_for(msg_ref_template(msg), kFirstCodeIndex, &seal);
    write_frame(label + ".ref", ref_frame(msg, ref, seal));
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(context, handle);
}

/* A full frame of a bitcode image (issue 32): the ifunc "bitcode", whose
 * NAME_main keeps a static count and calls strlen, compiled from C by the
 * clang of the JIT's LLVM, with an 8-byte payload. None without that
 * clang (configure found no LLVM). */
void write_bitcode_frame()
{
    const char *source  = "#include <stddef.h>\n"
                          "extern size_t strlen(const char *);\n"
                          "static long calls;\n"
                          "void bitcode_main(void *p, size_t n, void *a)\n"
                          "{ (void)n; (void)a;\n"
                          "  *(long *)p += ++calls + (long)strlen(\"bc\"); }\n";
    std::string bitcode = test::bitcode_of(source, test::kBitcodeHostTriple);
    if (bitcode.empty()) {
        std::fprintf(stderr, "make_corpus: no bitcode seed (no clang of "
                             "LLVM's version)\n");
        return;
    }
    std::vector<char> image =
            test::bitcode_image("bitcode", bitcode, test::kBitcodeHostTriple,
                                test::kBitcodeHostMachine, {{"strlen"}});
    std::vector<char> prefix =
            frame_prefix("bitcode", image.data(), image.size());
    size_t                payload_offset = align_up(prefix.size(), 16);
    size_t                frame_size     = payload_offset + 8 + kSealSize;
    std::vector<uint64_t> frame(frame_size / 8, 0);
    std::memcpy(frame.data(), prefix.data(), prefix.size());
    auto &hdr          = *reinterpret_cast<FrameHeader *>(frame.data());
    hdr.frame_size     = frame_size;
    hdr.nonce          = 1;
    hdr.payload_offset = uint32_t(payload_offset);
    hdr.payload_size   = 8;
    hdr.seal           = frame_seal(hdr);
    frame.back()       = hdr.seal;
    write_file("bitcode.full", frame.data(), frame_size);
}

[[noreturn]] void fail(const char *what)
{
    std::fprintf(stderr, "make_corpus: %s\n", what);
    std::exit(1);
}

/* The source side of delivery by active message, sending to itself; the
 * messages go to capture() instead of the target's handler. */
struct AmSource {
    ucp_worker_h      worker = nullptr;
    ucp_ep_h          ep     = nullptr;
    ucp_ifunc_am_h    am     = nullptr;
    std::vector<char> caught; /* the last message, as a harness input */
    bool              got = false;

    void progress_until(const bool &done)
    {
        for (long i = 0; !done; ++i) {
            if (i == 100000000) {
                fail("an active message does not arrive");
            }
            ucp_worker_progress(worker);
        }
    }
};

ucs_status_t capture(void *arg, const void *header, size_t header_length,
                     void *data, size_t length,
                     const ucp_am_recv_param_t *param)
{
    auto *source = static_cast<AmSource *>(arg);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        (header_length > UINT8_MAX)) {
        fail("a message came by rendezvous, or with a header of over 255 "
             "bytes: the harness's input format (am_input.h) needs a change");
    }
    /* Hashes fixed by default: a mutation of a frame then reaches the
     * checks behind its seal. */
    uint8_t flags = fuzz::kFixHashes;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) {
        flags |= fuzz::kReply;
    }
    source->caught.clear();
    fuzz::append_am_message(source->caught, flags, header,
                            uint8_t(header_length), data, uint32_t(length));
    source->got = true;
    return UCS_OK;
}

/* Sends @a msg on @a am_ep (with its code if @a with_code); returns the
 * message as the harness's input. */
std::vector<char> sent(AmSource &source, ucp_ifunc_am_ep_h am_ep,
                       ucp_ifunc_msg_t msg, bool with_code)
{
    ucp_ifunc_channel_send_params_t params = {};
    params.field_mask                      = UCP_IFUNC_CHANNEL_SEND_FIELD_FLAGS;
    params.flags = with_code ? UCP_IFUNC_SEND_FLAG_WITH_CODE : 0;
    source.got   = false;
    ucs_status_ptr_t request =
            ucp_ifunc_am_send_nbx(am_ep, msg, nullptr, &params);
    if (UCS_PTR_IS_ERR(request)) {
        fail("ucp_ifunc_am_send_nbx failed");
    }
    source.progress_until(source.got);
    if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) {
            ucp_worker_progress(source.worker);
        }
        ucp_request_free(request);
    }
    return source.caught;
}

/* What a target replies after it ran a full frame (am.cc's AmReply): the
 * source's token, the code id's low half, the target's ISA, its index of
 * the code (here kFirstCodeIndex). */
std::vector<char> reply_to(const std::vector<char> &full_message,
                           uint64_t code_id_lo, uint64_t machine)
{
    uint64_t reply[4] = {0, code_id_lo, machine, kFirstCodeIndex};
    /* The token is the first word of a full frame's AM header. */
    std::memcpy(&reply[0], full_message.data() + fuzz::kAmControlSize,
                sizeof(reply[0]));
    std::vector<char> input;
    fuzz::append_am_message(input, fuzz::kToReplyId, reply, sizeof(reply),
                            nullptr, 0);
    return input;
}

/* Makes the source believe what @a reply says (it goes to the source's
 * reply handler), and waits until it does. */
void deliver_reply(AmSource &source, ucp_ifunc_am_ep_h am_ep,
                   const std::vector<char> &reply, uint64_t machine)
{
    ucp_request_param_t param;
    /* A source takes a reply only on the endpoint it sends on, which UCP
     * names with this flag. */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t request =
            ucp_am_send_nbx(source.ep, UCP_IFUNC_AM_ID_DEFAULT + 1,
                            reply.data() + fuzz::kAmControlSize,
                            4 * sizeof(uint64_t), nullptr, 0, &param);
    if (UCS_PTR_IS_ERR(request)) {
        fail("sending a reply failed");
    }
    ucp_ifunc_ep_attr_t attr = {};
    attr.field_mask          = UCP_IFUNC_EP_ATTR_FIELD_MACHINE;
    for (long i = 0; attr.machine != machine; ++i) {
        if (i == 100000000) {
            fail("the source ignores the reply: does am.cc's AmReply still "
                 "hold token, code id, machine and code index?");
        }
        ucp_worker_progress(source.worker);
        ucp_ifunc_am_ep_query(am_ep, &attr);
    }
    if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) {
            ucp_worker_progress(source.worker);
        }
        ucp_request_free(request);
    }
}

std::vector<char> operator+(std::vector<char> a, const std::vector<char> &b)
{
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

void write_am_seed(const std::string &name, const std::vector<char> &input)
{
    write_file(name, input.data(), input.size(), am_output_dir);
}

/* Writes the active messages of one message of @a ifunc, each as its own
 * seed and, where the target would see them so, one after the other; with
 * @a hops, also the message sent on by running code (a hop count), which
 * goes whole where a reference would. */
void write_am_messages(ucp_context_h context, AmSource &source,
                       const char *ifunc, const std::string &label,
                       void *source_args, size_t source_args_size,
                       bool hops = false)
{
    ucp_ifunc_h       handle;
    ucp_ifunc_msg_t   msg;
    ucp_ifunc_am_ep_h am_ep; /* a new one: the target's ISA unknown */
    if ((ucp_register_ifunc(context, ifunc, &handle) != UCS_OK) ||
        (ucp_ifunc_msg_create(handle, source_args, source_args_size, &msg) !=
         UCS_OK) ||
        (ucp_ifunc_am_ep_create(source.am, source.ep, &am_ep) != UCS_OK)) {
        fail("cannot make an active message");
    }
    const IsaTable &isas = msg_isa_table(msg);
    uint64_t        code_id_lo =
            static_cast<const FrameHeader *>(msg.frame)->code_id_lo;
    uint64_t own = arch::elf_machine();

    std::vector<char> first = sent(source, am_ep, msg, false);
    std::vector<char> reply = reply_to(first, code_id_lo, own);
    deliver_reply(source, am_ep, reply, own);
    std::vector<char>   full = sent(source, am_ep, msg, true);
    std::vector<char>   ref  = sent(source, am_ep, msg, false);
    ucp_ifunc_ep_attr_t attr = {};
    attr.field_mask          = UCP_IFUNC_EP_ATTR_FIELD_SENT_BY_REF;
    ucp_ifunc_am_ep_query(am_ep, &attr);
    if (attr.sent_by_ref != 1) {
        fail("the source did not send by reference after the reply");
    }
    if (hops) {
        ucp_ifunc_msg_t sent_on;
        if (ucp_ifunc_msg_create(handle, source_args, source_args_size,
                                 &sent_on) != UCS_OK) {
            fail("cannot make an active message");
        }
        frame_set_hop_count(static_cast<char *>(sent_on.frame),
                            sent_on.frame_size, 3);
        std::vector<char> whole = sent(source, am_ep, sent_on, false);
        if (size_t(uint8_t(whole[1])) == sizeof(uint64_t)) {
            fail("a message with a hop count went by reference, which "
                 "cannot carry it");
        }
        write_am_seed(label + ".hops+ref", whole + ref);
        ucp_ifunc_msg_free(sent_on);

        /* Messages that ask for a delivery report: a full frame with its
         * report id, which goes whole, and a reference whose AM header
         * carries one, as the default path sends from the caller's
         * memory. */
        ucp_ifunc_msg_t reported;
        if (ucp_ifunc_msg_create(handle, source_args, source_args_size,
                                 &reported) != UCS_OK) {
            fail("cannot make an active message");
        }
        frame_set_report(static_cast<char *>(reported.frame),
                         reported.frame_size, 9);
        std::vector<char> reported_full = sent(source, am_ep, reported, false);
        if (size_t(uint8_t(reported_full[1])) == sizeof(uint64_t)) {
            fail("a message with a report id went by reference");
        }
        /* A reference from the caller's memory, as the default path
         * writes it through the send core (send_core.h). */
        ReportedRefHeader   header;
        ucp_request_param_t param;
        param.op_attr_mask = 0;
        CodeChoice choice  = {UCS_OK, 0, CodeId{0, 0}, true, kFirstCodeIndex};
        Outgoing   out     = {&choice, nullptr,
                              Reference{source_args, source_args_size, 0, 0, 9}};
        AmPath     path(*am_ep, &param, header);
        source.got          = false;
        ucs_status_t status = path.write_ref(out);
        if (UCS_STATUS_IS_ERR(status)) {
            fail("sending a reported reference failed");
        }
        ucs_status_ptr_t request = path.request();
        source.progress_until(source.got);
        if (UCS_PTR_IS_PTR(request)) {
            while (ucp_request_check_status(request) == UCS_INPROGRESS) {
                ucp_worker_progress(source.worker);
            }
            ucp_request_free(request);
        }
        write_am_seed(label + ".report+ref", reported_full + source.caught);
        ucp_ifunc_msg_free(reported);
    }

    /* The same full frame by rendezvous: the receive into pooled buffers. */
    std::vector<char> full_rndv = full;
    full_rndv[0] |= fuzz::kRndv;
    if (isas.n_foreign > 0) {
        write_am_seed(label + ".all_isas", first);
        write_am_seed(label + ".all_isas+ref", first + ref);
    }
    write_am_seed(label + ".full", full);
    write_am_seed(label + ".full+ref+ref", full + ref + ref);
    write_am_seed(label + ".full_rndv+ref", full_rndv + ref);

    /* The other ISA's frame alone, as to a target of that ISA. */
    for (uint64_t i = 0; i < isas.n_foreign; ++i) {
        uint64_t machine = isas.foreign[i].machine;
        deliver_reply(source, am_ep, reply_to(first, 0, machine), machine);
        write_am_seed(label + "." + machine_name(uint16_t(machine)),
                      sent(source, am_ep, msg, true));
    }

    ucp_ifunc_am_ep_destroy(am_ep);
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(context, handle);
}

void write_am_corpus(ucp_context_h context)
{
    AmSource            source;
    ucp_worker_params_t worker_params = {};
    ucp_address_t      *address;
    size_t              address_length;
    if ((ucp_worker_create(context, &worker_params, &source.worker) !=
         UCS_OK) ||
        (ucp_worker_get_address(source.worker, &address, &address_length) !=
         UCS_OK)) {
        fail("cannot create a UCP worker");
    }
    ucp_ep_params_t ep_params = {};
    ep_params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address         = address;
    ucs_status_t status = ucp_ep_create(source.worker, &ep_params, &source.ep);
    ucp_worker_release_address(source.worker, address);
    if ((status != UCS_OK) ||
        (ucp_ifunc_am_enable(context, source.worker, nullptr, &source.am) !=
         UCS_OK)) {
        fail("cannot create an endpoint and enable delivery by active "
             "message");
    }
    /* The messages come here instead of to the target's handler. */
    ucp_am_handler_param_t handler;
    handler.field_mask =
            UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
            UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    handler.id    = UCP_IFUNC_AM_ID_DEFAULT;
    handler.cb    = capture;
    handler.arg   = &source;
    handler.flags = UCP_AM_FLAG_WHOLE_MSG;
    if (ucp_worker_set_am_recv_handler(source.worker, &handler) != UCS_OK) {
        fail("cannot set an AM handler");
    }

    /* The libraries fuzz_am.cc's target holds: small code; payloads from
     * empty to a few KiB, some at addresses that are not 16-byte aligned
     * in UCP's buffer. */
    int64_t increment = 5;
    write_am_messages(context, source, "counter", "counter", &increment,
                      sizeof(increment), true);
    write_am_messages(context, source, "tally", "tally", nullptr, 0);
    std::vector<uint8_t> bytes(4000);
    for (size_t i = 0; i < bytes.size(); ++i) {
        bytes[i] = uint8_t(i * 131 + 7);
    }
    for (size_t size : {0, 1, 63, 1000}) {
        write_am_messages(context, source, "echo",
                          "echo_" + std::to_string(size), bytes.data(), size);
    }
    stress_args stress = {42, bytes.size(), bytes.data()};
    write_am_messages(context, source, "stress", "stress_4000", &stress,
                      sizeof(stress));

    /* A message with a header of neither kind, and a source's reply
     * message. */
    uint32_t          odd_header = 1; /* 4 bytes: no kind has them */
    uint64_t          word       = 1;
    std::vector<char> odd;
    fuzz::append_am_message(odd, 0, &odd_header, sizeof(odd_header), &word,
                            sizeof(word));
    write_am_seed("odd_header", odd);
    uint64_t          reply[3] = {1, 2, arch::elf_machine()};
    std::vector<char> reply_input;
    fuzz::append_am_message(reply_input, fuzz::kToReplyId, reply, sizeof(reply),
                            nullptr, 0);
    write_am_seed("reply", reply_input);

    ucp_ifunc_am_disable(source.am);
    ucp_request_param_t param;
    param.op_attr_mask       = 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(source.ep, &param);
    if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) {
            ucp_worker_progress(source.worker);
        }
        ucp_request_free(request);
    }
    ucp_worker_destroy(source.worker);
}

} // namespace

int main(int argc, char **argv)
{
    if ((argc != 3) || (std::getenv("UCX_IFUNC_LIB_DIR") == nullptr)) {
        std::fprintf(stderr,
                     "usage: UCX_IFUNC_LIB_DIR=DIR %s FRAME_DIR AM_DIR\n",
                     argv[0]);
        return 2;
    }
    output_dir    = argv[1];
    am_output_dir = argv[2];

    /* Active messages to this process, whole (never by rendezvous): the
     * harness chooses the protocol itself. */
    setenv("UCX_TLS", "self", 1);
    setenv("UCX_RNDV_THRESH", "inf", 1);
    ucp_params_t params = {};
    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    ucp_context_h context;
    if (ucp_init(&params, nullptr, &context) != UCS_OK) {
        std::fprintf(stderr, "make_corpus: ucp_init failed\n");
        return 1;
    }

    write_bitcode_frame();

    /* Small code without imports; code with imports; code with every
     * construct (relocations, imports, .data, .bss) at two optimisation
     * levels; payloads from empty to a few KiB. */
    int64_t increment = 5;
    write_message(context, "counter", "counter", &increment, sizeof(increment));
    write_message(context, "counter", "counter_hops", &increment,
                  sizeof(increment), 3);
    write_message(context, "counter", "counter_report", &increment,
                  sizeof(increment), 0, 7);
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
    /* Code built for the sandbox: format version 3, bundled text, calls to
     * imports through the gate page. */
    write_message(context, "imports_sandbox", "imports_sandbox", nullptr, 0);
    write_am_corpus(context);

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
    std::printf("make_corpus: %d files in %s and %s\n", n_written,
                output_dir.c_str(), am_output_dir.c_str());
    return 0;
}
