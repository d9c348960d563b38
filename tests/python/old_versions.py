"""Request versions Kafka 4.0 dropped and Kafka 3.9 still served, sent with
kafka-python's own definitions of them (`kafka.protocol.old`: an encoder and
decoder written independently of rill's), driven by tests/tests/old_clients.rs.

    old_versions.py BOOTSTRAP

Expects topic `old` (2 partitions) with 10 records in partition 0 and none
in partition 1, and a broker that checks offset expiry every 200 ms. Each check prints `ok <name>`; the first failing one raises
(exit status 1). A response that does not decode to its last byte fails.
"""

import io
import socket
import struct
import sys
import time

from kafka.protocol.old import admin, commit, find_coordinator, group, list_offsets, metadata
from kafka.protocol.old import offset_for_leader_epoch as ofle

NONE, UNKNOWN_TOPIC, ILLEGAL_GENERATION, UNKNOWN_MEMBER, TOPIC_EXISTS = 0, 3, 22, 25, 36


class Conn:
    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def call(self, request, response_class):
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="old-versions")
        self.sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", self.read(4))[0]
        body = io.BytesIO(self.read(size))
        correlation = struct.unpack(">i", body.read(4))[0]
        assert correlation == self.correlation, (correlation, self.correlation)
        response = response_class.decode(body)
        rest = body.read()
        assert not rest, f"{response_class.__name__}: {len(rest)} bytes left over"
        return response.to_object()

    def read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return out


def ok(name):
    print(f"ok {name}", flush=True)


def check_topics(c):
    r = c.call(admin.CreateTopicsRequest_v0(
        topics=[("made-v0", 3, 1, [], [])], timeout_ms=10000), admin.CreateTopicsResponse_v0)
    assert r["topics"] == [{"name": "made-v0", "error_code": NONE}], r
    r = c.call(admin.CreateTopicsRequest_v0(
        topics=[("made-v0", 1, 1, [], [])], timeout_ms=10000), admin.CreateTopicsResponse_v0)
    assert r["topics"] == [{"name": "made-v0", "error_code": TOPIC_EXISTS}], r
    ok("CreateTopics v0")
    r = c.call(admin.CreateTopicsRequest_v1(
        topics=[("made-v1", 1, 1, [], [])], timeout_ms=10000, validate_only=True),
        admin.CreateTopicsResponse_v1)
    assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("made-v1", NONE)], r
    r = c.call(admin.CreateTopicsRequest_v1(
        topics=[("made-v0", 1, 1, [], [])], timeout_ms=10000, validate_only=False),
        admin.CreateTopicsResponse_v1)
    t = r["topics"][0]
    assert t["error_code"] == TOPIC_EXISTS and t["error_message"], r
    ok("CreateTopics v1")

    # v0: an empty list means every topic (from v1 that is null).
    r = c.call(metadata.MetadataRequest_v0(topics=[]), metadata.MetadataResponse_v0)
    listed = {t["name"]: len(t["partitions"]) for t in r["topics"]}
    assert listed.get("old") == 2 and listed.get("made-v0") == 3, listed
    assert "made-v1" not in listed, "validate_only created a topic"
    assert len(r["brokers"]) >= 1, r
    ok("Metadata v0 empty list lists all topics")

    r = c.call(admin.DeleteTopicsRequest_v0(topic_names=["made-v0"], timeout_ms=10000),
               admin.DeleteTopicsResponse_v0)
    assert r["responses"] == [{"name": "made-v0", "error_code": NONE}], r
    r = c.call(admin.DeleteTopicsRequest_v0(topic_names=["made-v0"], timeout_ms=10000),
               admin.DeleteTopicsResponse_v0)
    assert r["responses"] == [{"name": "made-v0", "error_code": UNKNOWN_TOPIC}], r
    ok("DeleteTopics v0")


def check_list_offsets(c):
    r = c.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[(
        "old", [(0, -1, 1), (1, -2, 1), (0, -2, 1), (9, -1, 1)])]),
        list_offsets.ListOffsetsResponse_v0)
    got = [(p["partition_index"], p["error_code"], p["old_style_offsets"])
           for p in r["topics"][0]["partitions"]]
    assert got == [(0, NONE, [10]), (1, NONE, [0]), (0, NONE, [0]), (9, UNKNOWN_TOPIC, [])], got
    # A time after every record: the log end; max_num_offsets 0: none; time 0: the first.
    r = c.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[(
        "old", [(0, 4102444800000, 5), (0, -1, 0), (0, 0, 1)])]),
        list_offsets.ListOffsetsResponse_v0)
    got = [p["old_style_offsets"] for p in r["topics"][0]["partitions"]]
    assert got == [[10], [], [0]], got
    ok("ListOffsets v0")


def fetch_offsets(c, group_id, version):
    request = getattr(commit, f"OffsetFetchRequest_v{version}")
    response = getattr(commit, f"OffsetFetchResponse_v{version}")
    r = c.call(request(group_id=group_id, topics=[("old", [0, 1])]), response)
    return {p["partition_index"]: (p["committed_offset"], p["error_code"])
            for t in r["topics"] for p in t["partitions"]}


def commit_v0(c, group_id, offset):
    r = c.call(commit.OffsetCommitRequest_v0(group_id=group_id, topics=[(
        "old", [(0, offset, "m0")])]), commit.OffsetCommitResponse_v0)
    return r["topics"][0]["partitions"][0]["error_code"]


def commit_v1(c, group_id, generation, member, offset, timestamp_ms=-1):
    r = c.call(commit.OffsetCommitRequest_v1(
        group_id=group_id, generation_id_or_member_epoch=generation, member_id=member,
        topics=[("old", [(0, offset, timestamp_ms, "m1")])]), commit.OffsetCommitResponse_v1)
    return r["topics"][0]["partitions"][0]["error_code"]


def check_simple_commits(c):
    assert commit_v0(c, "simple", 4) == NONE
    assert fetch_offsets(c, "simple", 0) == {0: (4, NONE), 1: (-1, NONE)}
    assert fetch_offsets(c, "simple", 1) == {0: (4, NONE), 1: (-1, NONE)}
    ok("OffsetCommit v0 then OffsetFetch v0/v1")
    assert commit_v1(c, "simple", -1, "", 6) == NONE
    assert fetch_offsets(c, "simple", 0)[0] == (6, NONE)
    ok("OffsetCommit v1 without a generation")


def commit_v2(c, group_id, retention_ms, offset):
    r = c.call(commit.OffsetCommitRequest_v2(
        group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
        retention_time_ms=retention_ms, topics=[("old", [(0, offset, "m2")])]),
        commit.OffsetCommitResponse_v2)
    return r["topics"][0]["partitions"][0]["error_code"]


def check_retention(c):
    # v2-v4's retention_time_ms sets the offsets' own expiry; -1 keeps the
    # broker's (a week).
    assert commit_v2(c, "short-lived", 1000, 3) == NONE
    assert commit_v2(c, "kept", -1, 3) == NONE
    # v1's commit timestamp is the commit's time: eight days ago is past the
    # broker's week of retention for a group that only stores offsets.
    eight_days_ago_ms = int(time.time() * 1000) - 8 * 24 * 3600 * 1000
    assert commit_v1(c, "stamped", -1, "", 3, eight_days_ago_ms) == NONE
    assert fetch_offsets(c, "short-lived", 1)[0] == (3, NONE)
    time.sleep(2.5)
    assert fetch_offsets(c, "short-lived", 1)[0] == (-1, NONE), "expired after 1 s"
    assert fetch_offsets(c, "stamped", 1)[0] == (-1, NONE), "expired: committed 8 days ago"
    assert fetch_offsets(c, "kept", 1)[0] == (3, NONE)
    ok("OffsetCommit v2 retention_time_ms, v1 commit timestamp")


def check_group_cycle(c, port):
    r = c.call(find_coordinator.FindCoordinatorRequest_v0(key="old-group"),
               find_coordinator.FindCoordinatorResponse_v0)
    assert r["error_code"] == NONE and r["port"] == port, r
    ok("FindCoordinator v0")
    subscription = group.ProtocolMetadata(version=0, subscription=["old"], user_data=b"").encode()
    r = c.call(group.JoinGroupRequest_v0(
        group_id="old-group", session_timeout_ms=10000, member_id="", protocol_type="consumer",
        protocols=[("range", subscription)]), group.JoinGroupResponse_v0)
    assert r["error_code"] == NONE, r
    generation, member = r["generation_id"], r["member_id"]
    assert generation >= 1 and member and r["leader"] == member, r
    assert r["protocol_name"] == "range" and len(r["members"]) == 1, r
    assignment = group.MemberAssignment(version=0, assignment=[("old", [0, 1])], user_data=b"").encode()
    r = c.call(group.SyncGroupRequest_v0(
        group_id="old-group", generation_id=generation, member_id=member,
        assignments=[(member, assignment)]), group.SyncGroupResponse_v0)
    assert r["error_code"] == NONE and r["assignment"] == assignment, r
    r = c.call(group.HeartbeatRequest_v0(group_id="old-group", generation_id=generation,
                                         member_id=member), group.HeartbeatResponse_v0)
    assert r["error_code"] == NONE, r
    ok("JoinGroup/SyncGroup/Heartbeat v0")
    assert commit_v1(c, "old-group", generation, member, 8) == NONE
    assert commit_v1(c, "old-group", generation + 1, member, 9) == ILLEGAL_GENERATION
    # v0 carries no membership: a simple commit, refused while the group has members.
    assert commit_v0(c, "old-group", 9) == UNKNOWN_MEMBER
    assert fetch_offsets(c, "old-group", 0)[0] == (8, NONE)
    ok("OffsetCommit v1 in a generation")
    r = c.call(admin.DescribeGroupsRequest_v0(groups=["old-group"]), admin.DescribeGroupsResponse_v0)
    g = r["groups"][0]
    assert g["error_code"] == NONE and g["group_state"] == "Stable", g
    assert [m["member_id"] for m in g["members"]] == [member], g
    # Kafka shows the member's address as Java's InetAddress prints it.
    assert [m["client_host"] for m in g["members"]] == ["/127.0.0.1"], g
    r = c.call(admin.ListGroupsRequest_v0(), admin.ListGroupsResponse_v0)
    assert {"group_id": "old-group", "protocol_type": "consumer"} in r["groups"], r
    ok("DescribeGroups/ListGroups v0")
    r = c.call(group.LeaveGroupRequest_v0(group_id="old-group", member_id=member),
               group.LeaveGroupResponse_v0)
    assert r["error_code"] == NONE, r
    # Empty now: a simple commit lands.
    assert commit_v0(c, "old-group", 9) == NONE
    assert fetch_offsets(c, "old-group", 0)[0] == (9, NONE)
    ok("LeaveGroup v0 then a simple commit")


def check_admin(c):
    r = c.call(admin.DescribeConfigsRequest_v0(resources=[(2, "old", None), (2, "nope", None)]),
               admin.DescribeConfigsResponse_v0)
    found, missing = r["results"]
    assert found["error_code"] == NONE and found["configs"], found
    names = {e["name"] for e in found["configs"]}
    assert "retention.ms" in names and "cleanup.policy" in names, names
    # A fresh topic overrides nothing. Only min.insync.replicas is not a
    # default: the controller sets it cluster-wide (a dynamic broker
    # default), as Kafka 4.1's does with eligible leader replicas on.
    dynamic = [e["name"] for e in found["configs"] if not e["is_default"]]
    assert dynamic == ["min.insync.replicas"], found["configs"]
    assert missing["error_code"] == UNKNOWN_TOPIC, missing
    r = c.call(admin.DescribeConfigsRequest_v0(resources=[(2, "old", ["retention.ms"])]),
               admin.DescribeConfigsResponse_v0)
    assert [e["name"] for e in r["results"][0]["configs"]] == ["retention.ms"], r
    ok("DescribeConfigs v0")
    r = c.call(admin.DescribeLogDirsRequest_v0(topics=None), admin.DescribeLogDirsResponse_v0)
    dirs = r["results"]
    assert len(dirs) == 1 and dirs[0]["error_code"] == NONE, r
    sizes = {p["partition_index"]: p["partition_size"]
             for t in dirs[0]["topics"] if t["name"] == "old" for p in t["partitions"]}
    assert set(sizes) == {0, 1} and sizes[0] > 0, sizes
    ok("DescribeLogDirs v0")
    for version in (0, 1):
        request = getattr(ofle, f"OffsetForLeaderEpochRequest_v{version}")
        response = getattr(ofle, f"OffsetForLeaderEpochResponse_v{version}")
        r = c.call(request(topics=[("old", [(0, 0)])]), response)
        p = r["topics"][0]["partitions"][0]
        assert (p["error_code"], p["partition"], p["end_offset"]) == (NONE, 0, 10), p
        if version == 1:
            assert p["leader_epoch"] == 0, p
    ok("OffsetForLeaderEpoch v0/v1")


def check_admin_changes(c):
    """Last: they change `old` (a config, its log start, its partitions)."""
    r = c.call(admin.AlterConfigsRequest_v0(
        resources=[(2, "old", [("retention.ms", "86400000")])], validate_only=False),
        admin.AlterConfigsResponse_v0)
    assert [(e["error_code"], e["resource_name"]) for e in r["responses"]] == [(NONE, "old")], r
    r = c.call(admin.DescribeConfigsRequest_v0(resources=[(2, "old", ["retention.ms"])]),
               admin.DescribeConfigsResponse_v0)
    (entry,) = r["results"][0]["configs"]
    assert entry["value"] == "86400000" and not entry["is_default"], entry
    ok("AlterConfigs v0, then DescribeConfigs v0 shows the override")
    r = c.call(admin.DeleteRecordsRequest_v0(topics=[("old", [(0, 2)])], timeout_ms=10000),
               admin.DeleteRecordsResponse_v0)
    p = r["topics"][0]["partitions"][0]
    assert (p["error_code"], p["low_watermark"]) == (NONE, 2), p
    r = c.call(list_offsets.ListOffsetsRequest_v0(replica_id=-1, topics=[("old", [(0, -2, 1)])]),
               list_offsets.ListOffsetsResponse_v0)
    assert r["topics"][0]["partitions"][0]["old_style_offsets"] == [2], r
    ok("DeleteRecords v0, then ListOffsets v0 earliest")
    r = c.call(admin.CreatePartitionsRequest_v0(topics=[("old", (3, None))], timeout_ms=10000,
                                                validate_only=False),
               admin.CreatePartitionsResponse_v0)
    assert [(e["name"], e["error_code"]) for e in r["results"]] == [("old", NONE)], r
    r = c.call(metadata.MetadataRequest_v0(topics=["old"]), metadata.MetadataResponse_v0)
    assert len(r["topics"][0]["partitions"]) == 3, r
    ok("CreatePartitions v0")
    r = c.call(admin.DeleteGroupsRequest_v0(groups_names=["simple", "no-such-group"]),
               admin.DeleteGroupsResponse_v0)
    codes = {e["group_id"]: e["error_code"] for e in r["results"]}
    assert codes["simple"] == NONE and codes["no-such-group"] != NONE, codes
    assert fetch_offsets(c, "simple", 0)[0] == (-1, NONE)
    ok("DeleteGroups v0")


def main():
    bootstrap = sys.argv[1]
    port = int(bootstrap.rsplit(":", 1)[1])
    c = Conn(bootstrap)
    check_topics(c)
    check_list_offsets(c)
    check_simple_commits(c)
    check_retention(c)
    check_group_cycle(c, port)
    check_admin(c)
    check_admin_changes(c)


if __name__ == "__main__":
    main()
