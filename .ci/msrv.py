#!/usr/bin/env python3
"""The declared rust-version is a promise: every crate a user's build
compiles (normal dependencies of the workspace's crates, all features)
must declare a rust-version no newer than ours. Our own code is held to
it by clippy's incompatible_msrv lint. Only the one installed toolchain
can run here, so this is how CI checks the promise."""
import json
import subprocess
import sys

meta = json.loads(subprocess.check_output(
    ["cargo", "metadata", "--format-version", "1", "--all-features"]))
members = set(meta["workspace_members"])
by_id = {p["id"]: p for p in meta["packages"]}


def version(v):
    parts = [int(x) for x in (v or "0").split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


declared = {by_id[m]["rust_version"] for m in members}
if len(declared) != 1:
    sys.exit(f"workspace crates declare different rust-versions: {declared}")
ours = declared.pop()

# Normal (non-dev, non-build) dependencies reachable from the members.
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
seen, todo = set(), list(members)
while todo:
    pid = todo.pop()
    if pid in seen:
        continue
    seen.add(pid)
    for dep in nodes[pid]["deps"]:
        kinds = {k["kind"] for k in dep["dep_kinds"]}
        target_only = all(k.get("target") for k in dep["dep_kinds"])
        if None in kinds and not target_only:
            todo.append(dep["pkg"])

too_new = sorted(
    (by_id[p]["name"], by_id[p]["version"], by_id[p]["rust_version"])
    for p in seen - members
    if version(by_id[p]["rust_version"]) > version(ours)
)
if too_new:
    for name, ver, rv in too_new:
        print(f"{name} {ver} needs Rust {rv}, newer than rust-version {ours}")
    sys.exit(1)
print(f"rust-version {ours}: every one of {len(seen - members)} dependencies declares it or older")
