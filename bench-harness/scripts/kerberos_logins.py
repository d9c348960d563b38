#!/usr/bin/env python3
"""Broker CPU per SASL login: GSSAPI (Kerberos) against PLAIN and
SCRAM-SHA-512, on one rill, in interleaved rounds.

    kerberos_logins.py RILL DIR [LOGINS] [ROUNDS]

Makes a Kerberos realm of its own in DIR (MIT's krb5kdc, kdb5_util,
kadmin.local and kinit: Debian's krb5-kdc, krb5-admin-server, krb5-user)
and starts RILL with a SASL_PLAINTEXT listener offering the three
mechanisms. Each login is a new connection: SaslHandshake, the
SaslAuthenticate exchange, close (GSSAPI through the Python `gssapi`
module, the service ticket cached after the first). The broker's CPU
(utime + stime of its process) is read before and after each batch of
LOGINS logins; prints, per mechanism and round, the CPU ms per 1000
logins, logins/s, and the ratio to PLAIN of that round.
"""

import base64
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import time

REALM = "RILL.TEST"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kerberos(dir_):
    """A realm in dir_: its env for clients and the broker's keytab."""
    port = free_port()
    conf = os.path.join(dir_, "krb5.conf")
    with open(conf, "w") as f:
        f.write(f"[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n"
                f" rdns = false\n udp_preference_limit = 1\n"
                f"[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n")
    kdc_conf = os.path.join(dir_, "kdc.conf")
    with open(kdc_conf, "w") as f:
        f.write(f"[kdcdefaults]\n kdc_ports = {port}\n kdc_tcp_ports = {port}\n"
                f"[realms]\n {REALM} = {{\n  database_name = {dir_}/principal\n"
                f"  key_stash_file = {dir_}/stash\n }}\n")
    env = dict(os.environ, KRB5_CONFIG=conf, KRB5_KDC_PROFILE=kdc_conf,
               KRB5CCNAME=os.path.join(dir_, "alice.ccache"))
    run = lambda *args: subprocess.run(args, env=env, check=True, capture_output=True)
    run("kdb5_util", "-r", REALM, "-P", "master", "create", "-s")
    kdc = subprocess.Popen(["krb5kdc", "-n"], env=env)
    time.sleep(0.5)
    keytab = os.path.join(dir_, "kafka.keytab")
    client_keytab = os.path.join(dir_, "alice.keytab")
    for principal, tab in (("kafka/127.0.0.1", keytab), ("alice", client_keytab)):
        run("kadmin.local", "-q", f"addprinc -randkey {principal}")
        run("kadmin.local", "-q", f"ktadd -k {tab} {principal}")
    run("kinit", "-kt", client_keytab, "alice")
    return env, keytab, kdc


def frame(api_key, version, correlation, body):
    header = struct.pack(">hhih", api_key, version, correlation, 5) + b"bench"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def exchange(sock, api_key, version, body, correlation=[0]):
    correlation[0] += 1
    sock.sendall(frame(api_key, version, correlation[0], body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)[4:]


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def authenticate(sock, token):
    """SaslAuthenticate v1: the server's token, or an error."""
    answer = exchange(sock, 36, 1, struct.pack(">i", len(token)) + token)
    error = struct.unpack(">h", answer[:2])[0]
    length = struct.unpack(">h", answer[2:4])[0]
    rest = answer[4 + max(length, 0):]
    if error:
        raise RuntimeError(f"SaslAuthenticate error {error}")
    size = struct.unpack(">i", rest[:4])[0]
    return rest[4:4 + size]


def handshake(sock, mechanism):
    name = mechanism.encode()
    answer = exchange(sock, 17, 1, struct.pack(">h", len(name)) + name)
    if struct.unpack(">h", answer[:2])[0]:
        raise RuntimeError(f"{mechanism} not offered")


def plain(sock):
    authenticate(sock, b"\0alice\0alice-secret")


def scram(sock):
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n=alice,r={nonce}"
    server_first = authenticate(sock, b"n,," + first_bare.encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", b"alice-secret", base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    signature = hmac.new(hashlib.sha512(client_key).digest(), auth, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    authenticate(sock, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


def gssapi_login(sock):
    import gssapi
    name = gssapi.Name("kafka@127.0.0.1", gssapi.NameType.hostbased_service)
    ctx = gssapi.SecurityContext(name=name, usage="initiate")
    token = ctx.step()
    while True:
        reply = authenticate(sock, token)
        if ctx.complete:
            break
        token = ctx.step(reply) or b""
    # The reply to the empty message is the wrapped layer offer.
    offer = ctx.unwrap(reply).message
    authenticate(sock, ctx.wrap(bytes([1]) + offer[1:4], False).message)


MECHANISMS = {"PLAIN": plain, "SCRAM-SHA-512": scram, "GSSAPI": gssapi_login}


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch(port, pid, mechanism, logins):
    login = MECHANISMS[mechanism]
    before, started = cpu_s(pid), time.monotonic()
    for _ in range(logins):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            handshake(sock, mechanism)
            login(sock)
    return cpu_s(pid) - before, time.monotonic() - started


def main():
    rill, dir_ = sys.argv[1], os.path.abspath(sys.argv[2])
    logins = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    os.makedirs(dir_, exist_ok=True)
    env, keytab, kdc = kerberos(dir_)
    os.environ.update(KRB5_CONFIG=env["KRB5_CONFIG"], KRB5CCNAME=env["KRB5CCNAME"])
    plain_port, port = free_port(), free_port()
    with open(os.path.join(dir_, "server.properties"), "w") as f:
        f.write(f"listeners=PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{port}\n"
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT\n"
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,GSSAPI\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                "required user_alice=\"alice-secret\";\n"
                "listener.name.sasl_plaintext.gssapi.sasl.jaas.config=com.sun.security.auth."
                f"module.Krb5LoginModule required useKeyTab=true keyTab=\"{keytab}\";\n"
                "rill.sasl.bootstrap.scram=SCRAM-SHA-512=[name=alice,password=alice-secret]\n")
    broker = subprocess.Popen(
        [rill, "serve", "--data-dir", os.path.join(dir_, "data"), "--cores", "1",
         "--config", os.path.join(dir_, "server.properties"),
         "--admin-listen", f"127.0.0.1:{free_port()}"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(dir_, "broker.log"), "w"))
    try:
        time.sleep(3)
        for mechanism in MECHANISMS:  # warm-up: caches, the service ticket
            batch(port, broker.pid, mechanism, 20)
        print("round mechanism      cpu_ms_per_1000  logins_per_s  x_plain")
        for round_ in range(1, rounds + 1):
            results = {m: batch(port, broker.pid, m, logins) for m in MECHANISMS}
            base = results["PLAIN"][0]
            for m, (cpu, wall) in results.items():
                print(f"{round_:5} {m:14} {1000 * cpu / logins * 1000:15.0f} "
                      f"{logins / wall:13.0f} {cpu / base if base else float('nan'):8.2f}")
    finally:
        broker.terminate()
        broker.wait()
        kdc.terminate()


if __name__ == "__main__":
    main()
