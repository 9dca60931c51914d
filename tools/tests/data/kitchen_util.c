/* Second translation unit of the kitchen ifunc. */
#include <stdio.h>

int util_counter = 3;

__attribute__((noinline)) int util_scale(int x)
{
    util_counter++;
    return x * 3;
}

int util_tail(int x)
{
    return util_scale(x + 1); /* tail call inside the image */
}

int util_say(const char *text)
{
    return puts(text); /* tail call to an import */
}
