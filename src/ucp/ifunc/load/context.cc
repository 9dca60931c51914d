/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * States are shared pointers: a thread keeps the last one it used (its own
 * reference, checked against a generation counter that every release
 * bumps), so the common case takes no lock, and a state released while
 * another thread still holds it stays valid until that thread lets go.
 */
#include "ucp/ifunc/load/context.h"

#include "ucp/ifunc/base/api_guard.h"
#include "ucp/ifunc/format/frame.h"
#include "ucp/ifunc/sandbox/sandbox.h"
#include "ucp/ifunc/base/tls.h"

#include <ucs/debug/log_def.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

namespace ucx_ifunc {
namespace {

struct StateTable {
    std::mutex                                                       lock;
    std::unordered_map<ucp_context_h, std::shared_ptr<ContextState>> states;
    std::atomic<uint64_t> generation{0}; /* bumped by every release */
    uint64_t              next_id = 0;   /* of ContextState */
};

StateTable &state_table()
{
    static StateTable table;
    return table;
}

/* The state this thread used last. The lookup of every message reads only
 * the plain values (no destructor, so no guard on access); the owning
 * reference and the parked states live beside them. initial-exec: no
 * __tls_get_addr call on the per-message path (the library takes about a
 * hundred bytes of static TLS for it). */
struct LastState {
    ucp_context_h context    = nullptr;
    uint64_t      generation = UINT64_MAX;
    ContextState *state      = nullptr;
};
struct HeldStates {
    std::shared_ptr<ContextState> last; /* owns LastState::state */
    /* States this thread let go of while it ran messages: their code may
     * still be on its stack, so they are freed only once the outermost
     * message returns. */
    std::vector<std::shared_ptr<ContextState>> parked;
};
UCX_IFUNC_TLS LastState  last_state;
UCX_IFUNC_TLS HeldStates held_states;
/* Messages this thread is running: NAME_main may poll or release in turn. */
UCX_IFUNC_TLS unsigned        running    = 0;
UCX_IFUNC_TLS RunningMessage *innermost  = nullptr;
UCX_IFUNC_TLS bool            any_parked = false;

/* Lets go of this thread's reference to @a state: at once (outside any
 * lock, as the last reference unloads and unmaps), or, while a message
 * runs, when the outermost one returns. */
void let_go(std::shared_ptr<ContextState> state)
{
    if (!state || (running == 0) || (state == held_states.last)) {
        return; /* freed here, or still held */
    }
    auto &parked = held_states.parked;
    if (std::find(parked.begin(), parked.end(), state) == parked.end()) {
        /* One entry per state: a message that switches between contexts
         * again and again parks each of them once. */
        parked.push_back(std::move(state));
        any_parked = true;
    }
}

/* Removes the state of @a context from the table; the caller holds the
 * table's lock. The state itself goes when its last holder lets go. */
void forget(StateTable &table, ucp_context_h context)
{
    if (table.states.erase(context) > 0) {
        table.generation.fetch_add(1, std::memory_order_release);
    }
}

/* The state of @a context, created if needed; the caller holds the table's
 * lock. */
const std::shared_ptr<ContextState> &find_or_create(StateTable   &table,
                                                    ucp_context_h context)
{
    std::shared_ptr<ContextState> &state = table.states[context];
    if (!state) {
        state = std::make_shared<ContextState>(table.next_id++, context);
    }
    return state;
}

/* The state of @a context, created if needed, with one more registration
 * counted. */
std::shared_ptr<ContextState> hold_state(ucp_context_h context)
{
    StateTable                 &table = state_table();
    std::lock_guard<std::mutex> guard(table.lock);
    const auto                 &state = find_or_create(table, context);
    ++state->handles;
    return state;
}

/* Counts one registration of state @a state_id of @a context less. */
void drop_state(ucp_context_h context, uint64_t state_id)
{
    StateTable                 &table = state_table();
    std::lock_guard<std::mutex> guard(table.lock);
    auto                        it = table.states.find(context);
    if ((it == table.states.end()) || (it->second->id != state_id)) {
        return; /* that state was released before its registrations */
    }
    ContextState &state = *it->second;
    if ((state.handles > 0) && (--state.handles == 0) && !state.targeted &&
        state.code.empty()) {
        /* A context that only sends keeps nothing once its last
         * registration goes. */
        forget(table, context);
    }
}

/* The state of @a context if it has one; nothing is created. */
std::shared_ptr<ContextState> find_state(ucp_context_h context)
{
    StateTable                 &table = state_table();
    std::lock_guard<std::mutex> guard(table.lock);
    auto                        it = table.states.find(context);
    return (it != table.states.end()) ? it->second : nullptr;
}

CodeCounts code_counts(ContextState &state)
{
    CodeCache::Stats stats = state.code.stats();
    return CodeCounts{stats.linked, stats.evictions, stats.codes, stats.memory};
}

/* UCX_IFUNC_PRINT_COUNTERS: the counters of @a state, to stdout in one
 * write, so that the lines of several contexts do not mix. */
void print_counters(ContextState &state)
{
    char title[128];
    std::snprintf(title, sizeof(title),
                  "ucx-ifunc counters of UCP context %p (pid %d)",
                  static_cast<void *>(state.context), int(getpid()));
    std::string text =
            counters_text(state.counters.read(), code_counts(state), title);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

} // namespace

ContextState &target_state(ucp_context_h context)
{
    StateTable &table      = state_table();
    uint64_t    generation = table.generation.load(std::memory_order_acquire);
    LastState  &last       = last_state;
    if ((last.context == context) && (last.generation == generation)) {
        return *last.state;
    }

    std::shared_ptr<ContextState> previous = std::move(held_states.last);
    {
        std::lock_guard<std::mutex> guard(table.lock);
        const auto                 &state = find_or_create(table, context);
        state->targeted                   = true;
        held_states.last                  = state;
        last = {context, table.generation.load(std::memory_order_relaxed),
                state.get()};
    }
    let_go(std::move(previous));
    return *last.state;
}

std::shared_ptr<ContextState> share_target_state(ucp_context_h context)
{
    StateTable                 &table = state_table();
    std::lock_guard<std::mutex> guard(table.lock);
    const auto                 &state = find_or_create(table, context);
    state->targeted                   = true;
    return state;
}

UCX_IFUNC_TLS const void *delivering_from = nullptr;

namespace {
std::atomic<ReportHook> report_hook{nullptr};
} // namespace

void set_report_hook(ReportHook hook)
{
    report_hook.store(hook, std::memory_order_release);
}

void report_delivery_from(const void *source, uint16_t report,
                          ucs_status_t status)
{
    ReportHook hook = report_hook.load(std::memory_order_acquire);
    if ((hook != nullptr) && (source != nullptr)) {
        hook(source, report, status);
    }
}

void report_delivery(uint16_t report, ucs_status_t status)
{
    report_delivery_from(delivering_from, report, status);
}

RunningMessage::RunningMessage(ContextState *state_, const CodeUse *code_)
    : state(state_), code(code_), outer(innermost), source(delivering_from)
{
    if (code != nullptr) {
        /* Its own: a message it delivers in turn names its own source. */
        delivering_from = nullptr;
    }
    ++running;
    innermost = this;
}

const RunningMessage *RunningMessage::innermost_code()
{
    const RunningMessage *message = innermost;
    while ((message != nullptr) && (message->code == nullptr)) {
        message = message->outer;
    }
    return message;
}

RunningMessage::~RunningMessage()
{
    innermost = outer;
    if (code != nullptr) {
        delivering_from = source; /* for the next message of a batch */
    }
    if ((--running == 0) && any_parked) {
        /* Out of the list before they go: their destructors unload
         * libraries, which may run code that polls again. */
        std::vector<std::shared_ptr<ContextState>> parked;
        parked.swap(held_states.parked);
        any_parked = false;
    }
}

namespace {

/* The running message's code, if it runs in @a slot. */
const RunningMessage *message_in(const sandbox::Slot *slot)
{
    const RunningMessage *running = RunningMessage::innermost_code();
    return ((slot != nullptr) && (running != nullptr) &&
            (running->code->slot() == slot))
                   ? running
                   : nullptr;
}

/* ucp_ifunc_code_get for sandboxed code: its own code only (no context, no
 * parameters), the handle written to @a ifunc_p in its memory. The slot
 * keeps the handle (one per slot, which the sandbox cannot release), so
 * sandbox_code_handle() knows it. */
uint64_t sandboxed_code_get(uint64_t context, uint64_t params, uint64_t ifunc_p,
                            uint64_t, uint64_t, uint64_t)
{
    sandbox::Slot        *slot    = sandbox::running_slot();
    const RunningMessage *running = message_in(slot);
    uint64_t              host;
    if ((running == nullptr) || (context != 0) || (params != 0) ||
        !slot->check_range(ifunc_p, sizeof(ucp_ifunc_h), sandbox::kSlotWrite,
                           &host)) {
        ucs_debug("ifunc sandbox: ucp_ifunc_code_get(0x%lx, 0x%lx, 0x%lx) "
                  "refused: NULL context and parameters and a pointer into "
                  "the sandbox's memory are needed",
                  context, params, ifunc_p);
        return uint64_t(int64_t(UCS_ERR_INVALID_PARAM));
    }
    if (slot->host_data() == nullptr) {
        slot->host_data() = std::make_shared<ucp_ifunc>(ucp_ifunc{
                running->code->as_received(), running->state->context, 0});
    }
    ucp_ifunc_h handle = static_cast<ucp_ifunc_h>(slot->host_data().get());
    memcpy(reinterpret_cast<void *>(host), &handle, sizeof(handle));
    return UCS_OK;
}

/* Granted when the library loads, before any slot is made. */
[[maybe_unused]] const bool code_get_granted =
        (sandbox::grant_host_function("ucp_ifunc_code_get", sandboxed_code_get),
         true);

} // namespace

ucp_ifunc_h sandbox_code_handle(uint64_t value)
{
    sandbox::Slot *slot = sandbox::running_slot();
    if ((message_in(slot) == nullptr) || (value == 0) ||
        (value != reinterpret_cast<uintptr_t>(slot->host_data().get()))) {
        return nullptr;
    }
    return static_cast<ucp_ifunc_h>(slot->host_data().get());
}

} // namespace ucx_ifunc

using namespace ucx_ifunc;

namespace ucx_ifunc {

ucs_status_t register_ifunc(ucp_context_h context, const char *ifunc_name,
                            ucp_ifunc_h *ifunc_p)
{
    if ((context == nullptr) || (ifunc_p == nullptr)) {
        ucs_error("ucp_register_ifunc: context and ifunc_p must not be "
                  "NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    if (!ifunc_name_valid(ifunc_name)) {
        ucs_error("ucp_register_ifunc: invalid ifunc name '%.80s': use a "
                  "C identifier of 1 to %d characters",
                  ifunc_name ? ifunc_name : "(null)", UCP_IFUNC_NAME_MAX);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Counted before the library loads, so that a concurrent release
     * of the last other handle cannot take the state away meanwhile. */
    auto                          ifunc = std::make_unique<ucp_ifunc>();
    std::shared_ptr<ContextState> state = hold_state(context);
    ifunc->context                      = context;
    ifunc->state_id                     = state->id;
    ucs_status_t status = state->registry.get(ifunc_name, UCS_LOG_LEVEL_ERROR,
                                              &ifunc->library);
    if (status != UCS_OK) {
        drop_state(context, state->id);
        return status;
    }
    *ifunc_p = ifunc.release(); /* owned by the caller until deregistered */
    return UCS_OK;
}

void deregister_ifunc(ucp_ifunc_h ifunc_h)
{
    std::unique_ptr<ucp_ifunc> release(ifunc_h);
    if (ifunc_h != nullptr) {
        drop_state(ifunc_h->context, ifunc_h->state_id);
    }
}

ucs_status_t code_register(ucp_context_h                  context,
                           const ucp_ifunc_code_params_t *params,
                           ucp_ifunc_h                   *ifunc_p)
{
    constexpr uint64_t kNeeded =
            UCP_IFUNC_CODE_PARAM_FIELD_NAME | UCP_IFUNC_CODE_PARAM_FIELD_IMAGES;
    if ((context == nullptr) || (params == nullptr) || (ifunc_p == nullptr)) {
        ucs_error("ucp_ifunc_code_register: context, params and ifunc_p must "
                  "not be NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    if (params->field_mask != kNeeded) {
        ucs_error("ucp_ifunc_code_register: field_mask 0x%llx; set exactly "
                  "UCP_IFUNC_CODE_PARAM_FIELD_NAME and "
                  "UCP_IFUNC_CODE_PARAM_FIELD_IMAGES",
                  static_cast<unsigned long long>(params->field_mask));
        return UCS_ERR_INVALID_PARAM;
    }
    if (!ifunc_name_valid(params->name)) {
        ucs_error("ucp_ifunc_code_register: invalid ifunc name '%.80s': use "
                  "a C identifier of 1 to %d characters",
                  params->name ? params->name : "(null)", UCP_IFUNC_NAME_MAX);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((params->images == nullptr) && (params->images_size != 0)) {
        ucs_error("ucp_ifunc_code_register: ifunc '%s': images is NULL but "
                  "images_size is %zu",
                  params->name, params->images_size);
        return UCS_ERR_INVALID_PARAM;
    }

    /* Counted first, as in ucp_register_ifunc. */
    auto                          ifunc = std::make_unique<ucp_ifunc>();
    std::shared_ptr<ContextState> state = hold_state(context);
    ifunc->context                      = context;
    ifunc->state_id                     = state->id;
    ucs_status_t status                 = state->registry.from_images(
                            params->name, params->images, params->images_size,
                            UCS_LOG_LEVEL_ERROR, &ifunc->library);
    if (status != UCS_OK) {
        drop_state(context, state->id);
        return status;
    }
    *ifunc_p = ifunc.release(); /* until ucp_deregister_ifunc */
    return UCS_OK;
}

ucs_status_t code_get(ucp_context_h                  context,
                      const ucp_ifunc_code_params_t *params,
                      ucp_ifunc_h                   *ifunc_p)
{
    uint64_t    mask = (params != nullptr) ? params->field_mask : 0;
    const char *name =
            (mask & UCP_IFUNC_CODE_PARAM_FIELD_NAME) ? params->name : nullptr;
    if ((ifunc_p == nullptr) ||
        (mask & ~uint64_t(UCP_IFUNC_CODE_PARAM_FIELD_NAME)) ||
        ((mask & UCP_IFUNC_CODE_PARAM_FIELD_NAME) &&
         ((context == nullptr) || !ifunc_name_valid(name)))) {
        ucs_error("ucp_ifunc_code_get: need ifunc_p, and with a name a "
                  "context and a valid ifunc name; no unknown field");
        return UCS_ERR_INVALID_PARAM;
    }

    auto                          ifunc = std::make_unique<ucp_ifunc>();
    std::shared_ptr<Library>      library;
    std::shared_ptr<ContextState> state;
    if (name == nullptr) {
        const RunningMessage *running = RunningMessage::innermost_code();
        if ((running == nullptr) ||
            ((context != nullptr) && (running->state->context != context))) {
            ucs_debug("ucp_ifunc_code_get: no message of this context "
                      "runs on this thread (call it from NAME_main)");
            return UCS_ERR_NO_ELEM;
        }
        library = running->code->as_received();
        context = running->state->context;
    }
    /* Counted before the code is looked up, as in ucp_register_ifunc. */
    state = hold_state(context);
    if (name != nullptr) {
        library = state->code.as_received(name);
        if (library == nullptr) {
            /* Or a library this context registered: a source may send
             * on what it registered the same way. */
            state->registry.get(name, UCS_LOG_LEVEL_DEBUG, &library);
        }
        if (library == nullptr) {
            drop_state(context, state->id);
            ucs_debug("ucp_ifunc_code_get: this context holds no code of "
                      "ifunc '%s'",
                      name);
            return UCS_ERR_NO_ELEM;
        }
    }
    ifunc->library  = std::move(library);
    ifunc->context  = context;
    ifunc->state_id = state->id;
    *ifunc_p        = ifunc.release(); /* until ucp_deregister_ifunc */
    return UCS_OK;
}

ucs_status_t context_query(ucp_context_h             context,
                           ucp_ifunc_context_attr_t *attr)
{
    if ((context == nullptr) || (attr == nullptr)) {
        ucs_error("ucp_ifunc_context_query: context and attr must not be "
                  "NULL");
        return UCS_ERR_INVALID_PARAM;
    }
    CounterValues values;
    CodeCounts    codes = {};
    if (std::shared_ptr<ContextState> state = find_state(context)) {
        values = state->counters.read();
        codes  = code_counts(*state);
    }
    uint64_t mask = attr->field_mask;
    if (mask & UCP_IFUNC_CONTEXT_ATTR_FIELD_RUN) {
        attr->run_raw     = values.runs[size_t(RunPath::raw)];
        attr->run_channel = values.runs[size_t(RunPath::channel)];
        attr->run_am      = values.runs[size_t(RunPath::am)];
        attr->run_peer    = values.runs[size_t(RunPath::peer)];
    }
    if (mask & UCP_IFUNC_CONTEXT_ATTR_FIELD_BYTES) {
        attr->bytes_received = values.bytes_received;
    }
    if (mask & UCP_IFUNC_CONTEXT_ATTR_FIELD_REJECTED) {
        auto rejected = [&](Reject reason) {
            return values.rejected[size_t(reason)];
        };
        attr->rejected_untrusted      = rejected(Reject::untrusted);
        attr->rejected_bad_frame      = rejected(Reject::bad_frame);
        attr->rejected_bad_version    = rejected(Reject::bad_version);
        attr->rejected_bad_code       = rejected(Reject::bad_code);
        attr->rejected_wrong_isa      = rejected(Reject::wrong_isa);
        attr->rejected_missing_import = rejected(Reject::missing_import);
        attr->rejected_too_large      = rejected(Reject::too_large);
        attr->rejected_unknown_code   = rejected(Reject::unknown_code);
        attr->rejected_busy           = rejected(Reject::busy);
        attr->rejected_lost           = rejected(Reject::lost);
        attr->rejected_other          = rejected(Reject::other);
        attr->rejected_sandbox_fault  = rejected(Reject::sandbox_fault);
        attr->rejected_sandbox_budget = rejected(Reject::sandbox_budget);
    }
    if (mask & UCP_IFUNC_CONTEXT_ATTR_FIELD_CODES) {
        attr->codes_linked  = codes.linked;
        attr->codes_evicted = codes.evicted;
        attr->codes_held    = codes.held;
        attr->code_memory   = codes.memory;
    }
    return UCS_OK;
}

void context_release(ucp_context_h context)
{
    std::shared_ptr<ContextState> state;
    {
        StateTable                 &table = state_table();
        std::lock_guard<std::mutex> guard(table.lock);
        auto                        it = table.states.find(context);
        if (it == table.states.end()) {
            return;
        }
        state = std::move(it->second);
        forget(table, context);
    }
    if (state->registry.print_counters()) {
        print_counters(*state);
    }
    if (held_states.last == state) {
        last_state = {};
        let_go(std::move(held_states.last));
    }
    /* Unloads and unmaps here, outside the lock, unless another thread
     * (or a message this thread is running) still holds the state. */
}

} // namespace ucx_ifunc
