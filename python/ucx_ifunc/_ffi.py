#
# Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
#
"""The C library, opened with cffi in ABI mode (nothing compiled).

Declares the parts of <ucp/api/ucp_ifunc.h> and <ucp/api/ucp.h> the package
calls, and opens libucp_ifunc.so.0 (which brings libucp.so.0 and
libucs.so.0 with it): the file $PY_UCX_IFUNC_LIBRARY names if it is set (an
uninstalled build tree: build/.libs/libucp_ifunc.so.0), else the installed
soname through the dynamic linker's search path.

The structures the package fills for UCX itself (ucp_params_t,
ucp_worker_params_t) are declared by their leading fields only, padded: UCX
reads no field its field_mask does not name. The ifunc structures are
declared whole, as the header has them.
"""

import os

import cffi

LIBRARY_ENV = "PY_UCX_IFUNC_LIBRARY"
SONAME = "libucp_ifunc.so.0"

ffi = cffi.FFI()
ffi.cdef(r"""
typedef int8_t ucs_status_t; /* an enum packed to one byte (UCS_S_PACKED) */
typedef struct ucp_context *ucp_context_h;
typedef struct ucp_worker *ucp_worker_h;
typedef struct ucp_ep *ucp_ep_h;
typedef struct ucp_ifunc *ucp_ifunc_h;
typedef struct ucp_ifunc_worker *ucp_ifunc_worker_h;
typedef struct ucp_ifunc_listener *ucp_ifunc_listener_h;
typedef struct ucp_ifunc_peer *ucp_ifunc_peer_h;

/* ucp.h, by their leading fields (see the module's docstring). */
typedef struct {
    uint64_t field_mask;
    uint64_t features;
    size_t   request_size;
    void     *request_init;
    void     *request_cleanup;
    uint64_t tag_sender_mask;
    int      mt_workers_shared;
    char     rest[512];
} ucp_params_t;
typedef struct {
    uint64_t field_mask;
    char     rest[512];
} ucp_worker_params_t;

void ucp_get_version(unsigned *major, unsigned *minor, unsigned *release);
ucs_status_t ucp_init_version(unsigned api_major, unsigned api_minor,
                              const ucp_params_t *params, const void *config,
                              ucp_context_h *context_p);
void ucp_cleanup(ucp_context_h context);
ucs_status_t ucp_worker_create(ucp_context_h context,
                               const ucp_worker_params_t *params,
                               ucp_worker_h *worker_p);
void ucp_worker_destroy(ucp_worker_h worker);
const char *ucs_status_string(ucs_status_t status);

/* ucs/debug/log_def.h: the va_list goes on to vsnprintf untouched. */
typedef int (*ucs_log_func_t)(const char *file, unsigned line,
                              const char *function, int level,
                              const void *comp_conf, const char *message,
                              void *ap);
void ucs_log_push_handler(ucs_log_func_t handler);
void ucs_log_pop_handler(void);
int vsnprintf(char *str, size_t size, const char *format, void *ap);

/* ucp_ifunc_def.h */
typedef struct ucp_ifunc_code_params {
    uint64_t    field_mask;
    const char *name;
    const void *images;
    size_t      images_size;
} ucp_ifunc_code_params_t;
ucs_status_t ucp_register_ifunc(ucp_context_h context, const char *ifunc_name,
                                ucp_ifunc_h *ifunc_p);
ucs_status_t ucp_ifunc_code_register(ucp_context_h context,
                                     const ucp_ifunc_code_params_t *params,
                                     ucp_ifunc_h *ifunc_p);
void ucp_deregister_ifunc(ucp_context_h context, ucp_ifunc_h ifunc_h);
void ucp_ifunc_context_release(ucp_context_h context);
const char *ucp_ifunc_get_version_string(void);

/* ucp_ifunc_context.h */
typedef struct ucp_ifunc_context_attr {
    uint64_t field_mask;
    uint64_t run_raw;
    uint64_t run_channel;
    uint64_t run_am;
    uint64_t run_peer;
    uint64_t bytes_received;
    uint64_t rejected_untrusted;
    uint64_t rejected_bad_frame;
    uint64_t rejected_bad_version;
    uint64_t rejected_bad_code;
    uint64_t rejected_wrong_isa;
    uint64_t rejected_missing_import;
    uint64_t rejected_too_large;
    uint64_t rejected_unknown_code;
    uint64_t rejected_busy;
    uint64_t rejected_lost;
    uint64_t rejected_other;
    uint64_t codes_linked;
    uint64_t codes_evicted;
    uint64_t codes_held;
    uint64_t code_memory;
    uint64_t rejected_sandbox_fault;
    uint64_t rejected_sandbox_budget;
} ucp_ifunc_context_attr_t;
ucs_status_t ucp_ifunc_context_query(ucp_context_h context,
                                     ucp_ifunc_context_attr_t *attr);

/* ucp_ifunc_peer.h */
typedef void (*ucp_ifunc_peer_cb_t)(ucp_ifunc_peer_h peer, ucs_status_t status,
                                    void *arg);
typedef struct ucp_ifunc_worker_params {
    uint64_t            field_mask;
    void               *target_args;
    unsigned            am_id;
    int                 path;
    ucp_ifunc_peer_cb_t peer_cb;
    void               *peer_cb_arg;
} ucp_ifunc_worker_params_t;
ucs_status_t ucp_ifunc_worker_create(ucp_context_h context, ucp_worker_h worker,
                                     const ucp_ifunc_worker_params_t *params,
                                     ucp_ifunc_worker_h *iworker_p);
unsigned ucp_ifunc_worker_progress(ucp_ifunc_worker_h iworker);
void ucp_ifunc_worker_destroy(ucp_ifunc_worker_h iworker);

typedef struct ucp_ifunc_listener_params {
    uint64_t    field_mask;
    const char *address;
} ucp_ifunc_listener_params_t;
ucs_status_t ucp_ifunc_listen(ucp_ifunc_worker_h iworker,
                              const ucp_ifunc_listener_params_t *params,
                              ucp_ifunc_listener_h *listener_p);
typedef struct ucp_ifunc_listener_attr {
    uint64_t field_mask;
    uint16_t port;
} ucp_ifunc_listener_attr_t;
ucs_status_t ucp_ifunc_listener_query(ucp_ifunc_listener_h listener,
                                      ucp_ifunc_listener_attr_t *attr);
void ucp_ifunc_listener_destroy(ucp_ifunc_listener_h listener);

typedef struct ucp_ifunc_peer_params {
    uint64_t    field_mask;
    const char *address;
    ucp_ep_h    ep;
    int         path;
    unsigned    timeout_ms;
} ucp_ifunc_peer_params_t;
ucs_status_t ucp_ifunc_peer_connect(ucp_ifunc_worker_h iworker,
                                    const ucp_ifunc_peer_params_t *params,
                                    ucp_ifunc_peer_h *peer_p);

typedef void (*ucp_ifunc_send_cb_t)(void *user_data, ucs_status_t status);
typedef void (*ucp_ifunc_report_cb_t)(void *user_data, ucs_status_t status);
typedef struct ucp_ifunc_peer_send_params {
    uint64_t              field_mask;
    uint64_t              flags;
    ucp_ifunc_send_cb_t   cb;
    void                 *user_data;
    ucp_ifunc_report_cb_t report;
} ucp_ifunc_peer_send_params_t;
/* payload as char *: cffi passes a bytes object's own buffer to it. */
ucs_status_t ucp_ifunc_peer_send_nbx(ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h,
                                     const char *payload, size_t length,
                                     const ucp_ifunc_peer_send_params_t *params);
ucs_status_t ucp_ifunc_peer_send_array_nbx(
        ucp_ifunc_peer_h peer, ucp_ifunc_h ifunc_h, const char *payloads,
        size_t length, size_t count, size_t *sent_p,
        const ucp_ifunc_peer_send_params_t *params);

typedef struct ucp_ifunc_peer_attr {
    uint64_t     field_mask;
    int          path;
    uint16_t     machine;
    ucs_status_t status;
    uint64_t     sent_with_code;
    uint64_t     sent_by_ref;
    ucp_ep_h     ep;
    unsigned     queued;
    uint8_t      key[32];
    int          key_verified;
    size_t       held_bytes;
} ucp_ifunc_peer_attr_t;
ucs_status_t ucp_ifunc_peer_query(ucp_ifunc_peer_h peer,
                                  ucp_ifunc_peer_attr_t *attr);
void ucp_ifunc_peer_close(ucp_ifunc_peer_h peer);
""")

# ucp.h
UCP_PARAM_FIELD_FEATURES = 1 << 0
UCP_PARAM_FIELD_MT_WORKERS_SHARED = 1 << 5
UCP_FEATURE_AM = 1 << 6
# ucp_ifunc_def.h
UCP_IFUNC_CODE_PARAM_FIELD_NAME = 1 << 0
UCP_IFUNC_CODE_PARAM_FIELD_IMAGES = 1 << 1
UCP_IFUNC_SEND_FLAG_WITH_CODE = 1 << 0
# ucp_ifunc_context.h
UCP_IFUNC_CONTEXT_ATTR_FIELDS = 0xf  # every group
# ucp_ifunc_peer.h
UCP_IFUNC_WORKER_FIELD_TARGET_ARGS = 1 << 0
UCP_IFUNC_WORKER_FIELD_PATH = 1 << 2
UCP_IFUNC_WORKER_FIELD_PEER_CB = 1 << 3
UCP_IFUNC_LISTENER_FIELD_ADDRESS = 1 << 0
UCP_IFUNC_LISTENER_ATTR_FIELD_PORT = 1 << 0
UCP_IFUNC_PEER_FIELD_ADDRESS = 1 << 0
UCP_IFUNC_PEER_FIELD_PATH = 1 << 2
UCP_IFUNC_PEER_FIELD_TIMEOUT = 1 << 3
UCP_IFUNC_PEER_SEND_FIELD_FLAGS = 1 << 0
UCP_IFUNC_PEER_SEND_FIELD_CALLBACK = 1 << 1
UCP_IFUNC_PEER_SEND_FIELD_USER_DATA = 1 << 2
UCP_IFUNC_PEER_SEND_FIELD_REPORT = 1 << 3
UCP_IFUNC_PEER_ATTR_FIELDS = 0x1ff & ~(1 << 5)  # all but ep

UCS_OK = 0
UCS_INPROGRESS = 1
UCS_LOG_LEVEL_WARN = 2


def _open():
    path = os.environ.get(LIBRARY_ENV)
    name = path if path else SONAME
    try:
        return ffi.dlopen(name)
    except OSError as err:
        if path:
            hint = ("%s=%s: no such library, or it does not load; point it "
                    "at libucp_ifunc.so.0 of a build (build/.libs) or unset "
                    "it" % (LIBRARY_ENV, path))
        else:
            hint = ("%s is not installed where the dynamic linker looks "
                    "(Debian: apt-get install libucp-ifunc0); for a build "
                    "tree set %s to its .libs/%s" % (SONAME, LIBRARY_ENV,
                                                     SONAME))
        raise ImportError("ucx_ifunc: cannot open the C library: %s (%s)"
                          % (hint, err)) from err


lib = _open()
