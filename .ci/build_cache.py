#!/usr/bin/env python3
"""Gives the files of a fresh checkout the modification times CI's cached build last saw.

Cargo decides what to rebuild by modification time: a fresh clone's files are all newer than
the cached build, so every workspace crate would be rebuilt although only a few files changed.
This script keeps a manifest beside the cache (tracked path -> git blob and modification time
in nanoseconds). For each file of the checkout that is clean and whose blob is the one the
manifest records, it restores the recorded time; a changed, new or dirty file keeps the
checkout's newer time, so Cargo rebuilds what depends on it. Then it records the times the
builds of this run will see.

Sound because a recorded time only ever goes back to the same content.

Usage: build_cache.py MANIFEST   (run from the checkout's root)
"""

import json
import os
import subprocess
import sys


def git(*args: str) -> bytes:
    return subprocess.run(["git", *args], check=True, capture_output=True).stdout


def main() -> int:
    manifest_path = sys.argv[1]
    blobs: dict[str, str] = {}
    for record in git("ls-tree", "-r", "-z", "HEAD").split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, blob = meta.split()
        # Regular files only: links and submodules have no time of their own to restore.
        if kind == b"blob" and mode in (b"100644", b"100755"):
            blobs[path.decode()] = blob.decode()
    dirty = {p.decode() for p in git("diff", "--name-only", "-z", "HEAD").split(b"\0") if p}

    try:
        with open(manifest_path, encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        recorded = {}

    restored = 0
    manifest: dict[str, list] = {}
    for path, blob in blobs.items():
        if path in dirty or not os.path.isfile(path):
            continue
        entry = recorded.get(path)
        if entry and entry[0] == blob:
            os.utime(path, ns=(entry[1], entry[1]))
            restored += 1
        manifest[path] = [blob, os.stat(path).st_mtime_ns]

    tmp = manifest_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    os.replace(tmp, manifest_path)
    print(
        f"build cache: {restored} of {len(blobs)} tracked files have the content the cache "
        f"was last built from ({len(dirty)} dirty)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
