#!/usr/bin/env python3
"""The CPU a server spends per GB sent with sendfile(2) alone.

Writes a file of --size bytes in DIR (kept for the next run), reads it once
so it is in the page cache, then sends it whole over one loopback TCP
connection with sendfile(2) in --chunk pieces to a child process that
reads and discards. Prints the sending process's CPU seconds (getrusage)
per GB: what serving cached log bytes costs with no broker at all, to set
beside a broker's CPU per GB consumed (on loopback it includes the
receiver's softirq work, which the kernel runs on the sender's CPU).

usage: sendfile_floor.py DIR [--size 4g] [--chunk 1m]
"""
import argparse
import multiprocessing
import os
import resource
import socket
import time

from bench_sizes import size  # next to this script



def discard(port):
    sock = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(1 << 20)
    while sock.recv_into(buf):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--size", type=size, default=4 << 30)
    parser.add_argument("--chunk", type=size, default=1 << 20)
    args = parser.parse_args()
    path = os.path.join(args.dir, "sendfile-floor.dat")
    if not os.path.exists(path) or os.path.getsize(path) != args.size:
        block = os.urandom(1 << 20)
        with open(path, "wb") as out:
            for _ in range(args.size // len(block)):
                out.write(block)
            out.write(block[: args.size % len(block)])
    with open(path, "rb") as cached:
        while cached.read(8 << 20):
            pass
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    reader = multiprocessing.Process(target=discard, args=(server.getsockname()[1],))
    reader.start()
    conn, _ = server.accept()
    fd = os.open(path, os.O_RDONLY)
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    offset = 0
    while offset < args.size:
        offset += os.sendfile(conn.fileno(), fd, offset, min(args.chunk, args.size - offset))
    after, elapsed_s = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - started
    conn.close()
    reader.join()
    os.close(fd)
    gb = args.size / 1e9
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(
        f"sendfile in {args.chunk // 1024} KiB pieces: {gb:.2f} GB in {elapsed_s:.1f} s "
        f"({gb / elapsed_s * 1000:.0f} MB/s), CPU {cpu_s:.2f} s = {cpu_s / gb:.3f} CPU-s/GB"
    )


if __name__ == "__main__":
    main()
