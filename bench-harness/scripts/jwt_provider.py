#!/usr/bin/env python3
"""A stand-in identity provider for measuring OAUTHBEARER logins.

    jwt_provider.py DIR ALG SUB

Makes a key pair (ALG: ES256 or RS256), adds its public key (kid
`bench-ALG`) to the JWKS DIR/jwks.json, making it if need be (for
`sasl.oauthbearer.jwks.endpoint.url=file://DIR/jwks.json`), and prints one token for SUB, signed with it, valid for an hour (for
`rill-bench --sasl-mechanism OAUTHBEARER --sasl-password TOKEN`).
Needs Python's `cryptography` package.
"""

import base64
import json
import os
import sys
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def number(value, size):
    return b64(value.to_bytes(size, "big"))


def key_pair(alg):
    """(private key, JWK of its public half, sign(bytes) -> bytes)."""
    if alg == "ES256":
        key = ec.generate_private_key(ec.SECP256R1())
        public = key.public_key().public_numbers()
        jwk = {"kty": "EC", "crv": "P-256", "x": number(public.x, 32), "y": number(public.y, 32)}

        def sign(data):
            r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")

        return jwk, sign
    if alg == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = key.public_key().public_numbers()
        jwk = {"kty": "RSA", "n": number(public.n, 256), "e": number(public.e, 3)}
        return jwk, lambda data: key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    sys.exit("ALG must be ES256 or RS256")


def main():
    directory, alg, sub = sys.argv[1:4]
    jwk, sign = key_pair(alg)
    kid = "bench-" + alg
    jwk.update({"kid": kid, "use": "sig", "alg": alg})
    path = os.path.join(directory, "jwks.json")
    keys = []
    if os.path.exists(path):
        with open(path) as existing:
            keys = [k for k in json.load(existing)["keys"] if k.get("kid") != kid]
    with open(path, "w") as out:
        json.dump({"keys": keys + [jwk]}, out)
    now = int(time.time())
    header = b64(json.dumps({"alg": alg, "typ": "JWT", "kid": kid}).encode())
    claims = b64(json.dumps({"sub": sub, "iat": now, "exp": now + 3600}).encode())
    signing_input = (header + "." + claims).encode()
    print(header + "." + claims + "." + b64(sign(signing_input)))


if __name__ == "__main__":
    main()
