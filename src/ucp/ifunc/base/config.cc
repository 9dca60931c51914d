/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 */
#include "ucp/ifunc/base/config.h"

#include "ucp/ifunc/base/ucx_compat.h"

#include <ucs/config/parser.h>
#include <ucs/sys/string.h>
#include <ucs/debug/log_def.h>

#include <cstdlib>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>

namespace ucx_ifunc {
namespace {

const char *trust_names[] = {"library", "signed", "any", "sandboxed", nullptr};
static_assert((kTrustLibrary == 1) && (kTrustSigned == 2) && (kTrustAny == 4) &&
                      (kTrustSandboxed == 8),
              "trust_names follows the bits");

struct RawConfig {
    char    *lib_dir;
    unsigned trust;
    char    *trusted_keys;
    unsigned max_linked_codes;
    size_t   max_linked_memory;
    size_t   max_image_size;
    size_t   max_am_message;
    size_t   max_am_rndv_memory;
    unsigned peer_slots;
    size_t   peer_slot_size;
    unsigned peer_queue;
    size_t   peer_channel_memory;
    unsigned peer_pending;
    unsigned peer_pending_per_address;
    double   peer_setup_timeout;
    char    *identity_key;
    char    *peer_keys;
    size_t   peer_queue_bytes;
    double   am_receive_timeout;
    double   sandbox_budget;
    double   jit_timeout;
    size_t   jit_max_memory;
    int      prefer_bitcode;
    int      shm_direct;
    int      perf_map;
    int      gdb_jit;
    int      print_counters;
    unsigned sandbox_hops;
    unsigned sandbox_sends;
    unsigned sandbox_send_rate;
};

/* LIB_DIR first: config_lib_dir() reads it alone. */
ucs_config_field_t config_table[] = {
        {"LIB_DIR", "",
         "Directory of ifunc libraries: NAME.so is loaded from here, on the\n"
         "source by ucp_register_ifunc() and on the target when a message of "
         "an\n"
         "unknown ifunc arrives.",
         offsetof(RawConfig, lib_dir), UCS_CONFIG_TYPE_STRING},

        {"TRUST", "library,signed",
         "Code a target runs, a list of: 'library' (the received image is\n"
         "byte-identical to the image of UCX_IFUNC_LIB_DIR/NAME.so here),\n"
         "'signed' (signed by a key of UCX_IFUNC_TRUSTED_KEYS; no NAME.so "
         "needed),\n"
         "'any' (whatever a peer sends, as in the ifunc paper: only for "
         "closed\n"
         "clusters), 'sandboxed' (code built with ucx-ifunc-cc --sandbox that "
         "the\n"
         "target's verifier accepts, confined to its own 4 GiB slot; x86-64 "
         "Linux\n"
         "with FSGSBASE). A UCP context reads it when it first uses ifuncs.",
         offsetof(RawConfig, trust), UCS_CONFIG_TYPE_BITMAP(trust_names)},

        {"TRUSTED_KEYS", "",
         "Public key files (from ucx-ifunc-keygen), separated by ':', whose\n"
         "signatures the 'signed' policy accepts. A UCP context reads them "
         "when\n"
         "it first uses ifuncs.",
         offsetof(RawConfig, trusted_keys), UCS_CONFIG_TYPE_STRING},

        {"MAX_IMAGE_SIZE", "256MB",
         "Largest address space one received code image may ask for (code,\n"
         "constants, data and bss). Larger images are rejected.",
         offsetof(RawConfig, max_image_size), UCS_CONFIG_TYPE_MEMUNITS},

        {"MAX_LINKED_CODES", "1024",
         "Most code images one UCP context keeps linked. Beyond it the oldest\n"
         "one that no source was told about is unloaded once no message runs\n"
         "it. Code sources are told about is at most 64 images per source and\n"
         "half of this limit in all, so new code always links. A context "
         "reads\n"
         "it when it first uses ifuncs.",
         offsetof(RawConfig, max_linked_codes), UCS_CONFIG_TYPE_UINT},

        {"MAX_LINKED_MEMORY", "1GB",
         "Most memory the code images one UCP context keeps linked may take\n"
         "(their mappings and the received copy of each), with the same\n"
         "eviction as UCX_IFUNC_MAX_LINKED_CODES.",
         offsetof(RawConfig, max_linked_memory), UCS_CONFIG_TYPE_MEMUNITS},

        {"MAX_AM_MESSAGE", "auto",
         "Largest active message a target's ucp_ifunc_am service takes; a\n"
         "larger one is refused before anything is allocated for it (its\n"
         "source's send completes with UCS_ERR_EXCEEDS_LIMIT when it came by\n"
         "rendezvous). 'auto': 1/256 of this machine's memory, at least 16MB\n"
         "and at most 1GB.",
         offsetof(RawConfig, max_am_message), UCS_CONFIG_TYPE_MEMUNITS},

        {"MAX_AM_RNDV_MEMORY", "auto",
         "Most memory the receive buffers of active messages that arrive by\n"
         "rendezvous may take at once, per ucp_ifunc_am service; further\n"
         "messages wait until buffers are free (at least one message is\n"
         "always received). 'auto': 4 times UCX_IFUNC_MAX_AM_MESSAGE.",
         offsetof(RawConfig, max_am_rndv_memory), UCS_CONFIG_TYPE_MEMUNITS},

        {"PEER_SLOTS", "16",
         "Slots of the channel a target gives each peer on shared memory\n"
         "(ucp_ifunc_listen, ucp_ifunc_peer_connect): messages that may be\n"
         "in flight from it at once.",
         offsetof(RawConfig, peer_slots), UCS_CONFIG_TYPE_UINT},

        {"PEER_SLOT_SIZE", "1028KB",
         "Bytes per slot of a peer's channel: the largest message, code\n"
         "included, that goes by channel; larger ones go by active message.\n"
         "The ring takes UCX_IFUNC_PEER_SLOTS times this of shared memory per\n"
         "peer on this host, touched as messages use it. The default takes a\n"
         "1 MiB payload with its header.",
         offsetof(RawConfig, peer_slot_size), UCS_CONFIG_TYPE_MEMUNITS},

        {"PEER_QUEUE", "1024",
         "Sends to one peer that may wait for room (a channel whose slots are\n"
         "all in use), their payloads copied; beyond it\n"
         "ucp_ifunc_peer_send_nbx answers UCS_ERR_NO_RESOURCE.",
         offsetof(RawConfig, peer_queue), UCS_CONFIG_TYPE_UINT},

        {"PEER_CHANNEL_MEMORY", "512MB",
         "Shared memory the channels of one ifunc worker's peers may take\n"
         "together (UCX_IFUNC_PEER_SLOTS times UCX_IFUNC_PEER_SLOT_SIZE "
         "each);\n"
         "a peer beyond it is sent to by active message.",
         offsetof(RawConfig, peer_channel_memory), UCS_CONFIG_TYPE_MEMUNITS},

        {"PEER_PENDING", "64",
         "Connections one ifunc worker lets set up at once: a connection\n"
         "request beyond it is rejected, and so is one beyond\n"
         "UCX_IFUNC_PEER_PENDING_PER_ADDRESS from one remote address.",
         offsetof(RawConfig, peer_pending), UCS_CONFIG_TYPE_UINT},

        {"PEER_PENDING_PER_ADDRESS", "8",
         "Connections from one remote IP address that one ifunc worker lets\n"
         "set up at once.",
         offsetof(RawConfig, peer_pending_per_address), UCS_CONFIG_TYPE_UINT},

        {"PEER_SETUP_TIMEOUT", "10s",
         "How long a peer that connected to this worker may take to set up\n"
         "(and to authenticate, with UCX_IFUNC_PEER_KEYS); then it is dropped.",
         offsetof(RawConfig, peer_setup_timeout), UCS_CONFIG_TYPE_TIME},

        {"IDENTITY_KEY", "",
         "Secret key file (PREFIX.key of ucx-ifunc-keygen) with which an "
         "ifunc\n"
         "worker proves who it is to peers that list its public key.",
         offsetof(RawConfig, identity_key), UCS_CONFIG_TYPE_STRING},

        {"PEER_KEYS", "",
         "Public key files (PREFIX.pub of ucx-ifunc-keygen), separated by "
         "':'.\n"
         "When set, an ifunc worker sets up only peers that prove, at "
         "connect,\n"
         "that they hold the secret key of one of them (and proves its own,\n"
         "UCX_IFUNC_IDENTITY_KEY); nothing of another peer is run, queued or\n"
         "logged.",
         offsetof(RawConfig, peer_keys), UCS_CONFIG_TYPE_STRING},

        {"PEER_QUEUE_BYTES", "64m",
         "Bytes of messages one peer may hold that wait for room or are in\n"
         "flight by active message, whatever their number; beyond it\n"
         "ucp_ifunc_peer_send_nbx answers UCS_ERR_NO_RESOURCE.",
         offsetof(RawConfig, peer_queue_bytes), UCS_CONFIG_TYPE_MEMUNITS},
        {"AM_RECEIVE_TIMEOUT", "5s",
         "How long a ucp_ifunc_am service waits for the data of one message\n"
         "that arrives by rendezvous. Then it gives the receive up (the\n"
         "message is dropped, with a warning) and takes its source for dead:\n"
         "UCX does not complete a receive from a source that died on an\n"
         "endpoint without error handling, and its slot would stay taken.\n"
         "Raise it where one message takes longer to transfer.",
         offsetof(RawConfig, am_receive_timeout), UCS_CONFIG_TYPE_TIME},

        {"SANDBOX_BUDGET", "100ms",
         "How long sandboxed code may run one message. A watchdog thread "
         "ends\n"
         "a message that runs longer (it is counted and warned about once "
         "per\n"
         "code); the target and other code keep running.",
         offsetof(RawConfig, sandbox_budget), UCS_CONFIG_TYPE_TIME},

        {"JIT_TIMEOUT", "1s",
         "How long a target may take to compile one bitcode image for its\n"
         "CPU (wall-clock and CPU time of the compile, which runs in a child\n"
         "process). A longer compile is stopped and the image refused for\n"
         "good (UCS_ERR_EXCEEDS_LIMIT) when the child had at least half of\n"
         "it on a CPU, else only that message (UCS_ERR_TIMED_OUT): a\n"
         "bitcode bomb costs at most this.",
         offsetof(RawConfig, jit_timeout), UCS_CONFIG_TYPE_TIME},

        {"JIT_MAX_MEMORY", "512MB",
         "Most memory the compile of one bitcode image may add to the\n"
         "compiling process (its address space, the object it makes and the\n"
         "linked code); beyond it the image is refused for good\n"
         "(UCS_ERR_EXCEEDS_LIMIT). The linked code counts toward\n"
         "UCX_IFUNC_MAX_LINKED_MEMORY as well. \"inf\": no limit of address\n"
         "space (the object is still capped at 1 GiB); \"auto\": 512MB.",
         offsetof(RawConfig, jit_max_memory), UCS_CONFIG_TYPE_MEMUNITS},

        {"PREFER_BITCODE", "n",
         "Which code a source sends a target when its library carries both a\n"
         "native image and a bitcode image for the target's ISA: 'n', the\n"
         "native image (bitcode only for an ISA without one); 'y', the\n"
         "bitcode, which the target compiles for its own CPU. Read when a\n"
         "library is loaded.",
         offsetof(RawConfig, prefer_bitcode), UCS_CONFIG_TYPE_BOOL},

        {"SANDBOX_HOPS", "64",
         "How many times sandboxed code may send a message on, one message\n"
         "to the next: the sends of a message that many hops from the host\n"
         "that sent the first are refused (UCS_ERR_EXCEEDS_LIMIT).",
         offsetof(RawConfig, sandbox_hops), UCS_CONFIG_TYPE_UINT},

        {"SANDBOX_SENDS", "16",
         "Sends one message of sandboxed code may make; more are refused\n"
         "(UCS_ERR_EXCEEDS_LIMIT).",
         offsetof(RawConfig, sandbox_sends), UCS_CONFIG_TYPE_UINT},

        {"SANDBOX_SEND_RATE", "10000",
         "Sends per second one sandboxed code (one code id in one UCP\n"
         "context) may make, in bursts of up to as many; more are refused\n"
         "(UCS_ERR_NO_RESOURCE).",
         offsetof(RawConfig, sandbox_send_rate), UCS_CONFIG_TYPE_UINT},

        {"SHM_DIRECT", "y",
         "When the target's buffer is mapped into this process (shared "
         "memory,\n"
         "ucp_rkey_ptr()), store frames directly instead of through "
         "ucp_put_nbx().",
         offsetof(RawConfig, shm_direct), UCS_CONFIG_TYPE_BOOL},

        {"PERF_MAP", "n",
         "Write each code image this process links to /tmp/perf-PID.map\n"
         "(address, size, ifunc name and code id), so that perf report names\n"
         "the shipped code instead of showing bare addresses.",
         offsetof(RawConfig, perf_map), UCS_CONFIG_TYPE_BOOL},

        {"GDB_JIT", "y",
         "Describe each code image this process links to GDB through its JIT\n"
         "interface (function names and addresses), so that a backtrace\n"
         "through shipped code names its functions. Costs a few hundred bytes\n"
         "per linked image and nothing per message.",
         offsetof(RawConfig, gdb_jit), UCS_CONFIG_TYPE_BOOL},

        {"PRINT_COUNTERS", "n",
         "Print the counters of a UCP context's ifunc state to stdout when\n"
         "ucp_ifunc_context_release() releases it: messages run per path,\n"
         "bytes received, messages dropped per reason, code linked and\n"
         "evicted (ucp_ifunc_context_query() reads them at any time).",
         offsetof(RawConfig, print_counters), UCS_CONFIG_TYPE_BOOL},

        {nullptr, nullptr, nullptr, 0, {}}};

ucs_config_global_list_entry_t config_entry;
std::mutex                     config_lock;
std::atomic<bool>              shm_direct{true};

/* Parse once when the library loads: this marks our variables as used
 * before the application creates its first worker, which is when UCX warns
 * about unused ones. Also make the table known to UCX's list of tables. */
__attribute__((constructor)) void config_load()
{
    config_entry.name   = "IFUNC";
    config_entry.prefix = "IFUNC_";
    config_entry.table  = config_table;
    config_entry.size   = sizeof(RawConfig);
    ucs_list_add_tail(&ucs_config_global_list, &config_entry.list);
    config_read();
}

__attribute__((destructor)) void config_unload()
{
    ucs_list_del(&config_entry.list);
}

/* 'auto' limits of the AM service. A message whose buffer takes 1/256 of
 * memory, and four of them in flight (1/64), leave the machine to its
 * work while a peer sends the largest messages the target takes; 16MB at
 * least, so that small machines still take what the benchmarks send (1
 * MiB and more), and 1GB at most, as no ifunc payload needs more in one
 * message. */
void resolve_am_limits(Config *config)
{
    constexpr size_t kMin = 16ul << 20, kMax = 1ul << 30;
    if (config->max_am_message == UCS_MEMUNITS_AUTO) {
        long   pages           = sysconf(_SC_PHYS_PAGES);
        long   page            = sysconf(_SC_PAGESIZE);
        size_t share           = ((pages > 0) && (page > 0))
                                         ? size_t(pages) / 256 * size_t(page)
                                         : kMin;
        config->max_am_message = std::min(std::max(share, kMin), kMax);
    }
    if (config->max_am_rndv_memory == UCS_MEMUNITS_AUTO) {
        config->max_am_rndv_memory = 4 * config->max_am_message;
    }
}

} // namespace

namespace {

/* One variable of the table, parsed alone: a bad value (the parser logs it)
 * leaves that one at its default, not the others. The caller holds
 * config_lock. */
class OneVariable {
public:
    explicit OneVariable(const ucs_config_field_t *field) : table_{*field, {}}
    {
        ucs_config_global_list_entry_t entry = config_entry;
        entry.table                          = table_;
        if (compat::config_fill(&raw_, &entry, "UCX_") != UCS_OK) {
            ucs_config_parser_set_default_values(&raw_, table_);
        }
    }
    ~OneVariable() { ucs_config_parser_release_opts(&raw_, table_); }
    OneVariable(const OneVariable &)            = delete;
    OneVariable &operator=(const OneVariable &) = delete;

    const RawConfig &raw() const { return raw_; }

    /* The value as UCX's parser prints it. */
    std::string text()
    {
        char value[256] = "";
        ucs_config_parser_get_value(&raw_, table_, table_[0].name, value,
                                    sizeof(value));
        return value;
    }

private:
    ucs_config_field_t table_[2];
    RawConfig          raw_{};
};

/* Parses the one variable of @a field into @a config. The caller holds
 * config_lock. */
void read_field(const ucs_config_field_t *field, Config *config)
{
    OneVariable      one(field);
    const RawConfig &raw = one.raw();
    if (field->offset == offsetof(RawConfig, lib_dir)) {
        config->lib_dir = raw.lib_dir ? raw.lib_dir : "";
    } else if (field->offset == offsetof(RawConfig, trust)) {
        config->trust = raw.trust;
    } else if (field->offset == offsetof(RawConfig, max_linked_codes)) {
        config->max_linked_codes = raw.max_linked_codes;
    } else if (field->offset == offsetof(RawConfig, max_linked_memory)) {
        config->max_linked_memory = raw.max_linked_memory;
    } else if (field->offset == offsetof(RawConfig, trusted_keys)) {
        config->trusted_keys = raw.trusted_keys ? raw.trusted_keys : "";
    } else if (field->offset == offsetof(RawConfig, max_image_size)) {
        config->max_image_size = raw.max_image_size;
    } else if (field->offset == offsetof(RawConfig, max_am_message)) {
        config->max_am_message = raw.max_am_message;
    } else if (field->offset == offsetof(RawConfig, max_am_rndv_memory)) {
        config->max_am_rndv_memory = raw.max_am_rndv_memory;
    } else if (field->offset == offsetof(RawConfig, peer_slots)) {
        config->peer_slots = raw.peer_slots;
    } else if (field->offset == offsetof(RawConfig, peer_slot_size)) {
        config->peer_slot_size = raw.peer_slot_size;
    } else if (field->offset == offsetof(RawConfig, peer_queue)) {
        config->peer_queue = raw.peer_queue;
    } else if (field->offset == offsetof(RawConfig, peer_channel_memory)) {
        config->peer_channel_memory = raw.peer_channel_memory;
    } else if (field->offset == offsetof(RawConfig, peer_pending)) {
        config->peer_pending = raw.peer_pending;
    } else if (field->offset == offsetof(RawConfig, peer_pending_per_address)) {
        config->peer_pending_per_address = raw.peer_pending_per_address;
    } else if (field->offset == offsetof(RawConfig, peer_setup_timeout)) {
        config->peer_setup_timeout = raw.peer_setup_timeout;
    } else if (field->offset == offsetof(RawConfig, identity_key)) {
        config->identity_key = raw.identity_key ? raw.identity_key : "";
    } else if (field->offset == offsetof(RawConfig, peer_keys)) {
        config->peer_keys = raw.peer_keys ? raw.peer_keys : "";
    } else if (field->offset == offsetof(RawConfig, peer_queue_bytes)) {
        config->peer_queue_bytes = raw.peer_queue_bytes;
    } else if (field->offset == offsetof(RawConfig, sandbox_hops)) {
        config->sandbox_hops = raw.sandbox_hops;
    } else if (field->offset == offsetof(RawConfig, sandbox_sends)) {
        config->sandbox_sends = raw.sandbox_sends;
    } else if (field->offset == offsetof(RawConfig, sandbox_send_rate)) {
        config->sandbox_send_rate = raw.sandbox_send_rate;
    } else if (field->offset == offsetof(RawConfig, am_receive_timeout)) {
        config->am_receive_timeout = raw.am_receive_timeout;
    } else if (field->offset == offsetof(RawConfig, sandbox_budget)) {
        config->sandbox_budget = raw.sandbox_budget;
    } else if (field->offset == offsetof(RawConfig, jit_timeout)) {
        config->jit_timeout = raw.jit_timeout;
    } else if (field->offset == offsetof(RawConfig, jit_max_memory)) {
        config->jit_max_memory = raw.jit_max_memory;
    } else if (field->offset == offsetof(RawConfig, prefer_bitcode)) {
        config->prefer_bitcode = (raw.prefer_bitcode != 0);
    } else if (field->offset == offsetof(RawConfig, shm_direct)) {
        config->shm_direct = (raw.shm_direct != 0);
    } else if (field->offset == offsetof(RawConfig, perf_map)) {
        config->perf_map = (raw.perf_map != 0);
    } else if (field->offset == offsetof(RawConfig, print_counters)) {
        config->print_counters = (raw.print_counters != 0);
    } else {
        config->gdb_jit = (raw.gdb_jit != 0);
    }
}

} // namespace

Config config_read()
{
    std::lock_guard<std::mutex> guard(config_lock);
    Config                      config;
    for (const ucs_config_field_t *field = config_table; field->name != nullptr;
         ++field) {
        read_field(field, &config);
    }
    resolve_am_limits(&config);
    shm_direct.store(config.shm_direct, std::memory_order_relaxed);
    return config;
}

std::string config_lib_dir()
{
    std::lock_guard<std::mutex> guard(config_lock);
    Config                      config;
    read_field(&config_table[0], &config);
    return config.lib_dir;
}

std::vector<ConfigVariable> config_variables()
{
    std::lock_guard<std::mutex> guard(config_lock);
    std::vector<ConfigVariable> variables;
    for (ucs_config_field_t *field = config_table; field->name != nullptr;
         ++field) {
        OneVariable one(field);

        ConfigVariable variable;
        variable.name          = std::string("UCX_IFUNC_") + field->name;
        variable.value         = one.text();
        variable.default_value = field->dfl_value;
        for (const char *c = field->doc; *c != '\0'; ++c) {
            variable.doc += (*c == '\n') ? ' ' : *c;
        }
        variable.set = (getenv(variable.name.c_str()) != nullptr);
        variables.push_back(std::move(variable));
    }
    return variables;
}

std::string trust_kinds_text(unsigned kinds)
{
    std::string text;
    for (unsigned bit = 0; trust_names[bit] != nullptr; ++bit) {
        if (kinds & (1u << bit)) {
            text += (text.empty() ? "" : ",") + std::string(trust_names[bit]);
        }
    }
    return text.empty() ? "(none)" : text;
}

bool config_shm_direct()
{
    return shm_direct.load(std::memory_order_relaxed);
}

} // namespace ucx_ifunc
