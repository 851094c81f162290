/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-c-json: libexponea-auth's JSON reader (src/json.c), which reads the daemon's replies and the HTTP bodies an
 * app hands to exponea_auth_report_response(). What must hold for any input:
 *   - json_parse() accepts it or returns -EPROTO or -EMSGSIZE, reading nothing outside it (AddressSanitizer);
 *   - an accepted document's tokens nest: each subtree ends after it starts and within the document, and a
 *     container's members, walked one subtree at a time, end exactly where it does;
 *   - every string unescapes into a buffer of its raw length plus its NUL (unescaping never lengthens), and
 *     json_get() finds every key of an object.
 * With -DFUZZING it is a libFuzzer target (scripts/fuzz); without, it replays the files and folders it is given, as
 * Tests/CLibraryTests does with Fuzz/corpus/fuzz-c-json.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define CHECK(condition)                                                                                   \
        do {                                                                                               \
                if (!(condition)) {                                                                        \
                        fprintf(stderr, "fuzz-c-json: invariant violated: %s (line %d)\n", #condition, __LINE__); \
                        abort();                                                                           \
                }                                                                                          \
        } while (0)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
        /* A copy of exactly the input's size, so that a read past it is AddressSanitizer's to see. */
        char *text = malloc(size ? size : 1);
        if (!text) return 0;
        memcpy(text, data, size);
        jtok tokens[128];
        jdoc doc = {.tokens = tokens, .capacity = sizeof tokens / sizeof *tokens};
        int result = json_parse(&doc, text, size);
        CHECK(result == 0 || result == -EPROTO || result == -EMSGSIZE);
        if (result == 0) {
                CHECK(doc.count >= 1 && doc.tokens[0].next == doc.count);
                for (uint32_t i = 0; i < doc.count; i++) {
                        const jtok *t = &doc.tokens[i];
                        CHECK(t->next > i && t->next <= doc.count);
                        if (t->type == JSON_OBJECT || t->type == JSON_ARRAY) {
                                uint32_t child = i + 1;
                                for (uint32_t m = 0; m < t->length; m++) {
                                        if (t->type == JSON_OBJECT) {
                                                CHECK(doc.tokens[child].type == JSON_STRING);
                                                child = doc.tokens[child].next;
                                        }
                                        CHECK(child < t->next);
                                        child = doc.tokens[child].next;
                                }
                                CHECK(child == t->next);
                        }
                        if (t->type == JSON_STRING) {
                                char *out = malloc(t->length + 1);
                                int n = json_string(&doc, (int)i, out, t->length + 1);
                                CHECK(n == -EPROTO || (n >= 0 && (uint32_t)n <= t->length && out[n] == 0));
                                free(out);
                        }
                        uint64_t value;
                        json_u64(&doc, (int)i, &value);
                }
                /* Every key of the outer object is found, with the first value of that name. */
                if (doc.tokens[0].type == JSON_OBJECT) {
                        uint32_t key = 1;
                        for (uint32_t m = 0; m < doc.tokens[0].length; m++) {
                                char name[64];
                                if (json_string(&doc, (int)key, name, sizeof name) >= 0 && !memchr(text + doc.tokens[key].start, '\\', doc.tokens[key].length))
                                        CHECK(json_get(&doc, 0, name) >= 0);
                                key = doc.tokens[key + 1].next;
                        }
                }
                CHECK(json_at(&doc, 0, json_size(&doc, 0)) == -1);
        }
        free(text);
        return 0;
}

#ifndef FUZZING
static int replay_file(const char *path) {
        FILE *file = fopen(path, "rb");
        if (!file) return -1;
        static unsigned char buffer[1 << 20];
        size_t size = fread(buffer, 1, sizeof buffer, file);
        fclose(file);
        LLVMFuzzerTestOneInput(buffer, size);
        return 0;
}

/* Replays every file named, and every file in every folder named. */
int main(int argc, char **argv) {
        int count = 0;
        for (int i = 1; i < argc; i++) {
                DIR *folder = opendir(argv[i]);
                if (!folder) {
                        if (replay_file(argv[i]) < 0) return fprintf(stderr, "fuzz-c-json: cannot read %s\n", argv[i]), 1;
                        count++;
                        continue;
                }
                struct dirent *entry;
                while ((entry = readdir(folder))) {
                        if (entry->d_name[0] == '.') continue;
                        char path[4096];
                        snprintf(path, sizeof path, "%s/%s", argv[i], entry->d_name);
                        if (replay_file(path) < 0) return fprintf(stderr, "fuzz-c-json: cannot read %s\n", path), 1;
                        count++;
                }
                closedir(folder);
        }
        printf("fuzz-c-json: %d inputs\n", count);
        return 0;
}
#endif
