/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Types and calls every path shares: the API version, ifunc handles,
 * registration, send flags. Part of <ucp/api/ucp_ifunc.h>, which includes
 * every part: programs include that.
 */
#ifndef UCP_API_UCP_IFUNC_DEF_H_
#define UCP_API_UCP_IFUNC_DEF_H_

#include <ucp/api/ucp.h>

#include <stddef.h>
#include <stdint.h>

BEGIN_C_DECLS

/**
 * @addtogroup UCP_IFUNC_CONFIG
 * @{
 *
 * Configuration: the @c UCX_IFUNC_* environment variables, read through
 * UCX's configuration parser (so @c UCX_LOG_LEVEL controls the log and a
 * misspelt variable draws UCX's "unused env variable" warning). They are
 * listed, with their defaults and when each is read, in the configuration
 * table of README.md; <tt>ucx-ifunc-info -c</tt> lists them with their
 * values and defaults. Set them
 * before the program starts; a program that sets one with @c setenv after
 * starting should call @ref ucp_register_ifunc before creating its first
 * worker, or UCX reports the variable as unused.
 *
 * State: the library keeps what it loads and links per UCP context: the
 * context's settings (the @c UCX_IFUNC_* variables as the context last read
 * them), the ifunc libraries it loaded, and the code it linked, with the
 * static variables of that code. Two contexts in one process share none of
 * it. The state is created on a context's first ifunc call and released by
 * @ref ucp_ifunc_context_release; a context that only sends (it never ran a
 * message) also drops it when its last registration is released. Two pieces
 * stay process-wide: @c UCX_IFUNC_SHM_DIRECT (the send calls receive an
 * endpoint, not a context) and the random source id in every message's
 * nonce, which identifies the sending process to its targets.
 *
 * Version: @ref UCP_IFUNC_API_MAJOR and @ref UCP_IFUNC_API_MINOR of the
 * header an application was built with, @ref ucp_ifunc_get_version of the
 * library it runs with.
 */


/** Major version of the ifunc API; changes when a call's meaning or
 *  signature changes. */
#define UCP_IFUNC_API_MAJOR 0

/** Minor version of the ifunc API; changes when calls are added. */
#define UCP_IFUNC_API_MINOR 3

/** Construct an ifunc API version identifier from major and minor numbers,
 *  comparable with @ref UCP_IFUNC_API_VERSION. */
#define UCP_IFUNC_VERSION(_major, _minor) (((_major) << 16) | (_minor))

/** The ifunc API version of this header. */
#define UCP_IFUNC_API_VERSION                                                  \
    UCP_IFUNC_VERSION(UCP_IFUNC_API_MAJOR, UCP_IFUNC_API_MINOR)

/** @} */


/**
 * @addtogroup UCP_IFUNC_RAW
 * @{
 */


/** Longest ifunc name, in characters (the terminating NUL not counted). */
#define UCP_IFUNC_NAME_MAX 63


/**
 * @brief Handle of a registered ifunc library, returned by
 * @ref ucp_register_ifunc.
 */
typedef struct ucp_ifunc *ucp_ifunc_h;


/**
 * @brief Register the ifunc library @a ifunc_name on the source.
 *
 * Loads @c $UCX_IFUNC_LIB_DIR/NAME.so (NAME: @a ifunc_name), looks up its
 * payload functions and its shippable code image. Registering a name again
 * returns a new handle; each handle is released with
 * @ref ucp_deregister_ifunc. Once all handles of a library are released it
 * is unloaded, so registering it again picks up a rebuilt library.
 *
 * @param [in]  context     UCP context.
 * @param [in]  ifunc_name  Name of the ifunc: a C identifier of 1 to
 *                          @ref UCP_IFUNC_NAME_MAX characters.
 * @param [out] ifunc_p     Handle of the registered ifunc.
 *
 * @return UCS_OK                 Registered; @a *ifunc_p is set.
 * @return UCS_ERR_INVALID_PARAM  A bad name or argument, or a library that
 *                                defines the bound functions of both
 *                                conventions (@c NAME_payload_get_max_size
 *                                and @c NAME_payload_bound).
 * @return UCS_ERR_NO_ELEM        The library cannot be loaded or is not an
 *                                ifunc library.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_register_ifunc(ucp_context_h context, const char *ifunc_name,
                                ucp_ifunc_h *ifunc_p);


/**
 * @brief Release a handle returned by @ref ucp_register_ifunc,
 *        @ref ucp_ifunc_code_register or @ref ucp_ifunc_code_get.
 *
 * Messages created from the handle stay valid.
 *
 * @param [in] context  UCP context the ifunc was registered with.
 * @param [in] ifunc_h  Handle to release; NULL is ignored.
 */
void ucp_deregister_ifunc(ucp_context_h context, ucp_ifunc_h ifunc_h);


/**
 * @brief Fields of @ref ucp_ifunc_code_params_t that are set.
 */
typedef enum ucp_ifunc_code_params_field {
    /** name */
    UCP_IFUNC_CODE_PARAM_FIELD_NAME = UCS_BIT(0),
    /** images and images_size (@ref ucp_ifunc_code_register only) */
    UCP_IFUNC_CODE_PARAM_FIELD_IMAGES = UCS_BIT(1),
    /** The name of @ref UCP_IFUNC_CODE_PARAM_FIELD_NAME in release 0.2. */
    UCP_IFUNC_CODE_FIELD_NAME = UCP_IFUNC_CODE_PARAM_FIELD_NAME
} ucp_ifunc_code_field_t;


/**
 * @brief Parameters of @ref ucp_ifunc_code_register and
 *        @ref ucp_ifunc_code_get (code by name, or code from images).
 */
typedef struct ucp_ifunc_code_params {
    /** Fields of this structure that are set
     *  (@ref ucp_ifunc_code_field_t). */
    uint64_t field_mask;
    /** The ifunc's name: a C identifier of 1 to @ref UCP_IFUNC_NAME_MAX
     *  characters. */
    const char *name;
    /** One or more complete code images back to back, each exactly as
     *  @c ucx-ifunc-cc embeds it in @c NAME.so (the bytes of its
     *  @c __ucp_ifunc_image_NAME* or @c __ucp_ifunc_bitcode_NAME.em*
     *  symbol, signature block included). Each image's size is its
     *  descriptor's @c image_size, a multiple of 8, so each starts at an
     *  offset that is a multiple of 8. */
    const void *images;
    /** Bytes of @a images: the sum of the images' sizes. */
    size_t images_size;
} ucp_ifunc_code_params_t;


/**
 * @brief Register ifunc code from code images in memory, without a library.
 *
 * For a program that builds its code itself (a Python program with Numba,
 * a JIT) instead of loading @c $UCX_IFUNC_LIB_DIR/NAME.so: @a params names
 * the ifunc (@ref UCP_IFUNC_CODE_PARAM_FIELD_NAME, required) and holds its
 * images (@ref UCP_IFUNC_CODE_PARAM_FIELD_IMAGES, required), native or
 * bitcode, at most one of each kind per ISA, one of them for the ISA of
 * this process. The images are copied: the caller may free them on return.
 * Each is checked as those of a library are (format, sizes, tables,
 * @c UCX_IFUNC_MAX_IMAGE_SIZE), and the handle then behaves as a
 * library's: @ref ucp_ifunc_peer_send_nbx sends a target the image of its
 * ISA, native or bitcode as for a library (@c UCX_IFUNC_PREFER_BITCODE),
 * with the same code id and signature, and each target applies its trust
 * policy (@c UCX_IFUNC_TRUST) to it as to a library's code. The code has
 * no payload functions: send payloads from memory
 * (@ref ucp_ifunc_peer_send_nbx, @ref ucp_ifunc_msg_build with a payload);
 * @ref ucp_ifunc_msg_create refuses the handle with
 * UCS_ERR_UNSUPPORTED. Release the handle with @ref ucp_deregister_ifunc.
 *
 * @code
 * ucp_ifunc_code_params_t params = {
 *         .field_mask  = UCP_IFUNC_CODE_PARAM_FIELD_NAME |
 *                        UCP_IFUNC_CODE_PARAM_FIELD_IMAGES,
 *         .name        = "sum",
 *         .images      = images,        // e.g. __ucp_ifunc_image_sum's bytes
 *         .images_size = images_size};
 * ucp_ifunc_code_register(context, &params, &ifunc);
 * ucp_ifunc_peer_send_nbx(peer, ifunc, payload, length, NULL);
 * @endcode
 *
 * @param [in]  context  UCP context.
 * @param [in]  params   The name and the images.
 * @param [out] ifunc_p  Handle of the registered code.
 *
 * @return UCS_OK                 Registered; @a *ifunc_p is set.
 * @return UCS_ERR_INVALID_PARAM  A bad argument, name or field; images that
 *                                are truncated, malformed or not back to
 *                                back, two of one kind for one ISA, none
 *                                for this process's ISA, or one for an ISA
 *                                ucx-ifunc does not ship code for (one log
 *                                line says which).
 * @return UCS_ERR_EXCEEDS_LIMIT  An image larger than a frame carries, or
 *                                @a images_size more than a native and a
 *                                bitcode image of 2 GiB for each ISA.
 * @return UCS_ERR_NO_MEMORY      Out of memory.
 */
ucs_status_t ucp_ifunc_code_register(ucp_context_h                  context,
                                     const ucp_ifunc_code_params_t *params,
                                     ucp_ifunc_h                   *ifunc_p);


/** @} */


/**
 * @addtogroup UCP_IFUNC_CONFIG
 * @{
 */

/* Calls about a context's ifunc state as a whole (its release, queries,
 * counters) and about the library's version belong in this group: declare
 * them in this block. */


/**
 * @brief Release what the ifunc library keeps for @a context.
 *
 * Unloads the libraries the context loaded and unmaps the code it linked
 * (the static variables of that code are lost), and forgets its settings.
 * Call it when the context makes no more ifunc calls, before
 * @c ucp_cleanup: UCP may give a later context the same handle, and it must
 * not find this one's state. Registered handles and messages stay valid and
 * are released as usual. A thread that ran messages of the context keeps
 * the state until it runs a message of any context again or exits, and the
 * last one to let go frees it. A context that never ran a message releases
 * its state by itself when its last registration is released.
 *
 * @param [in] context  UCP context; one without ifunc state, or NULL, is
 *                      ignored.
 */
void ucp_ifunc_context_release(ucp_context_h context);


/**
 * @brief The version of the ifunc library in use.
 *
 * Compare @a major_version and @a minor_version with
 * @ref UCP_IFUNC_API_MAJOR and @ref UCP_IFUNC_API_MINOR of the header the
 * application was built with.
 *
 * @param [out] major_version   API major version.
 * @param [out] minor_version   API minor version.
 * @param [out] release_number  Release number within the API version.
 */
void ucp_ifunc_get_version(unsigned *major_version, unsigned *minor_version,
                           unsigned *release_number);


/**
 * @brief The version of the ifunc library in use, as a string
 *        "major.minor.release".
 *
 * @return A static string.
 */
const char *ucp_ifunc_get_version_string(void);

/** @} */


/**
 * @addtogroup UCP_IFUNC_CHANNEL
 * @{
 */


/**
 * @brief Flags of @ref ucp_ifunc_channel_send_params_t.
 */
typedef enum {
    /** Send the code image with this message even if the target holds it
     *  (the paper's mode, for measurements). */
    UCP_IFUNC_SEND_FLAG_WITH_CODE = UCS_BIT(0)
} ucp_ifunc_send_flags_t;


/** @} */

END_C_DECLS

#endif
