"""Both classifiers on the real-model zoo (``tests/real_zoo.py``): per-family counts for the tuning
and held-out splits, and one row per model, as the Markdown of ``docs/classifier_zoo.md``.

    python scripts/zoo_results.py                  # the whole table
    python scripts/zoo_results.py --split tuning   # one split only
    python scripts/zoo_results.py --folder families --tables family   # issue 20's models, counts only
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dashboard.classify.ep_rules import classify_ep  # noqa: E402
from dashboard.classify.refined import classify_refined  # noqa: E402
from dashboard.classify.verdicts import UNKNOWN, backend_for  # noqa: E402
from dashboard.intake.reader import load_model  # noqa: E402
from tests.real_zoo import HELD_OUT, REAL_ZOO, TUNING, RealModel  # noqa: E402


def _rows(models: list[RealModel]) -> list[dict]:
    rows = []
    for entry in models:
        graph = load_model(entry.path)
        ep, refined = classify_ep(graph), classify_refined(graph)
        rows.append({"entry": entry, "ep": ep, "refined": refined})
    return rows


def _score(rows: list[dict], key: str) -> str:
    right = sum(r[key].verdict == r["entry"].expected for r in rows)
    backends = sum(r[key].backend == backend_for(r["entry"].expected) for r in rows)
    unknown = sum(r[key].verdict == UNKNOWN for r in rows)
    return f"{right}/{len(rows)} | {backends}/{len(rows)} | {unknown}"


def family_table(rows: list[dict]) -> list[str]:
    lines = ["| split | family | models | EP verdicts | EP backends | EP Unknown | refined verdicts | "
             "refined backends | refined Unknown |", "|---|---|---|---|---|---|---|---|---|"]
    for split in (TUNING, HELD_OUT):
        by_family: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            if row["entry"].split == split:
                by_family[row["entry"].family].append(row)
        for family in sorted(by_family):
            group = by_family[family]
            lines.append(f"| {split} | {family} | {len(group)} | {_score(group, 'ep')} | {_score(group, 'refined')} |")
        group = [r for r in rows if r["entry"].split == split]
        if group:
            lines.append(f"| **{split}** | **all** | **{len(group)}** | {_score(group, 'ep')} | "
                         f"{_score(group, 'refined')} |")
    return lines


def source_table(rows: list[dict]) -> list[str]:
    """The same counts by where the models come from: pretrained (packages) or exported here."""
    lines = ["| source | models | EP verdicts | EP backends | EP Unknown | refined verdicts | refined backends | "
             "refined Unknown |", "|---|---|---|---|---|---|---|---|"]
    for label, pretrained in (("pretrained, from packages", True), ("exported or built here", False)):
        group = [r for r in rows if r["entry"].pretrained == pretrained]
        if group:
            lines.append(f"| {label} | {len(group)} | {_score(group, 'ep')} | {_score(group, 'refined')} |")
    return lines


def model_table(rows: list[dict]) -> list[str]:
    lines = ["| model | source | family | split | expected | EP rules | refined (margin) | decisive evidence |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        entry, ep, refined = row["entry"], row["ep"], row["refined"]
        mark = "" if refined.verdict == entry.expected else " ✗"
        why = refined.explanation.replace("|", "\\|")
        lines.append(f"| `{Path(entry.file).name}` | {entry.source} | {entry.family} | {entry.split} | "
                     f"{entry.expected} | {ep.verdict} | {refined.verdict}{mark} ({refined.margin:g}, "
                     f"{refined.confidence}) | {why} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(TUNING, HELD_OUT))
    parser.add_argument("--folder", choices=sorted({m.file.split("/")[0] for m in REAL_ZOO}),
                        help="only the models in this folder of tests/data")
    parser.add_argument("--tables", nargs="+", choices=("family", "source", "model"), default=["family", "source", "model"])
    args = parser.parse_args(argv)
    rows = _rows([m for m in REAL_ZOO if args.split in (None, m.split) and args.folder in (None, m.file.split("/")[0])])
    tables = {"family": family_table, "source": source_table, "model": model_table}
    print("\n\n".join("\n".join(tables[name](rows)) for name in args.tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
