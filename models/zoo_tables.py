#!/usr/bin/env python3
"""Prints the Markdown tables of models/README.md from models/zoo/manifest.json and check.json."""
import json
import os

ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo")


def shape(s):
    return "[" + ",".join(str(d) for d in s) + "]"


def main():
    man = json.load(open(os.path.join(ZOO, "manifest.json")))["models"]
    chk = json.load(open(os.path.join(ZOO, "check.json")))["models"]
    print("| model | inputs | parameters | file | nodes (with subgraphs) | export s | ORT run s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for e in man:
        ins = ", ".join(f"`{i['name']}` {i['dtype']} {shape(i['shape'])}" for i in e["inputs"])
        c = chk.get(e["name"], {})
        run = c.get("second_run_seconds", "n/a")
        print(f"| {e['name']} | {ins} | {e['parameters'] / 1e6:.1f} M | {e['bytes'] / 2**20:.1f} MiB | "
              f"{e['node_count']} ({e['node_count_with_subgraphs']}) | {e['export_seconds']} | {run} |")
    print()
    print("| model | photo | boxes into NMS (per NMS node) | detections out | of them score >= 0.5 | top score |")
    print("|---|---|---|---:|---:|---:|")
    for e in man:
        counts = chk.get(e["name"], {}).get("counts")
        if not counts:
            continue
        for p, r in counts.items():
            tag = " (held out)" if r["held_out"] else ""
            nms = " + ".join(str(n) for n in r["nms_inputs"])
            print(f"| {e['name']} | {p}{tag} | {nms} | {r['detections']} | {r['detections_score_ge_0.5']} | "
                  f"{r['score_max']} |")


if __name__ == "__main__":
    main()
