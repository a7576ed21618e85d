"""The terminal's table of a bench's results (`cohort bench` prints it):
one row per configuration, the layout noise of each baseline, and the
training run's headroom beside the D1 change each plan measured."""

from cohort.formats.results import layout_band


def layout_lines(results):
    """For each baseline whose layout was moved: the band of its own D1
    misses, and which configurations measured against it stay inside."""
    cg, lines = results.get("cachegrind") or {}, []
    for base in results["parameters"].get("allocators", []):
        band = layout_band(cg.get(base, {}))
        if band is None:
            continue
        n = len(cg[base]["layouts"])
        inside = [name for name, r in results["ratios"].items()
                  if r.get("vs") == base and "d1_ratio" in r and band[0] <= r["d1_ratio"] <= band[1]]
        lines.append(f"layout noise: {base}'s own D1 misses span {band[0]:.3f}-{band[1]:.3f} of its run over "
                     f"{n} moved layout{'s' * (n != 1)}; inside that band, no difference: "
                     + (", ".join(inside) if inside else "none"))
    return lines


def headroom_lines(results):
    """The training run's headroom beside the D1 change each plan measured."""
    h = results.get("headroom")
    if not h:
        return []
    measured = [f"{name} {r['d1_ratio']:.3f} x {r['vs']}" for name, r in results["ratios"].items()
                if name.startswith("cohort+") and r.get("d1_ratio") is not None]
    return [f"{h['line']} (the training run)"] + (
        [f"measured: D1 misses {', '.join(measured)}"] if measured else [])


def console_table(results):
    """The terminal's table: one row per configuration, columns aligned."""
    s, r, cg = results["summary"], results["ratios"], results["cachegrind"]
    head = ["config", "ok", "median s", "p25", "p75", "time vs", "peak RSS MiB"]
    head += ["D1 misses", "D1 vs", "LL misses", "LL vs", "rt D1", "rt meta"] if cg is not None else ["D1 misses"]
    rows = [head]

    def num(v, f="{:.3f}"):
        return f.format(v) if v is not None else "-"
    for name in results["parameters"]["order"]:
        x, ratio = s[name], r.get(name) or {}
        rss = x.get("max_rss_median_kb")
        row = [name, str(x["ok_trials"]), num(x["wall_median_s"]), num(x["wall_p25_s"]), num(x["wall_p75_s"]),
               f"{ratio['time_ratio']:.3f} {ratio['vs']}" if ratio else "",
               f"{rss / 1024:.1f}" if rss else "-"]
        if cg is None:
            row.append("no cachegrind input given")
        else:
            c = cg.get(name, {})
            d1, ll, rt = c.get("D1_misses"), c.get("LLd_misses"), c.get("runtime_D1_misses")
            blocks = c.get("runtime_D1_block_misses")
            row += [f"{d1:,}" if d1 is not None else c.get("error", "-")[:30],
                    num(ratio.get("d1_ratio")) if ratio else "",
                    f"{ll:,}" if ll is not None else "-",
                    num(ratio.get("lld_ratio")) if ratio else "",
                    f"{rt / d1:.1%}" if rt is not None and d1 else "",
                    f"{(rt - blocks) / d1:.1%}" if rt is not None and blocks is not None and d1 else ""]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             .rstrip() for row in rows]
    if cg is None:
        lines.append("(cache misses: give --cachegrind-args 'ARGS' to measure them with cachegrind)")
    lines += layout_lines(results)
    lines += headroom_lines(results)
    for p in results["problems"]:
        lines.append(f"PROBLEM: {p}")
    return "\n".join(lines)
