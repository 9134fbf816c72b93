"""Figures of the peer benchmark (``bench/peers.py``): medians over repeats, rocketlite's ratios to
the peers its targets name, and the tables (plain text for the terminal, Markdown for the file).

Pure functions over the runs' JSON records, so they are tested without any server.
A run record: ``{"row": key, "size": bytes, "repeat": i, "latency": {...}, "publish": {...},
"consume": {...}}`` (the phases as ``peer_clients.py`` reports them), or ``"error"`` instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# (label, phase, field): the figures summarized for each row and size
METRICS: tuple[tuple[str, str, str], ...] = (
    ("publish", "publish", "msgs_per_s"),
    ("consume", "consume", "msgs_per_s"),
    ("p50", "latency", "p50_us"),
    ("p99", "latency", "p99_us"),
    ("pub_srv_s", "publish", "cpu_server_s"),
    ("pub_cli_s", "publish", "cpu_client_s"),
    ("pub_all_s", "publish", "cpu_machine_s"),
    ("pub_s", "publish", "seconds"),
    ("con_srv_s", "consume", "cpu_server_s"),
    ("con_cli_s", "consume", "cpu_client_s"),
    ("con_all_s", "consume", "cpu_machine_s"),
    ("con_s", "consume", "seconds"),
    ("published", "publish", "messages"),
)


@dataclass(frozen=True)
class Target:
    """rocketlite's ``row`` ``metric`` over ``peer``'s should reach ``goal`` (issue 18)."""

    row: str
    peer: str
    metric: str
    goal: float
    sizes: tuple[int, ...] | None = None  # None: every size


TARGETS: tuple[Target, ...] = (
    Target("rocketlite-async", "redis-everysec", "publish", 1.0, (128,)),
    Target("rocketlite-async", "nats-default", "publish", 4.0, (128,)),
    Target("rocketlite-sync", "redis-always", "publish", 1.0),
    Target("rocketlite-sync", "rabbitmq-classic", "publish", 20.0),
    Target("rocketlite-async", "redis-everysec", "consume", 1.0),
)

# the peers each rocketlite row is set beside in the main table (same durability class)
PEERS_OF: dict[str, tuple[str, ...]] = {
    "rocketlite-async": ("redis-everysec", "nats-default", "rabbitmq-stream"),
    "rocketlite-async-lean": ("redis-everysec", "nats-default", "rabbitmq-stream"),
    "rocketlite-sync": ("redis-always", "rabbitmq-classic", "nats-always"),
    "rocketlite-sync-lean": ("redis-always", "rabbitmq-classic", "nats-always"),
}


@dataclass(frozen=True)
class Stat:
    median: float
    low: float
    high: float
    n: int


def stat(values: Sequence[float]) -> Stat | None:
    if not values:
        return None
    return Stat(statistics.median(values), min(values), max(values), len(values))


def summarize(runs: Iterable[dict[str, object]]) -> dict[tuple[str, int], dict[str, Stat]]:
    """(row, size) → metric → median (min–max) over the repeats that completed their phase."""
    acc: dict[tuple[str, int], dict[str, list[float]]] = {}
    for r in runs:
        key = (str(r["row"]), int(r["size"]))  # type: ignore[call-overload]
        slot = acc.setdefault(key, {m: [] for m, _, _ in METRICS})
        for metric, phase, fld in METRICS:
            ph = r.get(phase)
            if isinstance(ph, dict) and ph.get("completed", True) and fld in ph:
                slot[metric].append(float(ph[fld]))
    return {k: {m: s for m, vals in v.items() if (s := stat(vals)) is not None} for k, v in acc.items()}


def ratio(summary: dict[tuple[str, int], dict[str, Stat]], row: str, peer: str, size: int,
          metric: str) -> float | None:
    """Median over median; None when either side has no figure."""
    a = summary.get((row, size), {}).get(metric)
    b = summary.get((peer, size), {}).get(metric)
    if a is None or b is None or b.median == 0:
        return None
    return a.median / b.median


def target_rows(summary: dict[tuple[str, int], dict[str, Stat]], sizes: Sequence[int],
                labels: dict[str, str]) -> list[list[str]]:
    """One line per target and size measured: what, ratio, goal, met."""
    out = []
    for t in TARGETS:
        for size in sizes:
            if t.sizes is not None and size not in t.sizes:
                continue
            r = ratio(summary, t.row, t.peer, size, t.metric)
            if r is None:
                continue
            out.append([f"{labels.get(t.row, t.row)} {t.metric}", labels.get(t.peer, t.peer),
                        fmt_size(size), f"{r:.2f}x", f">= {t.goal:g}x", "yes" if r >= t.goal else "no"])
    return out


def fmt_size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def fmt_num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def fmt_stat(s: Stat | None) -> str:
    if s is None:
        return "–"
    if s.n == 1 or s.low == s.high:
        return fmt_num(s.median)
    return f"{fmt_num(s.median)} ({fmt_num(s.low)}–{fmt_num(s.high)})"


def cpu_cell(m: dict[str, Stat], phase: str) -> str:
    """``server / client`` CPU seconds over the phase, each with its share of one core."""
    wall = m.get(f"{phase}_s")
    parts = []
    for who in ("srv", "cli"):
        s = m.get(f"{phase}_{who}_s")
        if s is None:
            return "–"
        pct = f" ({100 * s.median / wall.median:.0f}%)" if wall and wall.median else ""
        parts.append(f"{s.median:.2f}{pct}")
    return " / ".join(parts)


def bound_by(m: dict[str, Stat], phase: str = "pub", cores: int = 2) -> str:
    """What limits a phase, from the CPU columns: the side using about a whole core (>= 85%);
    else all cores busy (the server, the client and what else ran on the machine, shown as
    ``others``: they took turns); else waiting (fsync, confirms, the loopback round trip)."""
    wall = m.get(f"{phase}_s")
    srv, cli, every = m.get(f"{phase}_srv_s"), m.get(f"{phase}_cli_s"), m.get(f"{phase}_all_s")
    if not wall or not wall.median or srv is None or cli is None:
        return "–"
    s, c = srv.median / wall.median, cli.median / wall.median
    others = f"others {100 * max(0.0, every.median / wall.median - s - c):.0f}%" if every else ""
    if c >= 0.85 and c >= s:
        verdict = "client"
    elif s >= 0.85:
        verdict = "server"
    elif every is not None and every.median / wall.median >= 0.9 * cores:
        verdict = "cores full"
    else:
        verdict = "waits"
    return f"{verdict} ({others})" if others else verdict


def ratio_cell(summary: dict[tuple[str, int], dict[str, Stat]], row: str, size: int,
               labels: dict[str, str]) -> str:
    parts = []
    for peer in PEERS_OF.get(row, ()):
        pub = ratio(summary, row, peer, size, "publish")
        con = ratio(summary, row, peer, size, "consume")
        if pub is None and con is None:
            continue
        p = f"{pub:.2f}" if pub is not None else "–"
        c = f"{con:.2f}" if con is not None else "–"
        parts.append(f"{labels.get(peer, peer)}: pub {p}x, con {c}x")
    return "; ".join(parts)


HEADERS = ["system", "msgs", "publish msgs/s", "consume msgs/s", "p50 / p99 µs (1 in flight)",
           "CPU s srv / cli: publish", "CPU s srv / cli: consume", "publish bound by",
           "rocketlite ÷ peer"]


def table_rows(summary: dict[tuple[str, int], dict[str, Stat]], rows: Sequence[str], size: int,
               labels: dict[str, str], cores: int = 2) -> list[list[str]]:
    out = []
    for row in rows:
        m = summary.get((row, size))
        if m is None:
            continue
        p50, p99 = m.get("p50"), m.get("p99")
        lat = f"{p50.median:.0f} / {p99.median:.0f}" if p50 and p99 else "–"
        n = m.get("published")
        out.append([labels.get(row, row), f"{n.median:,.0f}" if n else "–", fmt_stat(m.get("publish")),
                    fmt_stat(m.get("consume")), lat, cpu_cell(m, "pub"), cpu_cell(m, "con"),
                    bound_by(m, "pub", cores), ratio_cell(summary, row, size, labels)])
    return out


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*r) for r in rows])


TARGET_HEADERS = ["rocketlite", "peer", "size", "ratio (medians)", "target", "met"]
