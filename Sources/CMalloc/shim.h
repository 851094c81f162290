// SPDX-License-Identifier: Apache-2.0
// glibc's malloc extensions (malloc_trim), which the Glibc module does not include.
#include <malloc.h>
