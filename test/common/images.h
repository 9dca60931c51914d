/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The code images of a built ifunc library, read out of it as a program
 * that registers code from memory (ucp_ifunc_code_register) would have
 * them: the bytes of each image symbol ucx-ifunc-cc embeds in NAME.so.
 */
#ifndef UCX_IFUNC_TEST_IMAGES_H_
#define UCX_IFUNC_TEST_IMAGES_H_

#include "ucp/ifunc/format/image.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace test {

/* One image: its symbol's name and bytes (its descriptor's image_size). */
struct LibraryImage {
    std::string       symbol;
    std::vector<char> bytes;

    ucp_ifunc_image_desc_t desc() const
    {
        ucp_ifunc_image_desc_t d;
        std::memcpy(&d, bytes.data(), sizeof(d));
        return d;
    }
};

/* The images of ifunc @a name in the library at @a path, this ISA's
 * native image first, then the other ISAs' native and every bitcode
 * image, in a fixed order; empty if the library does not load. The
 * library is closed again before this returns. */
inline std::vector<LibraryImage> library_images(const std::string &path,
                                                const std::string &name)
{
    std::vector<LibraryImage> images;
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        return images;
    }
    std::vector<std::string> symbols = {UCP_IFUNC_IMAGE_SYMBOL + name};
    for (unsigned machine :
         {62u /* x86-64 */, 183u /* aarch64 */, 21u /* ppc64el */}) {
        std::string suffix = ".em" + std::to_string(machine);
        symbols.push_back(UCP_IFUNC_IMAGE_SYMBOL + name + suffix);
        symbols.push_back(UCP_IFUNC_BITCODE_SYMBOL + name + suffix);
    }
    std::vector<const void *> seen; /* this ISA's image has two names */
    for (const std::string &symbol : symbols) {
        const void *address = dlsym(handle, symbol.c_str());
        Dl_info     info;
        void       *sym = nullptr;
        if ((address == nullptr) ||
            (std::find(seen.begin(), seen.end(), address) != seen.end()) ||
            !dladdr1(address, &info, &sym, RTLD_DL_SYMENT) ||
            (sym == nullptr)) {
            continue;
        }
        size_t                 size = static_cast<ElfW(Sym) *>(sym)->st_size;
        ucp_ifunc_image_desc_t d;
        if (size < sizeof(d)) {
            continue;
        }
        std::memcpy(&d, address, sizeof(d));
        if (d.image_size <= size) {
            size = d.image_size;
        }
        seen.push_back(address);
        const char *bytes = static_cast<const char *>(address);
        images.push_back({symbol, std::vector<char>(bytes, bytes + size)});
    }
    dlclose(handle);
    return images;
}

/* @a images back to back, as ucp_ifunc_code_register takes them. */
inline std::vector<char> back_to_back(const std::vector<LibraryImage> &images)
{
    std::vector<char> all;
    for (const LibraryImage &image : images) {
        all.insert(all.end(), image.bytes.begin(), image.bytes.end());
    }
    return all;
}

} // namespace test

#endif
