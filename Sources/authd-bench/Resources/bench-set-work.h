// SPDX-License-Identifier: Apache-2.0
// What the daemon does for one SetToken besides its file operations, written as a careful C server would: the C
// server shaped as the daemon (c-durable-server.c) does it when built with -DSET_WORK (and -lcrypto), so that
// the two differ by how they do the work rather than by what they do. On the loop: parse and check the call's
// JSON, the group's name and the token's form; decode the token's header and claims (base64url, JSON); keep a
// generation per group; answer with the claims; log the operator's "Token set" line. On a writer: encode the
// record and seal it (AES-256-GCM, a random nonce, the group as authenticated data), as the daemon's store does.
// Like the daemon, it checks no signature. authd-bench writes it beside the servers at run time.
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_NAME 128
#define MAX_TOKEN (16 * 1024)
#define MAX_IDS 16
#define MAX_ID 256
#define MAX_DEPTH 64

/* A validating JSON reader over [at, end). */
struct json {
    const unsigned char *at, *end;
};

static void json_space(struct json *j) {
    while (j->at < j->end && (*j->at == ' ' || *j->at == '\t' || *j->at == '\n' || *j->at == '\r')) j->at++;
}

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads a string into `out` (NUL-ended, when `out` is not NULL): its length, or -1 when it is no valid string or
 * does not fit in `capacity` bytes. Escapes are decoded; raw bytes must be UTF-8. */
static long json_string(struct json *j, char *out, size_t capacity) {
    json_space(j);
    if (j->at >= j->end || *j->at != '"') return -1;
    j->at++;
    size_t length = 0;
    unsigned char encoded[4];
    while (j->at < j->end) {
        unsigned char c = *j->at++;
        size_t count = 1;
        encoded[0] = c;
        if (c == '"') {
            if (out) out[length] = 0;
            return (long)length;
        } else if (c < 0x20) {
            return -1;
        } else if (c == '\\') {
            if (j->at >= j->end) return -1;
            unsigned char e = *j->at++;
            switch (e) {
            case '"': case '\\': case '/': encoded[0] = e; break;
            case 'b': encoded[0] = '\b'; break;
            case 'f': encoded[0] = '\f'; break;
            case 'n': encoded[0] = '\n'; break;
            case 'r': encoded[0] = '\r'; break;
            case 't': encoded[0] = '\t'; break;
            case 'u': {
                if (j->end - j->at < 4) return -1;
                unsigned point = 0;
                for (int i = 0; i < 4; i++) {
                    int digit = hex_digit(*j->at++);
                    if (digit < 0) return -1;
                    point = point << 4 | (unsigned)digit;
                }
                if (point >= 0xd800 && point < 0xe000) point = 0xfffd;  // a lone surrogate: the replacement
                if (point < 0x80) {
                    encoded[0] = (unsigned char)point;
                } else if (point < 0x800) {
                    encoded[0] = (unsigned char)(0xc0 | point >> 6);
                    encoded[1] = (unsigned char)(0x80 | (point & 0x3f));
                    count = 2;
                } else {
                    encoded[0] = (unsigned char)(0xe0 | point >> 12);
                    encoded[1] = (unsigned char)(0x80 | (point >> 6 & 0x3f));
                    encoded[2] = (unsigned char)(0x80 | (point & 0x3f));
                    count = 3;
                }
                break;
            }
            default: return -1;
            }
        } else if (c >= 0x80) {
            count = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
            if (count == 0 || count > 4 || (size_t)(j->end - j->at) < count - 1) return -1;
            for (size_t i = 1; i < count; i++) {
                encoded[i] = *j->at++;
                if ((encoded[i] & 0xc0) != 0x80) return -1;
            }
        }
        if (out) {
            if (length + count >= capacity) return -1;
            memcpy(out + length, encoded, count);
        }
        length += count;
    }
    return -1;
}

/* Reads a number: 0 and its value in `value`, or -1. */
static int json_number(struct json *j, double *value) {
    json_space(j);
    const unsigned char *start = j->at;
    if (j->at < j->end && *j->at == '-') j->at++;
    if (j->at >= j->end || *j->at < '0' || *j->at > '9') return -1;
    if (*j->at == '0') {
        j->at++;
    } else {
        while (j->at < j->end && *j->at >= '0' && *j->at <= '9') j->at++;
    }
    if (j->at < j->end && *j->at == '.') {
        j->at++;
        if (j->at >= j->end || *j->at < '0' || *j->at > '9') return -1;
        while (j->at < j->end && *j->at >= '0' && *j->at <= '9') j->at++;
    }
    if (j->at < j->end && (*j->at | 0x20) == 'e') {
        j->at++;
        if (j->at < j->end && (*j->at == '+' || *j->at == '-')) j->at++;
        if (j->at >= j->end || *j->at < '0' || *j->at > '9') return -1;
        while (j->at < j->end && *j->at >= '0' && *j->at <= '9') j->at++;
    }
    char text[64];
    size_t length = (size_t)(j->at - start);
    if (length >= sizeof text) return -1;
    memcpy(text, start, length);
    text[length] = 0;
    *value = strtod(text, NULL);
    return 0;
}

static int json_skip(struct json *j, int depth);

/* Reads an object, calling `member` with each member's name and the reader at its value, which `member` must
 * read (or skip). 0, or -1 when it is no valid object or `member` fails. */
static int json_object(struct json *j, int depth, int (*member)(struct json *, const char *, void *), void *context) {
    json_space(j);
    if (depth > MAX_DEPTH || j->at >= j->end || *j->at != '{') return -1;
    j->at++;
    json_space(j);
    if (j->at < j->end && *j->at == '}') {
        j->at++;
        return 0;
    }
    char name[MAX_ID];
    for (;;) {
        if (json_string(j, name, sizeof name) < 0) return -1;
        json_space(j);
        if (j->at >= j->end || *j->at++ != ':') return -1;
        if (member ? member(j, name, context) : json_skip(j, depth + 1)) return -1;
        json_space(j);
        if (j->at >= j->end) return -1;
        unsigned char c = *j->at++;
        if (c == '}') return 0;
        if (c != ',') return -1;
    }
}

static int json_literal(struct json *j, const char *word) {
    size_t length = strlen(word);
    if ((size_t)(j->end - j->at) < length || memcmp(j->at, word, length) != 0) return -1;
    j->at += length;
    return 0;
}

/* Skips one value of any kind: 0, or -1 when it is not valid JSON. */
static int json_skip(struct json *j, int depth) {
    json_space(j);
    if (depth > MAX_DEPTH || j->at >= j->end) return -1;
    double number;
    switch (*j->at) {
    case '"': return json_string(j, NULL, 0) < 0 ? -1 : 0;
    case '{': return json_object(j, depth, NULL, NULL);
    case 't': return json_literal(j, "true");
    case 'f': return json_literal(j, "false");
    case 'n': return json_literal(j, "null");
    case '[':
        j->at++;
        json_space(j);
        if (j->at < j->end && *j->at == ']') {
            j->at++;
            return 0;
        }
        for (;;) {
            if (json_skip(j, depth + 1)) return -1;
            json_space(j);
            if (j->at >= j->end) return -1;
            unsigned char c = *j->at++;
            if (c == ']') return 0;
            if (c != ',') return -1;
        }
    default: return json_number(j, &number);
    }
}

/* A SetToken call, as read from the wire, and what its token says. */
struct set_call {
    char method[64];
    char group[MAX_NAME + 1];
    char token[MAX_TOKEN + 1];
    int has_group, has_token;
    char algorithm[64], key_id[MAX_ID];
    double expires_at;
    int has_exp, has_ids;
    int id_count;
    char id_names[MAX_IDS][MAX_ID], id_values[MAX_IDS][MAX_ID];
    uint64_t generation;
    uid_t caller_uid;
    pid_t caller_pid;
};

static int call_parameter(struct json *j, const char *name, void *context) {
    struct set_call *call = context;
    if (strcmp(name, "group") == 0) {
        call->has_group = json_string(j, call->group, sizeof call->group) >= 0;
        return call->has_group ? 0 : -1;
    }
    if (strcmp(name, "token") == 0) {
        call->has_token = json_string(j, call->token, sizeof call->token) >= 0;
        return call->has_token ? 0 : -1;
    }
    return -1;  // the interface has no other parameter
}

static int call_member(struct json *j, const char *name, void *context) {
    struct set_call *call = context;
    if (strcmp(name, "method") == 0) return json_string(j, call->method, sizeof call->method) < 0 ? -1 : 0;
    if (strcmp(name, "parameters") == 0) return json_object(j, 1, call_parameter, call);
    return json_skip(j, 1);
}

static int header_member(struct json *j, const char *name, void *context) {
    struct set_call *call = context;
    if (strcmp(name, "alg") == 0) return json_string(j, call->algorithm, sizeof call->algorithm) < 0 ? -1 : 0;
    if (strcmp(name, "kid") == 0) return json_string(j, call->key_id, sizeof call->key_id) < 0 ? -1 : 0;
    return json_skip(j, 1);
}

static int id_member(struct json *j, const char *name, void *context) {
    struct set_call *call = context;
    if (call->id_count == MAX_IDS) return -1;
    snprintf(call->id_names[call->id_count], MAX_ID, "%s", name);
    if (json_string(j, call->id_values[call->id_count], MAX_ID) < 0) return -1;
    call->id_count++;
    return 0;
}

static int claim_member(struct json *j, const char *name, void *context) {
    struct set_call *call = context;
    if (strcmp(name, "exp") == 0) {
        call->has_exp = 1;
        return json_number(j, &call->expires_at);
    }
    if (strcmp(name, "ids") == 0) {
        call->has_ids = 1;
        return json_object(j, 1, id_member, call);
    }
    return json_skip(j, 1);
}

static int base64url_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

/* Decodes unpadded base64url into `out`: the length, or -1. */
static long base64url_decode(const char *text, size_t length, unsigned char *out, size_t capacity) {
    if (length % 4 == 1 || length / 4 * 3 + 2 > capacity) return -1;
    size_t written = 0;
    uint32_t bits = 0;
    int count = 0;
    for (size_t i = 0; i < length; i++) {
        int value = base64url_value((unsigned char)text[i]);
        if (value < 0) return -1;
        bits = bits << 6 | (uint32_t)value;
        if (++count == 4) {
            out[written++] = (unsigned char)(bits >> 16);
            out[written++] = (unsigned char)(bits >> 8);
            out[written++] = (unsigned char)bits;
            bits = 0;
            count = 0;
        }
    }
    if (count == 2) out[written++] = (unsigned char)(bits >> 4);
    if (count == 3) {
        out[written++] = (unsigned char)(bits >> 10);
        out[written++] = (unsigned char)(bits >> 2);
    }
    return (long)written;
}

/* Checks the group's name and the token's form, and decodes its header and claims: 0, or -1. */
static int check_token(struct set_call *call) {
    size_t length = strlen(call->group);
    if (length == 0 || length > MAX_NAME) return -1;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)call->group[i];
        if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9') && c != '.' && c != '_' && c != '-')
            return -1;
    }
    const char *token = call->token;
    length = strlen(token);
    if (length == 0 || strncmp(token, "Bearer ", 7) == 0) return -1;
    const char *first = memchr(token, '.', length);
    const char *second = first ? memchr(first + 1, '.', length - (size_t)(first + 1 - token)) : NULL;
    if (!second || memchr(second + 1, '.', length - (size_t)(second + 1 - token))) return -1;
    static unsigned char decoded[MAX_TOKEN];
    for (const char *c = second + 1; c < token + length; c++) {
        if (base64url_value((unsigned char)*c) < 0) return -1;
    }
    long header = base64url_decode(token, (size_t)(first - token), decoded, sizeof decoded);
    if (header <= 0) return -1;
    struct json j = {decoded, decoded + header};
    if (json_object(&j, 0, header_member, call)) return -1;
    long claims = base64url_decode(first + 1, (size_t)(second - first - 1), decoded, sizeof decoded);
    if (claims <= 0) return -1;
    j = (struct json){decoded, decoded + claims};
    if (json_object(&j, 0, claim_member, call)) return -1;
    if (!call->has_exp || !isfinite(call->expires_at) || call->expires_at < 0 || call->expires_at > 253402300799.0)
        return -1;
    return call->has_ids ? 0 : -1;
}

/* Parses one SetToken call and checks it, with its caller: 0, or -1. */
static int parse_set_call(const char *text, size_t length, struct set_call *call) {
    call->has_group = call->has_token = call->has_exp = call->has_ids = 0;
    call->id_count = 0;
    call->algorithm[0] = call->key_id[0] = 0;
    struct json j = {(const unsigned char *)text, (const unsigned char *)text + length};
    if (json_object(&j, 0, call_member, call)) return -1;
    json_space(&j);
    if (j.at != j.end || strcmp(call->method, "com.exponea.Auth.SetToken") != 0) return -1;
    if (!call->has_group || !call->has_token) return -1;
    return check_token(call);
}

/* The group's next generation, from a table of the groups seen. */
static uint64_t next_generation(const char *group) {
    enum { SLOTS = 4096 };
    static struct { char name[MAX_NAME + 1]; uint64_t generation; } table[SLOTS];
    uint64_t hash = 14695981039346656037u;
    for (const char *c = group; *c; c++) hash = (hash ^ (unsigned char)*c) * 1099511628211u;
    for (size_t probe = 0; probe < SLOTS; probe++) {
        size_t slot = (hash + probe) % SLOTS;
        if (table[slot].name[0] == 0) snprintf(table[slot].name, sizeof table[slot].name, "%s", group);
        if (strcmp(table[slot].name, group) == 0) return ++table[slot].generation;
    }
    return 0;
}

/* Appends `text` as a JSON string. */
static size_t put_string(char *out, size_t at, size_t capacity, const char *text) {
    if (at < capacity) out[at] = '"';
    at++;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\' || *c < 0x20) {
            at += (size_t)snprintf(out + (at < capacity ? at : capacity), at < capacity ? capacity - at : 0,
                                   *c == '"' ? "\\\"" : *c == '\\' ? "\\\\" : "\\u%04x", *c);
        } else {
            if (at < capacity) out[at] = (char)*c;
            at++;
        }
    }
    if (at < capacity) out[at] = '"';
    return at + 1;
}

static size_t put_raw(char *out, size_t at, size_t capacity, const char *text) {
    size_t length = strlen(text);
    if (at + length < capacity) memcpy(out + at, text, length);
    return at + length;
}

/* Appends the customer ids as a JSON object, sorted by name. */
static size_t put_ids(char *out, size_t at, size_t capacity, struct set_call *call) {
    int order[MAX_IDS];
    for (int i = 0; i < call->id_count; i++) {
        int k = i;
        while (k > 0 && strcmp(call->id_names[order[k - 1]], call->id_names[i]) > 0) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    at = put_raw(out, at, capacity, "{");
    for (int i = 0; i < call->id_count; i++) {
        if (i) at = put_raw(out, at, capacity, ",");
        at = put_string(out, at, capacity, call->id_names[order[i]]);
        at = put_raw(out, at, capacity, ":");
        at = put_string(out, at, capacity, call->id_values[order[i]]);
    }
    return put_raw(out, at, capacity, "}");
}

static size_t put_number(char *out, size_t at, size_t capacity, double value) {
    char text[40];
    if (value == floor(value) && fabs(value) < 1e15) {
        snprintf(text, sizeof text, "%.0f", value);
    } else {
        snprintf(text, sizeof text, "%.17g", value);
    }
    return put_raw(out, at, capacity, text);
}

/* The reply to a SetToken: the claims and the generation, NUL-ended. Its length with the NUL. */
static size_t set_reply(char *out, size_t capacity, struct set_call *call) {
    size_t at = put_raw(out, 0, capacity, "{\"parameters\":{\"claims\":{\"algorithm\":");
    at = put_string(out, at, capacity, call->algorithm);
    at = put_raw(out, at, capacity, ",\"customerIds\":");
    at = put_ids(out, at, capacity, call);
    at = put_raw(out, at, capacity, ",\"expiresAt\":");
    at = put_number(out, at, capacity, call->expires_at);
    at = put_raw(out, at, capacity, ",\"keyId\":");
    at = put_string(out, at, capacity, call->key_id);
    char tail[48];
    snprintf(tail, sizeof tail, "},\"generation\":%llu}}", (unsigned long long)call->generation);
    at = put_raw(out, at, capacity, tail);
    if (at >= capacity) return 0;
    out[at] = 0;
    return at + 1;
}

/* The operator's line, as the daemon's console log has it. */
static void log_token_set(struct set_call *call) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double seconds = (double)now.tv_sec + now.tv_nsec / 1e9;
    const char *state = call->expires_at <= seconds ? "expired" : call->expires_at <= seconds + 60 ? "expiredSoon"
                                                                                                  : "valid";
    char line[512];
    int length = snprintf(line, sizeof line,
                          "info: Token set caller_pid=%d caller_uid=%u generation=%llu group=%s "
                          "message_id=eca47f2bef4e40a4ab43ff7e511139e3 state=%s\n",
                          (int)call->caller_pid, (unsigned)call->caller_uid, (unsigned long long)call->generation,
                          call->group, state);
    if (length > 0 && write(2, line, (size_t)length) < 0) return;
}

/* The record's file contents: the header, then the sealed plaintext (as RecordCodec.swift lays it out). Its
 * length, or 0 when it could not be sealed. */
static size_t seal_record(struct set_call *call, unsigned char *out, size_t capacity) {
    static const unsigned char key[32] = {9};
    char plaintext[MAX_TOKEN + 4096];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    size_t at = put_raw(plaintext, 0, sizeof plaintext, "{\"changedAt\":");
    at = put_number(plaintext, at, sizeof plaintext, (double)now.tv_sec - 978307200.0 + now.tv_nsec / 1e9 + 1e-7);
    // The group's identity, which a SetToken keeps: the benchmark's groups have none.
    at = put_raw(plaintext, at, sizeof plaintext, ",\"customerIds\":{}");
    at = put_raw(plaintext, at, sizeof plaintext, ",\"expiresAt\":");
    at = put_number(plaintext, at, sizeof plaintext, call->expires_at);
    char generation[32];
    snprintf(generation, sizeof generation, ",\"generation\":%llu", (unsigned long long)call->generation);
    at = put_raw(plaintext, at, sizeof plaintext, generation);
    at = put_raw(plaintext, at, sizeof plaintext, ",\"group\":");
    at = put_string(plaintext, at, sizeof plaintext, call->group);
    at = put_raw(plaintext, at, sizeof plaintext, ",\"schema\":1,\"token\":");
    at = put_string(plaintext, at, sizeof plaintext, call->token);
    at = put_raw(plaintext, at, sizeof plaintext, "}");
    if (at >= sizeof plaintext || 5 + 12 + at + 16 > capacity) return 0;

    memcpy(out, "XATK\1", 5);
    if (getrandom(out + 5, 12, 0) != 12) return 0;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    int length = 0, total = 0;
    int sealed = context && EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), NULL, key, out + 5) == 1 &&
                 EVP_EncryptUpdate(context, NULL, &length, out, 5) == 1 &&
                 EVP_EncryptUpdate(context, NULL, &length, (const unsigned char *)call->group,
                                   (int)strlen(call->group)) == 1 &&
                 EVP_EncryptUpdate(context, out + 17, &length, (const unsigned char *)plaintext, (int)at) == 1 &&
                 (total = length, EVP_EncryptFinal_ex(context, out + 17 + total, &length) == 1) &&
                 EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, out + 17 + total + length) == 1;
    total += length;
    EVP_CIPHER_CTX_free(context);
    return sealed ? 17 + (size_t)total + 16 : 0;
}

/* The caller's uid and pid, once per connection. */
static void peer_credentials(int fd, struct set_call *call) {
    struct ucred credentials;
    socklen_t size = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0) {
        call->caller_uid = credentials.uid;
        call->caller_pid = credentials.pid;
    }
}
