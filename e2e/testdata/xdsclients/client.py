"""An xDS conformance client on gRPC C-core (grpcio): dials xds:///<host>
with the bootstrap named by GRPC_XDS_BOOTSTRAP and answers commands read
from stdin, one JSON object a line, with one JSON line on stdout.

  {"cmd": "call", "n": 2000, "metadata": {"x-canary": "always"}}
  -> {"versions": {"e2e/app:v1": 1801, ...}, "errors": {"UNAVAILABLE: ...": 2}}

It first prints {"ready": true, "impl": ..., "first_call_ms": ...}: the time
from creating the channel to the first call answered (xDS resolution
included). The probe's request and response are google.protobuf.StringValue,
encoded here by hand (field 1, a string) so no generated code is needed.
Run it with Debian's /usr/bin/python3 and python3-grpcio (e2e/conformance_test.go)."""
import json
import sys
import time

import grpc

METHOD = "/sluice.probe.v1.Probe/Hello"
VERSION_KEY = "x-probe-version"
BATCH = 64  # calls in flight at once


def encode(s):
    b = s.encode()
    n, out = len(b), bytearray(b"\x0a")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + b


def version_of(call):
    try:
        md = call.trailing_metadata() or ()
    except Exception:
        return ""
    for k, v in md:
        if k == VERSION_KEY:
            return v
    return ""


def describe(err):
    return "%s: %s" % (err.code().name, err.details())


def main():
    host = sys.argv[1]
    channel = grpc.insecure_channel("xds:///" + host)
    hello = channel.unary_unary(METHOD, request_serializer=encode, response_deserializer=lambda b: b)
    start = time.monotonic()
    deadline = start + 60
    first_error, first_ok = "", False
    while True:
        try:
            hello("first", timeout=10, wait_for_ready=True)
            first_ok = True
            break
        except grpc.RpcError as e:
            first_error = describe(e)
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    ready = {"ready": first_ok, "impl": "grpc-core-python", "version": grpc.__version__,
             "first_call_ms": round((time.monotonic() - start) * 1000, 1)}
    if first_error:
        ready["first_error"] = first_error
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("cmd") == "quit":
            return
        md = tuple((req.get("metadata") or {}).items())
        timeout = req.get("timeout_ms", 5000) / 1000
        versions, errors = {}, {}
        left = req["n"]
        while left > 0:
            futures = [hello.future("hello", timeout=timeout, metadata=md, wait_for_ready=True)
                       for _ in range(min(BATCH, left))]
            left -= len(futures)
            for f in futures:
                try:
                    f.result()
                    v = version_of(f)
                    versions[v] = versions.get(v, 0) + 1
                except grpc.RpcError as e:
                    d = describe(e)
                    errors[d] = errors.get(d, 0) + 1
        print(json.dumps({"versions": versions, "errors": errors}), flush=True)


if __name__ == "__main__":
    main()
