/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * UCX_IFUNC_* configuration, parsed by UCX's own configuration parser so
 * that UCX knows the variables (no "unused env variable" warning) and
 * reports misspelt ones. The README's configuration table lists them.
 */
#ifndef UCP_IFUNC_CONFIG_H_
#define UCP_IFUNC_CONFIG_H_

#include <cstddef>
#include <string>
#include <vector>

namespace ucx_ifunc {

/* The kinds of code a target runs (UCX_IFUNC_TRUST), as bits. */
enum TrustKind : unsigned {
    kTrustLibrary   = 1u << 0, /* byte-identical to its own NAME.so's image */
    kTrustSigned    = 1u << 1, /* signed by a key of UCX_IFUNC_TRUSTED_KEYS */
    kTrustAny       = 1u << 2, /* anything (the paper's behaviour) */
    kTrustSandboxed = 1u << 3  /* sandbox code the verifier accepts */
};

/* "library,signed" and the like, for log lines. */
std::string trust_kinds_text(unsigned kinds);

struct Config {
    std::string lib_dir;                              /* UCX_IFUNC_LIB_DIR */
    unsigned    trust = kTrustLibrary | kTrustSigned; /* UCX_IFUNC_TRUST */
    std::string trusted_keys;               /* UCX_IFUNC_TRUSTED_KEYS */
    size_t      max_image_size      = 0;    /* UCX_IFUNC_MAX_IMAGE_SIZE */
    size_t      max_linked_codes    = 0;    /* UCX_IFUNC_MAX_LINKED_CODES */
    size_t      max_linked_memory   = 0;    /* UCX_IFUNC_MAX_LINKED_MEMORY */
    size_t      max_am_message      = 0;    /* UCX_IFUNC_MAX_AM_MESSAGE */
    size_t      max_am_rndv_memory  = 0;    /* UCX_IFUNC_MAX_AM_RNDV_MEMORY */
    unsigned    peer_slots          = 16;   /* UCX_IFUNC_PEER_SLOTS */
    size_t      peer_slot_size      = 0;    /* UCX_IFUNC_PEER_SLOT_SIZE */
    unsigned    peer_queue          = 1024; /* UCX_IFUNC_PEER_QUEUE */
    size_t      peer_channel_memory = 0;    /* UCX_IFUNC_PEER_CHANNEL_MEMORY */
    unsigned    peer_pending        = 64;   /* UCX_IFUNC_PEER_PENDING */
    unsigned    peer_pending_per_address = 8; /* ..._PENDING_PER_ADDRESS */
    double      peer_setup_timeout = 10;      /* UCX_IFUNC_PEER_SETUP_TIMEOUT */
    std::string identity_key;                 /* UCX_IFUNC_IDENTITY_KEY */
    std::string peer_keys;                    /* UCX_IFUNC_PEER_KEYS */
    double      am_receive_timeout = 5;   /* UCX_IFUNC_AM_RECEIVE_TIMEOUT, s */
    double      sandbox_budget     = 0.1; /* UCX_IFUNC_SANDBOX_BUDGET, s */
    double      jit_timeout        = 1;   /* UCX_IFUNC_JIT_TIMEOUT, s */
    size_t      jit_max_memory     = 512ul << 20; /* UCX_IFUNC_JIT_MAX_MEMORY */
    bool        prefer_bitcode     = false;       /* UCX_IFUNC_PREFER_BITCODE */
    bool        shm_direct         = true;        /* UCX_IFUNC_SHM_DIRECT */
    bool        perf_map           = false;       /* UCX_IFUNC_PERF_MAP */
    bool        gdb_jit            = true;        /* UCX_IFUNC_GDB_JIT */
    bool        print_counters     = false;       /* UCX_IFUNC_PRINT_COUNTERS */

    /* What sandboxed code's sends and a peer's queue may take. */
    size_t   peer_queue_bytes  = 64ul << 20; /* UCX_IFUNC_PEER_QUEUE_BYTES */
    unsigned sandbox_hops      = 64;         /* UCX_IFUNC_SANDBOX_HOPS */
    unsigned sandbox_sends     = 16;         /* UCX_IFUNC_SANDBOX_SENDS */
    unsigned sandbox_send_rate = 10000; /* UCX_IFUNC_SANDBOX_SEND_RATE, /s */
};

/* Parses the environment now. Each UCP context keeps the values it read
 * (context.h); a context reads them again whenever it loads a library, so a
 * program may set the variables before it registers, as it may before
 * ucp_init(). */
Config config_read();

/* UCX_IFUNC_LIB_DIR now, the other variables not parsed: for checks
 * whether a file there changed. */
std::string config_lib_dir();

/* One UCX_IFUNC_* variable as UCX's parser knows it (ucx-ifunc-info -c). */
struct ConfigVariable {
    std::string name;          /* "UCX_IFUNC_LIB_DIR" */
    std::string value;         /* now, as the parser writes it back */
    std::string default_value; /* as registered */
    std::string doc;           /* its description, lines joined */
    bool        set;           /* set in the environment */
};

/* Every registered variable, in the order of the table, each parsed from
 * the environment now (a bad value reads as its default, with the
 * parser's error line). */
std::vector<ConfigVariable> config_variables();

/* UCX_IFUNC_SHM_DIRECT as of the last config_read() in any context. It is
 * process-wide because the send call gets only an endpoint, and UCP offers
 * no way from an endpoint to its context. */
bool config_shm_direct();

} // namespace ucx_ifunc

#endif
