/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "register": finding NAME.so in UCX_IFUNC_LIB_DIR, loading it, and
 * looking up its payload functions and its code image. The source registers
 * explicitly; the target registers on the first message of a name. Each UCP
 * context has its own registry (context.h), holding its settings and the
 * libraries it loaded.
 */
#ifndef UCP_IFUNC_REGISTRY_H_
#define UCP_IFUNC_REGISTRY_H_

#include "ucp/ifunc/format/code_id.h"
#include "ucp/ifunc/base/config.h"

#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ucx_ifunc {

/* The two conventions of the payload functions, both by the ifunc
 * authors; a library follows the one whose bound function it defines.
 * The paper's: NAME_payload_get_max_size, and NAME_payload_init(payload,
 * payload_size, source_args, source_args_size) with the bound as the
 * payload size. The workshop slides': NAME_payload_bound, and
 * NAME_payload_init(source_args, source_args_size, payload, payload_size_p)
 * reporting the bytes it used. The bound functions share their prototype. */
enum class PayloadConvention { paper, slides };

using PayloadBoundFn = size_t (*)(void *source_args, size_t source_args_size);
using PaperPayloadInitFn  = int (*)(void *payload, size_t payload_size,
                                   void *source_args, size_t source_args_size);
using SlidesPayloadInitFn = int (*)(void *source_args, size_t source_args_size,
                                    void *payload, size_t *payload_size);

/* The suffix of the bound function of @a convention ("_payload_bound"). */
const char *payload_bound_suffix(PayloadConvention convention);

/* Which file a path named when it was looked at. */
struct FileIdentity {
    uint64_t device, inode, size, mtime_ns;

    bool operator==(const FileIdentity &other) const
    {
        return (device == other.device) && (inode == other.inode) &&
               (size == other.size) && (mtime_ns == other.mtime_ns);
    }
};

/* The code image of a library for another ISA, ready to go into the
 * messages of targets that run it (multi_isa.h). */
struct ForeignImage {
    uint16_t          machine;
    std::vector<char> frame_prefix; /* as Library::frame_prefix */
    CodeId            code_id;
};

/* A loaded ifunc library. Shared by every handle and by every linked code
 * image that resolved imports through it; unloaded with the last owner.
 * Code a target received is a Library too, with no file behind it (no
 * handle, no payload functions), so that it can be sent on (link.h). */
class Library {
public:
    Library(std::string name, std::string path, void *dl_handle);
    ~Library();
    Library(const Library &)            = delete;
    Library &operator=(const Library &) = delete;

    const std::string &name() const { return name_; }
    const std::string &path() const { return path_; }

    /* Looks @a symbol up in this library and its dependencies. */
    void *symbol(const char *symbol) const;

    /* Tells this library from every other one of the process, before and
     * after (message buffers keep its frame prefix, msg.cc). */
    const uint64_t serial;

    /* The payload functions (none for received code), bound at load for
     * the library's convention: only that one's payload_init is set, so
     * building a message looks nothing up. */
    PayloadConvention   convention          = PayloadConvention::slides;
    PayloadBoundFn      payload_bound       = nullptr;
    PaperPayloadInitFn  paper_payload_init  = nullptr;
    SlidesPayloadInitFn slides_payload_init = nullptr;

    bool has_payload_functions() const { return payload_bound != nullptr; }
    /* Registered from images in memory (ucp_ifunc_code_register): no file,
     * and by design no payload functions. */
    bool from_memory = false;
    /* Every frame of this ifunc starts with these bytes: the header
     * template (with the code id), the name and the code image. */
    std::vector<char> frame_prefix;
    /* The code id of its image (in frame_prefix's header too): the target's
     * "library" trust policy compares received code with it. */
    CodeId code_id;
    /* The code id of its bitcode image for this ISA (issue 32), zero if it
     * has none: the "library" policy accepts it as well as code_id's. */
    CodeId bitcode_code_id;
    /* Its images for the other ISAs it was built for (ucx-ifunc-cc
     * --target T1,T2...), in kShippableMachines order: native, or bitcode
     * where it has no native one or UCX_IFUNC_PREFER_BITCODE says so. */
    std::vector<ForeignImage> foreign_images;
    /* The file it was loaded from, as it was then. */
    FileIdentity file{};

private:
    std::string name_;
    std::string path_;
    void       *dl_handle_;
};

/* Where the images of a library are: the bytes of a symbol of NAME.so
 * (the symbol's size readable), or the image registered from memory that
 * NAME.so would hold under that symbol; nullptr if there is none. */
struct ImageBytes {
    const void *image     = nullptr;
    size_t      available = 0;
};
using ImageLookup = std::function<ImageBytes(const std::string &symbol)>;

/* The libraries and settings of one UCP context. Thread-safe. */
class Registry {
public:
    /* Reads the settings (config_read()). */
    Registry();

    /* Returns library @a name, loading it if no one holds it; the settings
     * are read again first, so UCX_IFUNC_LIB_DIR may change between loads.
     * @a name must be valid (ifunc_name_valid). Logs one line at
     * @a log_level and returns an error status if the library cannot be
     * loaded or is not an ifunc library. */
    ucs_status_t get(const char *name, ucs_log_level_t log_level,
                     std::shared_ptr<Library> *lib_p);

    /* A library of the images in @a images (ucp_ifunc_code_register): one
     * or more back to back, each as NAME.so holds it, at most one of a
     * kind (native, bitcode) per ISA, one for this process's ISA. They are
     * copied, checked and become the library's frames as a loaded
     * library's images do. Logs one line at @a log_level and returns
     * UCS_ERR_INVALID_PARAM (or UCS_ERR_EXCEEDS_LIMIT for a limit) if they
     * are not that. Never shared: each call makes a new library. */
    ucs_status_t from_images(const std::string &name, const void *images,
                             size_t images_size, ucs_log_level_t log_level,
                             std::shared_ptr<Library> *lib_p);

    /* Whether library @a name of UCX_IFUNC_LIB_DIR holds the code image
     * with @a code_id (the "library" trust policy). A NAME.so is loaded at
     * most once per version of the file: what a version holds is
     * remembered, and a file known to hold other code is not loaded again
     * to compare. UCS_OK with the library in @a lib_p (keep it while the
     * code is linked); else UCS_ERR_NO_ELEM (no loadable library) or
     * UCS_ERR_REJECTED (other code), and @a why says which. */
    ucs_status_t vouch(const std::string &name, const CodeId &code_id,
                       std::shared_ptr<Library> *lib_p, std::string *why);

    /* The identity of UCX_IFUNC_LIB_DIR/@a name.so now (a stat, nothing
     * loaded); false if there is no such file. */
    bool library_identity(const std::string &name, FileIdentity *identity);

    /* UCX_IFUNC_MAX_IMAGE_SIZE as this context last read it. */
    size_t max_image_size() const
    {
        return max_image_size_.load(std::memory_order_relaxed);
    }

    /* UCX_IFUNC_TRUST and UCX_IFUNC_TRUSTED_KEYS as they were when this
     * registry was made (when its context first used ifuncs). */
    unsigned           trust_kinds() const { return trust_kinds_; }
    size_t             max_linked_codes() const { return max_linked_codes_; }
    uint64_t           max_linked_memory() const { return max_linked_memory_; }
    const std::string &trusted_keys() const { return trusted_keys_; }
    /* UCX_IFUNC_MAX_AM_MESSAGE and UCX_IFUNC_MAX_AM_RNDV_MEMORY as they
     * were when this registry was made, 'auto' resolved. */
    size_t max_am_message() const { return max_am_message_; }
    size_t max_am_rndv_memory() const { return max_am_rndv_memory_; }
    double am_receive_timeout() const { return am_receive_timeout_; }
    /* UCX_IFUNC_JIT_TIMEOUT and UCX_IFUNC_JIT_MAX_MEMORY as they were when
     * this registry was made. */
    double jit_timeout() const { return jit_timeout_; }
    size_t jit_max_memory() const { return jit_max_memory_; }

    /* UCX_IFUNC_PERF_MAP as this context last read it. */
    bool perf_map() const { return perf_map_.load(std::memory_order_relaxed); }

    /* UCX_IFUNC_GDB_JIT as this context last read it. */
    bool gdb_jit() const { return gdb_jit_.load(std::memory_order_relaxed); }

    /* UCX_IFUNC_PRINT_COUNTERS as this context last read it. */
    bool print_counters() const
    {
        return print_counters_.load(std::memory_order_relaxed);
    }

private:
    /* Reads the settings again: a program may change them between
     * loads. */
    void         reread_config();
    ucs_status_t load(const std::string &name, ucs_log_level_t log_level,
                      std::shared_ptr<Library> *lib_p);
    /* Makes @a lib's frames from its images, which @a lookup finds by
     * their symbols in NAME.so: its own ISA's (native, or bitcode where it
     * has no native one or UCX_IFUNC_PREFER_BITCODE says so) and the other
     * ISAs'. UCS_ERR_NO_ELEM, without a log line, if it has no code for
     * this ISA; another error, logged, for an image that is not right. */
    ucs_status_t take_images(Library *lib, const ImageLookup &lookup,
                             ucs_log_level_t log_level) const;
    ucs_status_t load_foreign_images(Library *lib, const ImageLookup &lookup,
                                     ucs_log_level_t log_level) const;
    /* The bitcode image of @a lib for @a machine, checked, in @a image_p
     * (nothing there if the library has none for it). */
    ucs_status_t shippable_bitcode(const Library     &lib,
                                   const ImageLookup &lookup, uint16_t machine,
                                   ucs_log_level_t log_level,
                                   ForeignImage   *image_p) const;

    std::mutex lock_;
    /* Library directories already warned about (world-writable). */
    std::unordered_set<std::string> warned_dirs_;
    Config                          config_;
    const unsigned                  trust_kinds_;
    const std::string               trusted_keys_;
    const size_t                    max_linked_codes_;
    const uint64_t                  max_linked_memory_;
    const size_t                    max_am_message_;
    const size_t                    max_am_rndv_memory_;
    const double                    am_receive_timeout_;
    const double                    jit_timeout_;
    const size_t                    jit_max_memory_;
    std::atomic<size_t>             max_image_size_;
    std::atomic<bool>               perf_map_{false};
    std::atomic<bool>               gdb_jit_{true};
    std::atomic<bool>               print_counters_{false};
    std::unordered_map<std::string, std::weak_ptr<Library>> libraries_;
    /* What each version of a library held, by name: its file and the code
     * id of its image (vouch()). */
    struct KnownImage {
        FileIdentity file;
        CodeId       code_id;
        CodeId       bitcode_code_id;
    };
    static constexpr size_t                     kMaxKnownImages = 1024;
    std::unordered_map<std::string, KnownImage> known_images_;
};

} // namespace ucx_ifunc

/* What ucp_ifunc_h points to. */
struct ucp_ifunc {
    std::shared_ptr<ucx_ifunc::Library> library;
    ucp_context_h                       context;
    uint64_t                            state_id; /* ContextState::id */
};

#endif
