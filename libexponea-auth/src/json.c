/* SPDX-License-Identifier: Apache-2.0 */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Writing ---- */

static bool jbuf_reserve(jbuf *b, size_t more) {
        if (b->failed) return false;
        if (b->length + more <= b->capacity) return true;
        size_t capacity = b->capacity ? b->capacity : 256;
        while (capacity < b->length + more) capacity *= 2;
        char *data = malloc(capacity);
        if (!data) {
                b->failed = true;
                return false;
        }
        if (b->data) {
                memcpy(data, b->data, b->length);
                if (b->secret) explicit_bzero(b->data, b->capacity);
                free(b->data);
        }
        b->data = data;
        b->capacity = capacity;
        return true;
}

void jbuf_bytes(jbuf *b, const char *bytes, size_t length) {
        if (!jbuf_reserve(b, length)) return;
        memcpy(b->data + b->length, bytes, length);
        b->length += length;
}

void jbuf_raw(jbuf *b, const char *text) { jbuf_bytes(b, text, strlen(text)); }

void jbuf_string(jbuf *b, const char *text) {
        static const char hex[] = "0123456789abcdef";
        size_t length = strlen(text);
        if (!jbuf_reserve(b, length * 6 + 2)) return;
        char *out = b->data + b->length;
        *out++ = '"';
        for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
                switch (*p) {
                case '"': *out++ = '\\'; *out++ = '"'; break;
                case '\\': *out++ = '\\'; *out++ = '\\'; break;
                case '\n': *out++ = '\\'; *out++ = 'n'; break;
                case '\r': *out++ = '\\'; *out++ = 'r'; break;
                case '\t': *out++ = '\\'; *out++ = 't'; break;
                default:
                        if (*p < 0x20) {
                                memcpy(out, "\\u00", 4);
                                out[4] = hex[*p >> 4];
                                out[5] = hex[*p & 0xF];
                                out += 6;
                        } else {
                                *out++ = (char)*p;
                        }
                }
        }
        *out++ = '"';
        b->length = (size_t)(out - b->data);
}

void jbuf_u64(jbuf *b, uint64_t value) {
        char digits[24];
        int n = snprintf(digits, sizeof digits, "%" PRIu64, value);
        jbuf_bytes(b, digits, (size_t)n);
}

void jbuf_i64(jbuf *b, int64_t value) {
        char digits[24];
        int n = snprintf(digits, sizeof digits, "%" PRId64, value);
        jbuf_bytes(b, digits, (size_t)n);
}

int jbuf_finish(jbuf *b) {
        jbuf_bytes(b, "", 1);
        return b->failed ? -ENOMEM : 0;
}

void jbuf_free(jbuf *b) {
        if (b->data && b->secret) explicit_bzero(b->data, b->capacity);
        free(b->data);
        *b = (jbuf){0};
}

/* ---- Reading ---- */

typedef struct parser {
        jdoc *doc;
        const char *p;
        const char *end;
} parser;

static void skip_space(parser *ps) {
        while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int add(parser *ps, enum jtype type, const char *start, size_t length) {
        jdoc *doc = ps->doc;
        if (doc->count == doc->capacity) return -EMSGSIZE;
        doc->tokens[doc->count] = (jtok){
                .type = type,
                .start = (uint32_t)(start - doc->text),
                .length = (uint32_t)length,
        };
        return (int)doc->count++;
}

static int parse_value(parser *ps, int depth);

static int parse_string(parser *ps) {
        const char *start = ++ps->p; /* past the quote */
        while (ps->p < ps->end && *ps->p != '"') {
                if ((unsigned char)*ps->p < 0x20) return -EPROTO;
                if (*ps->p == '\\') ps->p++;
                ps->p++;
        }
        if (ps->p >= ps->end) return -EPROTO;
        int index = add(ps, JSON_STRING, start, (size_t)(ps->p - start));
        ps->p++;
        if (index >= 0) ps->doc->tokens[index].next = (uint32_t)index + 1;
        return index;
}

static int parse_literal(parser *ps, const char *word, enum jtype type) {
        size_t length = strlen(word);
        if ((size_t)(ps->end - ps->p) < length || memcmp(ps->p, word, length) != 0) return -EPROTO;
        int index = add(ps, type, ps->p, length);
        ps->p += length;
        if (index >= 0) ps->doc->tokens[index].next = (uint32_t)index + 1;
        return index;
}

static int parse_number(parser *ps) {
        const char *start = ps->p;
        while (ps->p < ps->end && strchr("+-0123456789.eE", *ps->p)) ps->p++;
        if (ps->p == start) return -EPROTO;
        int index = add(ps, JSON_NUMBER, start, (size_t)(ps->p - start));
        if (index >= 0) ps->doc->tokens[index].next = (uint32_t)index + 1;
        return index;
}

static int parse_container(parser *ps, int depth, bool object) {
        if (depth > 32) return -EPROTO;
        int index = add(ps, object ? JSON_OBJECT : JSON_ARRAY, ps->p, 0);
        if (index < 0) return index;
        ps->p++;
        skip_space(ps);
        char close = object ? '}' : ']';
        if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
        } else {
                for (;;) {
                        skip_space(ps);
                        int r;
                        if (object) {
                                if (ps->p >= ps->end || *ps->p != '"') return -EPROTO;
                                if ((r = parse_string(ps)) < 0) return r;
                                skip_space(ps);
                                if (ps->p >= ps->end || *ps->p != ':') return -EPROTO;
                                ps->p++;
                        }
                        if ((r = parse_value(ps, depth + 1)) < 0) return r;
                        ps->doc->tokens[index].length++;
                        skip_space(ps);
                        if (ps->p < ps->end && *ps->p == ',') {
                                ps->p++;
                                continue;
                        }
                        if (ps->p < ps->end && *ps->p == close) {
                                ps->p++;
                                break;
                        }
                        return -EPROTO;
                }
        }
        ps->doc->tokens[index].next = ps->doc->count;
        return index;
}

static int parse_value(parser *ps, int depth) {
        skip_space(ps);
        if (ps->p >= ps->end) return -EPROTO;
        switch (*ps->p) {
        case '{': return parse_container(ps, depth, true);
        case '[': return parse_container(ps, depth, false);
        case '"': return parse_string(ps);
        case 't': return parse_literal(ps, "true", JSON_TRUE);
        case 'f': return parse_literal(ps, "false", JSON_FALSE);
        case 'n': return parse_literal(ps, "null", JSON_NULL);
        default: return parse_number(ps);
        }
}

int json_parse(jdoc *doc, const char *text, size_t length) {
        doc->text = text;
        doc->count = 0;
        parser ps = {.doc = doc, .p = text, .end = text + length};
        int r = parse_value(&ps, 0);
        if (r < 0) return r;
        skip_space(&ps);
        return ps.p == ps.end ? 0 : -EPROTO;
}

bool json_is(const jdoc *doc, int index, enum jtype type) {
        return index >= 0 && (uint32_t)index < doc->count && doc->tokens[index].type == type;
}

uint32_t json_size(const jdoc *doc, int index) {
        if (!json_is(doc, index, JSON_OBJECT) && !json_is(doc, index, JSON_ARRAY)) return 0;
        return doc->tokens[index].length;
}

bool json_equals(const jdoc *doc, int index, const char *text) {
        if (!json_is(doc, index, JSON_STRING)) return false;
        const jtok *t = &doc->tokens[index];
        return strlen(text) == t->length && memcmp(doc->text + t->start, text, t->length) == 0;
}

int json_get(const jdoc *doc, int object, const char *key) {
        if (!json_is(doc, object, JSON_OBJECT)) return -1;
        uint32_t i = (uint32_t)object + 1;
        for (uint32_t member = 0; member < doc->tokens[object].length; member++) {
                uint32_t value = i + 1;
                if (json_equals(doc, (int)i, key)) return (int)value;
                i = doc->tokens[value].next;
        }
        return -1;
}

int json_at(const jdoc *doc, int array, uint32_t i) {
        if (!json_is(doc, array, JSON_ARRAY) || i >= doc->tokens[array].length) return -1;
        uint32_t index = (uint32_t)array + 1;
        while (i--) index = doc->tokens[index].next;
        return (int)index;
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
}

static int read_hex4(const char *p, const char *end, uint32_t *ret) {
        if (end - p < 4) return -EPROTO;
        uint32_t value = 0;
        for (int i = 0; i < 4; i++) {
                int digit = hex_value(p[i]);
                if (digit < 0) return -EPROTO;
                value = value << 4 | (uint32_t)digit;
        }
        *ret = value;
        return 0;
}

/* Writes `code` as UTF-8; returns the bytes written, or 0 when it does not fit. */
static size_t put_utf8(char *out, size_t room, uint32_t code) {
        char bytes[4];
        size_t n;
        if (code < 0x80) {
                bytes[0] = (char)code;
                n = 1;
        } else if (code < 0x800) {
                bytes[0] = (char)(0xC0 | code >> 6);
                bytes[1] = (char)(0x80 | (code & 0x3F));
                n = 2;
        } else if (code < 0x10000) {
                bytes[0] = (char)(0xE0 | code >> 12);
                bytes[1] = (char)(0x80 | (code >> 6 & 0x3F));
                bytes[2] = (char)(0x80 | (code & 0x3F));
                n = 3;
        } else {
                bytes[0] = (char)(0xF0 | code >> 18);
                bytes[1] = (char)(0x80 | (code >> 12 & 0x3F));
                bytes[2] = (char)(0x80 | (code >> 6 & 0x3F));
                bytes[3] = (char)(0x80 | (code & 0x3F));
                n = 4;
        }
        if (n > room) return 0;
        memcpy(out, bytes, n);
        return n;
}

int json_string(const jdoc *doc, int index, char *out, size_t size) {
        if (!json_is(doc, index, JSON_STRING)) return -EPROTO;
        const jtok *t = &doc->tokens[index];
        const char *p = doc->text + t->start, *end = p + t->length;
        size_t n = 0;
        if (!memchr(p, '\\', t->length)) {
                if (t->length + 1 > size) return -ENOBUFS;
                memcpy(out, p, t->length);
                out[t->length] = 0;
                return (int)t->length;
        }
        while (p < end) {
                if (n + 1 >= size) return -ENOBUFS;
                if (*p != '\\') {
                        out[n++] = *p++;
                        continue;
                }
                if (++p >= end) return -EPROTO;
                char c = *p++;
                switch (c) {
                case '"': case '\\': case '/': out[n++] = c; break;
                case 'b': out[n++] = '\b'; break;
                case 'f': out[n++] = '\f'; break;
                case 'n': out[n++] = '\n'; break;
                case 'r': out[n++] = '\r'; break;
                case 't': out[n++] = '\t'; break;
                case 'u': {
                        uint32_t code, low;
                        if (read_hex4(p, end, &code) < 0) return -EPROTO;
                        p += 4;
                        if (code >= 0xD800 && code < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
                            read_hex4(p + 2, end, &low) == 0 && low >= 0xDC00 && low < 0xE000) {
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                                p += 6;
                        }
                        size_t written = put_utf8(out + n, size - n - 1, code);
                        if (!written) return -ENOBUFS;
                        n += written;
                        break;
                }
                default: return -EPROTO;
                }
        }
        out[n] = 0;
        return (int)n;
}

char *json_strdup(const jdoc *doc, int index) {
        if (!json_is(doc, index, JSON_STRING)) return NULL;
        size_t size = doc->tokens[index].length + 1; /* unescaping never lengthens */
        char *copy = malloc(size);
        if (copy && json_string(doc, index, copy, size) < 0) {
                free(copy);
                return NULL;
        }
        return copy;
}

int json_u64(const jdoc *doc, int index, uint64_t *ret) {
        if (!json_is(doc, index, JSON_NUMBER)) return -EPROTO;
        const jtok *t = &doc->tokens[index];
        uint64_t value = 0;
        for (uint32_t i = 0; i < t->length; i++) {
                char c = doc->text[t->start + i];
                if (c < '0' || c > '9' || value > (UINT64_MAX - 9) / 10) return -EPROTO;
                value = value * 10 + (uint64_t)(c - '0');
        }
        *ret = value;
        return 0;
}
