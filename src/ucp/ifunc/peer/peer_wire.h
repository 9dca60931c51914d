/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Step "peers", the set-up messages on the wire (version 4; docs/design.md,
 * "The default path: peers"): active messages on am_id + 2, always with
 * the reply flag, each taken only on the endpoint of the peer whose token
 * it carries. Shared with the tests that play a hostile peer.
 *
 *   hello    my token, ISA; data: HelloData (the name of my same-host
 *            secret, my nonce, my key)
 *   proof    your token; data: ProofData (the MAC of both tokens under
 *            your secret, if I read it; my signature of both nonces and
 *            keys, if you asked for my key)
 *   welcome  your token, my ISA; data: a channel's blob and my
 *            shared-memory worker's address, when you proved you run on
 *            this host and want one
 *   path     whether I store into that channel; if not, you drop it
 *   ready    my endpoints to you are flushed
 *   report   how messages of yours that asked for delivery reports
 *            ended: data: ReportEntry each (the flags say how many)
 *   bye      I close my side (ucp_ifunc_peer_close, or my worker goes):
 *            nothing more comes from me; with kByeAnswer, the answer to
 *            yours (you may close your endpoint now)
 */
#ifndef UCP_IFUNC_PEER_WIRE_H_
#define UCP_IFUNC_PEER_WIRE_H_

#include "ucp/ifunc/peer/peer_auth.h"

#include <cstddef>
#include <cstdint>

namespace ucx_ifunc {

constexpr uint32_t kPeerMagic       = 0x52504649u; /* "IFPR" */
constexpr uint16_t kPeerVersion     = 4;
constexpr uint64_t kHelloWants      = 1; /* hello: may use a channel */
constexpr uint64_t kHelloAuth       = 2; /* hello: prove a peer key */
constexpr uint64_t kProofHost       = 1; /* proof: the same-host MAC */
constexpr uint64_t kProofKey        = 2; /* proof: a signature */
constexpr uint64_t kWelcomeHasBlob  = 1; /* welcome: a blob follows */
constexpr uint64_t kPathUsesChannel = 1; /* path: the source stores into it */
constexpr uint64_t kByeAnswer       = 1; /* bye: the answer to yours */
/* A welcome's data at most: a blob (a key of a few hundred bytes) and a
 * shared-memory worker's address. */
constexpr size_t kMaxWelcomeData = 16384;

enum class ControlKind : uint16_t {
    hello   = 1,
    welcome = 2,
    path    = 3,
    ready   = 4,
    proof   = 5,
    report  = 6,
    bye     = 7
};

/* AM header of the set-up messages. */
struct ControlHeader {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
    uint64_t token; /* hello: the sender's id of the peer; else the
                       receiver's */
    uint64_t machine;
    uint64_t flags;
};

/* AM data of a hello. */
struct HelloData {
    char      proof[HostProof::kNameMax]; /* our same-host secret, or "" */
    AuthNonce nonce; /* our challenge, with UCX_IFUNC_PEER_KEYS */
    PublicKey key;   /* our identity key, or zeros */
    /* The largest active message we take (UCX_IFUNC_MAX_AM_MESSAGE): a
     * larger send to us is refused at its source, at once. */
    uint64_t max_message;
};

/* One entry of a report: the source's report id of a message (frame.h)
 * and the status it ended with (ucp_ifunc_report_cb_t). */
struct ReportEntry {
    uint16_t report;
    int16_t  status;
};

/* Entries one report carries at most: sent eagerly, in one message. */
constexpr size_t kMaxReportEntries = 1024;

/* AM data of a proof: what the flags say. */
struct ProofData {
    HostMac   mac;       /* kProofHost: of both tokens, under the secret */
    Signature signature; /* kProofKey: of both nonces and keys */
    PublicKey key;       /* kProofKey: the key that signed */
};

} // namespace ucx_ifunc

#endif
