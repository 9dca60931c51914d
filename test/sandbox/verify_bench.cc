/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Throughput of the sandbox verifier: verifies a large valid text (a
 * function of five bundles with a compiler's instruction mix, sandboxed:
 * %gs loads and stores, %rsp slots, SSE2, a loop, the S5 pair and the S7
 * sequences, repeated) several times and prints MiB/s of the best run,
 * with the fast path and without it.
 *
 *     verify_bench [MIB [RUNS]]     (default 16 MiB, 5 runs)
 *     verify_bench LIB.so...        the x86-64 sandbox images of libraries
 *                                   built with ucx-ifunc-cc --sandbox, each
 *                                   verified whole, as a target does once
 *                                   per code id, until 64 MiB of text
 *
 * The function is GNU as output of .bundle_align_mode 5 source, kept as
 * bytes so that the benchmark needs no assembler; the comments are its
 * disassembly. Its branches are relative and stay inside one copy.
 */
#include "../../tools/info/elf_images.h"
#include "ucp/ifunc/format/image_check.h"
#include "ucp/ifunc/format/sandbox_layout.h"
#include "ucp/ifunc/sandbox/sandbox_verify.h"

#include <elf.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

const uint8_t kFunction[] = {
        0xf3, 0x0f, 0x1e, 0xfa, /* endbr64 */
        0x55,                   /* push %rbp */
        0x53,                   /* push %rbx */
        0x41, 0x54,             /* push %r12 */
        0x65, 0x67, 0x8b, 0x07, /* mov %gs:(%edi),%eax */
        0x65, 0x67, 0x48, 0x8b, 0x4c, 0xf7,
        0x08,                               /* mov %gs:0x8(%edi,%esi,8),%rcx */
        0x48, 0x01, 0xc8,                   /* add %rcx,%rax */
        0x83, 0xf8, 0x10,                   /* cmp $0x10,%eax */
        0x73, 0x10,                         /* jae 2b <start+0x2b> */
        0x65, 0x67, 0x8b, 0x14, 0x87,       /* mov %gs:(%edi,%eax,4),%edx */
        0x0f, 0xaf, 0xd2,                   /* imul %edx,%edx */
        0x01, 0xd3,                         /* add %edx,%ebx */
        0xff, 0xc0,                         /* inc %eax */
        0x39, 0xf0,                         /* cmp %esi,%eax */
        0x72, 0xf0,                         /* jb 1b <start+0x1b> */
        0x48, 0x89, 0x44, 0x24, 0x08,       /* mov %rax,0x8(%rsp) */
        0x65, 0x67, 0xf2, 0x0f, 0x10, 0x02, /* movsd %gs:(%edx),%xmm0 */
        0xf2, 0x0f, 0x59, 0xc1,             /* mulsd %xmm1,%xmm0 */
        0xf2, 0x0f, 0x58, 0xd0,             /* addsd %xmm0,%xmm2 */
        0x90,                               /* nop */
        0x90,                               /* nop */
        0x65, 0x67, 0xf2, 0x0f, 0x11, 0x52,
        0x08,                               /* movsd %xmm2,%gs:0x8(%edx) */
        0x8d, 0x4c, 0x18, 0x01,             /* lea 0x1(%rax,%rbx,1),%ecx */
        0x85, 0xc9,                         /* test %ecx,%ecx */
        0x0f, 0x44, 0xcb,                   /* cmove %ebx,%ecx */
        0x65, 0x67, 0x41, 0x89, 0x48, 0x04, /* mov %ecx,%gs:0x4(%r8d) */
        0x48, 0xc1, 0xe9, 0x03,             /* shr $0x3,%rcx */
        0x31, 0xc0,                         /* xor %eax,%eax */
        0x90,                               /* nop */
        0x90,                               /* nop */
        0x90,                               /* nop */
        0x90,                               /* nop */
        0x65, 0x67, 0x45, 0x0f, 0xb6, 0x14,
        0x01,       /* movzbl %gs:(%r9d,%eax,1),%r10d */
        0xeb, 0x0f, /* jmp 78 <start+0x78> */
        0x41, 0x81, 0xe3, 0xff, 0xff, 0x1f,
        0x00, /* and $0x1fffff,%r11d */
        0x4b, 0x8d, 0xa4, 0x1e, 0x00, 0x00,
        0x00, 0x40,                   /* lea 0x40000000(%r14,%r11,1),%rsp */
        0x4c, 0x8b, 0x64, 0x24, 0x10, /* mov 0x10(%rsp),%r12 */
        0x90,                         /* nop */
        0x90,                         /* nop */
        0x90,                         /* nop */
        0x41, 0x83, 0xe3, 0xe0,       /* and $0xffffffe0,%r11d */
        0x4d, 0x01, 0xf3,             /* add %r14,%r11 */
        0x41, 0xff, 0xd3,             /* call *%r11 */
        0x41, 0x5c,                   /* pop %r12 */
        0x5b,                         /* pop %rbx */
        0x5d,                         /* pop %rbp */
        0x41, 0x5b,                   /* pop %r11 */
        0x41, 0x83, 0xe3, 0xe0,       /* and $0xffffffe0,%r11d */
        0x4d, 0x01, 0xf3,             /* add %r14,%r11 */
        0x41, 0xff, 0xe3,             /* jmp *%r11 */
        0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, /* nopw 0x0(%rax,%rax,1) */
};

static_assert(sizeof(kFunction) % ucx_ifunc::sandbox::kBundleSize == 0,
              "whole bundles");

/* Verifies the sandbox images of the libraries @a paths, each whole and
 * again until 64 MiB of text went through, and prints MiB/s. */
int bench_libraries(int count, char **paths)
{
    using namespace ucx_ifunc::sandbox;
    std::vector<ucx_ifunc_info::EmbeddedImage> images;
    size_t                                     text = 0;
    for (int i = 0; i < count; ++i) {
        for (auto &image : ucx_ifunc_info::read_embedded_images(paths[i])) {
            auto d = ucx_ifunc::image_desc(image.bytes.data());
            if ((image.bytes.size() >= sizeof(d)) &&
                ucx_ifunc::image_is_sandboxed(d) && (d.machine == EM_X86_64)) {
                text += d.seg[UCP_IFUNC_SEG_TEXT].file_size;
                images.push_back(std::move(image));
            }
        }
    }
    if (images.empty()) {
        fprintf(stderr, "verify_bench: no x86-64 sandbox image in them\n");
        return 1;
    }
    const size_t rounds = std::max<size_t>(1, (size_t(64) << 20) / text);
    const auto   start  = std::chrono::steady_clock::now();
    for (size_t round = 0; round < rounds; ++round) {
        for (const auto &image : images) {
            auto               d = ucx_ifunc::image_desc(image.bytes.data());
            const VerifyResult r = verify_image(image.bytes.data(), d);
            if (!r.accepted) {
                fprintf(stderr, "verify_bench: %s refused: %s\n",
                        image.name.c_str(), r.reason.c_str());
                return 1;
            }
        }
    }
    const std::chrono::duration<double> took =
            std::chrono::steady_clock::now() - start;
    printf("verify_bench: %zu images, %.1f KiB of text (%.0f bytes each on "
           "average), verified %zu times: %.1f MiB/s\n",
           images.size(), double(text) / 1024, double(text) / images.size(),
           rounds, double(text) * rounds / (1 << 20) / took.count());
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    using namespace ucx_ifunc::sandbox;
    if ((argc > 1) && (strtoul(argv[1], nullptr, 0) == 0) &&
        (argv[1][0] != '0')) {
        return bench_libraries(argc - 1, argv + 1);
    }
    const size_t mib  = argc > 1 ? strtoul(argv[1], nullptr, 0) : 16;
    const int    runs = argc > 2 ? atoi(argv[2]) : 5;
    const size_t size = mib << 20;
    if (mib == 0 || runs <= 0 || size > kImageEnd - kImageOffset) {
        fprintf(stderr, "usage: %s [MIB (1..1023) [RUNS]]\n", argv[0]);
        return 2;
    }

    std::vector<uint8_t> text;
    text.reserve(size + sizeof(kFunction));
    while (text.size() + sizeof(kFunction) <= size) {
        text.insert(text.end(), kFunction, kFunction + sizeof(kFunction));
    }
    const VerifyInput in{text.data(), text.size(), 0, text.size(), 0};

    /* Both paths: the fast one (verify_x86_64) and every instruction
     * through Zydis (verify_x86_64_full). */
    const struct {
        const char *name;
        VerifyResult (*verify)(const VerifyInput &);
    } paths[] = {{"verify_x86_64", verify_x86_64},
                 {"verify_x86_64_full", verify_x86_64_full}};
    for (const auto &path : paths) {
        double best = 0;
        for (int i = 0; i < runs; ++i) {
            const auto         start = std::chrono::steady_clock::now();
            const VerifyResult r     = path.verify(in);
            const std::chrono::duration<double> took =
                    std::chrono::steady_clock::now() - start;
            if (!r.accepted) {
                fprintf(stderr, "verify_bench: %s refused the text: %s\n",
                        path.name, r.reason.c_str());
                return 1;
            }
            best = std::max(best,
                            double(text.size()) / (1 << 20) / took.count());
        }
        printf("verify_bench: %s: %.1f MiB of text, best of %d runs: %.1f "
               "MiB/s\n",
               path.name, double(text.size()) / (1 << 20), runs, best);
    }
    return 0;
}
