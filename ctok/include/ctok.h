/* ctok C API: encode UTF-8 text and decode token ids from C or C++, without the GIL.
 *
 * Obtain it from Python:
 *     enc = ctok.get_encoding("o200k_base")       # or ctok.load(...)
 *     api = enc.c_api()        # PyCapsule named "ctok.api", pointer to a `ctok_api` (static, never freed)
 *     handle = enc.c_handle()  # PyCapsule named "ctok.encoder"; it keeps the encoder alive while it lives
 * In C: `const ctok_api* api = PyCapsule_GetPointer(api_capsule, "ctok.api");`
 *       `const void* h = PyCapsule_GetPointer(handle_capsule, "ctok.encoder");`
 *
 * Contract:
 * - The encoder's tables are read-only: any number of threads may call encode/decode on one handle at
 *   once, with or without the GIL.  The handle is valid while its capsule (or the Encoding) is alive.
 * - encode() sees ordinary text only: special-token text is encoded as text (like encode_ordinary).
 *   Tokenizer.json files with a normalizer or an HF-only pre-tokenizer step are refused with
 *   CTOK_ERR_UNSUPPORTED (their pipeline runs in Python); tiktoken-format files always work.
 * - Buffers belong to the caller.  When `cap` is too small the call returns CTOK_ERR_BUFFER and sets
 *   *n_out to the size needed; nothing is written past `cap`.  Pass out=NULL, cap=0 to ask for the size.
 */
#ifndef CTOK_H
#define CTOK_H

#include <stddef.h>
#include <stdint.h>

#define CTOK_API_VERSION 1

enum {
    CTOK_OK = 0,
    CTOK_ERR_NOMEM = -1,
    CTOK_ERR_BUFFER = -2,        /* out too small: *n_out holds the size needed */
    CTOK_ERR_UNKNOWN_ID = -3,    /* decode: an id is not in the vocabulary; *n_out = its index */
    CTOK_ERR_UNSUPPORTED = -4    /* this encoder needs the Python pipeline */
};

typedef struct ctok_api {
    int version;                                     /* CTOK_API_VERSION */
    int (*encode)(const void* encoder, const uint8_t* text, size_t len,
                  uint32_t* out, size_t cap, size_t* n_out);
    int (*decode)(const void* encoder, const uint32_t* ids, size_t n,
                  uint8_t* out, size_t cap, size_t* n_out);
    size_t (*vocab_size)(const void* encoder);       /* ids are < vocab_size */
} ctok_api;

#endif
