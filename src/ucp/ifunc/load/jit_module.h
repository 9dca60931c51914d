/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The interface of the JIT module, libucp_ifunc_jit.so (jit_llvm.cc), which
 * jit.cc loads on the first bitcode compile: a process that never compiles
 * bitcode never loads LLVM (12-14 ms, and its mappings). Plain types
 * only: the module is built without RTTI, as LLVM is, and no C++ object
 * crosses. Installed in $(pkglibdir); an uninstalled build loads its
 * own (jit.cc says which).
 */
#ifndef UCP_IFUNC_JIT_MODULE_H_
#define UCP_IFUNC_JIT_MODULE_H_

#include <ucs/type/status.h>

#include <stddef.h>
#include <stdint.h>

/* Changes with every change of the struct below. */
#define UCX_IFUNC_JIT_MODULE_ABI 1
#define UCX_IFUNC_JIT_MODULE_SYMBOL "ucx_ifunc_jit_module"

/* jit.h's JitResolver, through a pointer of the caller's. */
using ucx_ifunc_jit_resolve_fn = ucs_status_t (*)(void *arg, const char *name,
                                                  uint64_t *address);

typedef struct ucx_ifunc_jit_module {
    uint32_t abi; /* UCX_IFUNC_JIT_MODULE_ABI */
    /* jit_compile() (jit.h): on UCS_OK the compiled code in @a code_p,
     * which release() frees, its entry and its bytes; else the reason in
     * @a why (NUL-terminated, cut at @a why_size). */
    ucs_status_t (*compile)(const void *bitcode, size_t size,
                            const char *triple, const char *entry,
                            ucx_ifunc_jit_resolve_fn resolve, void *resolve_arg,
                            double timeout, size_t max_memory, void **code_p,
                            void **entry_p, size_t *memory_p, char *why,
                            size_t why_size);
    void (*release)(void *code);
    size_t (*memory_in_use)(void);
} ucx_ifunc_jit_module_t;

/* The one symbol the module exports. */
extern "C" const ucx_ifunc_jit_module_t *ucx_ifunc_jit_module(void);

#endif
