"""A commit from a fenced generation, spoken by hand over raw sockets (no
client library in the way), for rill's black-box tests (tests/tests/groups.rs).

    fenced_commit.py BOOTSTRAP TOPIC GROUP

Member A joins GROUP (JoinGroup v1), syncs, commits with its generation (a
control: must be accepted). Member B joins; A sees REBALANCE_IN_PROGRESS on
its heartbeat and rejoins; both sync into the new generation. A then commits
with the old generation, and again with the new one. Prints one JSON line:
{"old_generation", "new_generation", "commit_old_before", "commit_fenced",
"commit_current"} (error codes of the three OffsetCommit v2 calls).
"""

import json
import socket
import struct
import sys
import time

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP, OFFSET_COMMIT = 10, 11, 12, 14, 8


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def blob(b):
    return struct.pack(">i", len(b)) + b


def array(items):
    return struct.pack(">i", len(items)) + b"".join(items)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def blob(self):
        n = self.take(">i")
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


class Conn:
    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.correlation = 0

    def send(self, api_key, version, body):
        self.correlation += 1
        header = struct.pack(">hhi", api_key, version, self.correlation) + string("fenced-commit")
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        return self.correlation

    def recv(self, correlation):
        size = struct.unpack(">i", self.exact(4))[0]
        r = Reader(self.exact(size))
        got = r.take(">i")
        assert got == correlation, f"correlation {got} != {correlation}"
        return r

    def call(self, api_key, version, body):
        return self.recv(self.send(api_key, version, body))

    def exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("broker closed the connection")
            buf += chunk
        return buf


def metadata(topic):
    # ConsumerProtocolSubscription v0: version, topics, user_data.
    return struct.pack(">h", 0) + array([string(topic)]) + blob(b"")


def assignment(topic, partitions):
    # ConsumerProtocolAssignment v0: version, [topic, [partition]], user_data.
    parts = array([struct.pack(">i", p) for p in partitions])
    return struct.pack(">h", 0) + array([string(topic) + parts]) + blob(b"")


def join_body(group, member, topic):
    protocols = array([string("range") + blob(metadata(topic))])
    return (
        string(group)
        + struct.pack(">ii", 6000, 10000)  # session, rebalance timeouts
        + string(member)
        + string("consumer")
        + protocols
    )


def read_join(r):
    error = r.take(">h")
    generation = r.take(">i")
    r.string()  # protocol name
    leader = r.string()
    member = r.string()
    members = []
    for _ in range(r.take(">i")):
        members.append(r.string())
        r.blob()  # the member's subscription metadata
    assert error == 0, f"JoinGroup error {error}"
    return generation, leader, member, members


def sync_body(group, generation, member, assignments):
    items = [string(m) + blob(a) for m, a in assignments]
    return string(group) + struct.pack(">i", generation) + string(member) + array(items)


def read_sync(r):
    error = r.take(">h")
    assert error == 0, f"SyncGroup error {error}"
    return r.blob()


def commit(conn, group, generation, member, topic, offset):
    body = (
        string(group)
        + struct.pack(">i", generation)
        + string(member)
        + struct.pack(">q", -1)  # retention: broker default
        + array([string(topic) + array([struct.pack(">iq", 0, offset) + string("")])])
    )
    r = conn.call(OFFSET_COMMIT, 2, body)
    topics = r.take(">i")
    assert topics == 1, topics
    r.string()
    assert r.take(">i") == 1
    r.take(">i")  # partition
    return r.take(">h")


def main():
    bootstrap, topic, group = sys.argv[1:4]
    a, b = Conn(bootstrap), Conn(bootstrap)

    r = a.call(FIND_COORDINATOR, 0, string(group))
    assert r.take(">h") == 0, "FindCoordinator failed"

    # Generation 1: A alone.
    gen1, leader, member_a, _ = read_join(a.call(JOIN_GROUP, 1, join_body(group, "", topic)))
    assert leader == member_a, (leader, member_a)
    read_sync(a.call(SYNC_GROUP, 0, sync_body(group, gen1, member_a, [(member_a, assignment(topic, [0]))])))
    commit_old_before = commit(a, group, gen1, member_a, topic, 5)

    # B joins; A learns of the rebalance from its heartbeat and rejoins.
    b_join = b.send(JOIN_GROUP, 1, join_body(group, "", topic))
    deadline = time.monotonic() + 10
    while True:
        r = a.call(HEARTBEAT, 0, string(group) + struct.pack(">i", gen1) + string(member_a))
        code = r.take(">h")
        if code == 27:  # REBALANCE_IN_PROGRESS
            break
        assert code == 0, f"heartbeat error {code}"
        assert time.monotonic() < deadline, "no rebalance after B joined"
        time.sleep(0.1)
    gen2, leader, member_a2, members = read_join(a.call(JOIN_GROUP, 1, join_body(group, member_a, topic)))
    gen2_b, _, member_b, _ = read_join(b.recv(b_join))
    assert member_a2 == member_a and gen2_b == gen2, (member_a2, member_a, gen2_b, gen2)

    # Both sync into generation 2 (the leader hands out the assignments).
    plan = [(member_a, assignment(topic, [0])), (member_b, assignment(topic, []))]
    sends = []
    for conn, member in ((a, member_a), (b, member_b)):
        given = plan if member == leader else []
        sends.append((conn, conn.send(SYNC_GROUP, 0, sync_body(group, gen2, member, given))))
    for conn, correlation in sends:
        read_sync(conn.recv(correlation))

    commit_fenced = commit(a, group, gen1, member_a, topic, 7)
    commit_current = commit(a, group, gen2, member_a, topic, 9)
    print(
        json.dumps(
            {
                "old_generation": gen1,
                "new_generation": gen2,
                "commit_old_before": commit_old_before,
                "commit_fenced": commit_fenced,
                "commit_current": commit_current,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
