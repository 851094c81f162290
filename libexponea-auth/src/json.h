/* SPDX-License-Identifier: Apache-2.0 */
/* The one JSON path each way: a writer for calls, a bounded parser for replies. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Writing: a growable buffer. A failed allocation sticks, and jbuf_finish() reports it. ---- */

typedef struct jbuf {
        char *data;
        size_t length;
        size_t capacity;
        bool failed;
        bool secret; /* holds a token: wiped before it is freed */
} jbuf;

void jbuf_raw(jbuf *b, const char *text);
void jbuf_bytes(jbuf *b, const char *bytes, size_t length);
/* A JSON string of NUL-terminated UTF-8, with its quotes. */
void jbuf_string(jbuf *b, const char *text);
void jbuf_u64(jbuf *b, uint64_t value);
void jbuf_i64(jbuf *b, int64_t value);
/* Appends the message's NUL. Returns 0 or -ENOMEM. */
int jbuf_finish(jbuf *b);
void jbuf_free(jbuf *b);

/* ---- Reading: a flat list of tokens over the text, each knowing where its subtree ends. ---- */

enum jtype { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

typedef struct jtok {
        enum jtype type;
        uint32_t start;  /* a string's first byte after its quote; else the value's first byte */
        uint32_t length; /* a string's raw length, without quotes; a number's length */
        uint32_t next;   /* the index of the token after this one's subtree */
} jtok;

typedef struct jdoc {
        const char *text;
        jtok *tokens;
        uint32_t count;
        uint32_t capacity;
} jdoc;

/* Parses `length` bytes of `text` (one JSON value, nothing after it but spaces). Returns 0, -EPROTO for text that
 * is not JSON or nests deeper than 32, -EMSGSIZE past the token capacity. */
int json_parse(jdoc *doc, const char *text, size_t length);

/* The value of `key` in the object at `object`, or -1 (also when `object` is -1 or not an object). */
int json_get(const jdoc *doc, int object, const char *key);
/* The `i`th element of the array at `array`, or -1. */
int json_at(const jdoc *doc, int array, uint32_t i);
/* The number of members of an object or elements of an array at `index`; 0 for anything else. */
uint32_t json_size(const jdoc *doc, int index);

bool json_is(const jdoc *doc, int index, enum jtype type);
/* Whether the string at `index` is exactly `text` (unescaped strings only: the daemon's names never escape). */
bool json_equals(const jdoc *doc, int index, const char *text);
/* Unescapes the string at `index` into `out` with its NUL. Returns its length, -ENOBUFS when `size` is too small,
 * -EPROTO when it is not a string. */
int json_string(const jdoc *doc, int index, char *out, size_t size);
/* Returns a malloc'ed copy of the string at `index`, or NULL. */
char *json_strdup(const jdoc *doc, int index);
/* The non-negative integer at `index`. Returns 0 or -EPROTO. */
int json_u64(const jdoc *doc, int index, uint64_t *ret);
