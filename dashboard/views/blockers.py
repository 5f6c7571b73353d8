"""The Partitions page's blockers: root causes of a shape-driven fallback (``partition.root_causes``)
and the HTP's refusals grouped by op and reason with their fix (``partition.blockers``).

Why a section of its own: in a Mask R-CNN-like model the off-NPU table lists hundreds of nodes
refused with "Cannot get shape", which reads as hundreds of problems. Two or three nodes (a
``NonZero``, a data-dependent ``Range``) are the problem; this names them first, with how many
downstream nodes each one takes off the accelerator and the change to try.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.partition import blockers
from dashboard.partition.report import PartitionReport
from dashboard.views.safe import download_name, md, short
from dashboard.views.settings import page_words


def render_blockers(report: PartitionReport) -> None:
    """Per backend with root causes, the count and a table of them; then the fix to try for each
    origin, once (the backends usually share their origins). Nothing when no backend has any."""
    backends = [(name, b) for name, b in report.backends.items() if b.root_causes]
    if not backends:
        return
    st.subheader("Root causes: sizes known only at run time", anchor=False)
    fixes: dict[str, str] = {}
    for name, backend in backends:
        causes = backend.root_causes
        st.warning(md(f"{name.upper()}: {len(causes)} node(s) whose output size is known only at run time make "
                      f"{backend.shape_failures} downstream node(s) fail with \"Cannot get shape\". Fix these "
                      "first: the downstream nodes need nothing else."), icon=":material/account_tree:")
        rows = [{"node": short(c.node, 60), "op": c.op_type, "downstream": c.downstream,
                 "its own refusal": c.reason or ("taken by this backend" if c.supported else ""),
                 "e.g.": ", ".join(short(e, 40) for e in c.examples)} for c in causes]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"pt_blockers_{name}",
                     column_config={"node": st.column_config.TextColumn(width="small"),
                                    "op": st.column_config.TextColumn(width="small"),
                                    "downstream": st.column_config.NumberColumn(width="small"),
                                    "its own refusal": st.column_config.TextColumn(width="large"),
                                    "e.g.": st.column_config.TextColumn(width="medium")})
        for cause in causes:
            fixes.setdefault(f"**{md(short(cause.node, 60))}** ({md(cause.op_type)})", page_words(cause.fix))
    st.markdown("**Fix to try**\n\n" + "\n".join(f"- {node}: {md(fix, 600)}" for node, fix in fixes.items()))


def render_groups(report: PartitionReport, graph=None) -> None:
    """The HTP's refusals grouped by op type, data type and reason, with the fix to try for each
    group and a CSV of the groups (``partition.blockers``). Nothing when the HTP refuses nothing."""
    rows = blockers.blockers(report, graph)
    if not rows:
        return
    st.markdown(f"**By op and reason** · {len(rows)} group(s), largest first, with the fix to try")
    table = [{"nodes": b.count, "op": f"{b.dtype} {b.op_type}".strip(), "reason": b.reason,
              "fix to try": page_words(b.fix), "GPU takes": b.gpu_takes,
              "e.g.": ", ".join(short(e, 40) for e in b.examples)} for b in rows]
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch", key="pt_blocker_groups",
                 height=min(38 + 35 * len(table), 420),
                 column_config={"nodes": st.column_config.NumberColumn(width="small"),
                                "op": st.column_config.TextColumn(width="small"),
                                "reason": st.column_config.TextColumn(width="medium"),
                                "fix to try": st.column_config.TextColumn(width="large"),
                                "GPU takes": st.column_config.NumberColumn(width="small"),
                                "e.g.": st.column_config.TextColumn(width="medium")})
    csv = [{**row, "fix": page_words(row["fix"])} for row in blockers.csv_rows(rows)]
    st.download_button("Download the blockers (CSV)", pd.DataFrame(csv).to_csv(index=False),
                       file_name=download_name(report.model, "blockers", "csv"), mime="text/csv",
                       icon=":material/download:", on_click="ignore", key="pt_blockers_csv")
