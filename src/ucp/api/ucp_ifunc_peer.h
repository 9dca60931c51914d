/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The default path: peers: ucp_ifunc_worker_*, ucp_ifunc_listen,
 * ucp_ifunc_peer_*. Part of <ucp/api/ucp_ifunc.h>, which includes every part:
 * programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_PEER_H_
#define UCP_API_UCP_IFUNC_PEER_H_

#include <ucp/api/ucp_ifunc_def.h>

BEGIN_C_DECLS

/**
 * @addtogroup UCP_IFUNC_PEER
 * @{
 *
 * The simple way to use ifuncs, and the fast one on every transport. A
 * target listens on an address and a source connects to it, one call each
 * (UCX's client/server connection, with peer error handling: no socket
 * code, no address or key to exchange). A source then sends a payload from
 * its own memory with an ifunc handle in one call; the library sends the
 * code once and names it by a short index afterwards, sends the image for
 * the ISA the target said it runs, and picks the path per peer: a channel
 * stored into directly where the peer's memory is mapped here (shared
 * memory), delivery by active message elsewhere (TCP and any other
 * network). The target runs the messages of all its peers inside
 * @ref ucp_ifunc_worker_progress.
 *
 * Use it unless a layer below is wanted for itself. The layers below stay
 * available: the paper's calls (@ref UCP_IFUNC_RAW, a frame put into a
 * buffer), channels (@ref UCP_IFUNC_CHANNEL) and delivery by active message
 * (@ref UCP_IFUNC_AM); this API is built on the last two. UCX 1.13
 * connects peers by address over TCP: keep @c tcp in @c UCX_TLS
 * (@c UCX_TLS=sm,tcp still moves messages by shared memory). The complete
 * programs: examples/hello (hello_target.c, hello_source.c).
 *
 * Set-up trusts nothing a peer sends: each set-up message counts only on
 * its peer's own endpoint and with its random token, a channel (shared
 * memory) is made only for a peer that proved it runs on this host and
 * is opened only by the side that connected, connections being set up are
 * limited (@c UCX_IFUNC_PEER_PENDING, @c _PER_ADDRESS) and dropped after
 * @c UCX_IFUNC_PEER_SETUP_TIMEOUT, and with @c UCX_IFUNC_PEER_KEYS a peer
 * must prove an Ed25519 key of the list (its own from
 * @c UCX_IFUNC_IDENTITY_KEY, @c ucx-ifunc-keygen) before anything of it
 * runs (docs/security.md, "Peers at the network edge").
 *
 * Threads: one thread at a time calls the functions of one ifunc worker
 * and of its peers and listeners, as for a UCP worker of
 * @c UCS_THREAD_MODE_SINGLE; @c NAME_main of a message this worker runs may
 * call @ref ucp_ifunc_peer_send_nbx (code that sends itself on), nothing
 * else of this group.
 */


/** @brief The ifunc side of one UCP worker: its peers, the messages it runs. */
typedef struct ucp_ifunc_worker *ucp_ifunc_worker_h;


/** @brief A listening address that accepts peers. */
typedef struct ucp_ifunc_listener *ucp_ifunc_listener_h;


/** @brief Another process this worker exchanges ifunc messages with. */
typedef struct ucp_ifunc_peer *ucp_ifunc_peer_h;


/**
 * @brief How messages travel to a peer.
 */
typedef enum {
    /** Chosen per peer: @ref UCP_IFUNC_PATH_CHANNEL where this side
     *  connected to the peer, the peer proved that it runs on this host,
     *  and its memory can be mapped here (shared memory in @c UCX_TLS,
     *  @c UCX_IFUNC_SHM_DIRECT=y), else @ref UCP_IFUNC_PATH_AM. */
    UCP_IFUNC_PATH_AUTO = 0,
    /** A channel the source stores into directly; a message larger than a
     *  slot goes as an active message. Where the ring cannot be mapped, the
     *  peer uses @ref UCP_IFUNC_PATH_AM, as peers never send puts
     *  (docs/design.md, "The default path", says why). */
    UCP_IFUNC_PATH_CHANNEL = 1,
    /** Active messages (@ref UCP_IFUNC_AM). */
    UCP_IFUNC_PATH_AM = 2
} ucp_ifunc_path_t;


/**
 * @brief The status @c peer_cb hears, and sends to the peer return, once
 *        the peer was closed by the process behind it.
 *
 * That process called @ref ucp_ifunc_peer_close or
 * @ref ucp_ifunc_worker_destroy, which say so to this side before their
 * endpoint goes: everything it sent before has arrived (and run, where
 * this side progressed), and nothing more comes. A process that died, or
 * whose endpoint failed, gives a failure status instead (for example
 * UCS_ERR_CONNECTION_RESET or UCS_ERR_ENDPOINT_TIMEOUT), never this one.
 */
#define UCP_IFUNC_PEER_CLOSED UCS_ERR_NOT_CONNECTED


/**
 * @brief Called when a peer connects to a listener, or when a peer fails
 *        or is closed by the other side.
 *
 * @param [in] peer    The peer. After a failure, a peer this process
 *                     connected (@ref ucp_ifunc_peer_connect) stays valid
 *                     until @ref ucp_ifunc_peer_close, and its sends fail
 *                     with @a status; a peer a listener accepted belongs
 *                     to the worker, which releases it when the callback
 *                     returns: do not use or close it after that. (The
 *                     worker releases accepted peers that did not fail
 *                     when it is destroyed; the application may close one
 *                     earlier.)
 * @param [in] status  UCS_OK for a new peer; @ref UCP_IFUNC_PEER_CLOSED
 *                     when the other side closed it cleanly; else why it
 *                     failed (for example UCS_ERR_CONNECTION_RESET when
 *                     the process died). Not called from
 *                     @ref ucp_ifunc_worker_destroy.
 * @param [in] arg     @ref ucp_ifunc_worker_params_t::peer_cb_arg.
 */
typedef void (*ucp_ifunc_peer_cb_t)(ucp_ifunc_peer_h peer, ucs_status_t status,
                                    void *arg);


/**
 * @brief Fields of @ref ucp_ifunc_worker_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_WORKER_FIELD_TARGET_ARGS = UCS_BIT(0), /**< target_args */
    UCP_IFUNC_WORKER_FIELD_AM_ID       = UCS_BIT(1), /**< am_id */
    UCP_IFUNC_WORKER_FIELD_PATH        = UCS_BIT(2), /**< path */
    UCP_IFUNC_WORKER_FIELD_PEER_CB     = UCS_BIT(3) /**< peer_cb, peer_cb_arg */
} ucp_ifunc_worker_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_worker_create.
 */
typedef struct ucp_ifunc_worker_params {
    /** Bits of @ref ucp_ifunc_worker_field_t. */
    uint64_t field_mask;
    /** Passed to @c NAME_main of every message this worker runs. Default
     *  NULL. */
    void *target_args;
    /** The first of the three active message ids the worker uses (messages,
     *  replies, connection set-up). Every peer must use the same. Default
     *  @ref UCP_IFUNC_AM_ID_DEFAULT. */
    unsigned am_id;
    /** The path of peers this worker connects to or accepts, unless a peer
     *  asks for another. Default @ref UCP_IFUNC_PATH_AUTO. */
    ucp_ifunc_path_t path;
    /** Called from @ref ucp_ifunc_worker_progress when a peer connects to
     *  one of this worker's listeners, and when a peer fails. Default none. */
    ucp_ifunc_peer_cb_t peer_cb;
    /** Passed to @a peer_cb. */
    void *peer_cb_arg;
} ucp_ifunc_worker_params_t;


/**
 * @brief Make a UCP worker an ifunc worker.
 *
 * Starts the ifunc active-message service on @a worker (which replaces
 * active message handlers of the three ids the worker uses), for peers on
 * endpoints of @a worker (@ref ucp_ifunc_peer_params_t::ep), and prepares
 * to poll the channels of its peers. @a context needs @c UCP_FEATURE_AM;
 * its ifunc state runs the messages.
 *
 * Network peers never reach @a context: listeners and peers connected by
 * address use a UCP context and worker the ifunc worker makes for itself,
 * with @c UCP_FEATURE_AM only (UCP then carries out no put, get or atomic
 * of a peer, whatever transport), and channels are mapped by a second one,
 * with @c UCP_FEATURE_RMA, restricted to the shared-memory transports of
 * @c UCX_TLS (only processes on this host reach it). Both read the UCX
 * configuration (@c UCX_* variables, @c UCX_TLS among them) now, as
 * @c ucp_config_read does, and take @a worker's thread mode. They are made
 * when first needed (a listener, a connect by address, a channel).
 * @ref ucp_ifunc_worker_query names the network one. UCX's own transports
 * still let a peer that reaches their ports do more than UCP allows
 * (docs/security.md, "What UCX itself lets a network peer do"): keep UCX
 * ports reachable from trusted hosts only.
 *
 * @param [in]  context    UCP context of @a worker.
 * @param [in]  worker     The worker; it must outlive the ifunc worker.
 * @param [in]  params     Parameters; NULL for the defaults.
 * @param [out] iworker_p  The ifunc worker; release it with
 *                         @ref ucp_ifunc_worker_destroy.
 *
 * @return UCS_OK                 @a *iworker_p is ready.
 * @return UCS_ERR_INVALID_PARAM  A bad argument or parameter.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of
 *                                @c ucp_worker_set_am_recv_handler.
 */
ucs_status_t ucp_ifunc_worker_create(ucp_context_h context, ucp_worker_h worker,
                                     const ucp_ifunc_worker_params_t *params,
                                     ucp_ifunc_worker_h *iworker_p);


/**
 * @brief Progress an ifunc worker: run what arrived, send what waits.
 *
 * Progresses the UCP worker (messages that came by active message run
 * there), runs the messages that are ready in the channels of its peers,
 * completes sends that waited for room (@ref ucp_ifunc_peer_send_nbx), and
 * reports new and failed peers to the worker's @c peer_cb. Never waits.
 * Call it instead of @c ucp_worker_progress.
 *
 * @param [in] iworker  The ifunc worker.
 *
 * @return The number of events: messages run, sends completed, and what
 *         @c ucp_worker_progress counted.
 */
unsigned ucp_ifunc_worker_progress(ucp_ifunc_worker_h iworker);


/**
 * @brief Fields of @ref ucp_ifunc_worker_attr_t.
 */
typedef enum {
    UCP_IFUNC_WORKER_ATTR_FIELD_NET_WORKER = UCS_BIT(0) /**< net_worker */
} ucp_ifunc_worker_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_worker_query reports.
 */
typedef struct ucp_ifunc_worker_attr {
    /** Bits of @ref ucp_ifunc_worker_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The UCP worker of the listeners and of the peers connected by
     *  address (its context has @c UCP_FEATURE_AM only), made now if it was
     *  not yet: an application may set active message handlers of its own
     *  there, for messages it sends on those peers' endpoints
     *  (@ref UCP_IFUNC_PEER_ATTR_FIELD_EP). @ref ucp_ifunc_worker_progress
     *  progresses it; it goes with the ifunc worker. */
    ucp_worker_h net_worker;
} ucp_ifunc_worker_attr_t;


/**
 * @brief Query an ifunc worker.
 *
 * @param [in]     iworker  The ifunc worker.
 * @param [in,out] attr     Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return other                  The network worker could not be made.
 */
ucs_status_t ucp_ifunc_worker_query(ucp_ifunc_worker_h       iworker,
                                    ucp_ifunc_worker_attr_t *attr);


/**
 * @brief Fields of @ref ucp_ifunc_source_attr_t.
 */
typedef enum {
    UCP_IFUNC_SOURCE_ATTR_FIELD_PEER = UCS_BIT(0), /**< peer */
    UCP_IFUNC_SOURCE_ATTR_FIELD_KEY  = UCS_BIT(1)  /**< key, key_verified */
} ucp_ifunc_source_attr_field_t;


/**
 * @brief Who sent the message that runs now: @ref ucp_ifunc_source_query.
 */
typedef struct ucp_ifunc_source_attr {
    /** Bits of @ref ucp_ifunc_source_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The peer that sent it. */
    ucp_ifunc_peer_h peer;
    /** Its Ed25519 public key, as it proved it at connect
     *  (@c UCX_IFUNC_PEER_KEYS); zeros where @a key_verified is 0. */
    uint8_t key[32];
    /** 1 if the peer proved @a key, else 0. */
    int key_verified;
} ucp_ifunc_source_attr_t;


/**
 * @brief Who sent the message whose @c NAME_main runs on this thread.
 *
 * Called from @c NAME_main of a message an ifunc worker runs in
 * @ref ucp_ifunc_worker_progress, this tells its source peer and the key
 * that peer proved at connect. The path that delivered the message names
 * its source, never the message itself, so no peer can pass its message
 * off as another's: a channel is one peer's alone, and every active
 * message of the default path comes with UCX's reply flag, which names
 * the endpoint it came on (the worker runs no active message without it).
 * The peer may be passed to @ref ucp_ifunc_peer_send_nbx, or the message
 * answered with @ref UCP_IFUNC_PEER_SOURCE.
 *
 * @param [in,out] attr  Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  @a attr is NULL.
 * @return UCS_ERR_NO_ELEM        No message of the default path runs on
 *                                this thread, or its source is no longer
 *                                a peer of the worker (closed).
 */
ucs_status_t ucp_ifunc_source_query(ucp_ifunc_source_attr_t *attr);


/**
 * @brief Destroy an ifunc worker.
 *
 * Safe in every state: never progressed (connection requests still
 * waiting in UCX), with peers being set up, and mid-message (sends queued
 * or in flight, receives under way). From the call on, connection
 * requests are rejected, an unknown endpoint's hello makes no peer, and
 * @c peer_cb is not called. The peers still open close together, as
 * @ref ucp_ifunc_peer_close closes one (each tells the other side,
 * which hears @ref UCP_IFUNC_PEER_CLOSED; what cannot be sent within a
 * peer's timeout is lost, counted in one warning for the whole worker);
 * so the call takes about the longest of its peers' closes, not their
 * sum. Then its listeners go (a connection request still waiting is
 * rejected) and its active message service stops. Handles of its peers
 * and listeners are invalid afterwards.
 *
 * @param [in] iworker  The ifunc worker; NULL is ignored.
 */
void ucp_ifunc_worker_destroy(ucp_ifunc_worker_h iworker);


/**
 * @brief Fields of @ref ucp_ifunc_listener_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_LISTENER_FIELD_ADDRESS = UCS_BIT(0) /**< address */
} ucp_ifunc_listener_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_listen.
 */
typedef struct ucp_ifunc_listener_params {
    /** Bits of @ref ucp_ifunc_listener_field_t. */
    uint64_t field_mask;
    /** Where to listen: "HOST:PORT", ":PORT" or "PORT" (every interface),
     *  HOST an IPv4 or IPv6 address or a name; port 0 lets the system pick
     *  one (@ref ucp_ifunc_listener_query tells it). Default "0". */
    const char *address;
} ucp_ifunc_listener_params_t;


/**
 * @brief Accept peers on an address.
 *
 * Peers that connect are accepted in @ref ucp_ifunc_worker_progress (with
 * peer error handling, so that a peer that dies fails alone); their
 * messages run in it from then on. The worker's @c peer_cb hears of each.
 *
 * @param [in]  iworker     The ifunc worker.
 * @param [in]  params      Parameters; NULL for the defaults.
 * @param [out] listener_p  The listener; release it with
 *                          @ref ucp_ifunc_listener_destroy.
 *
 * @return UCS_OK                 Listening.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, or an address that cannot
 *                                be parsed or resolved.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return UCS_ERR_BUSY           The port is taken.
 * @return other                  The error of @c ucp_listener_create.
 */
ucs_status_t ucp_ifunc_listen(ucp_ifunc_worker_h                 iworker,
                              const ucp_ifunc_listener_params_t *params,
                              ucp_ifunc_listener_h              *listener_p);


/**
 * @brief Fields of @ref ucp_ifunc_listener_attr_t.
 */
typedef enum {
    UCP_IFUNC_LISTENER_ATTR_FIELD_PORT = UCS_BIT(0) /**< port */
} ucp_ifunc_listener_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_listener_query reports.
 */
typedef struct ucp_ifunc_listener_attr {
    /** Bits of @ref ucp_ifunc_listener_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The port it listens on. */
    uint16_t port;
} ucp_ifunc_listener_attr_t;


/**
 * @brief Query a listener.
 *
 * @param [in]     listener  The listener.
 * @param [in,out] attr      Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 * @return other                  The error of @c ucp_listener_query.
 */
ucs_status_t ucp_ifunc_listener_query(ucp_ifunc_listener_h       listener,
                                      ucp_ifunc_listener_attr_t *attr);


/**
 * @brief Stop accepting peers. Peers already accepted stay.
 *
 * @param [in] listener  The listener; NULL is ignored.
 */
void ucp_ifunc_listener_destroy(ucp_ifunc_listener_h listener);


/**
 * @brief Fields of @ref ucp_ifunc_peer_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_PEER_FIELD_ADDRESS = UCS_BIT(0), /**< address */
    UCP_IFUNC_PEER_FIELD_EP      = UCS_BIT(1), /**< ep */
    UCP_IFUNC_PEER_FIELD_PATH    = UCS_BIT(2), /**< path */
    UCP_IFUNC_PEER_FIELD_TIMEOUT = UCS_BIT(3)  /**< timeout_ms */
} ucp_ifunc_peer_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_peer_connect, with exactly one of
 *        @a address and @a ep.
 */
typedef struct ucp_ifunc_peer_params {
    /** Bits of @ref ucp_ifunc_peer_field_t. */
    uint64_t field_mask;
    /** "HOST:PORT" of a peer's listener (@ref ucp_ifunc_listen). */
    const char *address;
    /** An endpoint to the peer the application made (for example from a
     *  worker address; use @c UCP_ERR_HANDLING_MODE_PEER so that a peer
     *  that dies fails alone). It must outlive the peer handle. The peer
     *  must be an ifunc worker with the same @c am_id. */
    ucp_ep_h ep;
    /** The path to this peer; default: the worker's. */
    ucp_ifunc_path_t path;
    /** How long to wait for the peer to listen and answer, in
     *  milliseconds; default 10 000. */
    unsigned timeout_ms;
} ucp_ifunc_peer_params_t;


/**
 * @brief Connect to a peer.
 *
 * Creates the endpoint (from @a address) or takes @a ep, tells the peer
 * this process's ISA and host, and progresses the worker until the peer
 * has answered with its own, the path is set up both ways, and both sides
 * have flushed their endpoints to each other (each says so), so that
 * either side may stop progressing for a while afterwards. Messages of the
 * peer that
 * arrive meanwhile run. An address where nothing listens yet (a target
 * still starting) is tried again every 50 ms until the timeout.
 *
 * @param [in]  iworker  The ifunc worker.
 * @param [in]  params   Parameters.
 * @param [out] peer_p   The peer; release it with @ref ucp_ifunc_peer_close.
 *
 * @return UCS_OK                 Connected, both ways.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, or an address that cannot
 *                                be parsed or resolved.
 * @return UCS_ERR_UNREACHABLE    No listener there (one log line).
 * @return UCS_ERR_TIMED_OUT      No answer in time, for example from a peer
 *                                that is not an ifunc worker, or of another
 *                                @c am_id (one log line).
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 * @return other                  The error of @c ucp_ep_create.
 */
ucs_status_t ucp_ifunc_peer_connect(ucp_ifunc_worker_h             iworker,
                                    const ucp_ifunc_peer_params_t *params,
                                    ucp_ifunc_peer_h              *peer_p);


/** @brief Called when a send of @ref ucp_ifunc_peer_send_nbx completes. */
typedef void (*ucp_ifunc_send_cb_t)(void *user_data, ucs_status_t status);


/**
 * @brief Called once with what became of a message of
 *        @ref ucp_ifunc_peer_send_nbx that asked for a delivery report
 *        (@ref ucp_ifunc_peer_send_params_t::report).
 *
 * The target reports on the peer's own endpoint, whichever path the
 * message took; a report counts only on the endpoint of the peer the
 * message was sent to. @a status:
 *
 * - UCS_OK: the target ran it (@c NAME_main returned).
 * - UCS_ERR_REJECTED: the target does not trust its code
 *   (@c UCX_IFUNC_TRUST).
 * - UCS_ERR_EXCEEDS_LIMIT: beyond a limit of the target: the code's size
 *   (@c UCX_IFUNC_MAX_IMAGE_SIZE), the code it keeps linked
 *   (@c UCX_IFUNC_MAX_LINKED_*), a sandboxed code's memory. (A message
 *   larger than the peer's @c UCX_IFUNC_MAX_AM_MESSAGE is refused by
 *   @ref ucp_ifunc_peer_send_nbx itself.)
 * - UCS_ERR_NOT_IMPLEMENTED: its code imports a symbol or needs a library
 *   the target does not have.
 * - UCS_ERR_NO_ELEM: it named code the target no longer holds (a
 *   reference after the target's ifunc state was released).
 * - UCS_ERR_UNSUPPORTED: code for another ISA, or a frame format the
 *   target does not read.
 * - UCS_ERR_INVALID_PARAM: a malformed message or code image.
 * - UCS_ERR_IO_ERROR: sandboxed code faulted or made a refused host call.
 * - UCS_ERR_TIMED_OUT: sandboxed code ran over the target's
 *   @c UCX_IFUNC_SANDBOX_BUDGET.
 * - UCS_ERR_MESSAGE_TRUNCATED: its data never arrived whole.
 * - UCS_ERR_NO_MEMORY: the target failed locally (memory, mappings).
 * - UCS_ERR_CANCELED: the peer was closed (@ref ucp_ifunc_peer_close, or
 *   @ref ucp_ifunc_worker_destroy) before the report came.
 * - the peer's failure (for example UCS_ERR_CONNECTION_RESET): it failed
 *   before the report came; or the send's own failure, where the message
 *   never reached the target.
 *
 * Called from @ref ucp_ifunc_worker_progress (or the call that closes the
 * peer); it may send, but must not close the peer nor destroy the worker.
 */
typedef void (*ucp_ifunc_report_cb_t)(void *user_data, ucs_status_t status);


/**
 * @brief Fields of @ref ucp_ifunc_peer_send_params_t that are set.
 */
typedef enum {
    UCP_IFUNC_PEER_SEND_FIELD_FLAGS     = UCS_BIT(0), /**< flags */
    UCP_IFUNC_PEER_SEND_FIELD_CALLBACK  = UCS_BIT(1), /**< cb */
    UCP_IFUNC_PEER_SEND_FIELD_USER_DATA = UCS_BIT(2), /**< user_data */
    UCP_IFUNC_PEER_SEND_FIELD_REPORT    = UCS_BIT(3)  /**< report */
} ucp_ifunc_peer_send_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_peer_send_nbx.
 */
typedef struct ucp_ifunc_peer_send_params {
    /** Bits of @ref ucp_ifunc_peer_send_field_t. */
    uint64_t field_mask;
    /** Bits of @ref ucp_ifunc_send_flags_t. Default: 0. */
    uint64_t flags;
    /** Called when the payload may be reused, if the send returned
     *  UCS_INPROGRESS: with UCS_OK once sent, UCS_ERR_CANCELED where
     *  @ref ucp_ifunc_peer_close (or @ref ucp_ifunc_worker_destroy) ended
     *  it unsent, else the peer's failure. Without it, a send never
     *  returns UCS_INPROGRESS: the library copies what the transport
     *  would still read. */
    ucp_ifunc_send_cb_t cb;
    /** Passed to @a cb and @a report. */
    void *user_data;
    /** Asks for a delivery report: called once with what became of the
     *  message (@ref ucp_ifunc_report_cb_t). The message then carries a
     *  report id (in a reference by active message, 4 bytes more and the
     *  reply flag; a message queued or sent before the peer said it holds
     *  the code carries its code). Without it, nothing is reported and
     *  nothing of it is sent. Default: none. */
    ucp_ifunc_report_cb_t report;
} ucp_ifunc_peer_send_params_t;


/**
 * @brief Send a payload to a peer, to be run by an ifunc there.
 *
 * The target runs @c NAME_main of @a ifunc_h's library on a copy of the
 * @a length bytes at @a payload (16-byte aligned there), once. The payload
 * functions of the library are not used: the payload is the caller's. The
 * code goes with the first messages until the peer has said it holds it;
 * later messages name it by a short index. Messages to one peer run in the
 * order they were sent when they take the same path (payloads that do not
 * fit a channel's slot take the active message path). @a ifunc_h may also
 * come from @ref ucp_ifunc_code_get (code that sends itself on), and the
 * call may be made from @c NAME_main.
 *
 * @c NAME_main, native or sandboxed, answers the message it runs in one
 * call with @ref UCP_IFUNC_PEER_SOURCE as @a peer, which names the peer
 * that sent that message, on whatever path it came (a request and its
 * reply: @c docs/guide.md, "Replying to the source").
 *
 * When the path has no room (a channel whose slots are all in use, or 256
 * active messages to the peer in flight), the send is queued, its payload
 * copied, and a later @ref ucp_ifunc_worker_progress sends it; at most
 * @c UCX_IFUNC_PEER_QUEUE sends wait per peer, and at most
 * @c UCX_IFUNC_PEER_QUEUE_BYTES bytes of messages wait or are in flight by
 * active message. Sandboxed code names the peer by a handle of
 * @ref ucp_ifunc_sandbox_peer_grant or @ref UCP_IFUNC_PEER_SOURCE, and its
 * sends are bounded as that call says. A message the target
 * refused for now (too many rendezvous messages waited there) is sent
 * again by progress; the callback hears only the final status.
 *
 * A returned UCS_OK says the message went (or waits to go), not that it
 * ran: what the target did with it, the source learns only by asking for
 * a delivery report (@ref ucp_ifunc_peer_send_params_t::report). A
 * message larger than the peer takes is refused here, at once: each side
 * tells the other its @c UCX_IFUNC_MAX_AM_MESSAGE at connect, and a
 * message that would go by active message (its payload, with its code
 * while the code goes with it) larger than the peer's is
 * UCS_ERR_EXCEEDS_LIMIT; one that fits a channel slot goes whatever its
 * size.
 *
 * @param [in] peer     The peer.
 * @param [in] ifunc_h  The ifunc.
 * @param [in] payload  The payload; may be NULL if @a length is 0.
 * @param [in] length   Its size in bytes.
 * @param [in] params   Parameters; NULL for the defaults.
 *
 * @return UCS_OK                 Sent or queued: the payload may be
 *                                reused.
 * @return UCS_INPROGRESS         (only with a callback) The payload is in
 *                                use until the callback.
 * @return UCS_ERR_NO_RESOURCE    The queue is full (in sends or bytes),
 *                                or 4 096 reports of this peer are
 *                                awaited (with a report), nothing sent:
 *                                progress and send again; from sandboxed
 *                                code, also its code's send rate used up.
 * @return UCS_ERR_UNSUPPORTED    The library has no code for the peer's
 *                                ISA.
 * @return UCS_ERR_EXCEEDS_LIMIT  The message is larger than the peer
 *                                takes by active message (its
 *                                @c UCX_IFUNC_MAX_AM_MESSAGE, which it told
 *                                at connect), nothing sent; from sandboxed
 *                                code, also its message's sends or hops
 *                                used up.
 * @return UCS_ERR_UNREACHABLE    @a peer is @ref UCP_IFUNC_PEER_SOURCE
 *                                and there is no source to answer: called
 *                                outside @c NAME_main of a message that
 *                                @ref ucp_ifunc_worker_progress runs (one
 *                                error line), or the source was closed
 *                                (one warning line, bounded per source);
 *                                nothing sent.
 * @return UCS_ERR_INVALID_PARAM  A bad argument (a report field without a
 *                                callback too).
 * @return UCS_ERR_CANCELED       The peer is being closed (a send from
 *                                code that runs during its close).
 * @return UCP_IFUNC_PEER_CLOSED  The other side closed the peer.
 * @return other                  The peer's failure (for example
 *                                UCS_ERR_CONNECTION_RESET), once it failed;
 *                                for @ref UCP_IFUNC_PEER_SOURCE also one
 *                                warning line (bounded per source). A
 *                                source that goes while its answer is in
 *                                flight, before this worker saw it go, is
 *                                not told: the answer is lost.
 */
ucs_status_t
ucp_ifunc_peer_send_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                        const void *payload, size_t length,
                        const ucp_ifunc_peer_send_params_t *params);


/**
 * @brief Send an ifunc to a peer once for each payload of an array.
 *
 * Sends @a count messages of @a ifunc_h, the payload of message @e i being
 * the @a length bytes at @a payloads + @e i * @a length, as that many
 * calls of @ref ucp_ifunc_peer_send_nbx would, in order, and stops at the
 * first message that does not go. One call for many messages: for
 * callers whose own call costs more than a send (a binding from another
 * language). Without callbacks, as the array may be reused on return.
 *
 * @param [in]  peer      The peer, or @ref UCP_IFUNC_PEER_SOURCE.
 * @param [in]  ifunc_h   The ifunc.
 * @param [in]  payloads  The payloads, back to back; may be NULL if
 *                        @a length is 0.
 * @param [in]  length    The size of each payload in bytes.
 * @param [in]  count     How many messages.
 * @param [out] sent_p    How many went (or wait to go), from the first.
 * @param [in]  params    Parameters; NULL for the defaults. Only
 *                        @ref UCP_IFUNC_PEER_SEND_FIELD_FLAGS.
 *
 * @return UCS_OK                 All @a count went or wait to go: the
 *                                array may be reused.
 * @return UCS_ERR_INVALID_PARAM  A bad argument: no @a sent_p, a callback
 *                                or report asked for, @a count times
 *                                @a length overflows; nothing sent.
 * @return other                  What @ref ucp_ifunc_peer_send_nbx
 *                                returned for message @a *sent_p, which
 *                                did not go, nor did those after it (for
 *                                UCS_ERR_NO_RESOURCE: progress and send
 *                                the rest).
 */
ucs_status_t
ucp_ifunc_peer_send_array_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                              const void *payloads, size_t length, size_t count,
                              size_t                             *sent_p,
                              const ucp_ifunc_peer_send_params_t *params);


/**
 * @brief Fields of @ref ucp_ifunc_peer_attr_t.
 */
typedef enum {
    UCP_IFUNC_PEER_ATTR_FIELD_PATH    = UCS_BIT(0), /**< path */
    UCP_IFUNC_PEER_ATTR_FIELD_MACHINE = UCS_BIT(1), /**< machine */
    UCP_IFUNC_PEER_ATTR_FIELD_STATUS  = UCS_BIT(2), /**< status */
    UCP_IFUNC_PEER_ATTR_FIELD_SENT_WITH_CODE =
            UCS_BIT(3),                                 /**< sent_with_code */
    UCP_IFUNC_PEER_ATTR_FIELD_SENT_BY_REF = UCS_BIT(4), /**< sent_by_ref */
    UCP_IFUNC_PEER_ATTR_FIELD_EP          = UCS_BIT(5), /**< ep */
    UCP_IFUNC_PEER_ATTR_FIELD_QUEUED      = UCS_BIT(6), /**< queued */
    UCP_IFUNC_PEER_ATTR_FIELD_KEY        = UCS_BIT(7), /**< key, key_verified */
    UCP_IFUNC_PEER_ATTR_FIELD_HELD_BYTES = UCS_BIT(8)  /**< held_bytes */
} ucp_ifunc_peer_attr_field_t;


/**
 * @brief What @ref ucp_ifunc_peer_query reports.
 */
typedef struct ucp_ifunc_peer_attr {
    /** Bits of @ref ucp_ifunc_peer_attr_field_t, the fields to fill. */
    uint64_t field_mask;
    /** The path chosen: @ref UCP_IFUNC_PATH_CHANNEL or
     *  @ref UCP_IFUNC_PATH_AM; @ref UCP_IFUNC_PATH_AUTO until the set-up
     *  has ended on both sides (a peer a listener accepted, just after
     *  @c peer_cb: it sends by active message till then). A side that
     *  sees a path other than AUTO may stop progressing for a while: the
     *  other side needs nothing more of it. */
    ucp_ifunc_path_t path;
    /** The peer's ISA as an ELF machine number. */
    uint16_t machine;
    /** UCS_OK, or why the peer failed. */
    ucs_status_t status;
    /** Messages sent with their code image. */
    uint64_t sent_with_code;
    /** Messages sent naming code the peer holds. */
    uint64_t sent_by_ref;
    /** The UCP endpoint to the peer. */
    ucp_ep_h ep;
    /** Sends waiting for room. */
    unsigned queued;
    /** The Ed25519 public key the peer proved at connect (where this
     *  worker has @c UCX_IFUNC_PEER_KEYS); zeros where @a key_verified is
     *  0. */
    uint8_t key[32];
    /** 1 if the peer proved @a key, else 0. */
    int key_verified;
    /** Bytes of the messages this side holds for the peer: queued, or in
     *  flight by active message until UCX ends their send; at most
     *  @c UCX_IFUNC_PEER_QUEUE_BYTES. */
    size_t held_bytes;
} ucp_ifunc_peer_attr_t;


/**
 * @brief Query a peer.
 *
 * @param [in]     peer  The peer.
 * @param [in,out] attr  Fields to fill (field_mask) and their values.
 *
 * @return UCS_OK                 The fields asked for are filled.
 * @return UCS_ERR_INVALID_PARAM  A bad argument.
 */
ucs_status_t ucp_ifunc_peer_query(ucp_ifunc_peer_h       peer,
                                  ucp_ifunc_peer_attr_t *attr);


/**
 * @brief Close a peer.
 *
 * Sends what is queued for it and waits for sends in flight (progressing
 * the worker, for at most the peer's timeout:
 * @ref ucp_ifunc_peer_params_t::timeout_ms), then, if the peer is up,
 * tells the other side that it closes and waits (at most 1 s, or the
 * timeout if shorter) for its answer, which needs the other side's
 * progress: the other side's @c peer_cb then hears
 * @ref UCP_IFUNC_PEER_CLOSED, after what this side sent (on a channel
 * too) has run, and its sends to the peer return it. A side that does
 * not answer in time may hear of a failure instead. Then the endpoint
 * closes, if the library made it (by force where sends did not drain, a
 * receive is under way, or the answer did not come).
 *
 * Sends that are still queued or in flight then (the other side did not
 * take them in time, or the peer failed) are lost: one warning says how
 * many (never one per send), and the callback of each that had one
 * (@ref ucp_ifunc_peer_send_params_t::cb) hears UCS_ERR_CANCELED. Sends
 * that were queued returned UCS_OK and have no callback: the warning
 * counts them. Messages the peer sent that arrive later are not run, and
 * a send to the peer from code that runs meanwhile returns
 * UCS_ERR_CANCELED. On the target, peers accepted by a listener are
 * closed by @ref ucp_ifunc_worker_destroy, or here.
 *
 * @param [in] peer  The peer; NULL is ignored.
 */
void ucp_ifunc_peer_close(ucp_ifunc_peer_h peer);

/** @} */

END_C_DECLS

#endif
