"""The Partitions page's root causes of a shape-driven fallback (``partition.root_causes``).

Why a section of its own: in a Mask R-CNN-like model the off-NPU table lists hundreds of nodes
refused with "Cannot get shape", which reads as hundreds of problems. Two or three nodes (a
``NonZero``, a data-dependent ``Range``) are the problem; this names them first, with how many
downstream nodes each one takes off the accelerator and the change to try.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.partition.report import PartitionReport
from dashboard.views.safe import md, short


def render_blockers(report: PartitionReport) -> None:
    """One table per backend that has root causes; nothing when no backend does."""
    backends = [(name, b) for name, b in report.backends.items() if b.root_causes]
    if not backends:
        return
    st.subheader("Root causes: sizes known only at run time", anchor=False)
    for name, backend in backends:
        causes = backend.root_causes
        st.warning(md(f"{name.upper()}: {len(causes)} node(s) whose output size is known only at run time make "
                      f"{backend.shape_failures} downstream node(s) fail with \"Cannot get shape\". Fix these "
                      "first: the downstream nodes need nothing else."), icon=":material/account_tree:")
        rows = [{"node": short(c.node, 60), "op": c.op_type, "downstream": c.downstream,
                 "its own refusal": c.reason or ("taken by this backend" if c.supported else ""),
                 "e.g.": ", ".join(short(e, 40) for e in c.examples), "fix to try": c.fix} for c in causes]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"pt_blockers_{name}",
                     column_config={"node": st.column_config.TextColumn(width="small"),
                                    "op": st.column_config.TextColumn(width="small"),
                                    "downstream": st.column_config.NumberColumn(width="small"),
                                    "its own refusal": st.column_config.TextColumn(width="medium"),
                                    "fix to try": st.column_config.TextColumn(width="large")})
