#!/usr/bin/env python3
"""The H200 matrix's phase ratios against their floors and targets, from the results.json of
`wsbench run matrices/h200.json`: every commit and prepare time as a ratio to the physical floor measured in the same
cell, next to its target, with peak RSS against its bound, plus the linear-cost check over expert counts.

Targets: cpu commit <= 1.10 x the H2D time of the rank images; cpu prepare <= 3 x canonical bytes / memcpy GB/s; cpu
peak RSS <= canonical + rank images + 2 GiB; disk commit <= 1.3 x max(disk-read time, H2D time) of the rank images;
disk prepare <= 1.3 x canonical bytes / disk read-plus-write GB/s; disk peak RSS <= 4 GiB;
refit commit.copy (the rank-image copy inside the commit call) <= 1.10 x the H2D time, refit prepare.stream >= 10 GB/s
per rank for llama-3.1-8b-bf16 at TP 1 (refit peak RSS is shown, not judged: its in-process trainer holds its own
images); prepare and commit seconds per GB within +-10% over the `linear/` cells' expert counts.

  scripts/validation-targets.py RESULTS.json --out DIR    -> DIR/targets.json, DIR/targets.md

Floors (per cell, results.json "floors"): h2d_gbps (pinned H2D, summed over the GPUs the ranks use), disk_read_gbps
(cold sequential read of the store's filesystem), disk_read_write_gbps (one read plus one write of the same bytes),
host_memcpy_gbps (prepare_threads threads). GB/s = 1e9 B/s.
Bytes: commit moves every rank image (sum of bytes.rank_image_per_rank); the prepare floor is 3 x canonical bytes /
memcpy GB/s (read the canonical image, write it, write the rank images).
"""
import argparse
import json
import os
import statistics

GIB = 1 << 30


def cell_rows(cell):
    floors, b = cell.get("floors", {}), cell.get("bytes", {})
    image = sum(b.get("rank_image_per_rank", []))
    canonical = b.get("canonical", 0)
    h2d = floors.get("h2d_gbps") or 0
    disk = floors.get("disk_read_gbps") or 0
    memcpy = floors.get("host_memcpy_gbps") or 0
    trials = [t for t in cell.get("trials", []) if "commit" in t.get("times_s", {})]
    out = []
    for t in trials:
        ts, mem = t["times_s"], t.get("memory", {})
        h2d_s = image / (h2d * 1e9) if h2d else None
        disk_s = image / (disk * 1e9) if disk else None
        row = {"trial": t["index"], "status": t["status"], "commit_s": ts["commit"], "pause_s": ts["pause"],
               "prepare_s": ts["prepare"], "envelope_s": ts.get("envelope"), "h2d_floor_s": h2d_s,
               "disk_floor_s": disk_s, "rss_peak_bytes": mem.get("rss_peak_bytes"),
               "cupti": t.get("cupti", {})}
        if cell["mode"] == "cpu":
            row["commit_ratio"] = ts["commit"] / h2d_s if h2d_s else None
            row["commit_target"] = 1.10
            prep_floor = 3 * canonical / (memcpy * 1e9) if memcpy else None
            row["prepare_floor_s"] = prep_floor
            row["prepare_ratio"] = ts["prepare"] / prep_floor if prep_floor else None
            row["prepare_target"] = 1.0  # prepare <= 3 x canonical / memcpy
            row["rss_bound_bytes"] = canonical + image + 2 * GIB
        elif cell["mode"] == "refit":
            # The pause is the rank-image copy: commit.copy is judged against H2D (the commit call also stops and
            # restarts the engine's decode loop, a fixed cost that dominates the small cells). Prepare is the
            # trainer's stream into the rank images, judged per rank in GB/s (>= 10 for llama-3.1-8b at TP 1).
            copy = [p for p in t.get("phases", []) if p["name"] == "commit.copy"]
            row["commit_copy_s"] = copy[0]["seconds"] if copy else None
            row["commit_ratio"] = row["commit_copy_s"] / h2d_s if h2d_s and copy else None
            row["commit_target"] = 1.10
            stream = [p for p in t.get("phases", []) if p["name"] == "prepare.stream" and p["seconds"] > 0]
            row["stream_gbps_per_rank"] = (stream[0]["bytes"] / cell["tp"] / stream[0]["seconds"] / 1e9
                                           if stream else None)
            row["stream_target_gbps"] = 10 if cell["model"] == "llama-3.1-8b-bf16" and cell["tp"] == 1 else None
            row["rss_bound_bytes"] = None  # no memory target for refit: its peak is reported, not judged
        else:
            floor = max(x for x in (h2d_s, disk_s) if x is not None) if (h2d_s or disk_s) else None
            row["commit_floor_s"] = floor
            row["commit_ratio"] = ts["commit"] / floor if floor else None
            row["commit_target"] = 1.3
            # Prepare reads the base checkpoint once and writes the next one once: its floor is the cell's
            # read-plus-write rate (disk_read_write_gbps = 1 / (1 / read + 1 / write), as the harness measures it).
            read_write = floors.get("disk_read_write_gbps") or 0
            prep_floor = canonical / (read_write * 1e9) if read_write else None
            row["prepare_floor_s"] = prep_floor
            row["prepare_ratio"] = ts["prepare"] / prep_floor if prep_floor else None
            row["prepare_target"] = 1.3
            row["rss_bound_bytes"] = 4 * GIB
        out.append(row)
    return {"id": cell["id"], "model": cell["model"], "mode": cell["mode"], "tp": cell["tp"],
            "layers": cell.get("layers"), "experts": cell.get("experts"), "status": cell.get("status"),
            "reason": cell.get("reason", ""), "canonical_bytes": canonical, "rank_image_bytes": image,
            "floors": {"h2d_gbps": h2d, "disk_read_gbps": disk, "host_memcpy_gbps": memcpy,
                       "host_memcpy_threads": floors.get("host_memcpy_threads")},
            "trials": out}


def worst(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return max(vals) if vals else None


def fmt(x, spec=".3f"):
    return "—" if x is None else format(x, spec)


def prepare_ratio_text(c):
    """cpu and disk: the worst prepare ratio to its floor; refit: the slowest trial's stream GB/s per rank."""
    t = c["trials"]
    if c["mode"] in ("cpu", "disk"):
        return fmt(worst(t, "prepare_ratio"), ".2f")
    if c["mode"] == "refit":
        vals = [r["stream_gbps_per_rank"] for r in t if r.get("stream_gbps_per_rank") is not None]
        return fmt(min(vals), ".2f") + " GB/s per rank" if vals else "—"
    return "—"


def prepare_target_text(c):
    if c["mode"] == "cpu":
        return "≤ 1 (3× floor)"
    if c["mode"] == "disk":
        return "≤ 1.3 (read + write floor)"
    target = c["trials"][0].get("stream_target_gbps") if c["trials"] else None
    return f"≥ {target} GB/s per rank" if c["mode"] == "refit" and target else "—"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    results = json.load(open(args.results))
    cells = [cell_rows(c) for c in results["cells"]]
    lines = ["# Targets against the floors measured in the same cell", "",
             "| cell | status | rank-image bytes | floors h2d / disk / memcpy (GB/s) | commit s (max) | commit ratio (max) | target | "
             "prepare s (max) | prepare ratio (max); refit: stream GB/s per rank (min) | target | pause s (max) | peak RSS GiB (max) | RSS bound GiB | CUPTI H2D GB/s |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in cells:
        t = c["trials"]
        f = c["floors"]
        cupti = [r["cupti"].get("achieved_gbps") for r in t if r["cupti"].get("enabled")]
        lines.append("| {} | {} | {} | {} / {} / {} | {} | {} | ≤ {} | {} | {} | {} | {} | {} | {} | {} |".format(
            c["id"], c["status"], c["rank_image_bytes"], fmt(f["h2d_gbps"], ".2f"), fmt(f["disk_read_gbps"], ".2f"),
            fmt(f["host_memcpy_gbps"], ".2f"), fmt(worst(t, "commit_s")), fmt(worst(t, "commit_ratio"), ".2f"),
            t[0]["commit_target"] if t else "—", fmt(worst(t, "prepare_s")),
            prepare_ratio_text(c), prepare_target_text(c), fmt(worst(t, "pause_s")),
            fmt((worst(t, "rss_peak_bytes") or 0) / GIB, ".2f"),
            fmt(t[0]["rss_bound_bytes"] / GIB, ".2f") if t and t[0]["rss_bound_bytes"] else "—",
            fmt(statistics.median(cupti), ".2f") if cupti else "—"))
    # Linear cost: seconds per GB of prepare and commit from the smallest to the largest expert count.
    linear = [c for c in cells if c["id"].startswith("linear/") and c["trials"]]
    lin = []
    if linear:
        lines += ["", "# Linear cost in tensor count (fixed expert shape)", "",
                  "| cell | experts | canonical bytes | prepare s/GB (median) | commit s/GB (median) |", "|---|---:|---:|---:|---:|"]
        for c in sorted(linear, key=lambda c: c["experts"] or 0):
            gb = c["canonical_bytes"] / 1e9
            p = statistics.median(r["prepare_s"] for r in c["trials"]) / gb
            k = statistics.median(r["commit_s"] for r in c["trials"]) / (c["rank_image_bytes"] / 1e9)
            lin.append({"id": c["id"], "experts": c["experts"], "prepare_s_per_gb": p, "commit_s_per_gb": k})
            lines.append(f"| {c['id']} | {c['experts']} | {c['canonical_bytes']} | {p:.4f} | {k:.4f} |")
        for key in ("prepare_s_per_gb", "commit_s_per_gb"):
            vals = [x[key] for x in lin]
            if len(vals) < 2:
                lines.append(f"\n{key}: one expert count only, linearity not judged (target ±10%)")
                continue
            spread = (max(vals) - min(vals)) / statistics.mean(vals) / 2 if vals else 0
            lines.append(f"\n{key}: ±{100 * spread:.1f}% around the mean (target ±10%)")
    os.makedirs(args.out, exist_ok=True)
    json.dump({"context": results.get("context", {}), "cells": cells, "linear": lin},
              open(os.path.join(args.out, "targets.json"), "w"), indent=1)
    open(os.path.join(args.out, "targets.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
