/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Per-thread variables that every message touches use the initial-exec
 * TLS model: an access is one load from the thread pointer, where the
 * default model of a shared library calls __tls_get_addr (a few percent of
 * a forwarded message's cost, measured). The price is static TLS, which a
 * late dlopen of the library can find exhausted: keep such variables small
 * (docs/design.md, "State per UCP context"). A thread-local with a
 * constructor also gets a guard from the compiler, which the attribute
 * does not reach: the library is built with -ftls-model=initial-exec
 * (Makefile.inc) so that the guard is one load too.
 */
#ifndef UCP_IFUNC_TLS_H_
#define UCP_IFUNC_TLS_H_

#define UCX_IFUNC_TLS __attribute__((tls_model("initial-exec"))) thread_local

#endif
