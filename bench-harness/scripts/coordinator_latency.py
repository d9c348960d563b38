#!/usr/bin/env python3
"""Transactional commit and offset-commit latency of a 3-node rill cluster.

    python3 bench-harness/scripts/coordinator_latency.py OLD/rill NEW/rill [ROUNDS]

Starts a fresh 3-node cluster (one shard each, loopback, ports from below
the ephemeral range) for each binary in turn, creates a topic with RF=3 and
min.insync.replicas=2, then times with confluent-kafka (librdkafka):
- ROUNDS transactions of one record each, `commit_transaction()` alone;
- ROUNDS synchronous consumer offset commits (`commit(asynchronous=False)`).
It prints p50/p99 in ms for each binary and the NEW/OLD ratios. Coordinator
writes wait for the high watermark since issue #30 (they waited only for
the coordinator's own fsync before); this measures what that costs.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def free_ports(n, start=23000):
    ports, port = [], start + (os.getpid() % 2000)
    while len(ports) < n:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                ports.append(port)
            except OSError:
                pass
        port += 1
    return ports


def start_cluster(binary, root):
    ports = free_ports(9)
    voters = ",".join(f"{i + 1}@127.0.0.1:{ports[6 + i]}" for i in range(3))
    procs = []
    for i in range(3):
        data = os.path.join(root, f"n{i + 1}")
        os.makedirs(data)
        log = open(os.path.join(root, f"n{i + 1}.log"), "w")
        procs.append(subprocess.Popen(
            [binary, "serve", "--cores", "1", "--node-id", str(i + 1),
             "--controller-quorum-voters", voters,
             "--listen", f"127.0.0.1:{ports[i]}",
             "--admin-listen", f"127.0.0.1:{ports[3 + i]}",
             "--data-dir", data],
            stdout=log, stderr=subprocess.STDOUT))
    bootstrap = ",".join(f"127.0.0.1:{ports[i]}" for i in range(3))
    return procs, bootstrap


def wait_ready(bootstrap, timeout_s=60):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if len(admin.list_topics(timeout=2).brokers) == 3:
                return admin
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit("the cluster did not come up")


def percentiles(samples):
    samples = sorted(samples)
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    return pick(0.5) * 1000, pick(0.99) * 1000


def measure(binary, rounds):
    root = tempfile.mkdtemp(dir=os.environ.get("TMPDIR_DISK", "/var/tmp"))
    procs, bootstrap = start_cluster(binary, root)
    try:
        admin = wait_ready(bootstrap)
        for f in admin.create_topics([NewTopic("lat", 3, 3, config={"min.insync.replicas": "2"})]).values():
            f.result()
        time.sleep(2)
        # log_level 2: no lines about the brokers going away at the end.
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "lat-tx",
                             "log_level": 2})
        producer.init_transactions(60)
        commits = []
        for i in range(rounds):
            producer.begin_transaction()
            producer.produce("lat", str(i).encode(), partition=i % 3)
            producer.flush(30)
            started = time.perf_counter()
            producer.commit_transaction(60)
            commits.append(time.perf_counter() - started)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lat-g",
                             "enable.auto.commit": False, "log_level": 2})
        consumer.assign([TopicPartition("lat", 0, 0)])
        consumer.commit(offsets=[TopicPartition("lat", 0, 0)], asynchronous=False)
        offsets = []
        for i in range(rounds):
            started = time.perf_counter()
            consumer.commit(offsets=[TopicPartition("lat", 0, i + 1)], asynchronous=False)
            offsets.append(time.perf_counter() - started)
        consumer.close()
        del producer
        return percentiles(commits), percentiles(offsets)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    results = {}
    for name, binary in (("old", old), ("new", new)):
        (c50, c99), (o50, o99) = measure(binary, rounds)
        results[name] = (c50, c99, o50, o99)
        print(f"{name}: commit_transaction p50 {c50:.2f} ms p99 {c99:.2f} ms; "
              f"offset commit p50 {o50:.2f} ms p99 {o99:.2f} ms", flush=True)
    o, n = results["old"], results["new"]
    print("new/old: commit_transaction p50 %.2fx p99 %.2fx; offset commit p50 %.2fx p99 %.2fx"
          % tuple(n[i] / o[i] for i in range(4)))


if __name__ == "__main__":
    main()
