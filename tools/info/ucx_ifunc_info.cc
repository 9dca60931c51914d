/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * ucx-ifunc-info: what ucx_info is to UCX, for ucx-ifunc. Prints the
 * version and build of the library, its UCX_IFUNC_* variables as UCX's
 * parser reads them, and, for ifunc libraries, their images and whether
 * this host would run their code.
 *
 * It is built with the library's own code (libucp_ifunc_core, as the unit
 * tests are), not against the installed libucp_ifunc.so, whose exports
 * are the public API only: the variables come from the table the library
 * registers with UCX's parser, a library's code id from the function the
 * library computes it with, and the verdict on a library from the
 * library's own image check and trust policy (trust.h), so that what this
 * tool says is what a target here does.
 */
#include "elf_images.h"

#include "ucp/ifunc/base/arch.h"
#include "ucp/ifunc/base/config.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/format/isa.h"
#include "ucp/ifunc/load/link.h"
#include "ucp/ifunc/load/registry.h"
#include "ucp/ifunc/sandbox/sandbox_verify.h"
#include "ucp/ifunc/load/trust.h"

#include <ucp/api/ucp.h>
#include <ucp/api/ucp_ifunc.h>
#include <ucs/debug/log_def.h>

#include <elf.h>
#include <getopt.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#ifndef UCX_IFUNC_CONFIGURE_ARGS
#define UCX_IFUNC_CONFIGURE_ARGS ""
#endif
#ifndef UCX_IFUNC_TARGETS
#define UCX_IFUNC_TARGETS ""
#endif

namespace {

using namespace ucx_ifunc;
using ucx_ifunc_info::EmbeddedImage;

const char kProg[] = "ucx-ifunc-info";

/* What sandboxed code may import includes the functions the library's
 * layers grant when they load (context.cc, peer.cc). This tool links the
 * library's objects one by one: naming an API function of each such layer
 * links it, and its grant, here as in the library, so that the verdict on
 * sandbox code is the target's. */
__attribute__((used)) void *const kLayersThatGrant[] = {
        reinterpret_cast<void *>(&ucp_ifunc_code_get),
        reinterpret_cast<void *>(&ucp_ifunc_peer_send_nbx)};

const char kUsage[] =
        "usage: ucx-ifunc-info [-v] [-c] [LIB.so ...]\n"
        "\n"
        "Describes this ucx-ifunc installation and ifunc libraries, as\n"
        "ucx_info does UCX. Without arguments: -v -c.\n"
        "\n"
        "  -v          version: the package and the ifunc API, the UCX it was\n"
        "              built against and runs with, the ISAs it runs and\n"
        "              ships code for, the options it was configured with\n"
        "  -c          every UCX_IFUNC_* variable as UCX's parser reads it\n"
        "              now: its value, its default and what it does\n"
        "  LIB.so ...  each ifunc library (built by ucx-ifunc-cc): its ISAs,\n"
        "              and for each its code id, sizes, imports, needed\n"
        "              libraries and the key that signed it; then whether\n"
        "              a target on this host, with UCX_IFUNC_TRUST,\n"
        "              UCX_IFUNC_TRUSTED_KEYS and UCX_IFUNC_LIB_DIR as they\n"
        "              are now, would run its code, and if not why\n"
        "  -h, --help  print this help and exit\n"
        "  --version   print the version and exit\n"
        "\n"
        "Exit status: 0, or 1 if a library could not be read or holds no\n"
        "ifunc image, 2 for a bad command line.\n";

/* Takes what UCX logs at warning level or above while it lives (the
 * library's own words for what it refuses) instead of printing it. */
class LogCapture {
public:
    LogCapture()
    {
        lines_.clear();
        ucs_log_push_handler(handler);
    }
    ~LogCapture() { ucs_log_pop_handler(); }
    LogCapture(const LogCapture &)            = delete;
    LogCapture &operator=(const LogCapture &) = delete;

    /* The lines so far, joined by "; ". */
    static std::string text()
    {
        std::string joined;
        for (const std::string &line : lines_) {
            joined += (joined.empty() ? "" : "; ") + line;
        }
        return joined;
    }

private:
    static ucs_log_func_rc_t handler(const char *, unsigned, const char *,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *,
                                     const char *format, va_list ap)
    {
        if (level > UCS_LOG_LEVEL_WARN) {
            return UCS_LOG_FUNC_RC_CONTINUE;
        }
        char    line[2048];
        va_list copy;
        va_copy(copy, ap);
        vsnprintf(line, sizeof(line), format, copy);
        va_end(copy);
        lines_.emplace_back(line);
        return UCS_LOG_FUNC_RC_STOP;
    }

    static inline std::vector<std::string> lines_;
};

/* "x86-64, aarch64". */
std::string machine_list(const std::vector<uint16_t> &machines)
{
    std::string text;
    for (uint16_t machine : machines) {
        text += (text.empty() ? "" : ", ") + machine_name(machine);
    }
    return text;
}

void print_version()
{
    unsigned major, minor, release;
    ucp_ifunc_get_version(&major, &minor, &release);
    std::vector<uint16_t> shippable(std::begin(kShippableMachines),
                                    std::end(kShippableMachines));
    std::printf("# Package version:  ucx-ifunc %s\n",
                ucp_ifunc_get_version_string());
    std::printf("# ifunc API:        %u.%u (header %u.%u)\n", major, minor,
                UCP_IFUNC_API_MAJOR, UCP_IFUNC_API_MINOR);
    std::printf("# UCX:              built against UCP API %d.%d, running "
                "UCX %s\n",
                UCP_API_MAJOR, UCP_API_MINOR, ucp_get_version_string());
    std::printf("# Runs code for:    %s\n",
                machine_name(arch::elf_machine()).c_str());
    std::printf("# Ships images for: %s (ucx-ifunc-cc --target)\n",
                machine_list(shippable).c_str());
    if (*UCX_IFUNC_TARGETS != '\0') {
        std::printf("# Configure found:  ucx-ifunc-cc targets %s "
                    "(IFUNC_TARGETS)\n",
                    UCX_IFUNC_TARGETS);
    }
    std::printf("# Configured with:  %s\n", (*UCX_IFUNC_CONFIGURE_ARGS != '\0')
                                                    ? UCX_IFUNC_CONFIGURE_ARGS
                                                    : "(no options)");
}

/* The first sentence of @a doc. */
std::string first_sentence(const std::string &doc)
{
    size_t end = doc.find(". ");
    return (end == std::string::npos) ? doc : doc.substr(0, end + 1);
}

void print_config()
{
    std::vector<ConfigVariable> variables = config_variables();
    std::printf("# %zu UCX_IFUNC_* variables, as UCX's parser reads them "
                "now\n",
                variables.size());
    for (const ConfigVariable &variable : variables) {
        std::printf("#\n# %s\n# default: %s%s\n%s=%s\n",
                    first_sentence(variable.doc).c_str(),
                    variable.default_value.empty()
                            ? "(empty)"
                            : variable.default_value.c_str(),
                    variable.set ? " (set in the environment)" : "",
                    variable.name.c_str(), variable.value.c_str());
    }
}

/* An image of a library, checked for its own ISA. */
struct Image {
    const EmbeddedImage   *embedded = nullptr;
    uint16_t               machine  = 0;
    ucp_ifunc_image_desc_t desc{};
    size_t                 size = 0;
    std::string            problem; /* why it is not a valid image */
    CodeId                 code_id{};
};

Image check_image(const EmbeddedImage &embedded)
{
    Image image;
    image.embedded = &embedded;
    image.machine  = embedded.machine;
    if (embedded.bytes.size() >= sizeof(ucp_ifunc_image_desc_t)) {
        image.desc = image_desc(embedded.bytes.data());
        if (image.machine == 0) {
            image.machine = image.desc.machine;
        }
    }
    LogCapture   capture;
    ucs_status_t status = image_check_for(
            image.machine, embedded.bytes.data(), embedded.bytes.size(),
            embedded.name.c_str(), SIZE_MAX, UCS_LOG_LEVEL_ERROR, &image.size);
    if (status != UCS_OK) {
        image.problem = LogCapture::text();
        if (image.problem.empty()) {
            image.problem = ucs_status_string(status);
        }
        return image;
    }
    std::vector<char> prefix = frame_prefix(embedded.name.c_str(),
                                            embedded.bytes.data(), image.size);
    image.code_id            = header_code_id(
                       *reinterpret_cast<const FrameHeader *>(prefix.data()));
    return image;
}

std::string hex(const uint8_t *bytes, size_t size)
{
    std::string text;
    char        digits[3];
    for (size_t i = 0; i < size; ++i) {
        std::snprintf(digits, sizeof(digits), "%02x", bytes[i]);
        text += digits;
    }
    return text;
}

/* The key that signed an image, machine code or bitcode alike. */
void print_signer(const char *bytes, const ucp_ifunc_image_desc_t &d)
{
    if (d.signature_offset != 0) {
        auto sig =
                read_at<ucp_ifunc_image_signature_t>(bytes, d.signature_offset);
        std::printf("#     signed by:    key %s\n",
                    hex(sig.public_key, sizeof(sig.public_key)).c_str());
    } else {
        std::printf("#     signed by:    (not signed)\n");
    }
}

/* The imports and needed libraries of an image, machine code or bitcode
 * alike. */
void print_imports_and_needed(const char                   *bytes,
                              const ucp_ifunc_image_desc_t &d)
{
    std::string imports;
    for (uint32_t i = 0; i < d.n_imports; ++i) {
        auto import = image_import(bytes, d, i);
        imports += (i ? ", " : "") +
                   std::string(image_string(bytes, d, import.name_offset)) +
                   ((import.flags & UCP_IFUNC_IMPORT_WEAK) ? " (weak)" : "");
    }
    std::printf("#     imports:      %s\n",
                imports.empty() ? "(none)" : imports.c_str());
    std::string needed;
    for (uint32_t i = 0; i < d.n_needed; ++i) {
        needed +=
                (i ? ", " : "") +
                std::string(image_string(bytes, d, image_needed(bytes, d, i)));
    }
    std::printf("#     needed:       %s\n",
                needed.empty() ? "(none)" : needed.c_str());
}

void print_image(const Image &image)
{
    const char *bytes = image.embedded->bytes.data();
    std::string isa   = machine_name(image.machine);
    std::printf("#   %s image:%*s%s\n", isa.c_str(),
                int(std::max<size_t>(1, 9 - std::min<size_t>(isa.size(), 8))),
                "", image.embedded->symbol.c_str());
    if (!image.problem.empty()) {
        std::printf("#     invalid:      %s\n", image.problem.c_str());
        return;
    }
    const ucp_ifunc_image_desc_t &d     = image.desc;
    const ucp_ifunc_image_seg_t  *seg   = d.seg;
    uint64_t                      relro = seg[UCP_IFUNC_SEG_RELRO].mem_size;
    uint64_t                      data  = seg[UCP_IFUNC_SEG_DATA].mem_size;
    std::printf("#     code id:      %s\n", image.code_id.hex().c_str());
    std::printf("#     sizes:        image %zu, code %llu, data %llu "
                "(read-only %llu, writable %llu), mapped %llu bytes\n",
                image.size,
                (unsigned long long)seg[UCP_IFUNC_SEG_TEXT].mem_size,
                (unsigned long long)(relro + data), (unsigned long long)relro,
                (unsigned long long)data, (unsigned long long)d.map_size);
    print_imports_and_needed(bytes, d);
    std::string functions;
    for (uint32_t i = 0; i < d.n_symbols; ++i) {
        auto symbol = image_symbol(bytes, d, i);
        functions += (i ? ", " : "") +
                     std::string(image_string(bytes, d, symbol.name_offset));
    }
    std::printf("#     functions:    %s\n",
                functions.empty() ? "(none)" : functions.c_str());
    if (image_is_sandboxed(d)) {
        /* The target's own verifier, on the bytes a target would receive. */
        sandbox::VerifyResult verdict =
                (image.machine == EM_X86_64)
                        ? sandbox::verify_image(bytes, d)
                        : sandbox::VerifyResult{false, 0,
                                                "no verifier for this ISA"};
        std::printf("#     sandbox:      built for it; the verifier %s%s\n",
                    verdict.accepted ? "accepts it (rules S1-S7)"
                                     : "refuses it: ",
                    verdict.reason.c_str());
    }
    print_signer(bytes, d);
}

/* Why the bitcode image @a bytes (version 4) is not sound, or "" if it is:
 * read here with the bounds each field needs, not by image_check(), which
 * checks the kinds a target maps. */
std::string bitcode_problem(const std::vector<char> &bytes,
                            ucp_ifunc_image_desc_t  *d)
{
    if (bytes.size() < sizeof(*d)) {
        return "too short for a descriptor";
    }
    *d          = image_desc(bytes.data());
    auto within = [d](uint64_t offset, uint64_t size) {
        return (offset <= d->image_size) && (size <= d->image_size - offset);
    };
    const ucp_ifunc_image_seg_t &text = d->seg[UCP_IFUNC_SEG_TEXT];
    if ((d->magic != UCP_IFUNC_IMAGE_MAGIC) ||
        (d->version != UCP_IFUNC_IMAGE_VERSION_BITCODE) ||
        (d->flags != UCP_IFUNC_IMAGE_FLAG_BITCODE)) {
        return "not a bitcode image (version " + std::to_string(d->version) +
               ", flags " + std::to_string(d->flags) + ")";
    }
    if ((d->desc_size != sizeof(*d)) || (d->image_size > bytes.size())) {
        return "its sizes do not fit the symbol";
    }
    if (!within(text.file_offset, text.file_size) || (text.file_size < 4)) {
        return "its bitcode lies outside the image";
    }
    if (!within(d->strtab_offset, d->strtab_size) || (d->strtab_size == 0) ||
        (bytes[d->strtab_offset + d->strtab_size - 1] != '\0')) {
        return "its string table lies outside the image";
    }
    if (!within(d->imports_offset,
                uint64_t(d->n_imports) * sizeof(ucp_ifunc_image_import_t)) ||
        !within(d->needed_offset, uint64_t(d->n_needed) * sizeof(uint32_t))) {
        return "its imports or libraries lie outside the image";
    }
    if ((d->signature_offset != 0) &&
        (d->signature_offset + sizeof(ucp_ifunc_image_signature_t) !=
         d->image_size)) {
        return "its signature block is not its end";
    }
    for (uint32_t i = 0; i < d->n_imports; ++i) {
        if (image_import(bytes.data(), *d, i).name_offset >= d->strtab_size) {
            return "an import's name lies outside the string table";
        }
    }
    for (uint32_t i = 0; i < d->n_needed; ++i) {
        if (image_needed(bytes.data(), *d, i) >= d->strtab_size) {
            return "a library's name lies outside the string table";
        }
    }
    return "";
}

/* The module's target triple of a sound bitcode image. */
std::string bitcode_triple(const EmbeddedImage &embedded)
{
    ucp_ifunc_image_desc_t d;
    if (!bitcode_problem(embedded.bytes, &d).empty()) {
        return "(damaged)";
    }
    return image_string(embedded.bytes.data(), d, 0);
}

void print_bitcode(const EmbeddedImage &embedded)
{
    std::printf("#   bitcode image:  %s\n", embedded.symbol.c_str());
    ucp_ifunc_image_desc_t d;
    std::string            problem = bitcode_problem(embedded.bytes, &d);
    if (!problem.empty()) {
        std::printf("#     invalid:      %s\n", problem.c_str());
        return;
    }
    const char       *bytes = embedded.bytes.data();
    std::vector<char> prefix =
            frame_prefix(embedded.name.c_str(), bytes, d.image_size);
    std::printf("#     triple:       %s (%s)\n", image_string(bytes, d, 0),
                machine_name(embedded.machine).c_str());
    std::printf("#     code id:      %s\n",
                header_code_id(
                        *reinterpret_cast<const FrameHeader *>(prefix.data()))
                        .hex()
                        .c_str());
    std::printf("#     sizes:        image %llu, bitcode %llu bytes\n",
                (unsigned long long)d.image_size,
                (unsigned long long)d.seg[UCP_IFUNC_SEG_TEXT].file_size);
    print_imports_and_needed(bytes, d);
    print_signer(bytes, d);
}

/* The name of a status a target's checks return. */
const char *status_name(ucs_status_t status)
{
    switch (status) {
        case UCS_ERR_REJECTED:
            return "UCS_ERR_REJECTED";
        case UCS_ERR_UNSUPPORTED:
            return "UCS_ERR_UNSUPPORTED";
        case UCS_ERR_EXCEEDS_LIMIT:
            return "UCS_ERR_EXCEEDS_LIMIT";
        case UCS_ERR_INVALID_PARAM:
            return "UCS_ERR_INVALID_PARAM";
        case UCS_ERR_NO_ELEM:
            return "UCS_ERR_NO_ELEM";
        default:
            return ucs_status_string(status);
    }
}

/* Whether a target on this host would run @a image (of ifunc @a name),
 * and why: the checks a target makes before it maps a received image
 * (link.cc), with the settings a context would read now. */
std::string verdict(const std::string &name, const Image *image)
{
    uint16_t host = arch::elf_machine();
    if (image == nullptr) {
        return std::string("refused: the library carries no ") +
               machine_name(host) +
               " code; build it with ucx-ifunc-cc --target listing " +
               machine_triplet(host);
    }
    if (!image->problem.empty()) {
        return "refused: " + image->problem;
    }
    const char *bytes = image->embedded->bytes.data();
    LogCapture  capture;
    Registry    registry; /* reads the UCX_IFUNC_* variables now */
    size_t      size;
    if (!ifunc_name_valid(name.c_str())) {
        return "refused: '" + name + "' is not a valid ifunc name";
    }
    ucs_status_t status =
            image_check(bytes, image->embedded->bytes.size(), name.c_str(),
                        registry.max_image_size(), UCS_LOG_LEVEL_ERROR, &size);
    if (status == UCS_OK) {
        /* The target's own decision (link.h), to the verifier for sandbox
         * code; only a native image's imports are left to the link. */
        TrustPolicy              policy(registry);
        std::shared_ptr<Library> library;
        std::string              notes = LogCapture::text();
        unsigned                 by    = 0;
        status = admit_image(registry, policy, name, bytes, image->code_id,
                             UCS_LOG_LEVEL_ERROR, &by, &library);
        if (status == UCS_OK) {
            bool        sandboxed = image_is_sandboxed(image->desc);
            std::string why =
                    (by == kTrustAny)
                            ? std::string("UCX_IFUNC_TRUST accepts any code")
                    : (by == kTrustSigned)
                            ? std::string("signed by a key "
                                          "UCX_IFUNC_TRUSTED_KEYS lists")
                    : (by == kTrustLibrary)
                            ? "the same code as " + library->path()
                            : std::string("built for the sandbox, and its "
                                          "verifier accepts it");
            if (sandboxed && (by != kTrustSandboxed)) {
                why += ", and the sandbox's verifier accepts it";
            }
            return "accepted (UCX_IFUNC_TRUST=" +
                   trust_kinds_text(registry.trust_kinds()) + "): " + why +
                   (notes.empty() ? "" : "; note: " + notes) +
                   (sandboxed ? "; it runs confined in a slot of its own"
                              : "; its imports are resolved when a target "
                                "links it");
        }
    }
    std::string why = LogCapture::text();
    return std::string("refused (") + status_name(status) +
           "): " + (why.empty() ? ucs_status_string(status) : why);
}

/* Describes library @a path; false if it could not be read or holds no
 * image. */
bool describe_library(const std::string &path)
{
    std::vector<EmbeddedImage> embedded, bitcode;
    try {
        embedded = ucx_ifunc_info::read_embedded_images(path);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: %s: %s\n", kProg, path.c_str(), e.what());
        return false;
    }
    for (const EmbeddedImage &e : embedded) {
        if (e.bitcode) {
            bitcode.push_back(e);
        }
    }
    embedded.erase(
            std::remove_if(embedded.begin(), embedded.end(),
                           [](const EmbeddedImage &e) { return e.bitcode; }),
            embedded.end());
    std::sort(bitcode.begin(), bitcode.end(),
              [](const EmbeddedImage &a, const EmbeddedImage &b) {
                  return a.machine < b.machine;
              });
    if (embedded.empty() && bitcode.empty()) {
        std::fprintf(stderr,
                     "%s: %s: no ifunc image in it (no symbol %s*); is it an "
                     "ifunc library built with ucx-ifunc-cc?\n",
                     kProg, path.c_str(), UCP_IFUNC_IMAGE_SYMBOL);
        return false;
    }
    /* One image per ISA: the ".em<N>" ones, else the plain one alone (a
     * library built for one ISA before --target). */
    bool per_isa = false;
    for (const EmbeddedImage &e : embedded) {
        per_isa = per_isa || (e.machine != 0);
    }
    std::vector<Image> images;
    for (const EmbeddedImage &e : embedded) {
        if ((e.machine != 0) || !per_isa) {
            images.push_back(check_image(e));
        }
    }
    std::sort(images.begin(), images.end(), [](const Image &a, const Image &b) {
        return a.machine < b.machine;
    });
    std::vector<uint16_t> machines;
    for (const Image &image : images) {
        machines.push_back(image.machine);
    }
    const std::string &name =
            embedded.empty() ? bitcode.front().name : embedded.front().name;
    std::printf("# ifunc library %s\n", path.c_str());
    std::printf("#   ifunc:          %s\n", name.c_str());
    std::printf("#   ISAs:           %s\n",
                machines.empty() ? "(none: bitcode only)"
                                 : machine_list(machines).c_str());
    const Image *host = nullptr;
    for (const Image &image : images) {
        print_image(image);
        if (image.machine == arch::elf_machine()) {
            host = &image;
        }
    }
    if (!bitcode.empty()) {
        std::string triples;
        for (const EmbeddedImage &e : bitcode) {
            triples += (triples.empty() ? "" : ", ") + bitcode_triple(e);
        }
        std::printf("#   bitcode:        %s\n", triples.c_str());
        for (const EmbeddedImage &e : bitcode) {
            print_bitcode(e);
        }
    }
    std::printf("#   on this host:   %s\n",
                (host == nullptr) && !bitcode.empty()
                        ? ("refused: the library carries no " +
                           machine_name(arch::elf_machine()) +
                           " machine code, only bitcode, which a target "
                           "compiles only where it can")
                                  .c_str()
                        : verdict(name, host).c_str());
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    enum { kOptVersion = 256 };
    const option long_options[] = {
            {"help", no_argument, nullptr, 'h'},
            {"version", no_argument, nullptr, kOptVersion},
            {nullptr, 0, nullptr, 0}};
    bool version = false, config = false;
    int  opt;
    while ((opt = getopt_long(argc, argv, "vch", long_options, nullptr)) !=
           -1) {
        switch (opt) {
            case 'v':
                version = true;
                break;
            case 'c':
                config = true;
                break;
            case 'h':
                std::fputs(kUsage, stdout);
                return 0;
            case kOptVersion:
                std::printf("%s %s\n", kProg, PACKAGE_VERSION);
                return 0;
            default:
                std::fprintf(stderr,
                             "usage: %s [-v] [-c] [LIB.so ...] (%s -h "
                             "says more)\n",
                             kProg, kProg);
                return 2;
        }
    }
    std::vector<std::string> libraries(argv + optind, argv + argc);
    if (!version && !config && libraries.empty()) {
        version = config = true;
    }
    int status = 0;
    try {
        if (version) {
            print_version();
        }
        if (config) {
            print_config();
        }
        for (const std::string &library : libraries) {
            if (!describe_library(library)) {
                status = 1;
            }
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
        return 1;
    }
    return status;
}
