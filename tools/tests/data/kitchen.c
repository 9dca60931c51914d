/* Everything shipped code must support, in one ifunc (see test_build.py). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

extern long some_target_var;                          /* the target program's */
extern int  optional_hook(int) __attribute__((weak)); /* defined nowhere */
extern int  util_counter;                             /* kitchen_util.c */
int         util_tail(int x);
int         util_say(const char *text);

static const char *names[]                  = {"alpha", "beta", "gamma"};
static int (*const ext_fns[])(const char *) = {atoi, util_say, puts};
static const double factors[]               = {0.5, 1.5, 2.5, 3.5};
static int          calls;       /* .bss */
static long         total = 100; /* .data */

static int compare(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Different calls per case keep this a jump table at every -O level. */
static int classify(int x, char *out, size_t size)
{
    switch (x) {
        case 0:
            return snprintf(out, size, "zero");
        case 1:
            return snprintf(out, size, "one%d", x);
        case 2:
            strcpy(out, "two");
            return 2;
        case 3:
            return snprintf(out, size, "%x", x * 11);
        case 4:
            out[0] = 'f';
            out[1] = 0;
            return 4;
        case 5:
            return (int)strlen(strcpy(out, "five"));
        case 6:
            return snprintf(out, size, "six%ld", total);
        case 7:
            memset(out, 's', 3);
            out[3] = 0;
            return 7;
        default:
            out[0] = 0;
            return -1;
    }
}

size_t kitchen_payload_bound(void *args, size_t size)
{
    return size + 1;
}

int kitchen_payload_init(void *args, size_t size, void *payload,
                         size_t *payload_size)
{
    if (getenv("KITCHEN_NEVER_SET") != NULL) {
        return -1;
    }
    memcpy(payload, args, size);
    ((char *)payload)[size] = '\0';
    *payload_size           = size + 1;
    return 0;
}

void kitchen_main(void *payload, size_t payload_size, void *target_args)
{
    const char  *text = payload;
    size_t       n    = strlen(text);
    volatile int pick = 0;
    char         word[32], line[256], copy[64];
    int          values[8], i;

    volatile size_t copy_size = n < sizeof(copy) ? n + 1 : sizeof(copy);
    memcpy(copy, text, copy_size); /* a real call: the size is opaque */
    for (i = 0; i < 8; i++) {
        values[i] = (copy[i % n] * (i + 1)) % 9;
    }
    qsort(values, 8, sizeof(values[0]), compare);
    calls++;
    total += calls;

    errno = 0;
    strtol("99999999999999999999999", NULL, 10);
    int    saved_errno = errno;
    double root        = sqrt(factors[calls & 3] * (double)n);
    classify(values[(calls + n) % 8], word, sizeof(word));

    snprintf(line, sizeof(line), "%s|%s|%d|%.4f|%.4f|%ld|%d", names[n % 3],
             word, saved_errno, root, exp(root / 8), total, calls);
    fputs(line, stdout);
    printf("|%lu|%ld|%d|%d|%d|%d\n", crc32(0L, (const Bytef *)text, (uInt)n),
           some_target_var, util_tail((int)n), util_counter,
           ext_fns[pick]("42"), optional_hook ? optional_hook(1) : -1);
    ext_fns[pick + 1]("via a table of function pointers");
    fflush(stdout);
}
