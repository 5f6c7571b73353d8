"""Sweep page: a sweep's results as a matrix of models × (SoC, setting set), a spec run, a diff."""

from dashboard.views import frame
from dashboard.views.sweep import render

frame.page("Sweep")
render()
