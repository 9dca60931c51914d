/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Shared by the test ifunc libraries (built with ucx-ifunc-cc) and the tests:
 * what each ifunc expects as source arguments and writes to target_args.
 */
#ifndef UCX_IFUNC_TEST_IFUNC_H_
#define UCX_IFUNC_TEST_IFUNC_H_

#include <stddef.h>
#include <stdint.h>

/* counter: adds the 8-byte payload to *(int64_t*)target_args. */

/* tally: writes to *(uint64_t*)target_args how often this copy of its code
 * ran (a static of the ifunc). */

/* reenter: calls callback(callback_arg), then counts in returned. */
struct reenter_args {
    void (*callback)(void *callback_arg);
    void    *callback_arg;
    uint64_t returned;
};

/* echo: copies source_args into the payload (payload_bound reserves
 * 2 * size + 64 bytes, so the frame always shrinks) and records on the
 * target what arrived. */
struct echo_result {
    uint64_t calls;
    uint64_t payload_size;
    uint64_t payload_hash; /* test_hash64() of the payload */
};

/* paper: payload functions in the paper's convention
 * (paper_payload_get_max_size, payload_init(payload, payload_size,
 * source_args, source_args_size)); the payload is the source arguments with
 * every byte complemented; main records it as echo does (echo_result). */

/* partial_paper, partial_slides: the payload is args->bound bytes, of which
 * payload_init writes only the first 8 (args->value); the slides' one
 * leaves *payload_size at the bound. main records it as echo does. */
struct partial_args {
    uint64_t bound;
    uint64_t value;
};

/* both_bounds: defines both conventions' bound functions (built with cc);
 * registering it must fail. */

/* stress: source_args is random bytes; the payload carries a sequence number
 * and a checksum of them, which main verifies on the target. */
struct stress_args {
    uint64_t       seq;
    size_t         size;
    const uint8_t *bytes;
};
struct stress_result {
    uint64_t executed;
    uint64_t corrupt;      /* checksum or size mismatch */
    uint64_t out_of_order; /* sequence number not the expected next */
    uint64_t next_seq;
    /* Optional (NULL: not kept): one run counter per sequence number in
     * [seen_base, seen_base + seen_count), for runs where messages may be
     * lost, so that order proves nothing but each must run at most once. */
    uint8_t *seen;
    uint64_t seen_base;
    uint64_t seen_count;
    uint64_t duplicate; /* runs of a sequence number that had run before */
    uint64_t unknown;   /* sequence numbers outside the seen range */
};

/* constructs: main runs one check per construct of shipped code and records
 * its outcome; the tests report each by name. */
enum construct_check {
    CHECK_STRING_LITERAL,
    CHECK_CONST_TABLE,
    CHECK_SWITCH_TABLE,
    CHECK_DATA_VARIABLE,
    CHECK_BSS_VARIABLE,
    CHECK_INTERNAL_FUNCTION_POINTER,
    CHECK_ABSOLUTE_POINTER_TABLE,
    CHECK_EXTERNAL_FUNCTION_TABLE,
    CHECK_LIBC_CALLS,
    CHECK_LIBM_CALLS,
    CHECK_ERRNO,
    CHECK_STDIO_DATA_IMPORT,
    CHECK_TARGET_GLOBAL,
    CHECK_ZLIB_CALL,
    CHECK_WEAK_UNDEFINED,
    CHECK_STACK_PROTECTED_BUFFER,
    CHECK_SECOND_SOURCE_FILE,
    CHECK_VARARGS,
    CHECK_PAYLOAD,
    CHECK_COUNT
};
struct constructs_result {
    uint64_t calls;
    uint64_t image_calls; /* earlier calls of this code image in the target
                             process, counted by a static of the ifunc */
    int32_t  passed[CHECK_COUNT]; /* 1 passed, 0 failed */
    int32_t  from_bitcode;        /* 1 when main was compiled from the library's
                              bitcode (UCX_IFUNC_BITCODE), 0 native */
};
/* Payload of constructs: made on the source by payload_init. */
struct constructs_payload {
    uint32_t
            zlib_crc; /* crc32 of constructs_zlib_input, computed on the source */
    int32_t selector; /* drives the switch and the tables */
    char    text[32];
};
#define CONSTRUCTS_ZLIB_INPUT "code moves to the data"

/* The global of the target program that the constructs ifunc updates. */
#define TEST_TARGET_GLOBAL ucx_ifunc_test_target_global

/* pattern: the payload is a sequence number (8 bytes) and then byte i of
 * the payload is (seq + i) & 0xff; main checks every byte and counts each
 * sequence number's runs. seq = stream << PATTERN_STREAM_SHIFT | index, so
 * that several sources of one target count apart (test/peer). */
#define PATTERN_STREAMS 8
#define PATTERN_STREAM_SHIFT 48
#define PATTERN_STREAM_CAPACITY (1u << 16)
struct pattern_result {
    uint64_t executed;
    uint64_t corrupt;   /* shorter than 8 bytes, or a byte off the pattern */
    uint64_t duplicate; /* runs of a sequence number that had run before */
    uint64_t unknown;   /* sequence numbers outside the counted range */
    uint64_t per_stream[PATTERN_STREAMS];
    /* PATTERN_STREAMS * PATTERN_STREAM_CAPACITY run counters */
    uint8_t *seen;
};

static inline uint8_t pattern_byte(uint64_t seq, size_t i)
{
    return (uint8_t)((seq + i) & 0xff);
}

/* relay: sends itself on to the other node (a peer of the default path)
 * until the hops are spent, then tells the other node to stop; the
 * payload is struct relay_payload, target_args struct relay_args. Built
 * against ucp_ifunc.h, so the peer handle is a void pointer here. */
struct relay_payload {
    uint64_t hops_left; /* sends still to make */
    uint64_t hops_done; /* runs so far */
    uint64_t checksum;  /* relay_mix() of the node of every run */
    uint64_t stop;      /* 1: the chain ended, record it and stop */
};
struct relay_args {
    void    *peer; /* ucp_ifunc_peer_h to the other node */
    uint64_t node;
    uint64_t runs;
    uint64_t sends;
    uint64_t failures; /* calls that failed in shipped code */
    uint64_t finished;
    uint64_t final_hops;
    uint64_t final_checksum;
};

static inline uint64_t relay_mix(uint64_t checksum, uint64_t node)
{
    checksum ^=
            node + 0x9e3779b97f4a7c15ull + (checksum << 6) + (checksum >> 2);
    return checksum * 0xff51afd7ed558ccdull;
}

/* One run of relay's chain on @a p: 0 when @a p ended it (recorded in
 * @a args), 1 when @a p is to be sent on; the last hop's @a p tells the
 * next node to stop, and the end is recorded here too. */
static inline int relay_step(struct relay_args *args, struct relay_payload *p)
{
    int send_on = !p->stop;
    if (send_on) {
        ++args->runs;
        ++p->hops_done;
        p->checksum = relay_mix(p->checksum, args->node);
        if (p->hops_left > 0) {
            --p->hops_left;
            return 1;
        }
        p->stop = 1;
    }
    args->finished       = 1;
    args->final_hops     = p->hops_done;
    args->final_checksum = p->checksum;
    return send_on;
}

/* sbx_relay: relay built for the sandbox. Its target_args lie in memory
 * the node granted to it (ucp_ifunc_sandbox_grant); probe != 0 makes the
 * host calls with one forged argument each (SBX_PROBE_*) and records
 * their statuses instead of relaying. */
struct sbx_relay_payload {
    struct relay_payload relay;
    uint64_t             probe;
};
enum {
    SBX_PROBE_PEER,     /* a peer handle that is no peer */
    SBX_PROBE_CODE,     /* a code handle the sandbox did not get */
    SBX_PROBE_PAYLOAD,  /* a payload outside the sandbox's memory */
    SBX_PROBE_LENGTH,   /* a payload running past its memory */
    SBX_PROBE_CODE_OUT, /* ucp_ifunc_code_get writing outside it */
    SBX_PROBE_CONTEXT,  /* ucp_ifunc_code_get with a context */
    SBX_PROBES
};
struct sbx_relay_args {
    struct relay_args relay;
    void             *host_code; /* a handle of the node's own, for a probe */
    uint64_t          probed;
    int64_t           probe_status[SBX_PROBES];
};

/* reply: answers the source of the message it runs with one call,
 * ucp_ifunc_peer_send_nbx(UCP_IFUNC_PEER_SOURCE, ...), of its own code
 * and the payload (of any size, struct reply_payload first) with value
 * incremented, while answers is not 0. The process it runs in exports
 * struct reply_record ifunc_test_reply (test/peer/ifunc_peer_node.cc). */
struct reply_payload {
    uint64_t value;   /* one more with each answer */
    uint64_t answers; /* answers still to make (one less each) */
    int64_t  key;     /* set by the one that answers: 1 + the first byte
                         of the key its source proved, 0 where it proved
                         none, -2 where ucp_ifunc_source_query failed */
    uint64_t reserved;
};
struct reply_record {
    uint64_t arrived;   /* messages with no answer to make */
    uint64_t value_sum; /* the sum of their values */
    int64_t  key;       /* the key field of the last of them */
    uint64_t answered;  /* answers sent (UCS_OK) */
    uint64_t failed;    /* answers that were not */
    int64_t  status;    /* the last of those answers' status */
};

/* sandboxed: built with ucx-ifunc-cc --sandbox, under two names (two
 * tenants). The payload is struct sandboxed_args; op says what main does:
 * the well-behaved message (SANDBOXED_ADD) or one way out of the sandbox.
 * main writes a struct sandboxed_result at args->result, or at target_args
 * when that is 0 (memory the target granted either way), and counts a run
 * there only when its op completed. */
enum sandboxed_op {
    SANDBOXED_ADD,       /* value += args->value */
    SANDBOXED_WRITE_AT,  /* *(uint64_t *)args->address = args->value */
    SANDBOXED_READ_AT,   /* value = *(uint64_t *)args->address */
    SANDBOXED_LOOP,      /* never returns */
    SANDBOXED_RECURSE,   /* args->value frames of recursion */
    SANDBOXED_TRAP,      /* ud2 */
    SANDBOXED_DIVIDE,    /* value = args->address / args->value */
    SANDBOXED_KEEP,      /* a static of the code = args->value */
    SANDBOXED_RECALL,    /* value = that static */
    SANDBOXED_CALL_AT,   /* calls the function at args->address */
    SANDBOXED_RETURN_TO, /* returns to args->address (its return address
                            overwritten) */
    SANDBOXED_WRITE_CODE /* writes args->value over its own code */
};
struct sandboxed_args {
    uint64_t op;
    uint64_t address;
    uint64_t value;
    uint64_t result;
};
struct sandboxed_result {
    uint64_t runs;
    uint64_t value;
};

/* sbx_sends: sandboxed code that sends from its target
 * (test_sandbox_paths.cc, SandboxSends). The payload is struct
 * sbx_sends_payload, target_args a struct sbx_sends_args in memory the
 * target granted to it; SBX_SENDS_DATA_OFFSET bytes after it, in the same
 * grant, the bytes a flood sends (a SBX_SENDS_COUNT payload first). */
enum sbx_sends_op {
    SBX_SENDS_COUNT, /* counts its run */
    SBX_SENDS_ON,    /* counts its run and sends itself, unchanged, to
                        peer: a message that never ends its chain */
    SBX_SENDS_FLOOD, /* sends count messages of length bytes to peer */
    SBX_SENDS_PROBE  /* sends itself as a COUNT to each of the count
                        handles at args->probes, in order */
};
struct sbx_sends_payload {
    uint64_t op;
    uint64_t peer; /* a handle of ucp_ifunc_sandbox_peer_grant, or
                      UCP_IFUNC_PEER_SOURCE */
    uint64_t count;
    uint64_t length;
};
#define SBX_SENDS_PROBES 16
struct sbx_sends_args {
    uint64_t runs;
    uint64_t sent;    /* sends that returned UCS_OK */
    uint64_t refused; /* sends that did not */
    int64_t  last_refusal;
    uint64_t probes[SBX_SENDS_PROBES]; /* handles a probe tries */
    int64_t  probe_status[SBX_SENDS_PROBES];
};
#define SBX_SENDS_DATA_OFFSET 4096

/* A 64-bit hash used by tests and ifuncs alike to compare payloads. */
static inline uint64_t test_hash64(const void *data, size_t size)
{
    const uint8_t *p = (const uint8_t *)data;
    uint64_t       h = 0x9e3779b97f4a7c15ull ^ size;
    size_t         i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t w;
        __builtin_memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    for (; i < size; ++i) {
        h = (h ^ p[i]) * 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 29;
    }
    return h;
}

#endif
