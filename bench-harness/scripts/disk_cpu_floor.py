#!/usr/bin/env python3
"""The CPU the kernel spends on a broker's disk work alone, per GB.

Appends BLOCK-byte O_DIRECT writes round-robin to FILES files preallocated
with fallocate (as rill's segments are), each write followed by an
fdatasync unless --no-sync, one call at a time, and prints the process's
CPU seconds (user + system, getrusage) per GB written. Nothing else runs:
no network, no parsing, no checksums. What a broker under the fsync policy
pays for writes and syncs of that size can be read off it, and set beside
the broker's own CPU per GB and a null-sink's (rill-bench run
--against-null-sink).

usage: disk_cpu_floor.py DIR [--block 256k] [--files 8] [--total 4g] [--no-sync]
       DIR must support O_DIRECT (not tmpfs); the files are removed after.
"""
import argparse
import mmap
import os
import resource
import sys
import time

from bench_sizes import size  # next to this script



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--block", type=size, default=256 << 10)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--total", type=size, default=4 << 30)
    parser.add_argument("--no-sync", action="store_true")
    args = parser.parse_args()
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
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
            fds.append(fd)
            os.posix_fallocate(fd, 0, per_file)
            os.fsync(fd)
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        for offset in range(0, per_file, args.block):
            for fd in fds:
                os.pwrite(fd, block, offset)
                if not args.no_sync:
                    os.fdatasync(fd)
        after, elapsed_s = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - started
    finally:
        for fd in fds:
            os.close(fd)
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    gb = per_file * args.files / 1e9
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sync = "no sync" if args.no_sync else "fdatasync each"
    print(
        f"{args.block // 1024} KiB writes to {args.files} files, {sync}: {gb:.2f} GB in "
        f"{elapsed_s:.1f} s ({gb / elapsed_s * 1000:.0f} MB/s), CPU {cpu_s:.2f} s "
        f"= {cpu_s / gb:.3f} CPU-s/GB"
    )


if __name__ == "__main__":
    main()
