#!/usr/bin/env python3
"""One refresh's requests to the kube store, alone: GET the user's Secret, then write it back,
from the issuer's ServiceAccount (its kubeconfig), on 4 connections, N times over the seeded users.
Prints CPU ms per GET+write of the processes given (user + system ticks from /proc), and the rate.

Modes: get (the GET alone), merge (GET + the issuer's JSON merge patch carrying the resourceVersion
read), put (GET + PUT of the object read, managedFields left out); a suffix "-ign" adds
fieldValidation=Ignore to the write.
Usage: kube-write.py KUBECONFIG MODE N USERS PID[,PID...]   (hack/bench/kube-write.sh runs it)
"""
import base64
import http.client
import json
import os
import re
import ssl
import sys
import threading
import time

kubeconfig, mode, total, users, pids = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
text = open(kubeconfig).read()
server = re.search(r"server: https://([^:\s]+):(\d+)", text)
ca = base64.b64decode(re.search(r"certificate-authority-data: (\S+)", text).group(1)).decode()
token = re.search(r"token: (\S+)", text).group(1)
context = ssl.create_default_context(cadata=ca)
pids = [int(p) for p in pids.split(",")]
headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
write_query = "?fieldManager=ichor-issuer" + ("&fieldValidation=Ignore" if mode.endswith("-ign") else "")
done = [0]
failed = []
lock = threading.Lock()


def ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def worker(first, step):
    conn = http.client.HTTPSConnection(server.group(1), int(server.group(2)), context=context)
    i = first
    while True:
        with lock:
            if done[0] >= total or failed:
                return
            done[0] += 1
        path = f"/api/v1/namespaces/ichor-credentials/secrets/ichor-user-bench-{i % users}"
        i += step
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            failed.append(f"GET {path}: {answer.status} {body[:200]!r}")
            return
        if mode == "get":
            continue
        secret = json.loads(body)
        if mode.startswith("merge"):
            write = {"metadata": {"resourceVersion": secret["metadata"]["resourceVersion"]},
                     "data": {"entry": secret["data"]["entry"]}}
            method, content_type = "PATCH", "application/merge-patch+json"
        else:
            secret["metadata"].pop("managedFields", None)
            write, method, content_type = secret, "PUT", "application/json"
        conn.request(method, path + write_query, body=json.dumps(write),
                     headers={**headers, "Content-Type": content_type})
        answer = conn.getresponse()
        body = answer.read()
        # 409: another connection wrote the same user in between; the attempt still cost.
        if answer.status not in (200, 409):
            failed.append(f"{method} {path}: {answer.status} {body[:200]!r}")
            return


before = [ticks(p) for p in pids]
start = time.monotonic()
threads = [threading.Thread(target=worker, args=(t, 4)) for t in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - start
if failed:
    sys.exit(f"kube-write.py {mode}: {failed[0]}")
hz = os.sysconf("SC_CLK_TCK")
per_op = [(b - a) * 1000 / hz / total for a, b in zip(before, [ticks(p) for p in pids])]
print(f"mode={mode} n={total} rate={total / elapsed:.1f} cpu_ms=" + ",".join(f"{x:.3f}" for x in per_op)
      + f" total_ms={sum(per_op):.3f}")
