#!/usr/bin/env python3
"""The CPU the kernel spends on a broker's disk work alone, per GB.

Appends BLOCK-byte O_DIRECT writes round-robin to FILES files preallocated
with fallocate (as rill's segments are), each write followed by an
fdatasync unless --no-sync, one call at a time, and prints the process's
CPU seconds (user + system, getrusage) per GB written, its context
switches per GB, and the bytes the file system's disk wrote per GB
(/proc/diskstats, the whole device: journal and metadata included).

--sync dsync writes with pwritev2(RWF_DSYNC) instead of write + fdatasync:
one call, and where the write changes no metadata the file system can
complete it as a FUA write without a journal commit. --prepare zero fills
the files with zeros first (written and synced, so their extents are
written, not unwritten): an overwrite then changes no metadata, which is
what lets RWF_DSYNC skip the journal. The default, --prepare fallocate,
leaves unwritten extents that each first write converts (a journalled
metadata change), as a freshly preallocated segment does. --preallocate
SIZE reserves SIZE per file (at least what is written): 1g, as a broker's
1 GiB segment, gives each file more than the four extents its inode holds
(ext4 caps an unwritten extent at 128 MiB), so every fdatasync writes an
extent-tree block as well as the inode. Nothing else runs:
no network, no parsing, no checksums. What a broker under the fsync policy
pays for writes and syncs of that size can be read off it, and set beside
the broker's own CPU per GB and a null-sink's (rill-bench run
--against-null-sink).

usage: disk_cpu_floor.py DIR [--block 256k] [--files 8] [--total 4g]
                          [--sync fdatasync|dsync|none] [--prepare fallocate|zero]
                          [--preallocate SIZE] [--no-sync (= --sync none)]
       DIR must support O_DIRECT (not tmpfs); the files are removed after.
"""
import argparse
import mmap
import os
import resource
import sys
import time

from bench_sizes import size  # next to this script



def device_written_bytes(path):
    """Bytes written so far by the block device holding `path` (whole
    device: partitions map to their disk's line by major:minor)."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    with open("/proc/diskstats") as stats:
        for line in stats:
            fields = line.split()
            if int(fields[0]) == major and int(fields[1]) == minor:
                return int(fields[9]) * 512
    return None


def device_name(path):
    """The kernel's name of the block device holding `path` (`vda`, `loop3`)."""
    dev = os.stat(path).st_dev
    try:
        return os.path.basename(os.readlink(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    except OSError:
        return None


def journal_writes(path):
    """Journal commits so far of the file system holding `path`: ext4's
    jbd2 transactions, or XFS's log writes; None for neither (an ext4
    without a journal has no jbd2 entry)."""
    name = device_name(path)
    if name is None:
        return None
    try:
        with open(f"/proc/fs/jbd2/{name}-8/info") as info:
            return int(info.readline().split()[0])
    except OSError:
        pass
    try:
        with open(f"/sys/fs/xfs/{name}/stats/stats") as stats:
            for line in stats:
                if line.startswith("log "):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def prepare(fds, per_file, how, block_bytes, preallocate):
    zeros = mmap.mmap(-1, block_bytes)  # zero-filled and page-aligned
    for fd in fds:
        os.posix_fallocate(fd, 0, max(per_file, preallocate))
        if how == "zero":
            for offset in range(0, per_file, block_bytes):
                os.pwrite(fd, zeros, offset)
        os.fsync(fd)


def append_all(fds, per_file, block, sync):
    for offset in range(0, per_file, len(block)):
        for fd in fds:
            if sync == "dsync":
                os.pwritev(fd, [block], offset, os.RWF_DSYNC)
                continue
            os.pwrite(fd, block, offset)
            if sync == "fdatasync":
                os.fdatasync(fd)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--block", type=size, default=256 << 10)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--total", type=size, default=4 << 30)
    parser.add_argument("--sync", choices=["fdatasync", "dsync", "none"], default="fdatasync")
    parser.add_argument("--prepare", choices=["fallocate", "zero"], default="fallocate")
    parser.add_argument("--no-sync", action="store_true")
    parser.add_argument("--preallocate", type=size, default=0)
    args = parser.parse_args()
    if args.no_sync:
        args.sync = "none"
    if args.block % 4096 or args.block <= 0 or args.files <= 0:
        sys.exit("--block must be a positive multiple of 4 KiB, --files positive")
    per_file = args.total // args.files // args.block * args.block
    if per_file == 0:
        sys.exit("--total must hold one block per file")
    # An anonymous mapping is page-aligned, as O_DIRECT needs.
    block = mmap.mmap(-1, args.block)
    block.write(os.urandom(args.block))
    paths = [os.path.join(args.dir, f"disk-cpu-floor-{i}.log") for i in range(args.files)]
    fds = []
    try:
        for path in paths:
            fds.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644))
        prepare(fds, per_file, args.prepare, args.block, args.preallocate)
        os.sync()
        disk_before = device_written_bytes(args.dir)
        journal_before = journal_writes(args.dir)
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        append_all(fds, per_file, block, args.sync)
        after, elapsed_s = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - started
        os.sync()
        disk_after = device_written_bytes(args.dir)
        journal_after = journal_writes(args.dir)
    finally:
        for fd in fds:
            os.close(fd)
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    gb = per_file * args.files / 1e9
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    switches = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw)
    disk = "?"
    if disk_before is not None and disk_after is not None:
        disk = f"{(disk_after - disk_before) / 1e9 / gb:.3f}"
    journal = "no journal seen"
    if journal_before is not None and journal_after is not None:
        writes = (per_file // args.block) * args.files
        journal = f"{(journal_after - journal_before) / writes:.2f} journal commits per write"
    print(
        f"{args.block // 1024} KiB writes to {args.files} files, prepare {args.prepare}, "
        f"sync {args.sync}: {gb:.2f} GB in {elapsed_s:.1f} s ({gb / elapsed_s * 1000:.0f} MB/s), "
        f"CPU {cpu_s:.2f} s = {cpu_s / gb:.3f} CPU-s/GB, {switches / gb:.0f} context switches/GB, "
        f"{disk} GB written to the device per GB, {journal}"
    )


if __name__ == "__main__":
    main()
