#!/usr/bin/env python3
"""Merges the symbol graphs of SharedCache and the modules it re-exports into one module.

`import SharedCache` brings SharedCacheEngine's and SharedCacheFormat's public vocabulary with it
(`@_exported import`, Sources/SharedCache/Exports.swift), but the compiler writes each module's
symbols into a graph of its own, and DocC documents one module per catalog. This writes one
graph, module `SharedCache`, holding the public symbols of all three (and the extensions each
declares on the others' types), so the documentation shows the API as a user sees it.

It also fails, listing them, when a public symbol has no documentation comment.

    merge-symbol-graphs.py INPUT-DIR OUTPUT-DIR
"""
import json
import os
import sys

MODULES = ["SharedCache", "SharedCacheEngine", "SharedCacheFormat"]
source, target = sys.argv[1], sys.argv[2]

merged = None
symbols = {}
relationships = []
for name in sorted(os.listdir(source)):
    if not name.endswith(".symbols.json"):
        continue
    module, _, extended = name[: -len(".symbols.json")].partition("@")
    # A module's own graph, or its extensions on another of the three; extensions on
    # Foundation's or the standard library's types stay in their own graph.
    if module not in MODULES or (extended and extended not in MODULES):
        continue
    with open(os.path.join(source, name)) as file:
        graph = json.load(file)
    if merged is None or (module == "SharedCache" and not extended):
        merged = dict(graph) if merged is None else {**graph, "symbols": [], "relationships": []}
    for symbol in graph["symbols"]:
        symbols.setdefault(symbol["identifier"]["precise"], symbol)
    relationships += graph["relationships"]

# Only what a user can reach: relationships between symbols that are in the merged graph, or
# from one of them to an outside type (a conformance to Sendable, say).
merged["module"]["name"] = "SharedCache"
merged["symbols"] = list(symbols.values())
seen = set()
merged["relationships"] = []
for relation in relationships:
    key = (relation["source"], relation["target"], relation["kind"])
    if relation["source"] in symbols and key not in seen:
        seen.add(key)
        merged["relationships"].append(relation)

os.makedirs(target, exist_ok=True)
with open(os.path.join(target, "SharedCache.symbols.json"), "w") as file:
    json.dump(merged, file)
# Extensions of Foundation's types (URLError.sharedCacheError) keep their own graph.
for name in os.listdir(source):
    if name.startswith("SharedCache@") and name.split("@")[1].split(".")[0] not in MODULES:
        with open(os.path.join(source, name)) as file, open(os.path.join(target, name), "w") as out:
            out.write(file.read())

undocumented = sorted(
    ".".join(symbol["pathComponents"])
    for symbol in symbols.values()
    if not symbol.get("docComment", {}).get("lines")
    and symbol["kind"]["identifier"] not in ("swift.extension",)
)
if undocumented:
    print(f"error: {len(undocumented)} public symbols have no documentation comment:", file=sys.stderr)
    for name in undocumented:
        print(f"  {name}", file=sys.stderr)
    sys.exit(1)
