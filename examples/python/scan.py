"""scan: a Python-written ifunc that sums a field over an array of records.

Two targets' layouts, one kernel each:

- perf_scan (tools/perftest/perf_scan.h): target_args is a table
  {uint64 count; uint64 sum; {uint32 key; uint32 value} records[count]};
  the payload {uint32 key_below; uint32 reserved}. main sums the values
  of the records whose key is below key_below into sum: the C perf_scan's
  loop, for comparing the two (docs/benchmarks.md).
- kv_scan (examples/kv/kv.h): target_args is the key-value service's
  kv_side_t, whose first field points to its table {uint64 mask, count,
  refused, replies_failed; {uint64 key; uint64 value} slot[mask + 1]};
  the payload {uint64 lo, hi, result_key}. main sums the values of the
  keys in [lo, hi) and puts the sum under result_key (linear probing from
  kv_hash(key), as kv.h's kv_find).
"""

# ucx_ifunc first: its C library has initial-exec TLS, which a dlopen
# after Numba's LLVM may find exhausted
import ucx_ifunc

import numba  # noqa: E402
import numpy as np  # noqa: E402

PERF_SCAN_HEADER = 16  # uint64 count, uint64 sum


def perf_scan_table(records):
    """A perf_scan table of records (a NumPy uint8 buffer, to be a target's
    target_args): key i % 1000, value (i * 7) % 65521, sum 0."""
    table = np.zeros(PERF_SCAN_HEADER + 8 * records, np.uint8)
    table[:8].view(np.uint64)[0] = records
    fields = table[PERF_SCAN_HEADER:].view(np.uint32)
    index = np.arange(records, dtype=np.uint64)
    fields[0::2] = index % 1000
    fields[1::2] = (index * 7) % 65521
    return table


def perf_scan_expected(table, key_below):
    """What perf_scan writes into table's sum for key_below."""
    fields = table[PERF_SCAN_HEADER:].view(np.uint32)
    keys, values = fields[0::2], fields[1::2]
    return int(values[keys < key_below].astype(np.uint64).sum())


def perf_scan_sum(table):
    return int(table[8:16].view(np.uint64)[0])


@ucx_ifunc.ifunc(name="perf_scan")
def perf_scan(payload, size, target_args):
    if size != 8:
        return
    key_below = numba.carray(payload, 2, np.uint32)[0]
    count = numba.carray(target_args, 2, np.uint64)[0]
    records = numba.carray(ucx_ifunc.offset(target_args, 16), 2 * count,
                           np.uint32)
    total = np.uint64(0)
    for i in range(count):
        value = records[2 * i + 1]
        total += value if records[2 * i] < key_below else np.uint32(0)
    numba.carray(target_args, 2, np.uint64)[1] = total


@numba.njit(inline="always")
def kv_hash(x):
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xbf58476d1ce4e5b9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94d049bb133111eb)
    x ^= x >> np.uint64(31)
    return x


@ucx_ifunc.ifunc(name="kv_scan")
def kv_scan(payload, size, target_args):
    if size != 24:
        return
    query = numba.carray(payload, 3, np.uint64)
    lo, hi, result_key = query[0], query[1], query[2]
    table_address = numba.carray(target_args, 1, np.uint64)[0]
    head = numba.carray(ucx_ifunc.pointer(table_address), 4, np.uint64)
    slots = head[0] + np.uint64(1)
    slot = numba.carray(ucx_ifunc.offset(ucx_ifunc.pointer(table_address),
                                         32), 2 * slots, np.uint64)
    total = np.uint64(0)
    for i in range(slots):
        key = slot[2 * i]
        total += slot[2 * i + 1] if (key >= lo) & (key < hi) else \
            np.uint64(0)
    if result_key == 0:
        return
    i = kv_hash(result_key) & head[0]
    for _ in range(slots):
        if slot[2 * i] == result_key or slot[2 * i] == 0:
            if slot[2 * i] == 0:
                slot[2 * i] = result_key
                head[1] += np.uint64(1)
            slot[2 * i + 1] = total
            return
        i = (i + np.uint64(1)) & head[0]
    head[2] += np.uint64(1)  # the table is full: refused
