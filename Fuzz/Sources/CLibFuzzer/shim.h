// SPDX-License-Identifier: Apache-2.0
// libFuzzer's entry for a program with a main of its own (the fuzz build links libFuzzer with -sanitize=fuzzer).
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
