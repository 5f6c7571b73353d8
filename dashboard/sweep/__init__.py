"""Sweeps: a model zoo × SoCs × setting sets × analyses, run cell by cell, stored, compared.

A team with tens of models and several Snapdragon parts asks which models run fully on the HTP of
which part, what falls back to the CPU, and what changed since the last release. A sweep answers
it on the team's own machines: ``spec`` reads the TOML that names the models, SoCs, setting sets
and analyses (every mistake one ``UserError`` before anything runs); ``cells`` defines one cell
(model, SoC, setting set, analysis), its result and ``run_cell``, which does the cell's work
through the project's worker subprocess, so a native crash costs one cell; ``executors`` run
cells (local worker processes, a Ray cluster, attached devices); ``store`` keeps one JSON record
per cell and a Parquet index, streamed as cells finish; ``diff`` compares two results folders and
is the CI gate. Nothing here imports Streamlit.
"""
