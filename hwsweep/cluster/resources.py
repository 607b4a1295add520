"""`hwsweep resources`: what the cluster could run now, per partition and GPU type, with the batch plan the
config's recipe gets on each hardware entry that fits and the entry ready to paste into the config."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from hwsweep.cluster import slurm
from hwsweep.contracts import catalog
from hwsweep.contracts.typed import SpecError
from hwsweep.plan.config import DEFAULT_CONFIG, ConfigError, load_or_exit, resolve
from hwsweep.plan.table import plan_rows

MISSING_MEMORY = "is not in the catalog: add memory_gb (GB per GPU) to its hardware entry"


@dataclass(frozen=True)
class GpuGroup:
    """The nodes of one partition that have GPUs of one GRES type."""

    partition: str
    kind: str  # the GRES type; '' for untyped `gpu:N`
    nodes: tuple[slurm.Node, ...]

    @property
    def per_node(self) -> int:
        return min(n.gpus[self.kind] for n in self.nodes)

    @property
    def label(self) -> str:
        return self.kind or "gpu"

    def counts(self) -> dict[str, int]:
        """GPUs idle (free on a node that takes jobs), allocated, and unavailable (drained, down, ...)."""
        used = sum(n.gpus_used.get(self.kind, 0) for n in self.nodes)
        free = sum(n.gpus_free(self.kind) for n in self.nodes)
        return {"idle": free, "allocated": used, "drained": sum(n.gpus[self.kind] for n in self.nodes) - used - free}


def gpu_groups(nodes: list[slurm.Node]) -> list[GpuGroup]:
    groups: dict[tuple[str, str], list[slurm.Node]] = {}
    for node in nodes:
        for kind, count in node.gpus.items():
            if count > 0:
                groups.setdefault((node.partition, kind), []).append(node)
    return [GpuGroup(partition, kind, tuple(members)) for (partition, kind), members in groups.items()]


def device_type(kind: str) -> tuple[catalog.DeviceType | None, str | None]:
    """The catalog type a GRES type names (a memory size in the name, e.g. a100_80g, picks among
    same-model types), and a note when it is unknown or ambiguous."""
    hint = re.search(r"(\d+)\s*g", kind, re.I)
    found = catalog.match(kind, float(hint.group(1)) if hint else None) if kind else None
    if found is None or found.name == "cpu":
        return None, f"{kind or 'untyped gpu'} {MISSING_MEMORY}"
    same = [t.name for t in catalog.catalog().values() if t.name.split("-")[0] == found.name.split("-")[0]]
    if len(same) > 1 and not hint:
        return found, f"{kind} could be {' or '.join(same)}: {found.name} assumed; set gpu_type to the one your nodes have"
    return found, None


def hardware_name(text: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_-]", "-", text).lstrip("-_") or "gpu")[:64]


def candidates(group: GpuGroup, device: catalog.DeviceType | None) -> list[tuple[str, dict]]:
    """Hardware entries on this group: 1, 2, 4, ... GPUs on one node up to a full node, and two full nodes."""
    n = group.per_node
    counts = sorted({2**i for i in range(n.bit_length()) if 2**i <= n} | {n})
    shapes = [(1, d) for d in counts] + ([(2, n)] if len(group.nodes) > 1 else [])
    smallest = min(group.nodes, key=lambda node: (node.cpus, node.memory_mb))
    out = []
    for nodes, d in shapes:
        entry = {"accelerator": "cuda", "nodes": nodes, "devices_per_node": d,
                 "gpu_type": device.name if device else hardware_name(group.label), "partition": group.partition,
                 "gres": f"gpu:{group.kind}:{d}" if group.kind else f"gpu:{d}",
                 "cpus_per_task": max(1, smallest.cpus * d // n), "mem_mb": max(1, smallest.memory_mb * d // n)}  # fmt: skip
        name = hardware_name(f"{group.label}x{nodes * d}" + (f"-{nodes}n" if nodes > 1 else ""))
        out.append((name, entry))
    return out


def free_now(group: GpuGroup, entry: dict) -> bool:
    """Enough nodes have the entry's GPUs, CPUs and memory free right now."""
    ready = [n for n in group.nodes if n.gpus_free(group.kind) >= entry["devices_per_node"]
             and n.cpus_idle >= entry["cpus_per_task"] and n.memory_free_mb >= entry["mem_mb"]]  # fmt: skip
    return len(ready) >= entry["nodes"]


def only_hardware(raw: dict, name: str, entry: dict) -> dict:
    """The config with this one hardware entry as its only hardware and baseline."""
    suites = {s: {k: v for k, v in body.items() if k != "hardware"} for s, body in raw["suites"].items()}
    return raw | {"hardware": {name: entry}, "baseline": name, "suites": suites}


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def plan_lines(raw: dict, name: str, entry: dict, recipes: dict, config_dir: Path) -> tuple[list[str], bool]:
    """One line per suite and variant: the split of the global batch, and whether batch and precision stay
    locked; False when the recipe cannot be planned on the entry (the line says why)."""
    try:
        rows = plan_rows(resolve(only_hardware(raw, name, entry), config_dir=config_dir))
    except (ConfigError, SpecError) as e:
        return [f"    ✗ not for this recipe: {e}"], False
    lines = []
    for row in rows:
        recipe = recipes[row["suite"], row["variant"]]
        batch = row["comparable"] and row["global_batch"] == recipe.global_batch
        precision = row["precision"] == recipe.precision and "precision" not in row["warnings"]
        lines.append(
            f"    {row['suite']}[{row['variant']}]: {row['micro_batch']}/GPU x {row['accumulation']} accum x "
            f"{plural(row['nodes'] * row['devices_per_node'], 'GPU')} = {row['global_batch']} global  "
            f"{'✓ global batch locked' if batch else '✗ global batch changes'}  "
            f"{'✓' if precision else '✗'} precision {row['precision']}{' locked' if precision else ' differs'}, "
            f"tf32 {str(row['tf32']).lower()}"
        )
    return lines, True


def group_lines(group: GpuGroup, raw: dict, recipes: dict, baseline: tuple[str, str], paste: dict,
                config_dir: Path) -> list[str]:  # fmt: skip
    device, note = device_type(group.kind)
    c = group.counts()
    down = sorted({f"{n.name}: {n.state}{' (' + n.reason + ')' if n.reason else ''}" for n in group.nodes if not n.available})
    lines = [f"partition {group.partition}: {group.label} = {device.name if device else 'not in the catalog'}, "
             f"{plural(sum(n.gpus[group.kind] for n in group.nodes), 'GPU')} on {plural(len(group.nodes), 'node')}: "
             f"{c['idle']} idle, {c['allocated']} allocated, {c['drained']} drained or down"
             + (f" [{'; '.join(down)}]" if down else "")]  # fmt: skip
    lines += [f"  note: {note}"] if note else []
    if device and device.name != baseline[1]:
        lines.append(f"  ⚠ {device.name} differs from your baseline {baseline[0]} ({baseline[1]}): the recipe keeps "
                     f"precision and tf32 the same on both; check the plans below")  # fmt: skip
    busy = []
    for name, entry in candidates(group, device):
        if not free_now(group, entry):
            busy.append(name)
            continue
        lines.append(f"  {name}: {plural(entry['nodes'], 'node')} x {plural(entry['devices_per_node'], 'GPU')}, free now")
        plan, fits = plan_lines(raw, name, entry, recipes, config_dir) if device else ([], True)
        lines += plan
        paste.update({name: entry} if fits else {})
    lines += [f"  busy now: {', '.join(busy)}"] if busy else []
    return lines


def cpu_lines(name: str, members: list[slurm.Node]) -> list[str]:
    idle = sum(n.cpus_idle for n in members if n.available)
    total = sum(n.cpus for n in members)
    return [f"partition {name}{' (default)' if members[0].default_partition else ''}: CPU only, "
            f"{plural(total, 'CPU')} on {plural(len(members), 'node')}, {idle} idle"]  # fmt: skip


def paste_lines(paste: dict, unknown: set[str]) -> list[str]:
    if not paste:
        return ["no GPU hardware entry is free right now for this recipe"]
    lines = ["ready to paste under hardware: in your config (free now):"]
    for name, entry in paste.items():
        text = yaml.safe_dump({name: entry}, default_flow_style=None, sort_keys=False, width=1000).rstrip()
        lines.append(f"  {text}" + (f"  # {entry['gpu_type']} {MISSING_MEMORY}" if entry["gpu_type"] in unknown else ""))
    return lines


def report(raw: dict, nodes: list[slurm.Node], config_dir: Path = Path(".")) -> list[str]:
    """Every partition: its GPU groups with what fits now and their plans, or CPU only; then the entries to paste."""
    matrix = resolve(raw, config_dir=config_dir)
    recipes = {(cell.suite, cell.variant): cell.recipe for cell in matrix.cells}
    baseline = (matrix.baseline, matrix.hardware[matrix.baseline].gpu_type)
    groups, paste, lines = gpu_groups(nodes), {}, []
    for name, members in slurm.partitions(nodes).items():
        mine = [g for g in groups if g.partition == name]
        for group in mine:
            lines += group_lines(group, raw, recipes, baseline, paste, config_dir)
        lines += [] if mine else cpu_lines(name, members)
    unknown = {hardware_name(g.label) for g in groups if device_type(g.kind)[0] is None}
    return lines + [""] + paste_lines(paste, unknown)


def add_parser(sub) -> None:
    r = sub.add_parser("resources", help="what the cluster could run now, with the batch plan the config gets on it")
    r.add_argument("--configfile", type=Path, help="the config whose recipe is planned (default: config/config.yaml)")
    r.set_defaults(handler=main)


def answered(command: str, ask):
    """ask()'s answer, or None once a scheduler's or the config's problem is printed as one line."""
    try:
        return ask()
    except slurm.SchedulerError as e:
        print(f"hwsweep {command}: {e}", file=sys.stderr)
    except (ConfigError, SpecError) as e:
        print(f"hwsweep config error: {e}", file=sys.stderr)
    return None


def main(args: argparse.Namespace) -> int:
    configfile = args.configfile or DEFAULT_CONFIG
    raw = load_or_exit(configfile)
    lines = answered("resources", lambda: report(raw, slurm.read_nodes(), configfile.parent))
    if lines is None:
        return 1
    print("\n".join(lines))
    return 0
